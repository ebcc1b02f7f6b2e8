//! Long contiguous element lanes: the kernel's vectorized loop (chosen at run time for
//! AVX2 / AVX-512 from 16 elements) against the naive references, for every index type and
//! several element sizes, every mode and lanes whose length crosses the vector widths.

use std::fmt::Debug;

use ndarray::{Array2, ArrayD, IxDyn};
use ndarray_gather::prelude::*;

use crate::support::reference::{self, Mode};

/// Lane lengths around the thresholds and vector widths (4, 8, 16 lanes of 32-bit).
const LENGTHS: [usize; 9] = [1, 15, 16, 17, 31, 33, 64, 67, 130];

/// Index values in range for an axis of `n`, negative ones included for signed types,
/// plus a few out of range when `wild` (for Wrap and Clip).
fn values(count: usize, n: usize, signed: bool, wild: bool, seed: usize) -> Vec<i64> {
    (0..count)
        .map(|i| {
            let h = (i * 2654435761 + seed * 40503) % 1000;
            let span = if wild { 3 * n } else { n };
            let v = (h % span) as i64 - if wild { n as i64 } else { 0 };
            if signed && !wild && h.is_multiple_of(3) {
                v - n as i64
            } else if !signed {
                v.rem_euclid(3 * n as i64)
            } else {
                v
            }
        })
        .map(|v| if !signed && !wild { v % n as i64 } else { v })
        .collect()
}

fn check<A, I>(input: &Array2<A>, signed: bool)
where
    A: Clone + Send + Sync + PartialEq + Debug,
    I: GatherIndex + TryFrom<i64> + TryInto<i128>,
    <I as TryFrom<i64>>::Error: Debug,
{
    let rows = input.nrows();
    let n = input.ncols();
    for (seed, &lane) in LENGTHS.iter().enumerate() {
        for (mode, m, wild) in [
            (IndexMode::Raise, Mode::Raise, false),
            (IndexMode::Wrap, Mode::Wrap, true),
            (IndexMode::Clip, Mode::Clip, true),
        ] {
            let v = values(rows * lane, n, signed, wild, seed);
            let idx = Array2::from_shape_vec(
                (rows, lane),
                v.into_iter().map(|x| I::try_from(x).unwrap()).collect(),
            )
            .unwrap();
            let iv = idx.view().into_dyn();
            let xv = input.view().into_dyn();
            // take_along_axis: one lane per row (positional stride 0 on the input).
            if mode == IndexMode::Raise {
                let want = reference::along_axis(&xv, &iv, 1).unwrap();
                assert_eq!(
                    input.take_along_axis(&idx, 1).unwrap().into_dyn(),
                    want,
                    "lane {lane}"
                );
                // gather_elements along axis 0: each lane reads across a row (positional
                // stride 1), a row chosen per element.
                let wide =
                    Array2::from_shape_fn((rows, lane), |(i, j)| input[[(i + j) % rows, j % n]].clone());
                let down = values(2 * lane, rows, signed, false, seed);
                let down = Array2::from_shape_vec(
                    (2, lane),
                    down.into_iter().map(|x| I::try_from(x).unwrap()).collect(),
                )
                .unwrap();
                let want = reference::elements(&wide.view().into_dyn(), &down.view().into_dyn(), 0).unwrap();
                assert_eq!(
                    wide.gather_elements(&down, 0).unwrap().into_dyn(),
                    want,
                    "lane {lane}"
                );
            }
            // take with an axis over a 1-D index vector: each row is one lane.
            let flat = ArrayD::from_shape_vec(IxDyn(&[rows * lane]), idx.iter().copied().collect()).unwrap();
            let want = reference::gather(&xv, &flat.view(), 1, m).unwrap();
            assert_eq!(
                input.take(&flat, Some(1), mode).unwrap(),
                want,
                "lane {lane} {mode:?}"
            );
            let mut out = ArrayD::from_elem(IxDyn(&[rows, rows * lane, 1]), input[[0, 0]].clone());
            let lowered = input.view().insert_axis(ndarray::Axis(2));
            let lidx = flat
                .view()
                .insert_axis(ndarray::Axis(0))
                .insert_axis(ndarray::Axis(0));
            if mode == IndexMode::Raise {
                lowered
                    .into_dyn()
                    .gather_multiaxis_into(&lidx.into_dyn().permuted_axes(IxDyn(&[0, 2, 1])), &[1], &mut out)
                    .unwrap();
                assert_eq!(out, want.clone().insert_axis(ndarray::Axis(2)));
            }
        }
    }
}

