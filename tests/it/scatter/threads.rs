//! Parallel scatters: the same bits on any number of threads, parts that touch only their
//! own elements.

use ndarray::{Array, Axis};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::{Add, Max, Replace};

use crate::support::threads::{on_1_and_3, on_1_and_3_natively};

/// A destination whose parts do not start on its own elements (a column of a wider
/// array: on 3 threads its parts start at odd offsets, in the other column) while another
/// thread writes the other column: the scatter must touch its own elements only (Miri's
/// race detector sees any read of the other column), on 1 and 3 threads.
#[test]
fn a_strided_destination_touches_only_its_own_elements() {
    // Natively the column spans 18 MB (of a 36 MB array), enough for several parts.
    let (rows, n) = if cfg!(miri) {
        (10, 40)
    } else {
        (2_250_001, 400_000)
    };
    let ids = Array::from_shape_fn(n, |i| ((i * 7) % rows) as i64);
    let upd = Array::from_shape_fn(n, |i| (i % 5) as f64);
    let got = on_1_and_3(|| {
        let mut a = Array::<f64, _>::zeros((rows, 2));
        let (mut c0, mut c1) = a.multi_slice_mut((ndarray::s![.., 0], ndarray::s![.., 1]));
        std::thread::scope(|s| {
            s.spawn(|| c1.fill(-1.0));
            c0.scatter(&ids, &upd, 0, Add).unwrap();
        });
        a.mapv(f64::to_bits)
    });
    let mut want = Array::<f64, _>::zeros((rows, 2));
    want.column_mut(1).fill(-1.0);
    for (&i, &u) in ids.iter().zip(&upd) {
        want[[i as usize, 0]] += u;
    }
    assert_eq!(got, want.mapv(f64::to_bits));
}

