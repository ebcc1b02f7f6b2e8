//! Gathers into outputs of any memory order: the kernel walks an output in its own order
//! (column-major loops for an all-Fortran gather, tiles staged through a buffer where a
//! Fortran-order output meets a C-order input), and the result is the C-order one,
//! element for element, for block and element lanes, one and two axes, elements with and
//! without drop glue, with a bad index still refused.

use std::sync::atomic::{AtomicUsize, Ordering};

use ndarray::{Array, ArrayD, Axis, IxDyn, ShapeBuilder, Slice};
use ndarray_gather::prelude::*;

use crate::support::reference;
use crate::support::threads::serial_and_parallel;

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
    serial_and_parallel(|| check_here(input, idx, axes));
}

fn check_here(input: &ArrayD<i64>, idx: &ArrayD<i64>, axes: &[usize]) {
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
    // Under Miri each call takes two of the four outputs, the next two on the next call:
    // Miri runs one test at a time, so every test that checks twice sees every kind of
    // output, at half the time.
    static TURN: AtomicUsize = AtomicUsize::new(0);
    let turn = TURN.fetch_add(1, Ordering::Relaxed);
    let runs = |kind: usize| !cfg!(miri) || kind / 2 == turn % 2;
    for inp in both(input) {
        for idx in both(idx) {
            if runs(0) {
                let mut f = ArrayD::from_elem(IxDyn(&shape).f(), -1);
                inp.gather_multiaxis_into(&idx, axes, &mut f).unwrap();
                assert_eq!(f, want, "{shape:?} into Fortran order");
            }
            if runs(1) {
                let mut reversed = ArrayD::from_elem(IxDyn(&shape).f(), -1);
                for d in 0..reversed.ndim() {
                    reversed.invert_axis(Axis(d));
                }
                inp.gather_multiaxis_into(&idx, axes, &mut reversed).unwrap();
                assert_eq!(reversed, want, "{shape:?} into reversed Fortran order");
            }
            if runs(2) {
                // Every other element of a larger Fortran-order array along the first axis.
                let mut wide = shape.clone();
                wide[0] *= 2;
                let mut big = ArrayD::from_elem(IxDyn(&wide).f(), -1);
                let mut stepped = big.slice_axis_mut(Axis(0), Slice::new(0, None, 2));
                inp.gather_multiaxis_into(&idx, axes, &mut stepped).unwrap();
                assert_eq!(stepped, want, "{shape:?} into a stepped view");
            }
            if runs(3) {
                let mut p = ArrayD::from_elem(IxDyn(&shape).f(), -1);
                plan.apply_into(&inp, &mut p).unwrap();
                assert_eq!(p, want, "{shape:?} plan into Fortran order");
            }
        }
    }
}

