//! The wrapper methods' cases: one of every method, with shapes and parameters mostly
//! valid, sometimes not.

use ndarray_gather::prelude::*;
use proptest::prelude::*;

use super::generate::{index_values, size};
use super::layouts::{Layout, any_layout};
use super::reference::Mode;

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
    r.prop_flat_map(|n| proptest::collection::vec(size(), n))
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

pub fn index_mode(m: Mode) -> IndexMode {
    match m {
        Mode::Raise => IndexMode::Raise,
        Mode::Wrap => IndexMode::Wrap,
        Mode::Clip => IndexMode::Clip,
    }
}
