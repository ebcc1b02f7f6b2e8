//! A tour of ndarray-gather on the worked examples of the Gather Multiaxis proposal:
//! for each, the input, the indices, the axes and the output.
//!
//! Run with `cargo run --release --example tour`.

use std::fmt::Display;

use ndarray::{Array, Array2, ArrayRef, Dimension, arr0, array};
use ndarray_gather::prelude::*;

fn show<A: Display, D: Dimension, I: Display, E: Dimension, O: Dimension>(
    title: &str,
    input: &ArrayRef<A, D>,
    indices: &ArrayRef<I, E>,
    params: &str,
    output: Result<Array<A, O>, GatherError>,
) {
    println!("--- {title}");
    println!("input {:?}:\n{input}", input.shape());
    println!("indices {:?}:\n{indices}", indices.shape());
    println!("{params}");
    match output {
        Ok(out) => println!("output {:?}:\n{out}\n", out.shape()),
        Err(e) => println!("error: {e}\n"),
    }
}

fn main() -> Result<(), GatherError> {
    let table = array![[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]];
    let cube = Array::from_shape_vec((2, 2, 2), (0..8).collect::<Vec<i32>>()).expect("8 elements");
    let small = array![[1, 2], [3, 4]];

    println!("=== gather_multiaxis: the one operator\n");
    let input = Array::from_shape_fn((4, 2, 1, 2), |(a, b, _, d)| 100 * a + 10 * b + d);
    let indices = Array::from_shape_fn((1, 3, 2, 2), |(_, j, k, _)| ((j + k) % 2) as i64);
    let out = input.gather_multiaxis(&indices, &[1])?;
    show(
        "input [4,2,1,2] with indices [1,3,2,2]: both sides broadcast",
        &input,
        &indices,
        "axes = [1]",
        Ok(out.into_dyn()),
    );
    let image = Array::from_shape_fn((1, 2, 3, 2), |(_, y, x, c)| 100 * y + 10 * x + c);
    let points = array![[[[2_i64, 1]], [[0, 0]], [[1, 1]]]];
    let out = image.gather_multiaxis(&points, &[2, 1])?;
    show(
        "(x, y) points from an NHWC image: axes in any order",
        &image,
        &points,
        "axes = [2, 1]",
        Ok(out.into_dyn()),
    );

    println!("=== gather_elements (ONNX GatherElements, torch.gather)\n");
    let i = array![[3_i64, 1, 1], [2, 0, 3]];
    show(
        "example 1",
        &table,
        &i,
        "axis = 0",
        table.gather_elements(&i, 0).map(|a| a.into_dyn()),
    );
    let i = array![[2_i64], [1], [0], [2]];
    show(
        "example 2",
        &table,
        &i,
        "axis = 1",
        table.gather_elements(&i, 1).map(|a| a.into_dyn()),
    );
    let input = array![
        [[0, 1], [10, 11]],
        [[100, 101], [110, 111]],
        [[200, 201], [210, 211]],
        [[300, 301], [310, 311]]
    ];
    let i = array![[[0_i64, 2], [1, 3]]];
    show(
        "example 3",
        &input,
        &i,
        "axis = 0",
        input.gather_elements(&i, 0).map(|a| a.into_dyn()),
    );

    println!("=== take with no axis (numpy.take, torch.take): the input read as 1-D\n");
    let i = array![[0_i64, 4], [11, 6]];
    show(
        "forced 1-D",
        &table,
        &i,
        "axis = None",
        table.take(&i, None, IndexMode::Raise),
    );
    let i = array![-13_i64, 12, 5];
    for mode in [IndexMode::Raise, IndexMode::Wrap, IndexMode::Clip] {
        show(
            "index modes",
            &table,
            &i,
            &format!("axis = None, mode = {mode:?}"),
            table.take(&i, None, mode),
        );
    }

    println!("=== gather (ONNX Gather, numpy.take(axis), tf.gather, torch.index_select)\n");
    let i = array![3_i64, 1];
    show("example 1", &table, &i, "axis = 0", table.gather(&i, 0));
    let i = array![2_i64, 1, 0, 1, 2];
    show("example 2", &table, &i, "axis = 1", table.gather(&i, 1));
    let i = array![[0_i64, 1], [1, 2]];
    show("example 3", &table, &i, "axis = 1", table.gather(&i, 1));
    let i = arr0(1_i64);
    show("numpy: scalar index", &small, &i, "axis = 0", small.gather(&i, 0));
    let i = array![1_i64, 0];
    show(
        "numpy: vector of indices",
        &small,
        &i,
        "axis = 0",
        small.gather(&i, 0),
    );
    let i = array![[1_i64, 0], [0, 1]];
    show(
        "numpy: matrix of indices",
        &small,
        &i,
        "axis = 0",
        small.gather(&i, 0),
    );

    println!("=== gather_nd (ONNX GatherND, tf.gather_nd)\n");
    let i = array![[0_i64, 1], [1, 0]];
    show(
        "example 1: index pairs",
        &cube,
        &i,
        "batch_dims = 0",
        cube.gather_nd(&i, 0),
    );
    let i = array![[1_i64], [0], [1]];
    show(
        "example 2: whole blocks",
        &cube,
        &i,
        "batch_dims = 0",
        cube.gather_nd(&i, 0),
    );
    let i = array![[1_i64], [0]];
    show(
        "example 3: batch_dims = 1",
        &cube,
        &i,
        "batch_dims = 1",
        cube.gather_nd(&i, 1),
    );
    let i = array![[0_i64, 0, 1], [0, 1, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1]];
    show(
        "example 4: full coordinates",
        &cube,
        &i,
        "batch_dims = 0",
        cube.gather_nd(&i, 0),
    );
    let row = array![[0, 1, 2]];
    let i = array![[1_i64], [2]];
    show(
        "example 5: a batch of 1 broadcasts",
        &row,
        &i,
        "batch_dims = 1",
        row.gather_nd(&i, 1),
    );

    println!("=== gather_batched (tf.gather with batch_dims, CoreML gather, TOSA gather)\n");
    let values = Array::from_shape_fn((2, 3, 2), |(n, k, c)| 100 * n + 10 * k + c);
    let i = array![[2_i32, 0], [1, 1]];
    show(
        "TOSA gather: values [N,K,C], indices [N,W]",
        &values,
        &i,
        "axis = 1, batch_dims = 1",
        values.gather_batched(&i, 1, 1),
    );

    println!("=== take_along_axis (numpy.take_along_axis, torch.take_along_dim)\n");
    let i = array![[2_usize, 0]];
    show(
        "indices broadcast along the rows",
        &table,
        &i,
        "axis = 1",
        table.take_along_axis(&i, 1).map(|a| a.into_dyn()),
    );

    println!("=== errors name the values\n");
    let i = array![0_i64, 4];
    show(
        "an index out of range",
        &table,
        &i,
        "axis = 0",
        table.gather(&i, 0),
    );
    println!("=== scatter: every gather's adjoint, in place\n");
    let mut grad = Array2::<f32>::zeros((4, 2));
    let ids = array![3_i64, 1, 3];
    let rows = array![[1.0_f32, 1.0], [2.0, 2.0], [0.5, 0.5]];
    grad.scatter(&ids, &rows, 0, reduce::Add)?;
    println!("embedding gradient, np.add.at(grad, ids, rows): ids {ids}\n{grad}\n");
    let mut x = array![[1.0, 2.0, 3.0, 4.0, 5.0]];
    x.scatter_elements(
        &array![[1_i64, 3, 1]],
        &array![[1.1, 2.1, 7.0]],
        1,
        Reduction::Max,
    )?;
    println!("ONNX ScatterElements(reduction=\"max\"), axis 1:\n{x}\n");
    let mut cube = Array::from_elem((2, 2, 2), 0);
    cube.scatter_nd(
        &array![[0_i64, 1], [1, 0], [0, 1]],
        &array![[1, 2], [3, 4], [5, 6]],
        0,
        reduce::Replace,
    )?;
    println!("ONNX ScatterND on [2, 2, 2], the last duplicate wins:\n{cube}\n");
    let mut a = array![[10, 30, 20], [60, 40, 50]];
    a.put_along_axis(&array![[1_usize], [0]], &arr0(0), 1)?;
    println!("numpy.put_along_axis: zero each row's largest:\n{a}\n");
    let mut img = Array::<f32, _>::zeros((1, 2, 3, 1));
    img.scatter_multiaxis(
        &array![[[[2_i64, 1]], [[2, 1]]]],
        &[2, 1],
        &array![[[[1.0_f32]], [[0.5]]]],
        reduce::Add,
    )?;
    println!("scatter_multiaxis: (x, y) points splatted into [N, H, W, C]:\n{img}\n");

    println!("=== gather_reduce: bags, segments and graphs (the gather fused with its reduction)\n");
    let table = array![[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [3.0, -1.0]];
    let (idx, offsets) = (array![3_i64, 0, 2, 2, 1], array![0_i64, 2, 2]);
    let w = array![1.0, 0.5, 1.0, 2.0, 1.0];
    let bags = table.gather_reduce(&idx, Segments::starts(&offsets), 0, Pooling::Sum.weighted(&w))?;
    println!(
        "F.embedding_bag(idx {idx}, table, offsets {offsets}, mode=\"sum\", per_sample_weights {w}):\n{bags}\n"
    );
    let (src, dst) = (array![0_i64, 1, 2, 3, 3], array![1_i64, 1, 0, 0, 2]);
    let mean = table.gather_reduce(&src, Segments::ids(&dst, 4), 0, Pooling::Mean)?;
    println!(
        "a graph layer, edges src {src} -> dst {dst}, mean of the neighbours (node 3 has none):\n{mean}\n"
    );
    let (max, arg) = table.gather_reduce_arg(&src, Segments::ids(&dst, 4), 0, Pooling::Max)?;
    println!("max and the edge it came from (torch_scatter.scatter_max; 5 = none):\n{max}\n{arg}\n");
    // Its backward, through a plan (checked and sorted once): each edge's share of its
    // destination's gradient (1 / in-degree), added into its source in edge order.
    let plan = GatherReducePlan::new(table.dim(), &src, Segments::ids(&dst, 4), 0)?;
    let mut grad_x = Array::zeros(table.raw_dim());
    plan.backward_into(&Array::from_elem((4, 2), 1.0), Pooling::Mean, &mut grad_x)?;
    println!("its backward, d(loss)/d(x) for d(loss)/d(h) = 1:\n{grad_x}\n");

    println!("=== training an embedding bag: forward, the loss's gradient, step (row-wise Adagrad)\n");
    let mut emb = Array::from_shape_fn((6, 2), |(r, c)| (r * 2 + c) as f32 * 0.25);
    let (idx, starts, target) = (
        array![5_i64, 0, 2, 2],
        array![0_i64, 2],
        array![[1.0f32, 1.0], [0.0, 0.5]],
    );
    let bags = GatherReducePlan::new(emb.dim(), &idx, Segments::starts(&starts), 0)?;
    // FBGEMM's EXACT_ROWWISE_ADAGRAD: one moment per row of the table.
    let mut opt = ndarray_gather::optim::RowwiseAdagrad::new(emb.nrows(), 0.5);
    for step in 0..6 {
        let out = bags.apply(&emb, Pooling::Mean)?; // forward
        let grad_out = (&out - &target) * 2.0; // d(squared error)/d(out)
        // Each touched row's gradient summed (torch's sparse=True rows), the row updated once.
        bags.step(&grad_out, Pooling::Mean, &mut emb, &mut opt)?;
        let loss = (&out - &target).mapv(|v| v * v).sum();
        println!("step {step}: loss {loss:.4}");
    }
    println!("the table after training (rows 1, 3, 4 untouched):\n{emb}");
    println!("the rows' moments: {}\n", opt.state());
    let ragged = table.segment_reduce(
        Segments::lengths(&[3, 0, 1]),
        0,
        Pooling::Max.fill(f64::NEG_INFINITY),
    )?;
    println!("torch.segment_reduce(table, \"max\", lengths [3, 0, 1]):\n{ragged}\n");
    Ok(())
}
