//! One test per error: the variant, and a message that names the values.

use ndarray::{Array, Array2, ArrayD, IxDyn, arr0, array, s};
use ndarray_gather::prelude::*;

fn msg(e: &GatherError) -> String {
    e.to_string()
}

#[test]
fn rank_mismatch_names_both_shapes() {
    let e = Array2::<f32>::zeros((2, 3))
        .gather_multiaxis(&array![0_i64], &[0])
        .unwrap_err();
    assert!(matches!(e, GatherError::RankMismatch { .. }), "{e:?}");
    assert_eq!(
        msg(&e),
        "gather_multiaxis: input of shape [2, 3] (rank 2) and indices of shape [1] (rank 1) must have the same rank"
    );
}

#[test]
fn axis_out_of_bounds_names_axis_and_rank() {
    let a = Array2::<f32>::zeros((2, 3));
    let e = a.gather_multiaxis(&array![[0_i64]], &[2]).unwrap_err();
    assert!(
        matches!(e, GatherError::AxisOutOfBounds { axis: 2, ndim: 2, .. }),
        "{e:?}"
    );
    assert_eq!(
        msg(&e),
        "gather_multiaxis: axis 2 is out of bounds for an input of rank 2 (valid: 0..=1)"
    );
    let e = a.gather(&array![0_i64], -3).unwrap_err();
    assert_eq!(
        msg(&e),
        "gather: axis -3 is out of bounds for an input of rank 2 (valid: -2..=1)"
    );
    let e = arr0(1.0).gather(&array![0_i64], 0).unwrap_err();
    assert_eq!(
        msg(&e),
        "gather: axis 0 is out of bounds for an input of rank 0 (valid: none, the input has no axes)"
    );
}

#[test]
fn duplicate_axis_names_the_axes() {
    let e = Array2::<f32>::zeros((2, 3))
        .gather_multiaxis(&array![[0_i64, 0]], &[1, 1])
        .unwrap_err();
    assert!(matches!(e, GatherError::DuplicateAxis { axis: 1, .. }), "{e:?}");
    assert_eq!(
        msg(&e),
        "gather_multiaxis: axis 1 appears more than once in axes [1, 1]"
    );
}