#[test]
fn block_lanes_into_fortran_order() {
    // An embedding lookup as W1 lowers it: [rows, 1, 1, dim] by [1, b, s, 1]. Lanes of
    // 192 and 256 (tiled in chunks of 64), crosses of 64, 128 (two tiles) and 3 (one
    // short); lanes of 40, 24, 17 and 200 staged whole, in groups of several rows (under
    // Miri, whose staging buffer holds 64 elements: groups of 5 lanes of 12, 4 of 13).
    let cases = [
        (50, 192, 64, 3),
        (9, 256, 128, 2),
        (30, 192, 3, 5),
        (50, 40, 64, 3),
        (9, 24, 128, 2),
        (30, 40, 3, 5),
        (7, 17, 64, 2),
        (7, 200, 8, 2),
    ];
    let cases = if cfg!(miri) {
        &[(9, 12, 16, 1), (5, 13, 6, 1)][..]
    } else {
        &cases[..]
    };
    for &(rows, dim, b, s) in cases {
        let table = Array::from_shape_fn((rows, 1, 1, dim), |(r, _, _, d)| (r * 1000 + d) as i64).into_dyn();
        check(&table, &ids(&[1, b, s, 1], rows, b), &[0]);
    }
    // 1-D lookups, [rows, dim] by [b, 1]: the lane down the output's columns is contiguous
    // in the indices too, yet each of its elements is in another row; the rows run in
    // tiles or whole staged lanes as above.
    let lookups = if cfg!(miri) {
        &[(9, 12, 16)][..]
    } else {
        &[(50, 192, 128), (30, 40, 64), (7, 17, 3), (9, 256, 64)][..]
    };
    for &(rows, dim, b) in lookups {
        let table = Array::from_shape_fn((rows, dim), |(r, d)| (r * 1000 + d) as i64).into_dyn();
        check(&table, &ids(&[b, 1], rows, b), &[0]);
    }
    if cfg!(miri) {
        return;
    }
    // Two axes, (x, y) points as W8: blocks of 32 channels; the images' short loop moves
    // inside rows of 64 points and inside chunks of 256 of 768 points.
    let image = Array::from_shape_fn((2, 5, 6, 32), |(n, y, x, c)| {
        (n * 10000 + y * 1000 + x * 100 + c) as i64
    })
    .into_dyn();
    for count in [64, 768] {
        let mut points = ids(&[2, count, 1, 2], 5, 3);
        points
            .slice_axis_mut(Axis(3), Slice::from(0..1))
            .mapv_inplace(|v| v % 6);
        check(&image, &points, &[2, 1]);
    }
}

#[test]
fn element_lanes_into_fortran_order() {
    // take_along_axis along the last axis as W3: lanes of 4160 (longer than the staging
    // buffer: tiled), 2048, 192, 48 and 7 (staged whole, in groups of at least 64 lanes:
    // 100 rows of 2048 are a group and a part, in two parallel ranges of whole groups),
    // rows of 128, 100, 64 and 5 (under Miri, whose buffer holds 64 elements and groups at
    // least 4 lanes: 6 rows of 32 in a group of 4 and one of 2, 5 of 7 in one group of up to 9).
    let cases = if cfg!(miri) {
        vec![(5, 7), (6, 32)]
    } else {
        vec![(64, 4160), (100, 2048), (128, 192), (64, 48), (5, 48), (64, 7)]
    };
    for (rows, len) in cases {
        let x = Array::from_shape_fn((rows, len), |(i, j)| (i * 1000 + j) as i64).into_dyn();
        check(&x, &ids(&[rows, len], len, rows), &[1]);
    }
}

