//! The plan's backward against a literal loop over the positions (decisions 34-36): random
//! shapes, axes, layouts, segments of every kind, poolings, weights, skip and fill, for
//! five element types; dense, touched rows, and through the argmax.

use ndarray::{ArrayD, IxDyn};
use ndarray_gather::prelude::*;
use proptest::prelude::*;

use crate::support::backward::{Walk, add_arg_rows, add_rows};
use crate::support::generate::config;
use crate::support::layouts::{Held, Layout};
use crate::support::pooling::{Seg, pool_of, same_bits};
use crate::support::reduce_cases::{Case, Elem, case};
use crate::with_segs;

/// The forward's random case made a plan's good one, mostly: indices (a `segment_reduce`
/// case's too) in range, weights one per position. (Bad axes and segments stay: the plan
/// refuses them, and the run skips them.)
fn repair(c: &Case) -> Case {
    let mut c = c.clone();
    let r = c.x_shape.len() as isize;
    if let Some(len) = (-r..r)
        .contains(&c.axis)
        .then(|| c.x_shape[c.axis.rem_euclid(r) as usize] as i64)
    {
        for v in &mut c.idx {
            if len > 0 && c.skip != Some(*v) && !(-len..len).contains(v) {
                *v = v.rem_euclid(len);
            }
        }
    }
    c.idx_shape.get_or_insert_with(|| vec![c.idx.len()]);
    if let Some(w) = &mut c.weights {
        w.truncate(c.idx.len());
    }
    c
}

/// Runs the backward of case `c` with elements `A` (indices and ids as i64).
fn run<A: Elem>(c: &Case) -> Result<(), TestCaseError> {
    let c = &repair(c);
    let Some((walk, axis)) = Walk::of(&c.x_shape, c.axis, &c.idx, &c.seg, c.skip) else {
        return Ok(());
    };
    let seg_arrays: Vec<i64> = match &c.seg {
        Seg::Indptr(v) | Seg::Starts(v) | Seg::Lengths(v) | Seg::Ids(v, _) => v.clone(),
        Seg::Uniform(_) => vec![],
    };
    let arr = &seg_arrays[..];
    let idx = &c.idx[..];
    let plan = match c.skip {
        Some(k) => with_segs!(c, arr, |s| GatherReducePlan::new_skipping(
            &c.x_shape[..],
            idx,
            k,
            s,
            c.axis
        )),
        None => with_segs!(c, arr, |s| GatherReducePlan::new(&c.x_shape[..], idx, s, c.axis)),
    };
    let plan = plan.map_err(|e| TestCaseError::fail(format!("the plan refused a good case: {e}")))?;
    let seeds = &c.seeds;
    let mut out_shape = c.x_shape.clone();
    out_shape[axis] = walk.count;
    let g = Held::new(&out_shape, c.x_layout, |i| {
        A::value(seeds[(i + 3) % seeds.len()], c.pooling)
    });
    let g = g.view();
    let g_owned = g.to_owned();
    let init = |i: usize| A::small(seeds[(i + 1) % seeds.len()]);
    let weights: Option<Vec<A>> = c
        .weights
        .as_ref()
        .map(|w| w.iter().map(|&v| A::small(v)).collect());
    let pool = pool_of(c.pooling, weights.as_deref(), c.skip, c.fill.map(A::small));
    let mut held = Held::new(&c.x_shape, c.out_layout, init);
    let mut grad = held.view_mut();
    let before = grad.to_owned();
    let extremum = matches!(c.pooling, Pooling::Max | Pooling::Min);
    let got = plan.backward_into(&g, pool.clone(), &mut grad);
    // (The repaired case's weights are one per position: a refusal is the pooling's.)
    if extremum || c.pooling == Pooling::Prod {
        prop_assert!(matches!(got, Err(GatherError::Pooling { .. })), "{got:?}");
        prop_assert!(same_bits(&before, &grad.to_owned()), "wrote on Err");
        if extremum && weights.is_none() {
            return run_arg(c, &plan, &walk, axis, &g_owned, pool);
        }
        return Ok(());
    }
    got.map_err(|e| TestCaseError::fail(format!("backward_into: {e}")))?;
    let coef = walk.coefficients(c.pooling, weights.as_deref());
    let mut expected = before.clone();
    add_rows(&mut expected, &g_owned, axis, &walk, &coef, |r| r, false);
    prop_assert!(
        same_bits(&expected, &grad.to_owned()),
        "backward_into: expected {expected:?}, got {grad:?}"
    );
    // The touched rows, ascending, each from its first contribution.
    let (rows, grads) = plan
        .backward_rows(&g, pool)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut touched: Vec<usize> = walk.kept().map(|(_, r, _)| r).collect();
    touched.sort();
    touched.dedup();
    prop_assert_eq!(rows.to_vec(), touched.clone());
    let mut shape = c.x_shape.clone();
    shape[axis] = touched.len();
    let mut expected = ArrayD::zeros(IxDyn(&shape));
    add_rows(
        &mut expected,
        &g_owned,
        axis,
        &walk,
        &coef,
        |r| touched.binary_search(&r).unwrap(),
        true,
    );
    prop_assert!(
        same_bits(&expected, &grads.into_dyn()),
        "backward_rows: expected {expected:?}"
    );
    Ok(())
}

