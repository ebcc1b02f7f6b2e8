//! Prepared gathers ([`GatherPlan`]) against the methods they mirror: the same error, or
//! the same elements from every layout of the input. The property tests of the wrappers
//! and of `gather_multiaxis`, and every fixture, run their calls through [`agrees`] too.

use ndarray::{Array, Array2, ArrayD, ArrayView3, ShapeBuilder, array};
use ndarray_gather::prelude::*;

use crate::support::generate::Elem;
use crate::support::layouts::{ALL, Held, Layout};
use crate::support::plans::{agrees, same_error};

#[test]
fn a_plan_is_clone_debug_send_sync_and_static() {
    fn check<T: Clone + std::fmt::Debug + Send + Sync + 'static>() {}
    check::<GatherPlan>();
}

#[test]
fn apply_checks_shapes_before_writing() {
    let plan = GatherPlan::gather([3, 2], &array![1_i64, 2], 0).unwrap();
    let e = plan.apply(&Array2::<f32>::zeros((2, 3))).unwrap_err();
    assert_eq!(
        e,
        GatherError::InputShape {
            op: "GatherPlan::apply",
            expected: vec![3, 2],
            found: vec![2, 3]
        }
    );
    assert!(
        e.to_string().contains("[3, 2]") && e.to_string().contains("[2, 3]"),
        "{e}"
    );
    let input = Array2::from_shape_fn((3, 2), |(i, j)| (i * 2 + j) as f32);
    // A wrong input with a right `out`, and a right input with a wrong `out`.
    let wrong_input = Array2::<f32>::zeros((2, 3));
    let mut out = Array2::from_elem((2, 2), -1.0);
    let r = plan.apply_into(&wrong_input, &mut out);
    assert!(matches!(r, Err(GatherError::InputShape { .. })), "{r:?}");
    assert!(out.iter().all(|&x| x == -1.0), "out was written: {out:?}");
    let mut wrong_out = Array2::from_elem((2, 3), -1.0);
    let r = plan.apply_into(&input, &mut wrong_out);
    assert_eq!(
        r,
        Err(GatherError::OutputShape {
            op: "GatherPlan::apply_into",
            expected: vec![2, 2],
            found: vec![2, 3]
        })
    );
    assert!(
        wrong_out.iter().all(|&x| x == -1.0),
        "out was written: {wrong_out:?}"
    );
}

#[test]
fn one_plan_serves_many_threads_and_element_types() {
    let ids = array![[3_i64, -1], [0, 2]];
    let plan = GatherPlan::gather([5, 3], &ids, 0).unwrap();
    std::thread::scope(|s| {
        for t in 0..3 {
            let plan = &plan;
            let ids = &ids;
            s.spawn(move || {
                let x = Array2::from_shape_fn((5, 3), |(i, j)| t * 100 + i * 3 + j);
                assert_eq!(
                    plan.apply(&x).unwrap().into_dyn(),
                    x.gather(ids, 0).unwrap().into_dyn()
                );
            });
        }
    });
    // Strings (drop glue) through both paths: fresh and assigned output.
    let strings = Array2::from_shape_fn((5, 3), |(i, j)| format!("{i}{j}"));
    let expected = strings.gather(&ids, 0).unwrap().into_dyn();
    assert_eq!(plan.apply(&strings).unwrap().into_dyn(), expected);
    let mut out = ndarray::ArrayD::from_elem(expected.raw_dim(), String::from("old"));
    plan.apply_into(&strings, &mut out).unwrap();
    assert_eq!(out, expected);
}

