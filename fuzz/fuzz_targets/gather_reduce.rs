#![no_main]

//! `gather_reduce` / `_into` / `_arg`, `segment_reduce` and `GatherReducePlan` against the
//! naive gather-reduce of the test suite (tests/it/support/pooling.rs): any shapes, axes,
//! layouts, segments of every kind (valid or not), poolings, weights, skip and fill. Each
//! call must return the reference's output bit for bit, or an error where it fails.

mod common;

use arbitrary::Arbitrary;
use common::{Held, Layout};
use ndarray::{ArrayD, IxDyn};
use ndarray_gather::prelude::*;

#[path = "../../tests/it/support/pooling.rs"]
#[allow(dead_code)]
mod pooling;

use pooling::{Seg, Spec, Why, gather_reduce as naive, pool_of, same_bits};

#[derive(Debug, Arbitrary)]
struct Input {
    shape: Vec<u8>,
    axis: i8,
    /// `None`: `segment_reduce`.
    idx_shape: Option<Vec<u8>>,
    idx: Vec<i16>,
    kind: u8,
    seg: Vec<i16>,
    count: u8,
    pooling: u8,
    weights: Option<Vec<i8>>,
    skip: Option<i8>,
    fill: Option<i8>,
    arg: bool,
    layout: Layout,
    values: Vec<i8>,
    plan: bool,
}

fn dims(raw: &[u8], max: usize) -> Vec<usize> {
    raw.iter().take(max).map(|&d| (d % 5) as usize).collect()
}

libfuzzer_sys::fuzz_target!(|input: Input| {
    let shape = dims(&input.shape, 3);
    if shape.is_empty() {
        return;
    }
    let idx_shape = input.idx_shape.as_ref().map(|s| dims(s, 2));
    let positions: usize = match &idx_shape {
        Some(s) => s.iter().product(),
        None => {
            let r = shape.len() as isize;
            let a = if input.axis < 0 {
                input.axis as isize + r
            } else {
                input.axis as isize
            };
            if (0..r).contains(&a) { shape[a as usize] } else { 0 }
        }
    };
    let idx: Vec<i64> = (0..positions)
        .map(|i| input.idx.get(i).copied().unwrap_or(0) as i64)
        .collect();
    let seg_values: Vec<i64> = input.seg.iter().take(12).map(|&v| v as i64).collect();
    let seg = Seg::of_kind(input.kind, seg_values, input.count as usize % 6);
    let pooling = Pooling::ALL[input.pooling as usize % 6];
    let values = if input.values.is_empty() {
        vec![1]
    } else {
        input.values.clone()
    };
    // f64 elements from small integers (and a NaN for -128): no overflow anywhere.
    let value = |i: usize| match values[i % values.len()] {
        -128 => f64::NAN,
        v => v as f64 / 4.0,
    };
    let x = Held::new(&shape, input.layout, value);
    let x = x.view();
    let weights: Option<Vec<f64>> = input
        .weights
        .as_ref()
        .map(|w| w.iter().take(positions + 1).map(|&v| v as f64 / 2.0).collect());
    let fill = input.fill.map(|f| f as f64);
    let skip = input.skip.map(|s| s as i64);
    let spec = Spec {
        pooling,
        weights: weights.clone(),
        skip,
        fill,
        arg: input.arg && idx_shape.is_some(),
    };
    let idx_arr = idx_shape
        .as_ref()
        .map(|s| ArrayD::from_shape_vec(IxDyn(s), idx.clone()).unwrap());
    let expected = naive(
        &x,
        idx_arr.as_ref().map(|a| a.view()).as_ref(),
        &seg,
        input.axis as isize,
        &spec,
    );
    let pool = || pool_of(pooling, weights.as_deref(), skip, fill);
    let segments = || seg.segments();
    let shape_of_idx = idx_shape.clone().unwrap_or_default();
    let axis = input.axis as isize;
    let check = |got: Result<ArrayD<f64>, GatherError>| match (&expected, got) {
        (Ok((e, _)), Ok(g)) => assert!(same_bits(e, &g), "expected {e:?}, got {g:?}"),
        (Err(w), Err(g)) => assert_eq!(w, &Why::of(&g, &shape_of_idx), "{g}"),
        (e, g) => panic!("expected {e:?}, got {g:?}"),
    };
    match &idx_arr {
        None => check(x.segment_reduce(segments(), axis, pool())),
        Some(i) if input.arg => match (&expected, x.gather_reduce_arg(i, segments(), axis, pool())) {
            (Ok((e, ea)), Ok((g, ga))) => {
                assert!(same_bits(e, &g));
                assert_eq!(ea, &ga);
            }
            (Err(w), Err(g)) => assert_eq!(w, &Why::of(&g, &shape_of_idx), "{g}"),
            (e, g) => panic!("expected {e:?}, got {g:?}"),
        },
        Some(i) => {
            check(x.gather_reduce(i, segments(), axis, pool()));
            if let Ok((e, _)) = &expected {
                let mut out = ArrayD::from_elem(e.raw_dim(), 7.0);
                check(
                    x.gather_reduce_into(i, segments(), axis, pool(), &mut out)
                        .map(|()| out),
                );
            }
            if input.plan {
                let plan = match skip {
                    Some(s) => GatherReducePlan::new_skipping(x.shape(), i, s, segments(), axis),
                    None => GatherReducePlan::new(x.shape(), i, segments(), axis),
                };
                let plain = Spec {
                    pooling: Pooling::Sum,
                    weights: None,
                    skip,
                    fill: None,
                    arg: false,
                };
                match (naive(&x, Some(&i.view()), &seg, axis, &plain), plan) {
                    (Err(w), Err(g)) => assert_eq!(w, Why::of(&g, &shape_of_idx), "{g}"),
                    (Ok(_), Ok(p)) => check(p.apply(&x, pool())),
                    (e, g) => panic!("plan: expected {e:?}, got {g:?}"),
                }
            }
        }
    }
});