#[test]
fn coordinate_fold_names_last_dimension_and_k() {
    let e = Array2::<f32>::zeros((2, 3))
        .gather_multiaxis(&array![[0_i64, 0, 0]], &[0, 1])
        .unwrap_err();
    assert!(
        matches!(
            e,
            GatherError::CoordinateFold {
                last: 3,
                coordinate_size: 2,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(msg(&e).contains("[1, 3]") && msg(&e).contains("is 3") && msg(&e).contains("coordinate size 2"));
}

#[test]
fn shape_mismatch_names_dimension_and_sizes() {
    let e = Array2::<f32>::zeros((2, 3))
        .gather_multiaxis(&Array2::<i64>::zeros((3, 1)), &[1])
        .unwrap_err();
    assert!(matches!(e, GatherError::ShapeMismatch { dim: 0, .. }), "{e:?}");
    assert_eq!(
        msg(&e),
        "gather_multiaxis: dimension 0 of input shape [2, 3] and indices shape [3, 1] is incompatible: \
         sizes 2 and 3 do not broadcast (one must be 1)"
    );
    // On the last dimension the folded size counts: 4 values per row are 2 (x, y)
    // coordinates, which do not broadcast against 5; the message names the folded shape.
    let e = ndarray::Array3::<f32>::zeros((2, 3, 5))
        .gather_multiaxis(&ndarray::Array3::<i64>::zeros((2, 4, 4)), &[0, 1])
        .unwrap_err();
    assert_eq!(
        msg(&e),
        "gather_multiaxis: dimension 2 of input shape [2, 3, 5] and indices shape [2, 4, 2] is \
         incompatible: sizes 5 and 2 do not broadcast (one must be 1)"
    );
    let e = Array2::<f32>::zeros((2, 3))
        .gather_elements(&Array2::<i64>::zeros((3, 1)), 1)
        .unwrap_err();
    assert!(
        msg(&e).contains("the indices size 3 exceeds the input size 2"),
        "{e}"
    );
}

#[test]
fn index_out_of_bounds_names_value_position_axis_and_length() {
    let a = Array2::<f32>::zeros((2, 3));
    let e = a.gather_multiaxis(&array![[0_i64, 1], [1, 7]], &[1]).unwrap_err();
    assert_eq!(
        e,
        GatherError::IndexOutOfBounds {
            op: "gather_multiaxis",
            index: 7,
            position: vec![1, 1],
            axis: 1,
            axis_len: 3
        }
    );
    assert_eq!(
        msg(&e),
        "gather_multiaxis: index 7 at position [1, 1] of the indices is out of bounds for axis 1 of length 3 (valid: -3..=2)"
    );
    // Positions are those of the caller's indices, not of the lowered view.
    let e = a.gather(&array![[0_i64], [-3]], 0).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: -3, axis: 0, axis_len: 2, ref position, .. } if position == &vec![1, 0])
    );
    let e = a.gather_nd(&array![[0_i64, 1], [1, 3]], 0).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 3, axis: 1, axis_len: 3, ref position, .. } if position == &vec![1, 1])
    );
    // The first bad index in the indices' logical row-major order, not in memory order,
    // for indices in any layout.
    let ix = array![[0_i64, 5], [1, 2], [9, 0]];
    let e = a.gather_multiaxis(&ix.t(), &[1]).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 9, ref position, .. } if position == &vec![0, 2]),
        "{e}"
    );
    let e = a.gather(&ix.slice(s![..;-1, ..]), 1).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 9, ref position, .. } if position == &vec![0, 0]),
        "{e}"
    );
    // Unsigned values above i64::MAX are positive.
    let e = a.gather(&array![u64::MAX], 1).unwrap_err();
    assert!(matches!(e, GatherError::IndexOutOfBounds { index, .. } if index == u64::MAX as i128));
    assert!(msg(&e).contains("index 18446744073709551615"));
    let e = a.gather(&array![i64::MIN], 1).unwrap_err();
    assert!(msg(&e).contains("index -9223372036854775808"));
}

#[test]
fn empty_axis_with_nonempty_output() {
    let a = Array2::<f32>::zeros((2, 0));
    let e = a.gather(&array![0_i64], 1).unwrap_err();
    assert!(matches!(e, GatherError::EmptyAxis { axis: 1, .. }), "{e:?}");
    assert_eq!(
        msg(&e),
        "gather: axis 1 of input shape [2, 0] has length 0, so no index into it is valid, but the output of shape [2, 1] is not empty"
    );
    for mode in [IndexMode::Raise, IndexMode::Wrap, IndexMode::Clip] {
        assert!(matches!(
            a.take(&array![0_i64], Some(1), mode),
            Err(GatherError::EmptyAxis { .. })
        ));
    }
    // A zero-size output is fine, and its indices are not read.
    assert_eq!(a.gather(&Array::<i64, _>::zeros(0), 1).unwrap().shape(), &[2, 0]);
    assert_eq!(
        Array2::<f32>::zeros((0, 3))
            .gather(&array![9_i64], 1)
            .unwrap()
            .shape(),
        &[0, 1]
    );
}

#[test]
fn output_shape_of_into() {
    let a = Array2::<f32>::zeros((2, 3));
    let mut out = Array2::<f32>::ones((2, 2));
    let e = a
        .gather_multiaxis_into(&array![[0_i64, 1, 2]], &[1], &mut out)
        .unwrap_err();
    assert!(matches!(e, GatherError::OutputShape { .. }), "{e:?}");
    assert_eq!(
        msg(&e),
        "gather_multiaxis_into: out has shape [2, 2], but the output shape is [2, 3]"
    );
    assert!(out.iter().all(|&x| x == 1.0));
}