/// Max / Min: the forward's argmax, then each gradient element to the element it names.
fn run_arg<A: Elem>(
    c: &Case,
    plan: &GatherReducePlan,
    walk: &Walk,
    axis: usize,
    g: &ArrayD<A>,
    pool: Pool<'_, A>,
) -> Result<(), TestCaseError> {
    let x = Held::new(&c.x_shape, Layout::C, |i| {
        A::value(c.seeds[i % c.seeds.len()], c.pooling)
    });
    let (_, arg) = plan
        .apply_arg(&x.view(), pool)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let init = |i: usize| A::small(c.seeds[(i + 1) % c.seeds.len()]);
    let mut held = Held::new(&c.x_shape, c.out_layout, init);
    let mut grad = held.view_mut();
    let mut expected = grad.to_owned();
    plan.backward_arg_into(g, &arg, &mut grad)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    add_arg_rows(&mut expected, &g.view(), &arg, axis, walk);
    prop_assert!(
        same_bits(&expected, &grad.to_owned()),
        "backward_arg_into: expected {expected:?}, got {grad:?}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn backward_matches_the_loop_f64(c in case()) { run::<f64>(&c)?; }
    #[test]
    fn backward_matches_the_loop_f32(c in case()) { run::<f32>(&c)?; }
    #[test]
    fn backward_matches_the_loop_i32(c in case()) { run::<i32>(&c)?; }
    #[test]
    fn backward_matches_the_loop_u8(c in case()) { run::<u8>(&c)?; }
}

/// The adjoint identity `<apply(x), g> = <x, backward(g)>` for Sum, Mean and SqrtN,
/// weighted or not, with skipped positions and empty segments, within f64 rounding.
#[test]
fn the_backward_is_the_adjoint_of_the_forward() {
    let idx = [3_i64, -1, 0, 3, 7, 2, 2, 5, 1, 3];
    let ids = [2_i64, 0, 0, 4, 2, 1, 4, 0, 2, 2];
    let w = [0.5, 1.5, -2.0, 1.0, 0.25, 3.0, -0.5, 2.0, 0.75, 1.25];
    let plan = GatherReducePlan::new_skipping([8, 3, 2], &idx, 7, Segments::ids(&ids, 6), 0).unwrap();
    let x = ndarray::Array3::from_shape_fn((8, 3, 2), |(a, b, c)| {
        ((a * 7 + b * 3 + c) % 13) as f64 * 0.37 - 2.0
    });
    let g = ndarray::Array3::from_shape_fn((6, 3, 2), |(a, b, c)| {
        ((a * 5 + b + c * 11) % 17) as f64 * 0.29 - 2.5
    });
    for pooling in [Pooling::Sum, Pooling::Mean, Pooling::SqrtN] {
        for weighted in [false, true] {
            let pool = || {
                let p = Pool::from(pooling).skip(7);
                if weighted { p.weighted(&w) } else { p }
            };
            let y = plan.apply(&x, pool()).unwrap();
            let mut grad = ndarray::Array3::zeros((8, 3, 2));
            plan.backward_into(&g, pool(), &mut grad).unwrap();
            let (lhs, rhs) = ((&y * &g).sum(), (&x * &grad).sum());
            assert!(
                (lhs - rhs).abs() < 1e-12 * lhs.abs().max(1.0),
                "{pooling} {weighted}: {lhs} {rhs}"
            );
        }
    }
}

fn e_text(plan: &GatherReducePlan, g: ndarray::Array2<f64>) -> String {
    plan.backward_rows(&g, Pooling::Sum).unwrap_err().to_string()
}

/// A backward's errors: shapes, poolings without one here, a `.skip` other than the
/// plan's, an argmax not from the plan; nothing written.
#[test]
fn backward_errors_write_nothing() {
    let plan = GatherReducePlan::new([4, 2], &[3, 0, 3], Segments::starts(&[0, 2]), 0).unwrap();
    let g = ndarray::Array2::<f64>::ones((2, 2));
    let mut grad = ndarray::Array2::<f64>::from_elem((4, 2), 9.0);
    let untouched = grad.clone();
    let shape_of = |e: GatherError| match e {
        GatherError::InputShape { expected, found, .. } => ("input", expected, found),
        GatherError::GradShape {
            expected,
            found,
            segments: 2,
            axis: 0,
            ..
        } => ("grad_out", expected, found),
        e => panic!("{e}"),
    };
    let mut small = ndarray::Array2::<f64>::zeros((3, 2));
    let e = plan.backward_into(&g, Pooling::Sum, &mut small).unwrap_err();
    assert_eq!(shape_of(e), ("input", vec![4, 2], vec![3, 2]));
    // The rows are free, but grad_in's must be grad_out's.
    let mut wide = ndarray::Array2::<f64>::zeros((4, 3));
    let e = plan.backward_into(&g, Pooling::Sum, &mut wide).unwrap_err();
    assert_eq!(shape_of(e), ("input", vec![4, 2], vec![4, 3]));
    let e = plan
        .backward_into(&ndarray::Array2::ones((3, 2)), Pooling::Sum, &mut grad)
        .unwrap_err();
    assert_eq!(shape_of(e), ("grad_out", vec![2, 2], vec![3, 2]));
    // The message names the segments' shape (issue 63's user read "updates ... the
    // matching gather", a scatter's words).
    assert_eq!(
        e_text(&plan, ndarray::Array2::<f64>::ones((3, 3))),
        "GatherReducePlan::backward_rows: grad_out has shape [3, 3], but the forward's output \
         has 2 segments along axis 0: shape [2, 3] (the segments', then the rows')"
    );
    // No rows at all is a row shape too: a 1-D gradient for a 1-D input.
    let (rows, g1) = plan
        .backward_rows(&ndarray::Array1::<f64>::ones(2), Pooling::Sum)
        .unwrap();
    assert_eq!((rows, g1), (ndarray::array![0, 3], ndarray::array![1.0, 2.0]));
    for pooling in [Pooling::Prod, Pooling::Max, Pooling::Min] {
        let e = plan.backward_into(&g, pooling, &mut grad).unwrap_err();
        assert!(matches!(e, GatherError::Pooling { .. }), "{e}");
    }
    let e = plan
        .backward_into(&g, Pooling::Sum.skip(3), &mut grad)
        .unwrap_err();
    assert!(e.to_string().contains("skips index 3"), "{e}");
    let e = plan
        .backward_into(&g, Pooling::Sum.weighted(&[1.0, 2.0]), &mut grad)
        .unwrap_err();
    assert!(
        matches!(
            e,
            GatherError::Weights {
                len: 2,
                positions: 3,
                ..
            }
        ),
        "{e}"
    );
    let e = plan
        .backward_arg_into(&g, &ndarray::array![[0, 4], [2, 3]], &mut grad)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "GatherReducePlan::backward_arg_into: the argmax names position 4 at [0, 1], but the plan has 3 positions (3 marks an empty segment)"
    );
    let e = plan
        .backward_arg_into(&g, &ndarray::array![[0, 1]], &mut grad)
        .unwrap_err();
    assert!(matches!(e, GatherError::Arg { .. }), "{e}");
    assert_eq!(grad, untouched);
    // An argmax of another layout than the gradient's, and the sentinel of an empty segment.
    let arg = ndarray::array![[1, 0], [3, 2]];
    let arg_f = arg.t().to_owned();
    plan.backward_arg_into(&g, &arg_f.t(), &mut grad).unwrap();
    assert_eq!(
        grad,
        ndarray::array![[10.0, 9.0], [9.0, 9.0], [9.0, 9.0], [9.0, 11.0]]
    );
}

