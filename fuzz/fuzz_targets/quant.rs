#![no_main]

//! `QTable` over garbage bytes in every layout (and over half floats): `new` refuses only
//! rows narrower than their scale and bias; `gather` is `Rowwise::dequantize`'s rows;
//! `Max` / `Min` / `Prod` (with their argmax) are the naive gather-reduce of the
//! dequantized table, `Sum` / `Mean` / `SqrtN` FBGEMM's per-position order written out,
//! a plan the call, bit for bit (every NaN alike); half floats, the naive gather-reduce of
//! their `f32` values. Errors as the naive one's. A NaN scale gives NaN, never a panic.

use arbitrary::Arbitrary;
use ndarray::{Array2, ArrayD, IxDyn};
use ndarray_gather::prelude::*;
use ndarray_gather::quant::{QTable, Rowwise};

#[path = "../../tests/it/support/pooling.rs"]
#[allow(dead_code)]
mod pooling;

use pooling::{Seg, Spec, Why, gather_reduce as naive, pool_of, same_bits, segment_of};

#[derive(Debug, Arbitrary)]
struct Input {
    /// 0-2: Int8, Int4, Int2; 3, 4: f16, bf16.
    layout: u8,
    rows: u8,
    width: u8,
    fortran: bool,
    bytes: Vec<u8>,
    idx: Vec<i8>,
    kind: u8,
    seg: Vec<i8>,
    count: u8,
    pooling: u8,
    weights: Option<Vec<i8>>,
    skip: Option<i8>,
    fill: Option<i8>,
    arg: bool,
    plan: bool,
}

libfuzzer_sys::fuzz_target!(|input: Input| {
    let (n, width) = (input.rows as usize % 6, input.width as usize % 24);
    let byte = |i: usize| {
        input
            .bytes
            .get(i % input.bytes.len().max(1))
            .copied()
            .unwrap_or(0)
    };
    let held = Array2::from_shape_fn((n, width), |(r, c)| byte(r * width + c));
    let bytes = if input.fortran {
        held.reversed_axes()
            .as_standard_layout()
            .reversed_axes()
            .to_owned()
    } else {
        held
    };
    let layout = [Rowwise::Int8, Rowwise::Int4, Rowwise::Int2]
        .get(input.layout as usize % 5)
        .copied();
    let halves = Array2::from_shape_fn((n, width), |(r, c)| {
        u16::from_le_bytes([byte(2 * (r * width + c)), byte(2 * (r * width + c) + 1)])
    });
    let h16 = halves.mapv(half::f16::from_bits);
    let hb16 = halves.mapv(half::bf16::from_bits);
    let (qt, table) = match layout {
        Some(l) => match QTable::new(&bytes, l) {
            Err(e) => {
                let tail = if l == Rowwise::Int8 { 8 } else { 4 };
                assert!(width < tail, "{e}");
                return;
            }
            Ok(qt) => (qt, l.dequantize(&bytes).unwrap()),
        },
        None if input.layout % 5 == 3 => (QTable::f16(&h16), h16.mapv(|h| h.to_f32())),
        None => (QTable::bf16(&hb16), hb16.mapv(|h| h.to_f32())),
    };
    assert_eq!(qt.dim(), table.dim());
    let idx: Vec<i64> = input.idx.iter().take(10).map(|&v| v as i64 % 8).collect();
    let positions = idx.len();
    let idx_arr = ArrayD::from_shape_vec(IxDyn(&[positions]), idx.clone()).unwrap();
    let x = table.view().into_dyn();
    // `gather`: the dequantized rows.
    match (
        qt.gather(&idx),
        ndarray_gather::GatherExt::gather(&table, &idx, 0),
    ) {
        (Ok(g), Ok(w)) => assert!(same_bits(&g.into_dyn(), &w.into_dyn())),
        (Err(_), Err(_)) => {}
        (g, w) => panic!("gather: {g:?} against {w:?}"),
    }
    let seg_values: Vec<i64> = input.seg.iter().take(8).map(|&v| v as i64).collect();
    let seg = Seg::of_kind(input.kind, seg_values, input.count as usize % 5);
    let pooling = Pooling::ALL[input.pooling as usize % 6];
    let weights: Option<Vec<f32>> = input
        .weights
        .as_ref()
        .map(|w| w.iter().take(positions + 1).map(|&v| v as f32 / 2.0).collect());
    let (skip, fill) = (input.skip.map(|s| s as i64 % 8), input.fill.map(|f| f as f32));
    let spec = Spec {
        pooling,
        weights: weights.clone(),
        skip,
        fill,
        arg: input.arg,
    };
    let sums = layout.is_some() && matches!(pooling, Pooling::Sum | Pooling::Mean | Pooling::SqrtN);
    // The reference: the naive one, its sums (for quantized rows) in FBGEMM's order.
    let expected = naive(&x, Some(&idx_arr.view()), &seg, 0, &spec).map(|(e, a)| match layout {
        Some(l) if sums => (fbgemm(&bytes, l, &idx, &seg, &spec, e), a),
        _ => (e, a),
    });
    let pool = || pool_of(pooling, weights.as_deref(), skip, fill);
    let segments = || seg.segments();
    let shape_of_idx = [positions];
    if input.arg {
        match (&expected, qt.gather_reduce_arg(&idx, segments(), pool())) {
            (Ok((e, ea)), Ok((g, ga))) => {
                assert!(same_bits(e, &g.into_dyn()));
                assert_eq!(ea, &ga.into_dyn());
            }
            (Err(w), Err(g)) => assert_eq!(w, &Why::of(&g, &shape_of_idx), "{g}"),
            (e, g) => panic!("arg: expected {e:?}, got {g:?}"),
        }
        return;
    }
    let got = qt.gather_reduce(&idx, segments(), pool());
    match (&expected, &got) {
        (Ok((e, _)), Ok(g)) => assert!(same_bits(e, &g.clone().into_dyn()), "expected {e:?}, got {g:?}"),
        (Err(w), Err(g)) => assert_eq!(w, &Why::of(g, &shape_of_idx), "{g}"),
        (e, g) => panic!("expected {e:?}, got {g:?}"),
    }
    if let (true, Ok(g)) = (input.plan, &got) {
        let plan = match skip {
            Some(s) => GatherReducePlan::new_skipping(qt.dim(), &idx, s, segments(), 0),
            None => GatherReducePlan::new(qt.dim(), &idx, segments(), 0),
        }
        .unwrap();
        let mut out = Array2::from_elem(g.dim(), 7.0f32);
        plan.apply_into(&qt, pool(), &mut out).unwrap();
        assert!(same_bits(&g.clone().into_dyn(), &out.into_dyn()));
    }
});

