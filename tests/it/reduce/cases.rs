//! Hand-checked gather-reduces: each decision of API.md (13-21) on a case small enough to
//! read, every error's message, and the backward pass against the scatter.

use ndarray::{Array1, Array2, array};
use ndarray_gather::prelude::*;

use super::props::run;
use crate::support::layouts::Layout;
use crate::support::pooling::Seg;
use crate::support::reduce_cases::Case;

/// Rows of the kernel's register blocks (64 columns natively, then 32 and 16; 8, 4 and 2
/// under Miri) and tails: a row one short of a block (a half, a quarter and a tail),
/// exactly one, one and a tail, two and a tail, a quarter block; every pooling,
/// with argmax, weights, skip and fill, an empty segment, a negative index, segments as
/// starts and as ids, three element types, against the reference.
#[test]
fn rows_of_register_blocks_and_tails_match_the_reference() {
    let idx = vec![4, 2, -1, 0, 2, 3, 1, 4, 0];
    let starts = Seg::Starts(vec![0, 0, 3, 8]);
    let ids = Seg::Ids(vec![1, 3, 1, 3, 3, 1, 0, 1, 3], 4);
    // (Under Miri, whose interpreter is slow: a block and a tail, sorted segments, a
    // weighted sum and a max with its argmax.)
    let (widths, poolings, segs): (&[usize], &[Pooling], &[Seg]) = if cfg!(miri) {
        (&[3], &[Pooling::Sum, Pooling::Max], &[starts])
    } else {
        (&[63, 64, 65, 130, 16], &Pooling::ALL, &[starts, ids])
    };
    for &width in widths {
        for &pooling in poolings {
            for seg in segs {
                for (arg, weights, skip, fill) in [
                    (false, None, None, None),
                    (true, None, Some(2), Some(1)),
                    (false, Some(vec![0, 1, 2, 2, 1, 0, 1, 2, 0]), Some(-1), Some(2)),
                ] {
                    if cfg!(miri) && (pooling == Pooling::Sum) != weights.is_some() {
                        continue;
                    }
                    let c = Case {
                        x_shape: vec![5, width],
                        axis: 0,
                        idx_shape: Some(vec![idx.len()]),
                        idx: idx.clone(),
                        seg: seg.clone(),
                        pooling,
                        // Weights for the poolings that take them (the others' refusal is
                        // tested elsewhere).
                        weights: weights
                            .filter(|_| matches!(pooling, Pooling::Sum | Pooling::Mean | Pooling::SqrtN)),
                        skip,
                        fill,
                        arg: arg && matches!(pooling, Pooling::Max | Pooling::Min),
                        x_layout: Layout::C,
                        out_layout: Layout::C,
                        seeds: vec![6, 0, 7, 2, 5, 1, 3, 4, 6, 2, 0],
                    };
                    let what = format!("width {width}, {pooling}, {} segments, {c:?}", seg.kind());
                    run::<f32, i64, i64>(&c).unwrap_or_else(|e| panic!("f32 {what}: {e}"));
                    if !cfg!(miri) {
                        run::<f64, i64, i64>(&c).unwrap_or_else(|e| panic!("f64 {what}: {e}"));
                        run::<i32, i64, i64>(&c).unwrap_or_else(|e| panic!("i32 {what}: {e}"));
                    }
                }
            }
        }
    }
}

#[test]
fn sum_starts_from_zero_so_negative_zeros_sum_to_zero() {
    let x = array![-0.0_f32, -0.0];
    let s = x.segment_reduce(Segments::uniform(2), 0, Pooling::Sum).unwrap();
    assert!(s[0] == 0.0 && s[0].is_sign_positive());
    // Max and Prod keep the first row as it is.
    let m = x.segment_reduce(Segments::uniform(2), 0, Pooling::Max).unwrap();
    assert!(m[0].is_sign_negative());
}