#[test]
fn construction_fails_exactly_as_the_method() {
    let x = Array2::<f32>::zeros((3, 4));
    let bad = array![[0_i64, 4]];
    assert!(same_error(
        &GatherPlan::gather_elements([3, 4], &bad, 1).unwrap_err(),
        &x.gather_elements(&bad, 1).unwrap_err()
    ));
    assert!(same_error(
        &GatherPlan::take([3, 4], &array![12_i64], None, IndexMode::Raise).unwrap_err(),
        &x.take(&array![12_i64], None, IndexMode::Raise).unwrap_err()
    ));
    // API decision 26: the method's error, named after the constructor.
    let e = GatherPlan::gather([3, 4], &array![0_i64], 2).unwrap_err();
    assert!(same_error(&e, &x.gather(&array![0_i64], 2).unwrap_err()), "{e}");
    assert_eq!(
        e.to_string(),
        "GatherPlan::gather: axis 2 is out of bounds for an input of rank 2 (valid: -2..=1)"
    );
    // Shapes no input can have: too many elements, or an empty shape whose other lengths
    // multiply past `isize::MAX` (which ndarray does not allow either).
    let half = 1 << (usize::BITS / 2);
    for shape in [&[usize::MAX, 2][..], &[half, 0, half][..]] {
        assert_eq!(
            GatherPlan::gather(shape, &array![0_i64], 1).unwrap_err(),
            GatherError::SizeOverflow {
                op: "GatherPlan::gather",
                shape: shape.to_vec()
            },
            "{shape:?}"
        );
    }
    // An empty shape within that bound plans.
    let plan = GatherPlan::gather([half / 2, 0, 3], &array![2_i64, 0], 2).unwrap();
    assert_eq!(plan.output_shape(), &[half / 2, 0, 2]);
    let empty = ArrayView3::<f32>::from_shape((half / 2, 0, 3), &[]).unwrap();
    assert_eq!(plan.apply(&empty).unwrap().shape(), &[half / 2, 0, 2]);
}

#[test]
fn every_layout_of_every_wrapper() {
    // One input per layout: the plans of the fixed layout sweep, for tiny outputs (kept as
    // input offsets) and, with the indices repeated 12 and 40 times, larger ones (positions).
    let x = Held::new(&[3, 4, 2], Layout::C, f32::of);
    let x = x.view();
    let small = array![[2_i64, -1, 0], [1, 1, -3]].into_dyn();
    let small_nd = array![[1_i64, 3], [-1, 0]].into_dyn();
    let tiled = |a: &ArrayD<i64>, n: usize| {
        let (rows, cols) = (a.shape()[0], a.shape()[1]);
        Array::from_shape_fn((rows * n, cols), |(i, j)| a[[i % rows, j]]).into_dyn()
    };
    for (ids, ids_nd) in [
        (small.clone(), small_nd.clone()),
        (tiled(&small, 12), tiled(&small_nd, 40)),
    ] {
        for layout in ALL {
            let held = Held::new(ids.shape(), layout, |i| ids.as_slice().unwrap()[i]);
            let v = held.view();
            agrees(GatherPlan::gather(x.shape(), &v, 0), &x, &x.gather(&v, 0)).unwrap();
            agrees(GatherPlan::gather(x.shape(), &v, 1), &x, &x.gather(&v, 1)).unwrap();
            let held = Held::new(ids_nd.shape(), layout, |i| ids_nd.as_slice().unwrap()[i]);
            let v = held.view();
            agrees(GatherPlan::gather_nd(x.shape(), &v, 0), &x, &x.gather_nd(&v, 0)).unwrap();
        }
    }
}