/// The sums of decision 47 written out (on a call the naive one found good, whose output
/// `e` gives the shape and the empty segments' fill): per kept position, in order,
/// `out = fma(w * scale, q, out + w * bias)` from zero, then divided as decision 16.
fn fbgemm(
    bytes: &Array2<u8>,
    l: Rowwise,
    idx: &[i64],
    seg: &Seg,
    spec: &Spec<f32>,
    e: ArrayD<f32>,
) -> ArrayD<f32> {
    let (of, count) = segment_of(seg, idx.len()).unwrap();
    let (n, d) = (bytes.nrows(), e.shape()[1]);
    let mut out = e;
    for s in 0..count {
        let (mut acc, mut kept, mut ws, mut w2) = (vec![0.0f32; d], 0usize, 0.0f32, 0.0f32);
        for (q, &v) in idx.iter().enumerate() {
            if of[q] != Some(s) || spec.skip == Some(v) {
                continue;
            }
            let row = bytes
                .row(if v < 0 {
                    (v + n as i64) as usize
                } else {
                    v as usize
                })
                .to_vec();
            let (scale, bias) = match l {
                Rowwise::Int8 => {
                    let f = |i: usize| f32::from_le_bytes(row[i..i + 4].try_into().unwrap());
                    (f(d), f(d + 4))
                }
                _ => {
                    let at = d * if l == Rowwise::Int4 { 4 } else { 2 } / 8;
                    let h =
                        |i: usize| half::f16::from_bits(u16::from_le_bytes([row[i], row[i + 1]])).to_f32();
                    (h(at), h(at + 2))
                }
            };
            let w = spec.weights.as_ref().map_or(1.0, |w| w[q]);
            for (j, a) in acc.iter_mut().enumerate() {
                let qv = match l {
                    Rowwise::Int8 => row[j],
                    Rowwise::Int4 => (row[j / 2] >> (4 * (j % 2))) & 0xf,
                    Rowwise::Int2 => (row[j / 4] >> (2 * (j % 4))) & 0x3,
                };
                *a = (w * scale).mul_add(f32::from(qv), *a + w * bias);
            }
            kept += 1;
            ws += w;
            w2 += w * w;
        }
        if kept == 0 {
            continue;
        }
        let weighted = spec.weights.is_some();
        let div = match spec.pooling {
            Pooling::Mean if weighted => ws,
            Pooling::Mean => kept as f32,
            Pooling::SqrtN if weighted => (w2 as f64).sqrt() as f32,
            Pooling::SqrtN => (kept as f64).sqrt() as f32,
            _ => 1.0,
        };
        for (j, a) in acc.iter().enumerate() {
            out[[s, j]] = if spec.pooling == Pooling::Sum { *a } else { a / div };
        }
    }
    out
}
