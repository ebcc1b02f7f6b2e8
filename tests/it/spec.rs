//! The worked examples of the seed documents (shared/seeds 000 / 002 and the ONNX Gather
//! specification 001), one test each. Where an example's own text is inconsistent, the
//! test follows numpy / ONNX and says so.

use ndarray::{Array, ArrayD, arr0, array};
use ndarray_gather::prelude::*;

use crate::support::reference;

fn table() -> ndarray::Array2<i32> {
    array![[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]]
}

fn cube() -> ndarray::Array3<i32> {
    Array::from_shape_vec((2, 2, 2), (0..8).collect()).unwrap()
}

#[test]
fn multiaxis_shape_example_broadcasts_both_ways() {
    // Input [4,2,1,2] with indices [1,3,2,2] on axes [1] gives [4,3,2,2].
    let input = Array::from_shape_fn((4, 2, 1, 2), |(a, b, c, d)| a * 1000 + b * 100 + c * 10 + d);
    let indices = Array::from_shape_fn((1, 3, 2, 2), |(_, j, k, l)| ((j + k + l) % 2) as i64);
    let out = input.gather_multiaxis(&indices, &[1]).unwrap();
    assert_eq!(out.shape(), &[4, 3, 2, 2]);
    for ((a, j, k, l), &v) in out.indexed_iter() {
        assert_eq!(v, a * 1000 + ((j + k + l) % 2) * 100 + l);
    }
    let expected = reference::multiaxis(&input.view().into_dyn(), &indices.view().into_dyn(), &[1]).unwrap();
    assert_eq!(out.into_dyn(), expected);
}

#[test]
fn multiaxis_sketch_shapes() {
    // The reference sketch's comments: input [2,3,1] with indices [1,1,4] on axes [1]
    // gives [2,1,4]; input [10,9,8] with indices [1,5,6*2] on axes [1,2] gives [10,5,6].
    let a = Array::from_shape_fn((2, 3, 1), |(i, j, _)| i * 10 + j);
    let out = a
        .gather_multiaxis(&Array::from_elem((1, 1, 4), 2_i32), &[1])
        .unwrap();
    assert_eq!(out, array![[[2, 2, 2, 2]], [[12, 12, 12, 12]]]);
    let b = Array::from_shape_fn((10, 9, 8), |(i, j, k)| i * 100 + j * 10 + k);
    let idx = Array::from_shape_fn(
        (1, 5, 12),
        |(_, r, c)| if c % 2 == 0 { r as i64 } else { -1 - r as i64 },
    );
    let out = b.gather_multiaxis(&idx, &[1, 2]).unwrap();
    assert_eq!(out.shape(), &[10, 5, 6]);
    assert_eq!(out[[3, 4, 0]], 3 * 100 + 4 * 10 + (8 - 1 - 4));
}

#[test]
fn gather_elements_example_1_axis_0() {
    let out = table()
        .gather_elements(&array![[3_i64, 1, 1], [2, 0, 3]], 0)
        .unwrap();
    assert_eq!(out, array![[30, 11, 12], [20, 1, 32]]);
}

#[test]
fn gather_elements_example_2_axis_1() {
    let out = table()
        .gather_elements(&array![[2_i64], [1], [0], [2]], 1)
        .unwrap();
    assert_eq!(out, array![[2], [11], [20], [32]]);
}

#[test]
fn gather_elements_example_3_rank_3_smaller_indices() {
    let input = array![
        [[0, 1], [10, 11]],
        [[100, 101], [110, 111]],
        [[200, 201], [210, 211]],
        [[300, 301], [310, 311]]
    ];
    let out = input.gather_elements(&array![[[0_i64, 2], [1, 3]]], 0).unwrap();
    assert_eq!(out, array![[[0, 201], [110, 311]]]);
}

#[test]
fn gather_elements_numpy_check_of_the_seed() {
    // The seed's numpy script prints `[[1, 2], [4, 3]]` in a comment for this call, a value
    // that belongs to the 2x2 data of its first examples; on the 4x3 data it actually passes,
    // numpy gives [[0, 1], [11, 10]].
    let out = table().gather_elements(&array![[0_i64, 1], [1, 0]], 1).unwrap();
    assert_eq!(out, array![[0, 1], [11, 10]]);
}

#[test]
fn take_forced_1d_reads_the_flattened_input() {
    // The seed's "Forced1D": the input reinterpreted as 1-D.
    let out = table()
        .take(&array![[0_i64, 4], [11, 6]], None, IndexMode::Raise)
        .unwrap();
    assert_eq!(out, array![[0, 11], [32, 20]].into_dyn());
}

#[test]
fn gather_blocks_example_1_axis_0() {
    let out = table().gather(&array![3_i64, 1], 0).unwrap();
    assert_eq!(out, array![[30, 31, 32], [10, 11, 12]]);
}

#[test]
fn gather_blocks_example_2_axis_1() {
    let out = table().gather(&array![2_i64, 1, 0, 1, 2], 1).unwrap();
    let expected = array![
        [2, 1, 0, 1, 2],
        [12, 11, 10, 11, 12],
        [22, 21, 20, 21, 22],
        [32, 31, 30, 31, 32]
    ];
    assert_eq!(out, expected);
}

#[test]
fn gather_blocks_example_3_2d_indices_axis_1() {
    let out = table().gather(&array![[0_i64, 1], [1, 2]], 1).unwrap();
    let expected = array![
        [[0, 1], [1, 2]],
        [[10, 11], [11, 12]],
        [[20, 21], [21, 22]],
        [[30, 31], [31, 32]]
    ];
    assert_eq!(out, expected);
}