#[test]
fn long_lanes_match_the_reference() {
    let rows = if cfg!(miri) { 2 } else { 5 };
    let f = |i: usize, j: usize| i * 1000 + j;
    // Every index type meets two element types and every element type two index types,
    // narrow and wide on both sides (the vector loop's widths come from both). Not the
    // full cross product: its 36 instantiations cost about a minute of CI compile time and
    // reach no path these pairs miss.
    let f32s = Array2::from_shape_fn((rows, 37), |(i, j)| f(i, j) as f32);
    let f64s = Array2::from_shape_fn((rows, 37), |(i, j)| f(i, j) as f64);
    let u8s = Array2::from_shape_fn((rows, 37), |(i, j)| f(i, j) as u8);
    let u16s = Array2::from_shape_fn((rows, 37), |(i, j)| f(i, j) as u16);
    let pairs = Array2::from_shape_fn((rows, 37), |(i, j)| (f(i, j) as u8, f(i, j) as u32));
    let strings = Array2::from_shape_fn((rows, 37), |(i, j)| f(i, j).to_string());
    check::<_, i32>(&f32s, true);
    check::<_, i32>(&u8s, true);
    check::<_, i64>(&f32s, true);
    check::<_, i64>(&f64s, true);
    check::<_, isize>(&u16s, true);
    check::<_, isize>(&strings, true);
    check::<_, u32>(&f64s, false);
    check::<_, u32>(&pairs, false);
    check::<_, u64>(&u8s, false);
    check::<_, u64>(&strings, false);
    check::<_, usize>(&u16s, false);
    check::<_, usize>(&pairs, false);
}

#[test]
fn a_bad_index_anywhere_in_a_long_lane_is_found() {
    let a = Array2::from_shape_fn((3, 40), |(i, j)| (i * 40 + j) as f32);
    for lane in [16, 40, 130] {
        for at in [0, lane / 2, lane - 1] {
            for bad in [40_i64, -41, i64::MAX, i64::MIN] {
                let mut idx = Array2::from_shape_fn((3, lane), |(i, j)| ((i + j) % 40) as i64);
                idx[[2, at]] = bad;
                let e = a.take_along_axis(&idx, 1).unwrap_err();
                assert!(
                    matches!(e, GatherError::IndexOutOfBounds { index, ref position, axis: 1, axis_len: 40, .. }
                        if index == bad as i128 && position == &vec![2, at]),
                    "lane {lane} at {at} bad {bad}: {e:?}"
                );
            }
        }
    }
}

/// Rows of many short block lanes: the kernel resolves blocks up to 32 lanes ahead to
/// prefetch them and reuses those offsets when their turn comes.
#[test]
fn long_rows_of_short_blocks_match_the_reference() {
    let n = if cfg!(miri) { 40 } else { 3000 };
    // Embedding lookup with 4-byte .. 256-byte rows, one row of lanes per index vector:
    // each width the kernel copies as a fixed-size array and some it does not.
    for width in [1, 2, 3, 4, 8, 16, 64] {
        let table = Array2::from_shape_fn((97, width), |(i, j)| (i * 1000 + j) as f32);
        let ids = ndarray::Array1::from_shape_fn(n, |k| ((k * 7919) % 97) as i64 - 40);
        let want =
            reference::gather(&table.view().into_dyn(), &ids.view().into_dyn(), 0, Mode::Raise).unwrap();
        assert_eq!(table.gather(&ids, 0).unwrap().into_dyn(), want, "width {width}");
        // Started mid-row (a range of the parallel split) and through a sliced input.
        let view = table.slice(ndarray::s![.., ..;2]);
        let want = reference::gather(&view.into_dyn(), &ids.view().into_dyn(), 0, Mode::Raise).unwrap();
        assert_eq!(
            view.gather(&ids, 0).unwrap().into_dyn(),
            want,
            "width {width} sliced"
        );
    }
    // (x, y) points per image, W8's layout.
    let x = ndarray::Array4::from_shape_fn((2, 9, 11, 16), |(b, h, w, c)| {
        (b * 10000 + h * 1000 + w * 20 + c) as u16
    });
    let idx = ndarray::Array4::from_shape_fn((2, n, 1, 2), |(b, i, _, k)| {
        ((i * 31 + b * 7 + k * 5) % if k == 0 { 11 } else { 9 }) as i32
    });
    let want = reference::multiaxis(&x.view().into_dyn(), &idx.view().into_dyn(), &[2, 1]).unwrap();
    assert_eq!(x.gather_multiaxis(&idx, &[2, 1]).unwrap().into_dyn(), want);
    // A bad point far into a row is still reported at its position.
    let mut bad = idx.clone();
    bad[[1, n - 3, 0, 1]] = 9;
    let e = x.gather_multiaxis(&bad, &[2, 1]).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 9, ref position, axis: 1, axis_len: 9, .. }
            if position == &vec![1, n - 3, 0, 1]),
        "{e:?}"
    );
}