/// Runs of consecutive positions (a range, shuffled patches, runs of several lengths,
/// runs broken at one place) are copied as blocks from standard-layout inputs: the
/// result is the method's, in every layout, for every run length around the threshold.
#[test]
fn runs_of_consecutive_indices() {
    let input = Array::from_shape_fn((6, 48), |(i, j)| (i * 1000 + j) as i32).into_dyn();
    let patterns: Vec<(&str, Array2<i64>)> = vec![
        ("range", Array2::from_shape_fn((6, 40), |(_, j)| j as i64 + 3)),
        (
            "negative range",
            Array2::from_shape_fn((6, 16), |(_, j)| j as i64 - 16),
        ),
        (
            "patches of 8",
            Array2::from_shape_fn((6, 48), |(i, j)| (((j / 8 + i) % 6) * 8 + j % 8) as i64),
        ),
        (
            "patches of 4",
            Array2::from_shape_fn((6, 12), |(i, j)| (((j / 4 + 2 * i) % 12) * 4 + j % 4) as i64),
        ),
        (
            "pairs",
            Array2::from_shape_fn((6, 12), |(_, j)| ((11 - j / 2) * 2 + j % 2) as i64),
        ),
        (
            "runs of 6 and 3",
            Array2::from_shape_fn((6, 12), |(i, j)| {
                if i == 5 {
                    ((j / 3) * 7 + j % 3) as i64
                } else {
                    ((j / 6) * 20 + j % 6) as i64
                }
            }),
        ),
        (
            "one break",
            Array2::from_shape_fn((6, 16), |(i, j)| if (i, j) == (3, 9) { 0 } else { j as i64 }),
        ),
        ("rows", Array2::from_shape_fn((6, 8), |(i, j)| (i * 5 + j) as i64)),
    ];
    // Under Miri: a range and patches, one way.
    let count = if cfg!(miri) { 3 } else { patterns.len() };
    for (name, ids) in &patterns[..count] {
        let got = input.take_along_axis(ids, 1);
        if cfg!(miri) {
            let plan = GatherPlan::take_along_axis(input.shape(), ids, 1).unwrap();
            assert_eq!(plan.apply(&input).unwrap().into_dyn(), got.unwrap(), "{name}");
            continue;
        }
        let plan = GatherPlan::take_along_axis(input.shape(), ids, 1);
        agrees(plan, &input.view(), &got).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The same runs along the other axis, and through gather.
        let t = ids.t().to_owned();
        let tall = Array::from_shape_fn((48, 6), |(i, j)| (i * 10 + j) as u8).into_dyn();
        let got = tall.take_along_axis(&t, 0);
        agrees(
            GatherPlan::take_along_axis(tall.shape(), &t, 0),
            &tall.view(),
            &got,
        )
        .unwrap_or_else(|e| panic!("{name}, axis 0: {e}"));
        let row = ids.row(0).to_owned();
        let got = input.gather(&row, 1);
        agrees(GatherPlan::gather(input.shape(), &row, 1), &input.view(), &got)
            .unwrap_or_else(|e| panic!("{name}, gather: {e}"));
    }
}

