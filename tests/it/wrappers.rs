//! Every wrapper against its own naive reference, on random shapes, parameters, index
//! modes, layouts of input and indices, seven index types and six element types (in
//! twelve pairs).

use ndarray::{ArrayD, ArrayViewD};
use ndarray_gather::prelude::*;
use proptest::prelude::*;

use crate::support::cases::{Case, Op, case, index_mode};
use crate::support::generate::{config, convert, index_values};
use crate::support::layouts::Held;
use crate::support::reference::{self, Fail, Mode};

/// Runs a case through the crate and the reference; both must fail with the same kind of
/// error, or agree exactly. `Ok(true)` when they agreed on an output.
pub fn check<A, I>(c: &Case) -> Result<bool, String>
where
    A: crate::support::generate::Elem,
    I: GatherIndex + TryFrom<i64> + TryFrom<u64> + TryInto<i128>,
{
    let input = Held::new(&c.input_shape, c.input_layout, A::of);
    let len = c.input_shape.iter().product::<usize>().max(1);
    let values: Vec<I> = c.values.iter().map(|&v| convert(v, len.min(4))).collect();
    let indices = Held::new(&c.indices_shape, c.indices_layout, |i| values[i]);
    let (iv, xv): (ArrayViewD<A>, ArrayViewD<I>) = (input.view(), indices.view());
    let (got, expected): (Result<ArrayD<A>, GatherError>, Result<ArrayD<A>, Fail>) = match c.op {
        Op::Gather => (
            iv.gather(&xv, c.axis),
            reference::gather(&iv, &xv, c.axis, Mode::Raise),
        ),
        Op::Batched => (
            iv.gather_batched(&xv, c.axis, c.batch_dims),
            reference::batched(&iv, &xv, c.axis, c.batch_dims, Mode::Raise),
        ),
        Op::Elements => (
            iv.gather_elements(&xv, c.axis),
            reference::elements(&iv, &xv, c.axis),
        ),
        Op::AlongAxis => (
            iv.take_along_axis(&xv, c.axis),
            reference::along_axis(&iv, &xv, c.axis),
        ),
        Op::Nd => (
            iv.gather_nd(&xv, c.batch_dims),
            reference::nd(&iv, &xv, c.batch_dims),
        ),
        Op::TakeAxis => (
            iv.take(&xv, Some(c.axis), index_mode(c.mode)),
            reference::gather(&iv, &xv, c.axis, c.mode),
        ),
        Op::TakeFlat => (
            iv.take(&xv, None, index_mode(c.mode)),
            reference::take_flat(&iv, &xv, c.mode),
        ),
    };
    let shape = iv.shape();
    let plan = match c.op {
        Op::Gather => GatherPlan::gather(shape, &xv, c.axis),
        Op::Batched => GatherPlan::gather_batched(shape, &xv, c.axis, c.batch_dims),
        Op::Elements => GatherPlan::gather_elements(shape, &xv, c.axis),
        Op::AlongAxis => GatherPlan::take_along_axis(shape, &xv, c.axis),
        Op::Nd => GatherPlan::gather_nd(shape, &xv, c.batch_dims),
        Op::TakeAxis => GatherPlan::take(shape, &xv, Some(c.axis), index_mode(c.mode)),
        Op::TakeFlat => GatherPlan::take(shape, &xv, None, index_mode(c.mode)),
    };
    crate::support::plans::agrees(plan, &iv, &got).map_err(|e| format!("{c:?}: {e}"))?;
    match (&got, &expected) {
        (Ok(g), Ok(e)) if g == e => Ok(true),
        (Err(g), Err(e)) if Fail::of(g) == *e => Ok(false),
        _ => Err(format!("crate {got:?}\nreference {expected:?}")),
    }
}

fn run_case(c: &Case) -> Result<(), TestCaseError> {
    // Each element type with two of the seven index types, every index type with at least
    // one element type: the kernels' element side (block copies, clones) and index side
    // (resolving each type) do not meet, and every pair instantiates the kernels again
    // (the full 6 x 7 product; twelve pairs took the `it` build 100 -> 86 s).
    let r = match (c.elem, c.index_type % 2) {
        (0, 0) => check::<f32, i32>(c),
        (0, _) => check::<f32, i64>(c),
        (1, 0) => check::<f64, isize>(c),
        (1, _) => check::<f64, u64>(c),
        (2, 0) => check::<i64, u32>(c),
        (2, _) => check::<i64, i64>(c),
        (3, 0) => check::<u8, u16>(c),
        (3, _) => check::<u8, usize>(c),
        (4, 0) => check::<bool, i64>(c),
        (4, _) => check::<bool, u32>(c),
        (_, 0) => check::<String, usize>(c),
        (_, _) => check::<String, i32>(c),
    };
    r.map(|_| ()).map_err(TestCaseError::fail)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_wrapper_matches_its_reference(c in case()) {
        run_case(&c)?;
    }
}

#[test]
fn every_wrapper_on_every_layout() {
    // A fixed sweep: each operation on each layout of input and indices.
    let cases = [
        (Op::Gather, vec![3, 4, 2], vec![2, 3], 1_isize, 0),
        (Op::Batched, vec![2, 3, 4], vec![2, 5], 1, 1),
        (Op::Elements, vec![3, 4, 2], vec![2, 4, 2], -2, 0),
        (Op::AlongAxis, vec![3, 1, 2], vec![1, 4, 2], 0, 0),
        (Op::Nd, vec![2, 3, 4], vec![2, 3, 2], 0, 1),
        (Op::TakeAxis, vec![3, 4], vec![5], -1, 0),
        (Op::TakeFlat, vec![3, 4, 2], vec![2, 3], 0, 0),
    ];
    let (mut valid, mut total) = (0, 0);
    for (op, input_shape, indices_shape, axis, batch_dims) in cases {
        for il in crate::support::layouts::ALL {
            for xl in crate::support::layouts::ALL {
                let lens = match op {
                    Op::TakeFlat => vec![input_shape.iter().product()],
                    Op::Nd => input_shape[batch_dims..batch_dims + 2].to_vec(),
                    _ => vec![input_shape[axis.rem_euclid(input_shape.len() as isize) as usize]],
                };
                let count = indices_shape.iter().product();
                let c = Case {
                    op,
                    input_shape: input_shape.clone(),
                    indices_shape: indices_shape.clone(),
                    axis,
                    batch_dims,
                    mode: Mode::Raise,
                    values: index_values(&lens, count, &[12345, 678], None),
                    input_layout: il,
                    indices_layout: xl,
                    elem: 0,
                    index_type: 1,
                };
                let r = check::<f32, i64>(&c);
                assert!(r.is_ok(), "{c:?}: {r:?}");
                valid += usize::from(r == Ok(true));
                total += 1;
            }
        }
    }
    // Every index is in range, so every case must give an output: a sweep that passed
    // with everything rejected would test nothing.
    assert_eq!(
        valid, total,
        "only {valid} of {total} layout cases gave an output"
    );
}
