//! One plan, every row width (decision 57): a plan binds its input's dimensions up to the
//! gathered axis; the rows after it follow each input, in the forward and the backward.

use ndarray::{Array2, ArrayD, IxDyn, array};
use ndarray_gather::prelude::*;

use crate::support::pooling::{Seg, Spec, gather_reduce, same_bits};

/// A small LCG: the graph and the values, fixed by the seed.
fn lcg(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s >> 33
    }
}

fn values(seed: u64, shape: (usize, usize)) -> Array2<f32> {
    let mut r = lcg(seed);
    Array2::from_shape_simple_fn(shape, || (r() % 2001) as f32 / 1000.0 - 1.0)
}

/// The mean's backward written out: each position, in increasing order, adds
/// `(1 / count) * g[dst]` to its source row.
fn mean_backward(src: &[i64], dst: &[i64], g: &Array2<f32>, rows: usize) -> Array2<f32> {
    let mut count = vec![0usize; g.nrows()];
    dst.iter().for_each(|&d| count[d as usize] += 1);
    let mut grad = Array2::zeros((rows, g.ncols()));
    for (&s, &d) in src.iter().zip(dst) {
        let c = 1.0 / count[d as usize] as f32;
        for j in 0..g.ncols() {
            grad[[s as usize, j]] += c * g[[d as usize, j]];
        }
    }
    grad
}

/// A two-layer GraphSAGE-like model (mean aggregation, 32 then 64 wide) trained through
/// one plan of its graph: forward and backward at both widths, against the reference
/// loops, bit for bit.
#[test]
fn a_gnn_with_two_widths_runs_on_one_plan() {
    let (n, edges) = (50, 400);
    let mut r = lcg(7);
    let src: Vec<i64> = (0..edges).map(|_| (r() % n as u64) as i64).collect();
    let dst: Vec<i64> = (0..edges).map(|_| (r() % n as u64) as i64).collect();
    let x = values(1, (n, 32));
    let plan = GatherReducePlan::new(x.shape(), &src, Segments::ids(&dst, n), 0).unwrap();
    let w1 = values(2, (32, 64));

    let mean = Spec {
        pooling: Pooling::Mean,
        weights: None,
        skip: None,
        fill: None,
        arg: false,
    };
    let reference = |x: &Array2<f32>| {
        let x = x.view().into_dyn();
        let ids = ndarray::aview1(&src).into_dyn();
        let seg = Seg::Ids(dst.clone(), n);
        let (out, _) = gather_reduce(&x, Some(&ids), &seg, 0, &mean).unwrap();
        out
    };
    // Forward: layer 1 at width 32, layer 2 at width 64, one plan.
    let h1 = plan.apply(&x, Pooling::Mean).unwrap();
    assert!(same_bits(&h1.clone().into_dyn(), &reference(&x)));
    let z1 = h1.dot(&w1);
    let h2 = plan.apply(&z1, Pooling::Mean).unwrap();
    assert_eq!(h2.dim(), (n, 64));
    assert!(same_bits(&h2.clone().into_dyn(), &reference(&z1)));
    let mut into = Array2::from_elem((n, 64), f32::NAN);
    plan.apply_into(&z1, Pooling::Mean, &mut into).unwrap();
    assert!(same_bits(&into.into_dyn(), &h2.into_dyn()));

    // Backward: width 64, then 32, through the same plan.
    let g2 = values(3, (n, 64));
    let mut gz1 = Array2::zeros((n, 64));
    plan.backward_into(&g2, Pooling::Mean, &mut gz1).unwrap();
    assert!(same_bits(
        &gz1.clone().into_dyn(),
        &mean_backward(&src, &dst, &g2, n).into_dyn()
    ));
    let gh1 = gz1.dot(&w1.t());
    let mut gx = Array2::zeros((n, 32));
    plan.backward_into(&gh1, Pooling::Mean, &mut gx).unwrap();
    assert!(same_bits(
        &gx.clone().into_dyn(),
        &mean_backward(&src, &dst, &gh1, n).into_dyn()
    ));
    // backward_rows at the other width: the touched rows of the same sums.
    let (rows, grads) = plan.backward_rows(&g2, Pooling::Mean).unwrap();
    assert_eq!(grads.dim(), (rows.len(), 64));
    for (k, &row) in rows.iter().enumerate() {
        assert_eq!(grads.row(k), gz1.row(row), "row {row}");
    }
    // A grad_out of one width into a gradient of another: refused, nothing written.
    let before = gx.clone();
    let e = plan.backward_into(&g2, Pooling::Mean, &mut gx).unwrap_err();
    assert!(
        matches!(&e, GatherError::InputShape { expected, found, .. }
            if expected == &[n, 64] && found == &[n, 32]),
        "{e}"
    );
    assert_eq!(gx, before);
}

/// Along an inner axis, with dimensions before it: those bind; the rows after it may even
/// change rank (a dynamic-rank input), or be none.
#[test]
fn the_dimensions_up_to_the_axis_bind() {
    let idx = [4_i64, 0, -1, 2];
    let plan = GatherReducePlan::new([3, 5, 4], &idx, Segments::starts(&[0, 1]), 1).unwrap();
    for shape in [&[3, 5][..], &[3, 5, 4], &[3, 5, 2, 3], &[3, 5, 0]] {
        let len: usize = shape.iter().product();
        let x = ArrayD::from_shape_vec(IxDyn(shape), (0..len).map(|v| v as f64).collect()).unwrap();
        for pooling in [Pooling::Sum, Pooling::Max] {
            let want = x
                .gather_reduce(&idx, Segments::starts(&[0, 1]), 1, pooling)
                .unwrap();
            assert_eq!(plan.apply(&x, pooling).unwrap(), want, "{shape:?} {pooling}");
        }
    }
    // A dimension before the axis, or the axis's length, differs: the plan's shape up to
    // the axis is named, with the input's own rows after it.
    for (shape, expected) in [
        (&[2, 5, 7][..], &[3, 5, 7][..]),
        (&[3, 6], &[3, 5]),
        (&[3], &[3, 5]),
    ] {
        let x = ArrayD::<f64>::zeros(IxDyn(shape));
        let e = plan.apply(&x, Pooling::Sum).unwrap_err();
        assert!(
            matches!(&e, GatherError::InputShape { expected: x, found, .. }
                if x == expected && found == shape),
            "{shape:?}: {e}"
        );
    }
    // The argmax and its backward follow the input's rows too.
    let plan = GatherReducePlan::new([3, 1], &[2, 0, 2], Segments::starts(&[0, 2]), 0).unwrap();
    let x = array![[1.0, 9.0, 0.0], [5.0, 0.0, 0.0], [4.0, 1.0, 2.0]];
    let (m, arg) = plan.apply_arg(&x, Pooling::Max).unwrap();
    assert_eq!(m, array![[4.0, 9.0, 2.0], [4.0, 1.0, 2.0]]);
    let mut grad = Array2::zeros((3, 3));
    plan.backward_arg_into(&array![[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], &arg, &mut grad)
        .unwrap();
    assert_eq!(grad, array![[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, 1.0, 2.0]]);
}
