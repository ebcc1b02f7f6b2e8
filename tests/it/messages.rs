//! Every error variant a caller can provoke, provoked, and its message read as a user
//! would: values in words and numbers, never Rust's `Debug` of an `Option` or a string
//! (decision 31), nor an escaped quote. Shapes, positions and axis lists are written `[2, 3]`, as NumPy does.

use ndarray::{Array1, Array2, array};
use ndarray_gather::prelude::*;

/// One provoked error of each variant (its name beside it), from the public calls.
fn every_error() -> Vec<(&'static str, GatherError)> {
    let x = array![[1.0, 2.0], [3.0, 4.0]];
    let mut out = Array2::<f64>::zeros((3, 3));
    let mut d = Array1::<f64>::zeros(3);
    let e = |r: Result<(), GatherError>| r.expect_err("an error");
    let mut v: Vec<(&'static str, GatherError)> = vec![
        ("AxisOutOfBounds", e(x.gather(&array![0_i64], 5).map(|_| ()))),
        (
            "DuplicateAxis",
            e(x.gather_multiaxis(&array![[0_i64, 0]], &[0, 0]).map(|_| ())),
        ),
        (
            "RankMismatch",
            e(x.gather_elements(&array![0_i64], 0).map(|_| ())),
        ),
        (
            "CoordinateFold",
            e(x.gather_multiaxis(&array![[0_i64, 0, 0]], &[0, 1]).map(|_| ())),
        ),
        (
            "ShapeMismatch",
            e(x.take_along_axis(&array![[0_i64], [0], [0]], 1).map(|_| ())),
        ),
        ("IndexOutOfBounds", e(x.gather(&array![7_i64], 0).map(|_| ()))),
        (
            "EmptyAxis",
            e(Array2::<f64>::zeros((0, 2)).gather(&array![0_i64], 0).map(|_| ())),
        ),
        (
            "OutputShape",
            e(x.gather_multiaxis_into(&array![[0_i64], [1]], &[0], &mut out)),
        ),
        (
            "InputShape",
            e(GatherPlan::gather([3, 2], &array![0_i64], 0)
                .and_then(|p| p.apply(&x))
                .map(|_| ())),
        ),
        ("BatchDims", e(x.gather_nd(&array![[0_i64]], 3).map(|_| ()))),
        (
            "UpdatesShape",
            e(d.scatter(&array![0_i64, 1], &array![1.0], 0, reduce::Add)),
        ),
        (
            "Segments",
            e(x.segment_reduce(Segments::indptr(&[0, 3]), 0, Pooling::Sum)
                .map(|_| ())),
        ),
        (
            "Segments",
            e(x.segment_reduce(Segments::uniform(-1), 0, Pooling::Sum)
                .map(|_| ())),
        ),
        (
            "Segments",
            e(x.segment_reduce(Segments::ids(&[0, 0], -2), 0, Pooling::Sum)
                .map(|_| ())),
        ),
        (
            "Weights",
            e(
                x.segment_reduce(Segments::uniform(2), 0, Pooling::Sum.weighted(&[1.0]))
                    .map(|_| ()),
            ),
        ),
        (
            "Pooling",
            e(x.segment_reduce(Segments::uniform(2), 0, Pooling::Sum.skip(0))
                .map(|_| ())),
        ),
        (
            "Pooling",
            e(x.gather_reduce_arg(&[0], Segments::uniform(1), 0, Pooling::Sum)
                .map(|_| ())),
        ),
        (
            "ParsePooling",
            e("average"
                .parse::<Pooling>()
                .map_err(GatherError::from)
                .map(|_| ())),
        ),
        (
            "ParseReduction",
            e("mean".parse::<Reduction>().map_err(GatherError::from).map(|_| ())),
        ),
        (
            "Ndarray",
            e(x.gather(&array![0_i64], 0)
                .unwrap()
                .into_dimensionality::<ndarray::Ix3>()
                .map_err(GatherError::from)
                .map(|_| ())),
        ),
    ];
    // A plan made without a skip, applied with one; and one made with a skip, applied
    // with another.
    let plan = GatherReducePlan::new([2, 2], &[1, 0], Segments::uniform(2), 0).unwrap();
    v.push(("Pooling", e(plan.apply(&x, Pooling::Sum.skip(1)).map(|_| ()))));
    let plan = GatherReducePlan::new_skipping([2, 2], &[1, 0], 0_usize, Segments::uniform(2), 0).unwrap();
    v.push(("Pooling", e(plan.apply(&x, Pooling::Sum.skip(1_u32)).map(|_| ()))));
    // An argmax that names no position of its plan, and one of another shape.
    let plan = GatherReducePlan::new([2, 2], &[1, 0], Segments::uniform(1), 0).unwrap();
    let mut grad = Array2::<f64>::zeros((2, 2));
    v.push((
        "Arg",
        e(plan.backward_arg_into(&x, &array![[0, 3], [1, 1]], &mut grad)),
    ));
    v.push(("Arg", e(plan.backward_arg_into(&x, &array![[0, 1]], &mut grad))));
    // Quantized rows: a NaN to quantize, and rows too narrow for their layout.
    v.push((
        "NotFinite",
        e(ndarray_gather::quant::Rowwise::Int8
            .quantize(&array![[f64::NAN as f32]])
            .map(|_| ())),
    ));
    v.push((
        "RowWidth",
        e(ndarray_gather::quant::QTable::new(
            &Array2::<u8>::zeros((1, 3)),
            ndarray_gather::quant::Rowwise::Int4,
        )
        .map(|_| ())),
    ));
    // A gradient of three segments for a plan of two.
    let three = Array2::<f64>::zeros((3, 2));
    v.push((
        "GradShape",
        e(plan.backward_into(&three, Pooling::Sum, &mut grad)),
    ));
    // A broadcast input and indices whose output would not fit in memory.
    let big = 1usize << 40;
    let one = ndarray::ArrayD::<u8>::zeros(ndarray::IxDyn(&[1, 1]));
    let wide = one.broadcast(ndarray::IxDyn(&[big, 1])).unwrap();
    let idx = ndarray::ArrayD::<i64>::zeros(ndarray::IxDyn(&[1, 1]));
    let idx = idx.broadcast(ndarray::IxDyn(&[1, big])).unwrap();
    v.push(("SizeOverflow", e(wide.gather_multiaxis(&idx, &[1]).map(|_| ()))));
    v
}

