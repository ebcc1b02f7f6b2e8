//! Serial and parallel runs of the same large gathers give identical results.
//! (Under Miri the kernel's parallel threshold is tiny, so small sizes reach it too.)

#![cfg(feature = "rayon")]

use ndarray::{Array, Array2, Array3, ShapeBuilder};
use ndarray_gather::prelude::*;

use crate::support::threads::{on_1_and_3, pool};

/// A side length well above the parallel threshold (small under Miri).
const N: usize = if cfg!(miri) { 12 } else { 1024 };

#[test]
fn block_gather_far_above_the_threshold() {
    let (rows, width, lookups) = if cfg!(miri) { (48, 4, 3) } else { (4096, 256, 64) };
    let table = Array::from_shape_fn((rows, width), |(i, j)| (i * 256 + j) as f32);
    let ids = Array::from_shape_fn((lookups, 97), |(i, j)| {
        ((i * 7919 + j * 104729) % rows) as i64 - rows as i64 / 2
    });
    on_1_and_3(|| table.gather(&ids, 0).unwrap());
    let out = table.gather(&ids, 0).unwrap();
    let row = ids[[lookups / 2, 6]].rem_euclid(rows as i64) as usize;
    assert_eq!(out[[lookups / 2, 6, 3]], table[[row, 3]]);
}

#[test]
fn element_gather_far_above_the_threshold() {
    let a = Array::from_shape_fn((N, N), |(i, j)| (i * N + j) as i64);
    let idx = Array::from_shape_fn((N, N), |(i, j)| ((i * 31 + j * 17) % N) as u32);
    on_1_and_3(|| a.take_along_axis(&idx, 1).unwrap());
    on_1_and_3(|| a.t().gather_elements(&idx, 0).unwrap());
    let mut out = Array2::<i64>::zeros((N, N).f());
    a.gather_multiaxis_into(&idx, &[1], &mut out).unwrap();
    assert_eq!(out, a.take_along_axis(&idx, 1).unwrap());
}

/// A 1-D output is one lane with no loop around it: it too is cut into ranges (this
/// panicked with an index out of range, for every 1-D gather above the threshold).
#[test]
fn one_dimensional_gathers_far_above_the_threshold() {
    let (len, n) = if cfg!(miri) { (40, 72) } else { (1 << 20, 1 << 20) };
    let a = Array::from_shape_fn(len, |i| i as f32 * 0.5);
    let idx = Array::from_shape_fn(n, |i| ((i * 7919) % (2 * len)) as i64 - len as i64);
    let want = idx.mapv(|v| a[v.rem_euclid(len as i64) as usize]);
    assert_eq!(on_1_and_3(|| a.gather(&idx, 0).unwrap()), want);
    let plan = GatherPlan::gather([len], &idx, 0).unwrap();
    // (A plan from a fixed-size shape is typed, as the method is.)
    assert_eq!(on_1_and_3(|| plan.apply(&a).unwrap()), want);
    assert_eq!(
        on_1_and_3(|| a.take(&idx, None, IndexMode::Raise).unwrap()),
        want.view().into_dyn()
    );
    let wrapped = idx.mapv(|v| a[(v + 1).rem_euclid(len as i64) as usize]);
    let shifted = idx.mapv(|v| v + 1 + len as i64);
    assert_eq!(
        on_1_and_3(|| a.take(&shifted, None, IndexMode::Wrap).unwrap()),
        wrapped.into_dyn()
    );
    let into = on_1_and_3(|| {
        let mut out = Array::zeros(n);
        a.gather_multiaxis_into(&idx, &[0], &mut out).unwrap();
        out
    });
    assert_eq!(into, want);
}

#[test]
fn strings_far_above_the_threshold() {
    let (r, c) = if cfg!(miri) { (6, 8) } else { (300, 400) };
    let a = Array::from_shape_fn((r, c), |(i, j)| format!("{i}:{j}"));
    let idx = Array::from_shape_fn((r, c), |(i, j)| ((i + j) % c) as i64);
    on_1_and_3(|| a.take_along_axis(&idx, 1).unwrap());
}

#[test]
fn parallel_errors_are_the_first_bad_index() {
    let n = if cfg!(miri) { 8 } else { N / 16 };
    let a = Array3::<f32>::zeros((n, n, n));
    let mut idx = Array3::<i64>::zeros((n, n, n));
    idx[[n - 3, 3, 9 % n]] = n as i64;
    idx[[n - 2, 0, 0]] = -(n as i64) - 1;
    on_1_and_3(|| a.gather_elements(&idx, 2).unwrap_err());
    let e = pool(3).install(|| a.gather_elements(&idx, 2).unwrap_err());
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index, ref position, .. } if index == n as i128 && position == &vec![n - 3, 3, 9 % n])
    );
}