#[test]
fn max_keeps_the_first_of_ties_and_a_nan_stays() {
    let x = array![[1.0, f64::NAN], [3.0, 1.0], [3.0, f64::NAN], [f64::NAN, 5.0]];
    let (m, arg) = x
        .gather_reduce_arg(&[0, 1, 2, 3], Segments::uniform(4), 0, Pooling::Max)
        .unwrap();
    assert!(m[[0, 0]].is_nan() && m[[0, 1]].is_nan());
    // Column 0: 3.0 first at position 1 (the tie at 2 keeps it), then the NaN at 3.
    // Column 1: the NaN at position 0 stays, the later NaN does not move the argmax.
    assert_eq!(arg, array![[3, 0]]);
    let (m, arg) = x
        .gather_reduce_arg(&[1, 2], Segments::uniform(2), 0, Pooling::Min)
        .unwrap();
    assert_eq!(m[[0, 0]], 3.0);
    assert!(m[[0, 1]].is_nan());
    assert_eq!(arg, array![[0, 1]]);
}

#[test]
fn integer_means_truncate_and_divisions_by_zero_give_zero() {
    let x = array![7_i32, -7, 2];
    let m = x
        .segment_reduce(Segments::indptr(&[0, 2, 3]), 0, Pooling::Mean)
        .unwrap();
    assert_eq!(m, array![0, 2]);
    assert_eq!(
        x.segment_reduce(Segments::uniform(3), 0, Pooling::Mean).unwrap(),
        array![0]
    );
    assert_eq!(
        array![7_i32, 8]
            .segment_reduce(Segments::uniform(2), 0, Pooling::Mean)
            .unwrap(),
        array![7]
    );
    // Weights summing to zero: integers give 0, floats IEEE's quotient.
    let w = [1, -1];
    let z = array![5_i32, 3]
        .segment_reduce(Segments::uniform(2), 0, Pooling::Mean.weighted(&w))
        .unwrap();
    assert_eq!(z, array![0]);
    let wf = [1.0, -1.0];
    let f = array![5.0_f64, 3.0]
        .segment_reduce(Segments::uniform(2), 0, Pooling::Mean.weighted(&wf))
        .unwrap();
    assert_eq!(f, array![f64::INFINITY]);
    // i32::MIN / -1 wraps, as Rust's wrapping division does, instead of panicking.
    let w = [1, -2];
    let z = array![i32::MIN, 0]
        .segment_reduce(Segments::uniform(2), 0, Pooling::Mean.weighted(&w))
        .unwrap();
    assert_eq!(z, array![i32::MIN]);
}

#[test]
fn a_count_beyond_a_small_integer_type_gives_a_zero_mean() {
    // 300 positions of u8: the count does not fit u8, and every u8 sum is below it.
    let x = Array1::<u8>::zeros(300);
    let m = x
        .segment_reduce(Segments::uniform(300), 0, Pooling::Mean)
        .unwrap();
    assert_eq!(m, array![0]);
}

#[test]
fn sqrtn_divides_by_the_square_root_of_the_count_or_of_the_squared_weights() {
    let x = array![[2.0_f32], [2.0], [2.0], [2.0]];
    let s = x.segment_reduce(Segments::uniform(4), 0, Pooling::SqrtN).unwrap();
    assert_eq!(s, array![[4.0]]);
    let w = [1.0, 1.0, 1.0, 1.0_f32];
    let t = x
        .segment_reduce(Segments::uniform(4), 0, Pooling::SqrtN.weighted(&w))
        .unwrap();
    assert_eq!(t, array![[4.0]]);
    // Integers divide by the truncated root: sqrt(3) -> 1.
    let i = array![3_i64, 3, 3]
        .segment_reduce(Segments::uniform(3), 0, Pooling::SqrtN)
        .unwrap();
    assert_eq!(i, array![9]);
}

