//! A plan's scatter (`GatherPlan::scatter`, decision 33): bit for bit the `ScatterExt`
//! call with the same indices where one exists, and for every constructor the adjoint of
//! the plan's own gather, written out: the plan gathers, from an array that holds each
//! element's own row-major position, where each output position reads; a literal loop
//! then combines each update there, in row-major order.

use ndarray::{Array, ArrayD, Axis, IxDyn, ShapeBuilder, Slice, array};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::{Add, Max, Mul, Replace};

use crate::support::generate::Lcg;
use crate::support::threads::on_1_and_3;

/// Where each output position of `plan`'s gather reads, as row-major positions of its
/// input.
fn sources(plan: &GatherPlan) -> ArrayD<usize> {
    let n: usize = plan.input_shape().iter().product();
    let positions = ArrayD::from_shape_vec(IxDyn(plan.input_shape()), (0..n).collect()).unwrap();
    plan.apply(&positions).unwrap()
}

/// The adjoint written out: `updates` combined into `dst` (row-major) at `plan`'s sources.
fn adjoint(
    plan: &GatherPlan,
    dst: &ArrayD<f64>,
    updates: &ArrayD<f64>,
    combine: fn(f64, f64) -> f64,
) -> ArrayD<f64> {
    let mut flat: Vec<f64> = dst.iter().copied().collect();
    for (&s, &u) in sources(plan).iter().zip(updates.iter()) {
        flat[s] = combine(flat[s], u);
    }
    ArrayD::from_shape_vec(dst.raw_dim(), flat).unwrap()
}

/// `dst` in C and in Fortran order (a strided one: `strided_and_large_destinations`).
fn layouts(dst: &ArrayD<f64>) -> Vec<ArrayD<f64>> {
    let mut f = ArrayD::zeros(dst.raw_dim().f());
    f.assign(dst);
    vec![dst.clone(), f]
}

/// Bits of an array in row-major order.
fn bits(a: &ArrayD<f64>) -> Vec<u64> {
    a.iter().map(|v| v.to_bits()).collect()
}

/// Every constructor, small (a plan of offsets) and large (lowered loops), against the
/// written-out adjoint and, where one exists, the `ScatterExt` call.
#[test]
fn every_plan_scatters_as_its_gathers_adjoint() {
    let mut g = Lcg(7);
    for case in 0..40 {
        let (r, c) = (2 + g.below(5), 2 + g.below(40));
        let x = Array::from_shape_fn((r, c), |(i, j)| (i * 100 + j) as f64 * 0.25 - 3.0).into_dyn();
        let k = 1 + g.below(if case % 2 == 0 { 3 } else { 120 });
        let rows: Vec<i64> = (0..k).map(|_| g.below(2 * r) as i64 - r as i64).collect();
        let cols =
            Array::from_shape_fn((r, 1 + g.below(2 * c)), |_| g.below(2 * c) as i64 - c as i64).into_dyn();
        let along = Array::from_shape_fn((1, 1 + g.below(c)), |_| g.below(c) as i64).into_dyn();
        let points =
            Array::from_shape_fn((k, 2), |(_, j)| g.below(if j == 0 { r } else { c }) as i64).into_dyn();
        let ids = ndarray::Array1::from(rows.clone()).into_dyn();
        let plans: Vec<(&str, GatherPlan)> = vec![
            ("gather", GatherPlan::gather(x.shape(), &ids, 0).unwrap()),
            (
                "gather_elements",
                GatherPlan::gather_elements(x.shape(), &cols, 1)
                    .unwrap()
                    .into_dyn(),
            ),
            ("gather_nd", GatherPlan::gather_nd(x.shape(), &points, 0).unwrap()),
            (
                "multiaxis",
                GatherPlan::multiaxis(x.shape(), &points, &[0, 1])
                    .unwrap()
                    .into_dyn(),
            ),
            (
                "take_along_axis",
                GatherPlan::take_along_axis(x.shape(), &along, 1)
                    .unwrap()
                    .into_dyn(),
            ),
            (
                "take wrap",
                GatherPlan::take(x.shape(), &ids, Some(1), IndexMode::Wrap).unwrap(),
            ),
            (
                "take clip flat",
                GatherPlan::take(x.shape(), &ids, None, IndexMode::Clip).unwrap(),
            ),
            (
                "gather_batched",
                GatherPlan::gather_batched(x.shape(), &cols, 1, 1).unwrap(),
            ),
        ];
        for (name, plan) in &plans {
            let out_len: usize = plan.output_shape().iter().product();
            let updates = ArrayD::from_shape_vec(
                IxDyn(plan.output_shape()),
                (0..out_len)
                    .map(|i| ((i * 37) % 11) as f64 * 0.75 - 2.0)
                    .collect(),
            )
            .unwrap();
            for (reducer_name, combine) in [
                ("add", (|a, b| a + b) as fn(f64, f64) -> f64),
                ("max", f64::max),
                ("mul", |a, b| a * b),
                ("replace", |_, b| b),
            ] {
                for dst in layouts(&x) {
                    let want = adjoint(plan, &dst, &updates, combine);
                    let got = on_1_and_3(|| {
                        let mut d = dst.clone();
                        match reducer_name {
                            "add" => plan.scatter(&mut d, &updates, Add),
                            "max" => plan.scatter(&mut d, &updates, Max),
                            "mul" => plan.scatter(&mut d, &updates, Mul),
                            _ => plan.scatter(&mut d, &updates, Replace),
                        }
                        .unwrap();
                        bits(&d)
                    });
                    assert_eq!(
                        got,
                        bits(&want),
                        "case {case} {name} ({out_len} outputs) {reducer_name}"
                    );
                }
            }
            // The `ScatterExt` call with the same indices: the same bits.
            let mut by_plan = x.clone();
            plan.scatter(&mut by_plan, &updates, Add).unwrap();
            let mut by_call = x.clone();
            let same = match *name {
                "gather" => Some(by_call.scatter(&ids, &updates, 0, Add)),
                "gather_elements" => Some(by_call.scatter_elements(&cols, &updates, 1, Add)),
                "gather_nd" => Some(by_call.scatter_nd(&points, &updates, 0, Add)),
                "multiaxis" => Some(by_call.scatter_multiaxis(&points, &[0, 1], &updates, Add)),
                _ => None,
            };
            if let Some(done) = same {
                done.unwrap();
                assert_eq!(
                    bits(&by_plan),
                    bits(&by_call),
                    "case {case} {name}: the ScatterExt call"
                );
            }
            if *name == "take_along_axis" {
                let (mut p, mut q) = (x.clone(), x.clone());
                plan.scatter(&mut p, &updates, Replace).unwrap();
                q.put_along_axis(&along, &updates, 1).unwrap();
                assert_eq!(bits(&p), bits(&q), "case {case}: put_along_axis");
            }
            // A 0-d update broadcasts.
            let mut p = x.clone();
            plan.scatter(&mut p, &ndarray::arr0(1.0).into_dyn(), Add).unwrap();
            let ones = ArrayD::from_elem(IxDyn(plan.output_shape()), 1.0);
            assert_eq!(
                bits(&p),
                bits(&adjoint(plan, &x, &ones, |a, b| a + b)),
                "case {case} {name}: 0-d"
            );
        }
    }
}