/// Plans of at most 64 output elements gather from standard-layout inputs into
/// standard-layout outputs through a list of offsets: the same results as the method for
/// inputs whose unit dimensions have odd strides (still standard layout), non-standard
/// inputs and outputs, empty outputs, outputs of 64 and 65 elements, and elements with drop
/// glue.
#[test]
fn tiny_plans() {
    let data: Vec<i32> = (0..12).collect();
    // [4, 1, 3] in standard layout, with a stride of 99 on the unit dimension.
    let odd = ndarray::ArrayView::from_shape((4, 1, 3).strides((3, 99, 1)), &data).unwrap();
    assert!(odd.is_standard_layout());
    let c = odd.to_owned();
    let ids = array![[3_i64], [-4]];
    let expected = c.gather(&ids, 0).unwrap().into_dyn();
    assert_eq!(expected.shape(), &[2, 1, 1, 3]);
    let plan = GatherPlan::gather([4, 1, 3], &ids, 0).unwrap();
    assert_eq!(plan.apply(&odd).unwrap().into_dyn(), expected);
    assert_eq!(plan.apply(&c).unwrap().into_dyn(), expected);
    // An output with a stride of 99 on a unit dimension, and a Fortran-order one.
    let mut buf = vec![-1; 6];
    let mut out = ndarray::ArrayViewMut::from_shape((2, 1, 1, 3).strides((3, 99, 7, 1)), &mut buf).unwrap();
    plan.apply_into(&odd, &mut out).unwrap();
    assert_eq!(out.into_dyn(), expected);
    let mut f = ndarray::Array4::from_elem((2, 1, 1, 3).f(), -1);
    // The transposed input has another shape: refused, `f` untouched.
    let r = plan.apply_into(&c.t(), &mut f);
    assert!(matches!(r, Err(GatherError::InputShape { .. })), "{r:?}");
    assert!(f.iter().all(|&v| v == -1), "{f:?}");
    plan.apply_into(&odd, &mut f).unwrap();
    assert_eq!(f.into_dyn(), expected);
    // A reversed input (not standard layout).
    let mut rev = c.clone();
    rev.invert_axis(ndarray::Axis(0));
    let rev_std = rev.as_standard_layout().to_owned();
    assert_eq!(
        plan.apply(&rev).unwrap().into_dyn(),
        rev_std.gather(&ids, 0).unwrap().into_dyn()
    );

    // Empty outputs.
    let none = ndarray::Array1::<i64>::zeros(0);
    let plan = GatherPlan::gather([4, 1, 3], &none, 0).unwrap();
    assert_eq!(
        plan.apply(&c).unwrap().into_dyn(),
        c.gather(&none, 0).unwrap().into_dyn()
    );
    let mut empty = ArrayD::<i32>::zeros(plan.output_shape());
    plan.apply_into(&c, &mut empty).unwrap();
    assert_eq!(empty.shape(), &[0, 1, 3]);

    // 64 and 65 output elements, the first of them read from the input's last element.
    let x = Array::from_shape_fn((5, 13), |(i, j)| (i * 13 + j) as u16);
    for n in [64, 65] {
        let ids = Array::from_shape_fn(n, |k| ((k * 7 + 64) % 65) as i64);
        let plan = GatherPlan::take(x.shape(), &ids, None, IndexMode::Raise).unwrap();
        let expected = x.take(&ids, None, IndexMode::Raise).unwrap();
        assert_eq!(expected[[0]], 64);
        agrees(Ok(plan), &x.view().into_dyn(), &Ok(expected)).unwrap();
    }

    // Strings through both paths.
    let strings = Array::from_shape_fn((4, 1, 3), |(i, _, j)| format!("{i}.{j}"));
    let plan = GatherPlan::gather([4, 1, 3], &ids, 0).unwrap();
    let expected = strings.gather(&ids, 0).unwrap().into_dyn();
    assert_eq!(plan.apply(&strings).unwrap().into_dyn(), expected);
    let mut out = ArrayD::from_elem(expected.raw_dim(), String::from("old"));
    plan.apply_into(&strings, &mut out).unwrap();
    assert_eq!(out, expected);
}

/// Indices of more than 2 MiB (under Miri, of more than 256 bytes) are resolved in ranges
/// on the pool's threads: the plan gathers what the method gathers, and with bad indices
/// in several ranges it fails with the method's error, which names the first.
#[test]
fn large_plans_resolve_in_parallel() {
    let (m, n) = if cfg!(miri) { (5, 12) } else { (1000, 90_000) };
    let x = Array2::from_shape_fn((3, m), |(i, j)| (i * m + j) as f32);
    let mut ids = Array2::from_shape_fn((3, n), |(i, j)| ((i * 7 + j * 13) % (2 * m)) as i64 - m as i64);
    let plan = GatherPlan::take_along_axis(x.shape(), &ids, 1);
    let got = x.take_along_axis(&ids, 1).map(|a| a.into_dyn());
    assert!(got.is_ok());
    agrees(plan, &x.view().into_dyn(), &got).unwrap();
    // Bad indices in the last range and in the first: the first is reported.
    ids[[2, n - 1]] = m as i64;
    ids[[0, 1]] = -1001;
    let err = GatherPlan::take_along_axis(x.shape(), &ids, 1).unwrap_err();
    assert!(
        same_error(&err, &x.take_along_axis(&ids, 1).unwrap_err()),
        "{err}"
    );
    assert!(err.to_string().contains("-1001"), "{err}");
}