#[test]
fn into_leaves_out_valid_on_a_bad_index() {
    // (Smaller under Miri, where formatting 4096 floats as strings takes a minute; still
    // above its parallel threshold.)
    let n = if cfg!(miri) { 16 } else { 64 };
    let a = Array::from_shape_fn((n, n), |(i, j)| (i * n + j) as f32);
    let mut idx = Array2::<i64>::from_shape_fn((n, n), |(i, j)| ((i + j) % n) as i64);
    idx[[n - 1, n - 1]] = n as i64;
    let mut out = Array2::<f32>::from_elem((n, n), -1.0);
    let e = a.gather_multiaxis_into(&idx, &[1], &mut out).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index, ref position, .. }
            if index == n as i128 && position == &vec![n - 1, n - 1])
    );
    // Each element is its old value or the gathered one, except in the bad index's lane,
    // where the values are unspecified but still elements of that row.
    let good = a.take_along_axis(&idx.mapv(|v| v % n as i64), 1).unwrap();
    for ((i, j), &o) in out.indexed_iter() {
        let ok = o == -1.0 || o == good[[i, j]] || (i == n - 1 && a.row(n - 1).iter().any(|&x| x == o));
        assert!(ok, "out[{i}, {j}] = {o}");
    }
    // Strings too: no element is left dropped or torn.
    let s = a.mapv(|x| x.to_string());
    let mut sout = Array2::<String>::from_elem((n, n), "old".to_string());
    assert!(s.gather_multiaxis_into(&idx, &[1], &mut sout).is_err());
    assert!(sout.iter().all(|x| x == "old" || x.parse::<f32>().is_ok()));
}

#[test]
fn size_overflow_without_allocating() {
    // A broadcast zero-stride input whose output would overflow usize.
    let big = 1usize << 40;
    let a = ArrayD::<u8>::zeros(IxDyn(&[1, 1]));
    let v = a.broadcast(IxDyn(&[big, 1])).unwrap();
    let idx = ArrayD::<i64>::zeros(IxDyn(&[1, 0]))
        .into_shape_with_order(IxDyn(&[1, 0]))
        .unwrap();
    // [big, 0] is empty: fine.
    assert_eq!(v.gather_multiaxis(&idx, &[1]).unwrap().shape(), &[big, 0]);
    let idx = ArrayD::<i64>::zeros(IxDyn(&[1, 1]));
    let i2 = idx.broadcast(IxDyn(&[1, big])).unwrap();
    let e = v.gather_multiaxis(&i2, &[1]).unwrap_err();
    assert!(matches!(e, GatherError::SizeOverflow { .. }), "{e:?}");
    assert!(msg(&e).contains(&format!("[{big}, {big}]")), "{e}");
}

#[test]
fn batch_dims_errors() {
    let a = Array::<f32, _>::zeros((2, 3, 4));
    let e = a.gather_batched(&Array2::<i64>::zeros((3, 1)), 1, 1).unwrap_err();
    assert!(matches!(e, GatherError::BatchDims { batch_dims: 1, .. }), "{e:?}");
    assert!(
        msg(&e).contains("batch dimension 0 has size 2 in the input and 3 in the indices"),
        "{e}"
    );
    let e = a.gather_batched(&Array2::<i64>::zeros((2, 1)), 0, 1).unwrap_err();
    assert!(msg(&e).contains("exceeds the axis 0"), "{e}");
    let e = a.gather_nd(&Array2::<i64>::zeros((2, 3)), 1).unwrap_err();
    assert!(
        msg(&e).contains("coordinate size 3") && msg(&e).contains("input rank 3"),
        "{e}"
    );
    let e = a.gather_nd(&Array2::<i64>::zeros((2, 1)), 2).unwrap_err();
    assert!(msg(&e).contains("less than the indices rank 2"), "{e}");
    let e = a.gather_nd(&arr0(0_i64), 0).unwrap_err();
    assert!(matches!(e, GatherError::RankMismatch { .. }), "{e:?}");
}