/// `apply_arg_into` gives `apply_arg`'s arrays in any layouts, and writes nothing on Err.
#[test]
fn apply_arg_into_matches_apply_arg() {
    use ndarray::ShapeBuilder;
    let plan =
        GatherReducePlan::new([5, 3], &[4, 0, 2, 0, 1], Segments::ids(&[2, 0, 2, 3, 0], 4), 0).unwrap();
    let x = ndarray::Array2::from_shape_fn((5, 3), |(r, c)| ((r * 7 + c * 5) % 6) as f32);
    for pooling in [Pooling::Max, Pooling::Min] {
        let (m, arg) = plan.apply_arg(&x, pooling.fill(-1.0)).unwrap();
        for (f_out, f_arg) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut out = ndarray::Array2::<f32>::zeros((4, 3).set_f(f_out));
            let mut a = ndarray::Array2::<usize>::zeros((4, 3).set_f(f_arg));
            plan.apply_arg_into(&x, pooling.fill(-1.0), &mut out, &mut a)
                .unwrap();
            assert_eq!((&out, &a), (&m, &arg), "{pooling} {f_out} {f_arg}");
        }
    }
    let mut out = ndarray::Array2::<f32>::zeros((4, 3));
    let mut a = ndarray::Array2::<usize>::from_elem((3, 3), 7);
    let e = plan
        .apply_arg_into(&x, Pooling::Max, &mut out, &mut a)
        .unwrap_err();
    assert!(matches!(e, GatherError::OutputShape { .. }), "{e}");
    let e = plan
        .apply_arg_into(&x, Pooling::Sum, &mut out, &mut a)
        .unwrap_err();
    assert!(matches!(e, GatherError::Pooling { .. }), "{e}");
    assert!(out.iter().all(|&v| v == 0.0) && a.iter().all(|&v| v == 7));
}