#[test]
fn elements_with_drop_glue_into_fortran_order() {
    // Not staged (the buffer is abandoned on a bad index): the tiles' lanes one by one.
    let (rows, dim, b) = if cfg!(miri) { (5, 6, 8) } else { (30, 192, 64) };
    let table = Array::from_shape_fn((rows, 1, 1, dim), |(r, _, _, d)| format!("{r}.{d}")).into_dyn();
    let idx = ids(&[1, b, 3, 1], rows, 7);
    let want = table.gather_multiaxis(&idx, &[0]).unwrap();
    let mut f = ArrayD::from_elem(IxDyn(want.shape()).f(), String::from("old"));
    table.gather_multiaxis_into(&idx, &[0], &mut f).unwrap();
    assert_eq!(f, want);
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

#[test]
fn element_lanes_from_transposed_inputs() {
    // take_along_axis along the last axis of a transposed input (W3's `into_t_in`): the
    // rows are adjacent, the axis strides; staged through a buffer a group of rows at a
    // time (rows of 7 in groups of 9 under Miri), into C-order, Fortran-order and
    // reversed outputs, from a transposed and a reversed transposed input.
    let cases = if cfg!(miri) {
        vec![(20, 7)]
    } else {
        vec![(20, 7), (100, 64), (37, 300), (64, 2048)]
    };
    for (rows, len) in cases {
        serial_and_parallel(|| from_transposed(rows, len));
    }
}

fn from_transposed(rows: usize, len: usize) {
    let c = Array::from_shape_fn((len, rows), |(j, i)| (i * 10000 + j) as i64).into_dyn();
    let idx = ids(&[rows, len], len, rows + len);
    // The same values through a view whose rows run backwards (row stride -1).
    let mut backwards = c.clone();
    backwards.invert_axis(Axis(1));
    for inp in [c.t(), backwards.t()] {
        // The naive reference indexes element by element, whatever the layout.
        let want = reference::multiaxis(&inp, &idx.view(), &[1]).unwrap();
        assert_eq!(
            inp.gather_multiaxis(&idx, &[1]).unwrap(),
            want,
            "{rows}x{len} allocating"
        );
        let mut out = ArrayD::from_elem(IxDyn(&[rows, len]), -1);
        inp.gather_multiaxis_into(&idx, &[1], &mut out).unwrap();
        assert_eq!(out, want, "{rows}x{len} into C order");
        let mut f = ArrayD::from_elem(IxDyn(&[rows, len]).f(), -1);
        inp.gather_multiaxis_into(&idx, &[1], &mut f).unwrap();
        assert_eq!(f, want, "{rows}x{len} into Fortran order");
    }
    // A bad index in the last row is still found and named.
    let mut bad = idx.clone();
    bad[[rows - 1, len - 1]] = len as i64;
    let err = c.t().gather_multiaxis(&bad, &[1]).unwrap_err();
    assert!(
        matches!(err, GatherError::IndexOutOfBounds { index, ref position, .. } if index == len as i128 && position == &[rows - 1, len - 1]),
        "{err}"
    );
}

#[test]
fn element_lanes_along_a_far_axis() {
    // GatherElements along the first axis (W4): each lane reads its elements from rows
    // far apart. The planner cuts long lanes into strips (of 1000 columns by 600 rows,
    // 250; of 2048 by 512, 512; of 1000 by 300, 500; none for 100 output rows of 512;
    // under Miri, whose slab holds 64 elements, 16 of 64 and 20 of 80 columns); each
    // row of a strip gathers from a copy of its slab. From C-order, reversed, stepped and
    // axis-reversed inputs, with fewer output rows than input rows, and with a batch
    // dimension around; negative indices; allocating, into C-order and Fortran-order
    // outputs, and through a plan.
    let cases: &[(usize, usize, usize, usize)] = if cfg!(miri) {
        &[(1, 4, 4, 64), (2, 3, 2, 80)]
    } else {
        &[
            (1, 600, 600, 1000),
            (1, 512, 300, 2048),
            (2, 300, 300, 1000),
            (1, 512, 100, 2048),
        ]
    };
    for (case, &(batch, rows, out_rows, cols)) in cases.iter().enumerate() {
        // Twice the columns, so that every other one is a stepped view.
        let wide = Array::from_shape_fn((batch, rows, 2 * cols), |(b, i, j)| {
            (b * 10_000_000 + i * 10_000 + j) as i64
        });
        let mut idx = ids(&[batch, out_rows, cols], rows, cols);
        // Negative indices count from the end.
        idx.iter_mut().step_by(7).for_each(|v| *v -= rows as i64);
        let plain = wide.slice(ndarray::s![.., .., ..cols]).to_owned();
        let mut flipped = plain.clone();
        flipped.invert_axis(Axis(2));
        let mut upside_down = plain.clone();
        upside_down.invert_axis(Axis(1));
        let stepped = wide.slice(ndarray::s![.., .., ..;2]);
        let inputs = [plain.view(), flipped.view(), upside_down.view(), stepped];
        // Under Miri each case takes every other layout (C order and reversed rows, then
        // reversed columns and stepped): every layout once, at half the time.
        let inputs: Vec<_> = (0..4)
            .filter(|k| !cfg!(miri) || k % 2 == case % 2)
            .map(|k| &inputs[k])
            .collect();
        // GatherElements along axis 1 as a plain loop (the IxDyn reference, element by
        // element, took most of this test's time under Miri), once per layout.
        let idx3 = idx.view().into_dimensionality::<ndarray::Ix3>().unwrap();
        let wants: Vec<_> = inputs
            .iter()
            .map(|inp| {
                Array::from_shape_fn((batch, out_rows, cols), |(b, i, j)| {
                    inp[[b, idx3[[b, i, j]].rem_euclid(rows as i64) as usize, j]]
                })
                .into_dyn()
            })
            .collect();
        serial_and_parallel(|| {
            for (k, (inp, want)) in inputs.iter().zip(&wants).enumerate() {
                let inp = inp.view().into_dyn();
                let what = format!(
                    "{batch}x{rows}x{cols} by {out_rows} rows, strides {:?}",
                    inp.strides()
                );
                // Under Miri the first layout of a case goes into fresh and C-order
                // outputs, the second into Fortran order and through a plan.
                let (direct, others) = (!cfg!(miri) || k == 0, !cfg!(miri) || k == 1);
                let mut out = ArrayD::from_elem(IxDyn(want.shape()), -1);
                if direct {
                    assert_eq!(inp.gather_elements(&idx, 1).unwrap(), want, "{what} allocating");
                    inp.gather_multiaxis_into(&idx, &[1], &mut out).unwrap();
                    assert_eq!(out, want, "{what} into C order");
                }
                if others {
                    let mut f = ArrayD::from_elem(IxDyn(want.shape()).f(), -1);
                    inp.gather_multiaxis_into(&idx, &[1], &mut f).unwrap();
                    assert_eq!(f, want, "{what} into Fortran order");
                    let plan = GatherPlan::gather_elements(inp.shape(), &idx, 1).unwrap();
                    assert_eq!(plan.apply(&inp).unwrap(), want, "{what} plan");
                    plan.apply_into(&inp, &mut out).unwrap();
                    assert_eq!(out, want, "{what} plan into C order");
                }
            }
        });
        // Of two bad indices, the first in row-major order is named, though the strips
        // reach the other one first.
        let mut bad = idx.clone();
        bad[[batch - 1, out_rows - 1, 0]] = rows as i64;
        bad[[0, 1, cols - 1]] = -(rows as i64) - 1;
        let err = plain.gather_elements(&bad, 1).unwrap_err();
        assert!(
            matches!(err, GatherError::IndexOutOfBounds { index, ref position, .. } if index == -(rows as i128) - 1 && position == &[0, 1, cols - 1]),
            "{err}"
        );
    }
}

#[test]
fn elements_with_drop_glue_along_a_far_axis() {
    // Strings are never copied into a slab (a copy abandoned at a bad index must not own
    // anything): into an existing output the strips' lanes gather one by one, a fresh
    // output is filled in row-major order.
    let (rows, cols) = if cfg!(miri) { (4, 64) } else { (300, 1000) };
    let x = Array::from_shape_fn((rows, cols), |(i, j)| format!("{i}.{j}")).into_dyn();
    let idx = ids(&[rows, cols], rows, 5);
    let want = reference::elements(&x.view(), &idx.view(), 0).unwrap();
    assert_eq!(x.gather_elements(&idx, 0).unwrap(), want);
    let mut out = ArrayD::from_elem(IxDyn(&[rows, cols]), String::from("old"));
    x.gather_multiaxis_into(&idx, &[0], &mut out).unwrap();
    assert_eq!(out, want);
    let mut bad = idx.clone();
    bad[[rows - 1, 3]] = rows as i64;
    // The fresh output's and the existing output's walks both stop there and say where.
    let at = vec![rows - 1, 3];
    let named = |e: GatherError| matches!(e, GatherError::IndexOutOfBounds { index, ref position, .. } if index == rows as i128 && position == &at);
    let err = x.gather_elements(&bad, 0).unwrap_err();
    assert!(named(err.clone()), "{err}");
    let err = x.gather_multiaxis_into(&bad, &[0], &mut out).unwrap_err();
    assert!(named(err.clone()), "{err}");
}