/// Large enough for the parallel path (under Miri too, where the threshold is tiny): the
/// same bits on 1 and 3 threads, and those of a plain sequential loop.
#[test]
fn parallel_scatters_give_the_sequential_bits() {
    let n = if cfg!(miri) { 300 } else { 600_000 };
    let bins = if cfg!(miri) { 7 } else { 1000 };
    let ids = Array::from_shape_fn(n, |i| ((i * 7919 + i / 3) % bins) as i64);
    let upd = Array::from_shape_fn(n, |i| 1.0 / (1.0 + (i % 97) as f64));
    // Histogram-style: heavy duplicates into a small self.
    let got = on_1_and_3(|| {
        let mut h = Array::<f64, _>::zeros(bins);
        h.scatter(&ids, &upd, 0, Add).unwrap();
        h.mapv(f64::to_bits)
    });
    let mut want = vec![0.0_f64; bins];
    for (&i, &u) in ids.iter().zip(upd.iter()) {
        want[i as usize] += u;
    }
    assert_eq!(got.to_vec(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    // Rows (embedding gradient) into a reversed destination, and elements along axis 1.
    // (Natively these destinations are under the 16 MiB from which a scatter is split
    // between threads: one part on 1 and on 3 threads; under Miri, parts.)
    let rows = if cfg!(miri) { 6 } else { 40_000 };
    let width = 16;
    let r_ids = Array::from_shape_fn(rows, |i| ((i * 31) % (rows / 2)) as i64);
    let r_upd = Array::from_shape_fn((rows, width), |(i, j)| (i * width + j) as f32 * 0.37);
    let got = on_1_and_3(|| {
        let mut t = Array::<f32, _>::zeros((rows / 2, width));
        t.invert_axis(Axis(0));
        t.scatter(&r_ids, &r_upd, 0, Add).unwrap();
        let mut e = Array::<f32, _>::ones((rows, width));
        let e_idx = Array::from_shape_fn((rows, width), |(i, j)| ((i + 3 * j) % width) as i64);
        e.scatter_elements(&e_idx, &r_upd, 1, Max).unwrap();
        (t.mapv(f32::to_bits), e.mapv(f32::to_bits))
    });
    let mut want = Array::<f32, _>::zeros((rows / 2, width));
    for (i, &r) in r_ids.iter().enumerate() {
        for j in 0..width {
            want[[r as usize, j]] += r_upd[[i, j]];
        }
    }
    assert_eq!(got.0, want.mapv(f32::to_bits));
    let mut want = Array::<f32, _>::ones((rows, width));
    for ((i, j), &u) in r_upd.indexed_iter() {
        let c = (i + 3 * j) % width;
        if u > want[[i, c]] {
            want[[i, c]] = u;
        }
    }
    assert_eq!(got.1, want.mapv(f32::to_bits));
}

/// Scatters of one broadcast value (histograms) into a small destination with more
/// positions than elements run as counts and replays: the bits of a plain loop that
/// applies the updates one at a time, on 1 and 3 threads, through one axis (elements, with
/// negative indices, into a reversed destination; rows) and two (`scatter_nd`), with a
/// reducer that is neither commutative nor associative, with drop glue; a bad index
/// anywhere leaves the destination unchanged; a panicking reducer leaves valid values.
#[test]
fn one_value_scatters_give_the_sequential_bits() {
    let (bins, n) = if cfg!(miri) { (10, 100) } else { (1000, 300_000) };
    let ids = Array::from_shape_fn(n, |i| ((i * 7919 + i / 3) % (2 * bins)) as i64 - bins as i64);
    let bin = |i: usize| ids[i].rem_euclid(bins as i64) as usize;
    let tenth = ndarray::arr0(0.1_f32);
    let tenths = tenth.broadcast(n).unwrap();
    let affine = |x: &mut f64, u: &f64| *x = *x * 0.75 + *u;
    let two = ndarray::arr0(2.0_f64);
    let points = Array::from_shape_fn((n, 2), |(i, c)| [bin(i) / 10, bin(i) % 10][c] as i64);
    let got = on_1_and_3_natively(|| {
        let mut h = Array::from_shape_fn(bins, |b| b as f32);
        h.invert_axis(Axis(0));
        h.scatter(&ids, &tenths, 0, Add).unwrap();
        let mut a = Array::from_shape_fn(bins, |b| b as f64);
        a.scatter(&ids, &two.broadcast(n).unwrap(), 0, affine).unwrap();
        let mut rows = Array::from_shape_fn((bins, 3), |(b, j)| (b + j) as f64);
        rows.scatter(&ids, &two.broadcast((n, 3)).unwrap(), 0, affine)
            .unwrap();
        let mut grid = Array::from_shape_fn((bins / 10, 10), |(r, c)| (r + c) as f64);
        grid.scatter_nd(&points, &two.broadcast(n).unwrap(), 0, affine)
            .unwrap();
        (
            h.mapv(f32::to_bits),
            a.mapv(f64::to_bits),
            rows.mapv(f64::to_bits),
            grid.mapv(f64::to_bits),
        )
    });
    let mut h = Array::from_shape_fn(bins, |b| (bins - 1 - b) as f32);
    let mut a = Array::from_shape_fn(bins, |b| b as f64);
    let mut rows = Array::from_shape_fn((bins, 3), |(b, j)| (b + j) as f64);
    for i in 0..n {
        h[bin(i)] += 0.1;
        affine(&mut a[bin(i)], &2.0);
        for j in 0..3 {
            affine(&mut rows[[bin(i), j]], &2.0);
        }
    }
    assert_eq!(got.0, h.mapv(f32::to_bits), "histogram");
    assert_eq!(got.1, a.mapv(f64::to_bits), "elements");
    assert_eq!(got.2, rows.mapv(f64::to_bits), "rows");
    let mut want = Array::from_shape_fn((bins / 10, 10), |(r, c)| (r + c) as f64);
    for i in 0..n {
        affine(&mut want[[bin(i) / 10, bin(i) % 10]], &2.0);
    }
    assert_eq!(got.3, want.mapv(f64::to_bits), "points");
    // Drop glue: the value replaces every element hit.
    let u = ndarray::arr0(String::from("u"));
    let got = on_1_and_3_natively(|| {
        let mut t = Array::from_shape_fn(bins + 5, |b| format!("s{b}"));
        t.scatter(&ids, &u.broadcast(n).unwrap(), 0, Replace).unwrap();
        t
    });
    let mut want = Array::from_shape_fn(bins + 5, |b| format!("s{b}"));
    for &i in &ids {
        want[i.rem_euclid(bins as i64 + 5) as usize] = String::from("u");
    }
    assert_eq!(got, want, "strings");
    // A bad index, last: named exactly, nothing written (1 and 3 threads).
    let mut bad = ids.clone();
    bad[n - 1] = bins as i64;
    let start = Array::from_shape_fn(bins, |b| b as f32);
    let (err, after) = on_1_and_3_natively(|| {
        let mut h = start.clone();
        let err = h.scatter(&bad, &tenths, 0, Add).unwrap_err();
        (err, h.mapv(f32::to_bits))
    });
    assert!(
        matches!(err, GatherError::IndexOutOfBounds { op: "scatter", index, ref position, axis: 0, axis_len }
            if index == bins as i128 && position == &[n - 1] && axis_len == bins),
        "{err}"
    );
    assert_eq!(after, start.mapv(f32::to_bits));
    // A reducer that panics in the replay leaves every element valid (dropping `t` checks
    // for double drops).
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = AtomicUsize::new(0);
    let panicky = |x: &mut String, u: &String| {
        assert!(calls.fetch_add(1, Ordering::SeqCst) != n / 2, "reducer panics");
        x.push_str(u);
    };
    let mut t = Array::from_elem(bins, String::from("x"));
    let r = catch_unwind(AssertUnwindSafe(|| {
        t.scatter(&ids, &u.broadcast(n).unwrap(), 0, panicky)
    }));
    assert!(r.is_err());
    assert!(
        t.iter()
            .all(|s| s.starts_with('x') && s[1..].chars().all(|c| c == 'u'))
    );
}
