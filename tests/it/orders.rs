//! Gathers into outputs of any memory order: the kernel walks an output in its own order
//! (column-major loops for an all-Fortran gather, tiles where a Fortran-order output meets
//! a C-order input), and the result is the C-order one, element for element, for block
//! and element lanes, one and two axes, with a bad index still refused.

use ndarray::{Array, ArrayD, Axis, IxDyn, ShapeBuilder, Slice};
use ndarray_gather::prelude::*;

use crate::reference;

/// Deterministic values in `0..n`.
fn ids(shape: &[usize], n: usize, seed: usize) -> ArrayD<i64> {
    let len = shape.iter().product::<usize>();
    let v = (0..len)
        .map(|i| ((i * 2654435761 + seed * 97) % 1_000_003 % n) as i64)
        .collect();
    ArrayD::from_shape_vec(IxDyn(shape), v).unwrap()
}

fn fortran<T: Clone>(a: &ArrayD<T>) -> ArrayD<T> {
    let mut f = ArrayD::from_elem(IxDyn(a.shape()).f(), a.first().unwrap().clone());
    f.assign(a);
    f
}

/// `input.gather_multiaxis(idx, axes)` into Fortran-order, reversed and stepped outputs,
/// from a C-order and a Fortran-order input, unprepared and through a plan: each equal to
/// the naive reference.
fn check(input: &ArrayD<i64>, idx: &ArrayD<i64>, axes: &[usize]) {
    let want = reference::multiaxis(&input.view(), &idx.view(), axes).unwrap();
    let shape = want.shape().to_vec();
    let plan = GatherPlan::multiaxis(input.shape(), idx, axes).unwrap();
    // (Under Miri, C-order operands only: the outputs' orders are what is new here.)
    let both = |a: &ArrayD<i64>| {
        if cfg!(miri) {
            vec![a.clone()]
        } else {
            vec![a.clone(), fortran(a)]
        }
    };
    for inp in both(input) {
        for idx in both(idx) {
            let mut f = ArrayD::from_elem(IxDyn(&shape).f(), -1);
            inp.gather_multiaxis_into(&idx, axes, &mut f).unwrap();
            assert_eq!(f, want, "{shape:?} into Fortran order");
            let mut reversed = ArrayD::from_elem(IxDyn(&shape).f(), -1);
            for d in 0..reversed.ndim() {
                reversed.invert_axis(Axis(d));
            }
            inp.gather_multiaxis_into(&idx, axes, &mut reversed).unwrap();
            assert_eq!(reversed, want, "{shape:?} into reversed Fortran order");
            // Every other element of a larger Fortran-order array along the first axis.
            let mut wide = shape.clone();
            wide[0] *= 2;
            let mut big = ArrayD::from_elem(IxDyn(&wide).f(), -1);
            let mut stepped = big.slice_axis_mut(Axis(0), Slice::new(0, None, 2));
            inp.gather_multiaxis_into(&idx, axes, &mut stepped).unwrap();
            assert_eq!(stepped, want, "{shape:?} into a stepped view");
            let mut p = ArrayD::from_elem(IxDyn(&shape).f(), -1);
            plan.apply_into(&inp, &mut p).unwrap();
            assert_eq!(p, want, "{shape:?} plan into Fortran order");
        }
    }
}

#[test]
fn block_lanes_into_fortran_order() {
    // An embedding lookup as W1 lowers it: [rows, 1, 1, dim] by [1, b, s, 1]. Lanes of
    // 40 and 24 (tiled in chunks of 8), crosses of 64, 128 (two tiles) and 3 (one short).
    let cases = [(50, 40, 64, 3), (9, 24, 128, 2), (30, 40, 3, 5), (7, 17, 64, 2)];
    let cases = if cfg!(miri) {
        &[(9, 24, 64, 1)][..]
    } else {
        &cases[..]
    };
    for &(rows, dim, b, s) in cases {
        let table = Array::from_shape_fn((rows, 1, 1, dim), |(r, _, _, d)| (r * 1000 + d) as i64).into_dyn();
        check(&table, &ids(&[1, b, s, 1], rows, b), &[0]);
    }
    if cfg!(miri) {
        return;
    }
    // Two axes, (x, y) points as W8: blocks of 32 channels.
    let image = Array::from_shape_fn((2, 5, 6, 32), |(n, y, x, c)| {
        (n * 10000 + y * 1000 + x * 100 + c) as i64
    });
    let mut points = ids(&[2, 64, 1, 2], 5, 3);
    points
        .slice_axis_mut(Axis(3), Slice::from(0..1))
        .mapv_inplace(|v| v % 6);
    check(&image.into_dyn(), &points, &[2, 1]);
}

#[test]
fn element_lanes_into_fortran_order() {
    // take_along_axis along the last axis as W3: lanes of 48 (tiled), rows of 64 and 5.
    for rows in if cfg!(miri) { vec![5] } else { vec![64, 5] } {
        let x = Array::from_shape_fn((rows, 48), |(i, j)| (i * 100 + j) as i64).into_dyn();
        check(&x, &ids(&[rows, 48], 48, rows), &[1]);
    }
}

#[test]
fn a_bad_index_is_refused_in_any_order() {
    let table = Array::from_shape_fn((50, 1, 1, 40), |(r, _, _, d)| (r * 1000 + d) as i64).into_dyn();
    let mut idx = ids(&[1, 64, 3, 1], 50, 1);
    idx[[0, 63, 2, 0]] = 50;
    let mut f = ArrayD::from_elem(IxDyn(&[1, 64, 3, 40]).f(), -1);
    let err = table.gather_multiaxis_into(&idx, &[0], &mut f).unwrap_err();
    assert!(
        matches!(err, GatherError::IndexOutOfBounds { index: 50, ref position, .. } if position == &[0, 63, 2, 0]),
        "{err}"
    );
}