/// A strided destination (every other column of a wider array) and a large scatter on
/// one and three threads.
#[test]
fn strided_and_large_destinations() {
    let ids = ndarray::Array1::from_shape_fn(300_000, |i| ((i * 7919) % 1000) as i64);
    let plan = GatherPlan::gather([1000, 16], &ids, 0).unwrap();
    let updates = Array::from_shape_fn((300_000, 16), |(i, j)| ((i + j) % 13) as f64 - 6.0);
    let got = on_1_and_3(|| {
        let mut d = ndarray::Array2::<f64>::zeros((1000, 16));
        plan.scatter(&mut d, &updates, Add).unwrap();
        d.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    });
    let mut want = ndarray::Array2::<f64>::zeros((1000, 16));
    want.scatter(&ids, &updates, 0, Add).unwrap();
    assert_eq!(got, want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let mut wide = ndarray::Array2::<f64>::zeros((1000, 32));
    let mut strided = wide.slice_axis_mut(Axis(1), Slice::new(0, None, 2));
    plan.scatter(&mut strided, &updates, Add).unwrap();
    assert_eq!(strided, want);
    assert!(
        wide.slice_axis(Axis(1), Slice::new(1, None, 2))
            .iter()
            .all(|&v| v == 0.0)
    );
}

/// Shape errors write nothing.
#[test]
fn shape_errors_write_nothing() {
    let plan = GatherPlan::gather([3, 2], &array![2_i64, 0], 0).unwrap();
    let mut d = ndarray::Array2::<f64>::from_elem((3, 2), 0.5);
    let e = plan.scatter(&mut d, &array![[1.0, 1.0]], Add).unwrap_err();
    assert!(matches!(e, GatherError::UpdatesShape { .. }), "{e}");
    let mut wrong = ndarray::Array2::<f64>::from_elem((4, 2), 0.5);
    let e = plan
        .scatter(&mut wrong, &array![[1.0, 1.0], [1.0, 1.0]], Add)
        .unwrap_err();
    assert!(matches!(e, GatherError::InputShape { .. }), "{e}");
    assert!(d.iter().chain(wrong.iter()).all(|&v| v == 0.5));
    let big = GatherPlan::gather([3, 40], &ndarray::Array1::<i64>::zeros(10), 0).unwrap();
    let mut d = ndarray::Array2::<f64>::from_elem((3, 40), 0.5);
    let e = big
        .scatter(&mut d, &ndarray::Array2::<f64>::ones((10, 41)), Add)
        .unwrap_err();
    assert!(matches!(e, GatherError::UpdatesShape { .. }), "{e}");
    assert!(d.iter().all(|&v| v == 0.5));
}