#[test]
fn gather_numpy_scalar_index() {
    let out = array![[1, 2], [3, 4]].gather(&arr0(1_i64), 0).unwrap();
    assert_eq!(out, array![3, 4]);
}

#[test]
fn gather_numpy_vector_indices() {
    // The seed's numpy script comments `[[[3 4], [1 2]], [[1 2], [3 4]]]` on this call; that
    // is the output of the next example. numpy.take gives [[3, 4], [1, 2]], as the seed's
    // own table says.
    let out = array![[1, 2], [3, 4]].gather(&array![1_i64, 0], 0).unwrap();
    assert_eq!(out, array![[3, 4], [1, 2]]);
}

#[test]
fn gather_numpy_matrix_indices() {
    let out = array![[1, 2], [3, 4]]
        .gather(&array![[1_i64, 0], [0, 1]], 0)
        .unwrap();
    assert_eq!(out, array![[[3, 4], [1, 2]], [[1, 2], [3, 4]]]);
}

#[test]
fn gather_nd_example_1_index_pairs() {
    let out = cube().gather_nd(&array![[0_i64, 1], [1, 0]], 0).unwrap();
    assert_eq!(out, array![[2, 3], [4, 5]].into_dyn());
}

#[test]
fn gather_nd_example_2_whole_blocks() {
    let out = cube().gather_nd(&array![[1_i64], [0], [1]], 0).unwrap();
    assert_eq!(
        out,
        array![[[4, 5], [6, 7]], [[0, 1], [2, 3]], [[4, 5], [6, 7]]].into_dyn()
    );
}

#[test]
fn gather_nd_example_3_batch_dims_1() {
    let out = cube().gather_nd(&array![[1_i64], [0]], 1).unwrap();
    assert_eq!(out, array![[2, 3], [4, 5]].into_dyn());
}

#[test]
fn gather_nd_example_4_full_coordinates() {
    let idx = array![[0_i64, 0, 1], [0, 1, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1]];
    assert_eq!(
        cube().gather_nd(&idx, 0).unwrap(),
        array![1, 2, 4, 6, 7].into_dyn()
    );
}

#[test]
fn gather_nd_example_5_broadcast_batch() {
    // Batch dimension of size 1 in the input, 2 in the indices.
    let out = array![[0, 1, 2]].gather_nd(&array![[1_i64], [2]], 1).unwrap();
    assert_eq!(out, array![1, 2].into_dyn());
}

#[test]
fn gather_nd_onnx_examples_2_and_4() {
    let d = array![[0, 1], [2, 3]];
    assert_eq!(
        d.gather_nd(&array![[0_i64, 0], [1, 1]], 0).unwrap(),
        array![0, 3].into_dyn()
    );
    assert_eq!(
        d.gather_nd(&array![[1_i64], [0]], 0).unwrap(),
        array![[2, 3], [0, 1]].into_dyn()
    );
    let out = cube().gather_nd(&array![[[0_i64, 1]], [[1, 0]]], 0).unwrap();
    assert_eq!(out, array![[[2, 3]], [[4, 5]]].into_dyn());
}

#[test]
fn gather_nd_numpy_check_of_the_seed() {
    // The seed's script computes data[tuple(indices.T)] on the 4x3 data and comments
    // `[1, 4]`, the value for the 2x2 data; numpy gives [0, 11].
    let out = table().gather_nd(&array![[0_i64, 0], [1, 1]], 0).unwrap();
    assert_eq!(out, array![0, 11].into_dyn());
}

#[test]
fn onnx_gather_0() {
    // ONNX gather_0: data [5,4,3,2], indices [0,1,3], axis 0.
    let data = Array::from_shape_fn((5, 4, 3, 2), |(a, b, c, d)| (a * 24 + b * 6 + c * 2 + d) as f32);
    let out = data.gather(&array![0_i64, 1, 3], 0).unwrap();
    assert_eq!(out.shape(), &[3, 4, 3, 2]);
    assert_eq!(
        out.index_axis(ndarray::Axis(0), 2),
        data.index_axis(ndarray::Axis(0), 3)
    );
}

#[test]
fn onnx_gather_2d_indices() {
    // ONNX gather_2d_indices: data [3,3], indices [[0, 2]], axis 1 -> [3, 1, 2].
    let data = array![[1.0_f32, 1.2, 1.9], [2.3, 3.4, 3.9], [4.5, 5.7, 5.9]];
    let out = data.gather(&array![[0_i64, 2]], 1).unwrap();
    assert_eq!(out, array![[[1.0_f32, 1.9]], [[2.3, 3.9]], [[4.5, 5.9]]]);
}

#[test]
fn onnx_gather_negative_indices() {
    let data: ArrayD<f32> = Array::from_iter((0..10).map(|x| x as f32)).into_dyn();
    let out = data.gather(&array![0_i64, -9, -10], 0).unwrap();
    assert_eq!(out, array![0.0_f32, 1.0, 0.0].into_dyn());
    assert_eq!(out.shape(), &[3]);
}

#[test]
fn rank_zero_returns_the_input_and_empty_axes_broadcast() {
    // The seed's early return for scalars, reached through the ordinary planner.
    assert_eq!(arr0(5).gather_multiaxis(&arr0(-9_i64), &[]).unwrap(), arr0(5));
    assert!(arr0(5).gather_multiaxis(&arr0(0_i64), &[0]).is_err());
    // Empty axes: a plain broadcast; index values are never read.
    let out = array![[1, 2]]
        .gather_multiaxis(&array![[99_i64], [-99]], &[])
        .unwrap();
    assert_eq!(out, array![[1, 2], [1, 2]]);
}
