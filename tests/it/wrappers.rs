//! Every wrapper against its own naive reference, on random shapes, parameters, index
//! modes, layouts of input and indices, seven index types and six element types.

use ndarray::{ArrayD, ArrayViewD};
use ndarray_gather::prelude::*;
use proptest::prelude::*;

use crate::layouts::{Held, Layout, any_layout};
use crate::props::{config, convert, index_values};
use crate::reference::{self, Fail, Mode};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Gather,
    Batched,
    Elements,
    AlongAxis,
    Nd,
    TakeAxis,
    TakeFlat,
}

#[derive(Debug, Clone)]
pub struct Case {
    pub op: Op,
    pub input_shape: Vec<usize>,
    pub indices_shape: Vec<usize>,
    pub axis: isize,
    pub batch_dims: usize,
    pub mode: Mode,
    pub values: Vec<i64>,
    pub input_layout: Layout,
    pub indices_layout: Layout,
    pub elem: u8,
    pub index_type: u8,
}

fn dims(r: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<usize>> {
    r.prop_flat_map(|n| proptest::collection::vec(crate::props::size(), n))
}

/// Shapes and parameters per operation, mostly valid, sometimes not.
fn shapes() -> impl Strategy<Value = (Op, Vec<usize>, Vec<usize>, isize, usize, Mode)> {
    let mode = prop_oneof![Just(Mode::Raise), Just(Mode::Wrap), Just(Mode::Clip)];
    (
        dims(1..=4),
        dims(0..=3),
        any::<u64>(),
        mode,
        0u8..7,
        proptest::collection::vec(0u8..3, 4),
    )
        .prop_map(|(input, idx, pick, mode, op, pattern)| {
            let r = input.len() as isize;
            // Mostly a valid axis, negative half the time, rarely out of range.
            let mut axis = (pick % r as u64) as isize;
            if pick >> 8 & 1 == 1 {
                axis -= r;
            }
            if pick >> 9 & 31 == 0 {
                axis += 2 * r;
            }
            let a = axis.rem_euclid(r) as usize;
            let bump = pick >> 14 & 15 == 0; // sometimes break a shape rule
            match op {
                0 | 5 | 6 => {
                    let op = match op {
                        5 => Op::TakeAxis,
                        6 => Op::TakeFlat,
                        _ => Op::Gather,
                    };
                    let mode = if op == Op::Gather { Mode::Raise } else { mode };
                    (op, input, idx, axis, 0, mode)
                }
                1 => {
                    // Batch dims copied from the input, up to the axis.
                    let b = (pick >> 20) as usize % (a + 1);
                    let mut idx2 = input[..b].to_vec();
                    idx2.extend_from_slice(&idx);
                    if bump && b > 0 {
                        idx2[0] += 1;
                    }
                    (Op::Batched, input, idx2, axis, b, Mode::Raise)
                }
                2 => {
                    // Indices no larger than the input off the axis.
                    let idx2: Vec<usize> = input
                        .iter()
                        .enumerate()
                        .map(|(d, &n)| {
                            if d == a {
                                idx.first().copied().unwrap_or(2)
                            } else {
                                n.min(idx.get(d).copied().unwrap_or(n)) + usize::from(bump && d == 0)
                            }
                        })
                        .collect();
                    (Op::Elements, input, idx2, axis, 0, Mode::Raise)
                }
                3 => {
                    let mut input = input;
                    let mut idx2 = input.clone();
                    for d in 0..input.len() {
                        match pattern[d] {
                            _ if d == a => idx2[d] = idx.first().copied().unwrap_or(1),
                            1 => input[d] = 1,
                            2 => idx2[d] = 1,
                            _ => {}
                        }
                    }
                    if bump {
                        idx2[0] += 2;
                    }
                    (Op::AlongAxis, input, idx2, axis, 0, Mode::Raise)
                }
                _ => {
                    // gather_nd: batch dims (equal or 1), index dims, then k coordinates.
                    let rr = input.len();
                    let b = (pick >> 20) as usize % rr.min(3);
                    let k = (pick >> 24) as usize % (rr - b + 1 + usize::from(bump));
                    let mut idx2: Vec<usize> = (0..b)
                        .map(|d| if pattern[d] == 1 { 1 } else { input[d] })
                        .collect();
                    let mut input = input;
                    for d in 0..b {
                        if pattern[d] == 2 {
                            input[d] = 1;
                        }
                    }
                    idx2.extend(idx.iter().take(2));
                    idx2.push(k);
                    (Op::Nd, input, idx2, 0, b, Mode::Raise)
                }
            }
        })
}

pub fn case() -> impl Strategy<Value = Case> {
    shapes().prop_flat_map(|(op, input_shape, indices_shape, axis, batch_dims, mode)| {
        let lens: Vec<usize> = match op {
            Op::TakeFlat => vec![input_shape.iter().product()],
            Op::Nd => {
                let k = *indices_shape.last().unwrap();
                input_shape
                    .get(batch_dims..batch_dims + k)
                    .map(|s| s.to_vec())
                    .unwrap_or_default()
            }
            _ => vec![input_shape[axis.rem_euclid(input_shape.len() as isize) as usize]],
        };
        let count: usize = indices_shape.iter().product();
        (
            Just((
                op,
                input_shape,
                indices_shape,
                axis,
                batch_dims,
                mode,
                lens,
                count,
            )),
            proptest::collection::vec(any::<u64>(), 1..4),
            proptest::option::weighted(0.1, any::<u64>()),
            any_layout(),
            any_layout(),
            0u8..6,
            0u8..7,
        )
            .prop_map(
                |(
                    (op, input_shape, indices_shape, axis, batch_dims, mode, lens, count),
                    seeds,
                    bad,
                    il,
                    xl,
                    elem,
                    it,
                )| {
                    let mut values = index_values(&lens, count, &seeds, bad);
                    if mode != Mode::Raise {
                        // Far outside the axis too: wrap and clip must handle any value.
                        for (i, v) in values.iter_mut().enumerate() {
                            *v = v.saturating_mul(1 + (i as i64 % 5));
                        }
                    }
                    Case {
                        op,
                        input_shape,
                        indices_shape,
                        axis,
                        batch_dims,
                        mode,
                        values,
                        input_layout: il,
                        indices_layout: xl,
                        elem,
                        index_type: it,
                    }
                },
            )
    })
}

fn index_mode(m: Mode) -> IndexMode {
    match m {
        Mode::Raise => IndexMode::Raise,
        Mode::Wrap => IndexMode::Wrap,
        Mode::Clip => IndexMode::Clip,
    }
}

/// Runs a case through the crate and the reference; both must fail with the same kind of
/// error, or agree exactly. `Ok(true)` when they agreed on an output.
pub fn check<A, I>(c: &Case) -> Result<bool, String>
where
    A: crate::props::Elem,
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
    crate::plans::agrees(plan, &iv, &got).map_err(|e| format!("{c:?}: {e}"))?;
    match (&got, &expected) {
        (Ok(g), Ok(e)) if g == e => Ok(true),
        (Err(g), Err(e)) if Fail::of(g) == *e => Ok(false),
        _ => Err(format!("crate {got:?}\nreference {expected:?}")),
    }
}

fn run_case(c: &Case) -> Result<(), TestCaseError> {
    macro_rules! by_index {
        ($a:ty) => {
            match c.index_type {
                0 => check::<$a, i32>(c),
                1 => check::<$a, i64>(c),
                2 => check::<$a, isize>(c),
                3 => check::<$a, u32>(c),
                4 => check::<$a, u64>(c),
                5 => check::<$a, u16>(c),
                _ => check::<$a, usize>(c),
            }
        };
    }
    let r = match c.elem {
        0 => by_index!(f32),
        1 => by_index!(f64),
        2 => by_index!(i64),
        3 => by_index!(u8),
        4 => by_index!(bool),
        _ => by_index!(String),
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
        for il in crate::layouts::ALL {
            for xl in crate::layouts::ALL {
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