#[test]
fn skipped_positions_count_for_nothing_and_empty_segments_take_the_fill() {
    let table = array![[1.0], [2.0], [4.0]];
    let idx = [0, 1, 0, 0, 2];
    let pool = Pooling::Mean.skip(0).fill(-1.0);
    let out = table
        .gather_reduce(&idx, Segments::indptr(&[0, 2, 4, 5]), 0, pool)
        .unwrap();
    assert_eq!(out, array![[2.0], [-1.0], [4.0]]);
    // The skipped value is compared before negative indices count from the end.
    let out = table
        .gather_reduce(&[-1, 2], Segments::uniform(2), 0, Pooling::Sum.skip(-1))
        .unwrap();
    assert_eq!(out, array![[4.0]]);
    // Every other index must be in range.
    assert!(
        table
            .gather_reduce(&[0, 3], Segments::uniform(2), 0, Pooling::Sum.skip(0))
            .is_err()
    );
}

#[test]
fn axes_other_than_the_first_and_any_rank_of_indices() {
    let x = array![[1, 2, 3], [4, 5, 6]];
    // Columns {2, 0} and {1}: axis 1 (and -1).
    let out = x
        .gather_reduce(&[2, 0, 1], Segments::starts(&[0, 2]), 1, Pooling::Sum)
        .unwrap();
    assert_eq!(out, array![[4, 2], [10, 5]]);
    assert_eq!(
        out,
        x.gather_reduce(&[2, 0, 1], Segments::starts(&[0, 2]), -1, Pooling::Sum)
            .unwrap()
    );
    // 2-D indices are positions in row-major order.
    let idx = array![[1, 0], [1, 1]];
    let out = x
        .gather_reduce(&idx, Segments::uniform(2), 0, Pooling::Max)
        .unwrap();
    assert_eq!(out, array![[4, 5, 6], [4, 5, 6]]);
    // A 0-d index is one position.
    let one = ndarray::arr0(1_i64);
    assert_eq!(
        x.gather_reduce(&one, Segments::uniform(1), 0, Pooling::Sum)
            .unwrap(),
        array![[4, 5, 6]]
    );
}

#[test]
fn the_backward_pass_is_a_gather_reduce_with_the_roles_swapped() {
    // d(bags)/d(table): each position's bag gradient, summed into its row.
    let table = Array2::from_shape_fn((6, 3), |(r, c)| (r * 3 + c) as f64);
    let idx = [4, 0, 4, 2, 5, 0, 1];
    let bags = Segments::starts(&[0, 3, 3, 5]);
    let out = table.gather_reduce(&idx, bags, 0, Pooling::Sum).unwrap();
    let grad_out = Array2::from_shape_fn(out.raw_dim(), |(b, c)| 1.0 + b as f64 * 10.0 + c as f64);
    let ids = bags.to_ids(idx.len()).unwrap();
    let grad = grad_out
        .gather_reduce(&ids, Segments::ids(&idx, 6), 0, Pooling::Sum)
        .unwrap();
    // The scatter path: gather each position's gradient, scatter-add it into the rows.
    let mut expect = Array2::<f64>::zeros((6, 3));
    expect
        .scatter(&idx, &grad_out.gather(&ids, 0).unwrap(), 0, reduce::Add)
        .unwrap();
    assert_eq!(grad, expect);
    // Weighted: each position's gradient scaled by its weight.
    let w = [0.5, 2.0, 1.0, -1.0, 3.0, 0.25, 1.5];
    let g2 = grad_out
        .gather_reduce(&ids, Segments::ids(&idx, 6), 0, Pooling::Sum.weighted(&w))
        .unwrap();
    let mut scaled = grad_out.gather(&ids, 0).unwrap();
    for (mut row, w) in scaled.outer_iter_mut().zip(w) {
        row *= w;
    }
    let mut expect = Array2::<f64>::zeros((6, 3));
    expect.scatter(&idx, &scaled, 0, reduce::Add).unwrap();
    assert_eq!(g2, expect);
}