/// Short blocks of elements that own memory, into an existing output (assigned as
/// fixed-size arrays, not initialized) and into a new one, in rows longer and shorter
/// than the lanes the kernel locates ahead. Small enough for Miri, which CI runs on it.
#[test]
fn short_blocks_into_an_existing_output() {
    let n = 40;
    let cases = [(2, n), (4, n), (8, 5), (5, n), (16, 1)];
    // Under Miri (CI's slowest test): a fixed-size block (4) in long rows, an odd one (5)
    // in long rows, and one row shorter than the lanes ahead.
    let cases = if cfg!(miri) { &cases[1..4] } else { &cases[..] };
    for &(width, rows) in cases {
        let table = Array2::from_shape_fn((13, width), |(i, j)| format!("{i}.{j}"));
        let idx = Array2::from_shape_fn((rows, 1), |(k, _)| ((k * 5) % 13) as u32);
        // Row `idx[k]` of the table, as a plain loop.
        let want = Array2::from_shape_fn((rows, width), |(k, j)| table[[idx[[k, 0]] as usize, j]].clone());
        let mut out = Array2::from_elem((rows, width), String::from("old"));
        table.gather_multiaxis_into(&idx, &[0], &mut out).unwrap();
        assert_eq!(out, want, "width {width}, {rows} rows, into");
        assert_eq!(table.gather_multiaxis(&idx, &[0]).unwrap(), want);
        // A bad index among the first lanes and among the last.
        for at in [0, rows - 1] {
            let mut bad = idx.clone();
            bad[[at, 0]] = 13;
            let mut out = Array2::from_elem((rows, width), String::from("old"));
            for e in [
                table.gather_multiaxis(&bad, &[0]).unwrap_err(),
                table.gather_multiaxis_into(&bad, &[0], &mut out).unwrap_err(),
            ] {
                assert!(
                    matches!(e, GatherError::IndexOutOfBounds { index: 13, ref position, .. }
                        if position == &vec![at, 0]),
                    "{e:?}"
                );
            }
        }
    }
}

/// Fresh outputs of 4 MiB and more are backed by huge pages faulted in before the gather
/// (natively on Linux; the same code path elsewhere): the result is the reference's, and
/// a bad index near the end is still the error, whatever the allocation's alignment.
#[test]
fn fresh_outputs_above_4_mib_match_the_reference() {
    let (rows, width) = if cfg!(miri) { (8, 4) } else { (1 << 14, 97) };
    let table = Array2::from_shape_fn((301, width), |(i, j)| (i * 1000 + j) as f32);
    // 4 bytes x 97 x 16384 = 6.06 MiB: not whole 2 MiB pages, so part of it is faulted
    // in by the gather's own writes wherever the allocation starts.
    let ids = ndarray::Array1::from_shape_fn(rows, |k| ((k * 7919) % 301) as i64 - 150);
    let want = reference::gather(&table.view().into_dyn(), &ids.view().into_dyn(), 0, Mode::Raise).unwrap();
    assert_eq!(table.gather(&ids, 0).unwrap().into_dyn(), want);
    let plan = GatherPlan::gather(table.shape(), &ids, 0).unwrap();
    assert_eq!(plan.apply(&table).unwrap(), want);
    let mut bad = ids.clone();
    bad[rows - 2] = 301;
    let e = table.gather(&bad, 0).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 301, ref position, .. } if position == &vec![rows - 2]),
        "{e:?}"
    );
}