#[test]
fn no_message_shows_rust_debug_syntax() {
    let errors = every_error();
    for (variant, e) in &errors {
        let m = e.to_string();
        assert!(
            format!("{e:?}").starts_with(variant),
            "{variant} was provoked as {e:?}"
        );
        // (A name the caller gave is quoted, `unknown pooling "average"`: that is prose.)
        for debug in ["Some(", "None", "Indptr(", "Kind", "\\\""] {
            assert!(!m.contains(debug), "{variant}: {m:?} shows {debug:?}");
        }
    }
    // The scan covers every variant a caller can provoke (all but `Internal`).
    let mut seen: Vec<&str> = errors.iter().map(|(v, _)| *v).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 22, "{seen:?}");
}

#[test]
fn the_plans_skip_mismatch_names_values_in_words() {
    let x = array![[1.0, 2.0], [3.0, 4.0]];
    let plan = GatherReducePlan::new_skipping([2, 2], &[1, 0], -1_i64, Segments::uniform(2), 0).unwrap();
    let m = plan.apply(&x, Pooling::Sum.skip(1)).unwrap_err().to_string();
    assert_eq!(
        m,
        "GatherReducePlan::apply: pooling sum skips index 1, but the plan was made to skip -1 (GatherReducePlan::new_skipping)"
    );
}