#[test]
fn to_ids_gives_each_positions_segment() {
    assert_eq!(
        Segments::indptr(&[0, 1, 1, 3]).to_ids(3).unwrap(),
        array![0, 2, 2]
    );
    assert_eq!(Segments::lengths(&[2, 0, 1]).to_ids(3).unwrap(), array![0, 0, 2]);
    assert_eq!(Segments::ids(&[3, 0], 4).to_ids(2).unwrap(), array![3, 0]);
    assert!(Segments::uniform(2).to_ids(3).is_err());
    assert!(matches!(
        Segments::uniform(1).to_ids(usize::MAX),
        Err(GatherError::SizeOverflow { .. })
    ));
}

#[test]
fn poolings_parse_by_torch_tf_and_onnx_names() {
    for (name, p) in [
        ("sum", Pooling::Sum),
        ("mean", Pooling::Mean),
        ("max", Pooling::Max),
        ("amax", Pooling::Max),
        ("min", Pooling::Min),
        ("amin", Pooling::Min),
        ("prod", Pooling::Prod),
        ("sqrtn", Pooling::SqrtN),
    ] {
        assert_eq!(name.parse::<Pooling>().unwrap(), p);
    }
    let e: GatherError = "avg".parse::<Pooling>().unwrap_err().into();
    assert_eq!(
        e.to_string(),
        "unknown pooling \"avg\" (expected \"sum\", \"mean\", \"max\", \"min\", \"prod\", \"amax\", \"amin\" or \"sqrtn\")"
    );
    // A scatter's "mean" points to the gather-reduce.
    assert!(
        "mean"
            .parse::<Reduction>()
            .unwrap_err()
            .to_string()
            .contains("gather_reduce")
    );
}

/// Every error: its message names the values.
#[test]
fn every_error_names_its_values() {
    let x = array![[1.0, 2.0], [3.0, 4.0]];
    let msg = |r: Result<ndarray::Array2<f64>, GatherError>| r.unwrap_err().to_string();
    let cases: Vec<(String, &str)> = vec![
        (
            msg(x.gather_reduce(&[0], Segments::uniform(1), 2, Pooling::Sum)),
            "gather_reduce: axis 2 is out of bounds for an input of rank 2 (valid: -2..=1)",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::indptr(&[0, 3]), 0, Pooling::Sum)),
            "gather_reduce: indptr entry 1 (value 3) is invalid: indptr must be non-decreasing, from 0 to the 2 positions",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::indptr(&[1, 2]), 0, Pooling::Sum)),
            "gather_reduce: indptr entry 0 (value 1) is invalid: the first entry of indptr must be 0",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::indptr(&[0, 1]), 0, Pooling::Sum)),
            "gather_reduce: indptr entry 1 (value 1) is invalid: the last entry of indptr must be the number of positions, 2 (torch's offsets are Segments::starts)",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::indptr(&[] as &[i64]), 0, Pooling::Sum)),
            "gather_reduce: indptr entry 0 (value 0) is invalid: there are no entries: indptr needs S + 1, the first 0",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::starts(&[0, 2, 1]), 0, Pooling::Sum)),
            "gather_reduce: starts entry 2 (value 1) is invalid: starts must be non-decreasing, from 0 and at most the 2 positions",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::lengths(&[3, -1]), 0, Pooling::Sum)),
            "gather_reduce: lengths entry 0 (value 3) is invalid: the lengths sum to 3 by this entry, but there are 2 positions",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::lengths(&[1, -1]), 0, Pooling::Sum)),
            "gather_reduce: lengths entry 1 (value -1) is invalid: lengths must not be negative",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::lengths(&[1]), 0, Pooling::Sum)),
            "gather_reduce: lengths entry 0 (value 1) is invalid: the lengths sum to 1, but there are 2 positions",
        ),
        (
            msg(x.gather_reduce(&[0, 1, 1], Segments::uniform(2), 0, Pooling::Sum)),
            "gather_reduce: uniform entry 0 (value 2) is invalid: 3 positions do not divide into segments of 2",
        ),
        (
            msg(x.gather_reduce(&[0], Segments::uniform(0), 0, Pooling::Sum)),
            "gather_reduce: uniform entry 0 (value 0) is invalid: the length of uniform segments must be positive",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::ids(&[0, -1], 2), 0, Pooling::Sum)),
            "gather_reduce: ids entry 1 (value -1) is invalid: ids must be in 0..2, the segment count",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::ids(&[0], 2), 0, Pooling::Sum)),
            "gather_reduce: ids entry 1 (value 1) is invalid: there are 1 ids for 2 positions (one id per position)",
        ),
        (
            msg(x.gather_reduce(&[0, 1], Segments::uniform(2), 0, Pooling::Sum.weighted(&[1.0]))),
            "gather_reduce: 1 weights for 2 positions (one weight per position)",
        ),
        (
            msg(x.gather_reduce(
                &[0, 1],
                Segments::uniform(2),
                0,
                Pooling::Max.weighted(&[1.0, 1.0]),
            )),
            "gather_reduce: pooling max cannot be weighted (weights are for sum, mean and sqrtn)",
        ),
        (
            x.gather_reduce_arg(&[0, 1], Segments::uniform(2), 0, Pooling::Sum)
                .unwrap_err()
                .to_string(),
            "gather_reduce_arg: pooling sum has no argmax (only max and min do)",
        ),
        (
            msg(x.segment_reduce(Segments::uniform(2), 0, Pooling::Sum.skip(0))),
            "segment_reduce: pooling sum cannot skip index 0: segment_reduce reads no indices",
        ),
        (
            msg(x.gather_reduce(&array![[0, 1], [2, 0]], Segments::uniform(4), 0, Pooling::Sum)),
            "gather_reduce: index 2 at position [1, 0] of the indices is out of bounds for axis 0 of length 2 (valid: -2..=1)",
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
    let mut wrong = Array2::<f64>::zeros((3, 2));
    let e = x
        .gather_reduce_into(&[0, 1], Segments::uniform(1), 0, Pooling::Sum, &mut wrong)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "gather_reduce_into: out has shape [3, 2], but the output shape is [2, 2]"
    );
    assert_eq!(wrong, Array2::<f64>::zeros((3, 2)));
}