/// Gathers that write 16 MiB or more copy their contiguous blocks of 1 KiB or more, and
/// blocks of whole cache lines, with streaming stores (natively on x86-64 with AVX;
/// elsewhere and under Miri the same gathers copy as usual): rows that start at every
/// offset within a cache line, into a fresh output, a reused one, a column slice of a
/// wider one and an output that starts on a line, give the rows ndarray's `select` picks.
#[test]
fn streamed_block_copies_match_ndarrays_select() {
    fn check<A: Clone + PartialEq + std::fmt::Debug + Send + Sync>(
        rows: usize,
        width: usize,
        value: fn(usize) -> A,
        old: A,
    ) {
        let table = Array2::from_shape_fn((301, width), |(i, j)| value(i * 1000 + j));
        let ids = ndarray::Array1::from_shape_fn(rows, |k| ((k * 7919) % 301) as i64 - 150);
        // (ndarray's own `select`: the reference is slow on 16 MiB in a debug build.)
        let rows_picked: Vec<usize> = ids.iter().map(|&i| i.rem_euclid(301) as usize).collect();
        let want = table.select(ndarray::Axis(0), &rows_picked).into_dyn();
        assert_eq!(table.gather(&ids, 0).unwrap().into_dyn(), want, "fresh");
        let plan = GatherPlan::gather(table.shape(), &ids, 0).unwrap();
        let mut out = Array2::from_elem((rows, width), old.clone());
        plan.apply_into(&table, &mut out).unwrap();
        assert_eq!(out.into_dyn(), want, "reused");
        let mut wide = Array2::from_elem((rows, width + 3), old.clone());
        plan.apply_into(&table, &mut wide.slice_mut(ndarray::s![.., 1..width + 1]))
            .unwrap();
        assert_eq!(
            wide.slice(ndarray::s![.., 1..width + 1]).into_dyn(),
            want,
            "column slice"
        );
        assert!(
            wide.column(0)
                .iter()
                .chain(wide.column(width + 1))
                .all(|v| *v == old)
        );
        // An output whose first element starts a cache line (rows of whole lines stream).
        let mut storage = vec![old.clone(); rows * width + 64];
        let skip = storage.as_ptr().align_offset(64).min(64);
        let mut lined =
            ndarray::ArrayViewMut2::from_shape((rows, width), &mut storage[skip..skip + rows * width])
                .unwrap();
        plan.apply_into(&table, &mut lined).unwrap();
        assert_eq!(lined.into_dyn(), want, "from a line");
    }
    if cfg!(miri) {
        check(8, 5, |v| v as f32, -1.0);
    } else {
        // Just over 16 MiB each: 261 f32 (1044 bytes) x 16100 rows, 1030 bytes x 16300
        // rows, and rows of 64 f32 (256 bytes, whole lines from a line) x 65600.
        check(16_100, 261, |v| v as f32, -1.0);
        check(16_300, 1030, |v| v as u8, 0xEE);
        check(65_600, 64, |v| v as f32, -1.0);
    }
}

/// Rows of short element lanes, each reading one contiguous row (GatherElements along the
/// last axis with a few indices per row, W9): run a row of lanes per kernel call once a
/// call has more than 64 positions. Against the reference, fresh and into an existing
/// output, through a plan, for lanes of 1 to 257 (past the rows path's 256), and a bad
/// index anywhere named with its position.
#[test]
fn short_element_rows_match_the_reference() {
    let (b, n) = (if cfg!(miri) { 3 } else { 6 }, 9);
    let x = ndarray::Array3::from_shape_fn((2, b, n), |(i, j, k)| (i * 100 + j * 10 + k) as f32);
    let lens: &[usize] = if cfg!(miri) {
        &[11, 40]
    } else {
        &[1, 3, 4, 6, 16, 64, 256, 257]
    };
    // (`i64` indices with negatives among them, and without: those lanes are read as
    // they are.)
    for (&k, negatives) in lens.iter().flat_map(|k| [(k, true), (k, false)]) {
        let v = values(2 * b * k, n, negatives, false, k);
        let idx = ndarray::Array3::from_shape_vec((2, b, k), v).unwrap();
        let want = reference::elements(&x.view().into_dyn(), &idx.view().into_dyn(), 2).unwrap();
        assert_eq!(x.gather_elements(&idx, -1).unwrap().into_dyn(), want, "k {k}");
        let plan = GatherPlan::gather_elements(x.dim(), &idx, 2).unwrap();
        let mut out = ndarray::Array3::<f32>::zeros((2, b, k));
        plan.apply_into(&x, &mut out).unwrap();
        assert_eq!(out.into_dyn(), want, "k {k}: plan");
        // A bad index in the last lane: the error names it; `out` is left as it was.
        let mut bad = idx.clone();
        bad[[1, b - 1, k - 1]] = n as i64;
        match x.gather_elements(&bad, -1) {
            Err(GatherError::IndexOutOfBounds { index, position, .. }) => {
                assert_eq!((index, position), (n as i128, vec![1, b - 1, k - 1]), "k {k}")
            }
            r => panic!("k {k}: {r:?}"),
        }
    }
}
