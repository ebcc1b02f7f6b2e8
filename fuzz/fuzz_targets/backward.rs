#![no_main]

//! `GatherReducePlan::backward_into` / `backward_rows` / `backward_arg_into` against the
//! backward written out (tests/it/support/backward.rs): any shapes, axes, layouts of the
//! gradients, segments of every kind, poolings, weights and skip. Each call must add the
//! loop's values bit for bit, or return an error and write nothing.

mod common;

use arbitrary::Arbitrary;
use common::{Held, Layout};
use ndarray::{ArrayD, Dimension, IxDyn};
use ndarray_gather::prelude::*;

#[path = "../../tests/it/support/backward.rs"]
#[allow(dead_code)]
mod backward;
#[path = "../../tests/it/support/pooling.rs"]
#[allow(dead_code)]
mod pooling;

use backward::{Walk, add_arg_rows, add_rows};
use pooling::{Seg, same_bits};

#[derive(Debug, Arbitrary)]
struct Input {
    shape: Vec<u8>,
    axis: i8,
    idx: Vec<i16>,
    kind: u8,
    seg: Vec<i16>,
    count: u8,
    pooling: u8,
    weights: Option<Vec<i8>>,
    skip: Option<i8>,
    grad_layout: Layout,
    into_layout: Layout,
    values: Vec<i8>,
}

libfuzzer_sys::fuzz_target!(|input: Input| {
    let shape: Vec<usize> = input.shape.iter().take(3).map(|&d| (d % 5) as usize).collect();
    if shape.is_empty() {
        return;
    }
    let idx: Vec<i64> = input.idx.iter().take(12).map(|&v| v as i64 % 8).collect();
    let seg_values: Vec<i64> = input.seg.iter().take(12).map(|&v| v as i64).collect();
    let seg = Seg::of_kind(input.kind, seg_values, input.count as usize % 6);
    let skip = input.skip.map(|s| s as i64 % 8);
    let Some((walk, axis)) = Walk::of(&shape, input.axis as isize, &idx, &seg, skip) else {
        return;
    };
    let segments = seg.segments();
    let plan = match skip {
        Some(k) => GatherReducePlan::new_skipping(&shape[..], &idx, k, segments, input.axis as isize),
        None => GatherReducePlan::new(&shape[..], &idx, segments, input.axis as isize),
    }
    .expect("a plan the reference accepts");
    let pooling = Pooling::ALL[input.pooling as usize % 6];
    let values = if input.values.is_empty() {
        vec![1]
    } else {
        input.values.clone()
    };
    let value = |i: usize| match values[i % values.len()] {
        -128 => f64::NAN,
        v => v as f64 / 4.0,
    };
    let mut out_shape = shape.clone();
    out_shape[axis] = walk.count;
    let g = Held::new(&out_shape, input.grad_layout, value);
    let g = g.view();
    let weights: Option<Vec<f64>> = input.weights.as_ref().map(|w| {
        (0..idx.len())
            .map(|i| w.get(i).copied().unwrap_or(1) as f64 / 2.0)
            .collect()
    });
    let mut pool: Pool<'_, f64> = pooling.into();
    if let Some(w) = &weights {
        pool = pool.weighted(w);
    }
    if let Some(k) = skip {
        pool = pool.skip(k);
    }
    let writable = if matches!(input.into_layout, Layout::Broadcast(_)) {
        Layout::C
    } else {
        input.into_layout
    };
    let mut held = Held::new(&shape, writable, |i| value(i + 5));
    let mut grad = held.view_mut();
    let before = grad.to_owned();
    let extremum = matches!(pooling, Pooling::Max | Pooling::Min);
    let got = plan.backward_into(&g, pool.clone(), &mut grad);
    if extremum || pooling == Pooling::Prod {
        assert!(matches!(got, Err(GatherError::Pooling { .. })), "{got:?}");
        assert!(same_bits(&before, &grad.to_owned()), "wrote on Err");
        if !extremum || weights.is_some() {
            return;
        }
        // Through the argmax of the forward.
        let x = ArrayD::from_shape_fn(IxDyn(&shape), |d| value(d.slice().iter().sum::<usize>() * 3 + 1));
        let (_, arg) = plan.apply_arg(&x, pool).expect("apply_arg");
        let mut expected = before.clone();
        add_arg_rows(&mut expected, &g.view(), &arg, axis, &walk);
        plan.backward_arg_into(&g, &arg, &mut grad)
            .expect("backward_arg_into");
        assert!(same_bits(&expected, &grad.to_owned()));
        return;
    }
    got.expect("backward_into");
    let coef = walk.coefficients(pooling, weights.as_deref());
    let g = g.to_owned();
    let mut expected = before;
    add_rows(&mut expected, &g, axis, &walk, &coef, |r| r, false);
    assert!(
        same_bits(&expected, &grad.to_owned()),
        "backward_into: expected {expected:?}, got {grad:?}"
    );
    let (rows, grads) = plan.backward_rows(&g, pool).expect("backward_rows");
    let mut touched: Vec<usize> = walk.kept().map(|(_, r, _)| r).collect();
    touched.sort();
    touched.dedup();
    assert_eq!(rows.to_vec(), touched);
    let mut dims = shape.clone();
    dims[axis] = touched.len();
    let mut expected = ArrayD::zeros(IxDyn(&dims));
    add_rows(
        &mut expected,
        &g,
        axis,
        &walk,
        &coef,
        |r| touched.binary_search(&r).unwrap(),
        true,
    );
    assert!(same_bits(&expected, &grads.into_dyn()));
});