#[test]
fn plan_errors_name_the_plan() {
    let x = array![[1.0, 2.0], [3.0, 4.0]];
    let plan = GatherReducePlan::new([2, 2], &[1, 0, 1], Segments::ids(&[0, 0, 1], 2), 0).unwrap();
    assert_eq!(
        (plan.segments(), plan.positions(), plan.shape()),
        (2, 3, &[2, 2][..])
    );
    // The rows after the axis are free (decision 57); its length is not.
    assert_eq!(
        plan.apply(&array![1.0, 2.0], Pooling::Sum).unwrap(),
        array![3.0, 2.0]
    );
    let e = plan
        .apply(&array![[1.0], [2.0], [3.0]], Pooling::Sum)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "GatherReducePlan::apply: the input has shape [3, 1], but the plan was made for input shape [2, 1]"
    );
    let e = plan.apply(&x, Pooling::Sum.skip(1)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "GatherReducePlan::apply: pooling sum skips index 1, but the plan was made to skip no index (GatherReducePlan::new_skipping)"
    );
    let e = GatherReducePlan::new([2, 2], &[0, 5], Segments::uniform(2), 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "GatherReducePlan::new: index 5 at position [1] of the indices is out of bounds for axis 0 of length 2 (valid: -2..=1)"
    );
    let mut out = Array2::zeros((2, 2));
    plan.apply_into(&x, Pooling::Max, &mut out).unwrap();
    assert_eq!(out, array![[3.0, 4.0], [3.0, 4.0]]);
    // Weighted at apply time, one weight per position.
    let w = [1.0, 2.0, 0.5];
    assert_eq!(
        plan.apply(&x, Pooling::Sum.weighted(&w)).unwrap(),
        array![[5.0, 8.0], [1.5, 2.0]]
    );
}
