//! Serial and parallel runs of the same large gathers give identical results.

#![cfg(feature = "rayon")]

use ndarray::{Array, Array2, Array3, ShapeBuilder};
use ndarray_gather::prelude::*;

fn pool(n: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap()
}

fn both<T: PartialEq + std::fmt::Debug + Send>(f: impl Fn() -> T + Sync) {
    let serial = pool(1).install(&f);
    let parallel = pool(3).install(&f);
    assert_eq!(serial, parallel);
}

#[test]
fn block_gather_far_above_the_threshold() {
    let table = Array::from_shape_fn((4096, 256), |(i, j)| (i * 256 + j) as f32);
    let ids = Array::from_shape_fn((64, 97), |(i, j)| ((i * 7919 + j * 104729) % 4096) as i64 - 2048);
    both(|| table.gather(&ids, 0).unwrap());
    let out = table.gather(&ids, 0).unwrap();
    let row = ids[[5, 6]].rem_euclid(4096) as usize;
    assert_eq!(out[[5, 6, 7]], table[[row, 7]]);
}

#[test]
fn element_gather_far_above_the_threshold() {
    let a = Array::from_shape_fn((1024, 1024), |(i, j)| (i * 1024 + j) as i64);
    let idx = Array::from_shape_fn((1024, 1024), |(i, j)| ((i * 31 + j * 17) % 1024) as u32);
    both(|| a.take_along_axis(&idx, 1).unwrap());
    both(|| a.t().gather_elements(&idx, 0).unwrap());
    let mut out = Array2::<i64>::zeros((1024, 1024).f());
    a.gather_multiaxis_into(&idx, &[1], &mut out).unwrap();
    assert_eq!(out, a.take_along_axis(&idx, 1).unwrap());
}

#[test]
fn strings_far_above_the_threshold() {
    let a = Array::from_shape_fn((300, 400), |(i, j)| format!("{i}:{j}"));
    let idx = Array::from_shape_fn((300, 400), |(i, j)| ((i + j) % 400) as i64);
    both(|| a.take_along_axis(&idx, 1).unwrap());
}

#[test]
fn parallel_errors_are_the_first_bad_index() {
    let a = Array3::<f32>::zeros((64, 64, 64));
    let mut idx = Array3::<i64>::zeros((64, 64, 64));
    idx[[40, 3, 9]] = 64;
    idx[[50, 0, 0]] = -65;
    both(|| a.gather_elements(&idx, 2).unwrap_err());
    let e = pool(3).install(|| a.gather_elements(&idx, 2).unwrap_err());
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 64, ref position, .. } if position == &vec![40, 3, 9])
    );
}
