//! PyTorch's own results (`tests/fixtures/REDUCE_MANIFEST.txt`, written by
//! `generate_torch.py`): `F.embedding_bag`, `torch.segment_reduce`, `index_reduce_` /
//! `index_add_` / `scatter_reduce_(include_self=False)` on fresh zeros, and the autograd
//! gradients of the first three through a plan's backward. Every case must give the
//! recorded output, bit for bit.

use crate::support::manifest::{Case, read};
use crate::support::npy::Npy;
use ndarray::{ArrayD, IxDyn};
use ndarray_gather::prelude::*;

fn cases() -> Vec<Case> {
    crate::support::manifest::cases("REDUCE_MANIFEST.txt")
}

/// The case run with elements `A`; `None` if its data is not of type `A`.
fn run<A: PoolElement + Copy + std::fmt::Debug + Npy + std::str::FromStr>(
    c: &Case,
) -> Option<(ArrayD<A>, ArrayD<A>)> {
    let data = read::<A>(c.get("data").unwrap())?;
    let expect = read::<A>(c.get("expect").unwrap()).expect("expect");
    let seg_file = c.get("seg").map(|f| read::<i64>(f).expect("seg"));
    let seg: Vec<i64> = seg_file.map(|a| a.iter().copied().collect()).unwrap_or_default();
    let segments = match c.get("segments").unwrap() {
        "offsets" => Segments::indptr(&seg),
        "starts" => Segments::starts(&seg),
        "lengths" => Segments::lengths(&seg),
        "ids" => Segments::ids(&seg, c.num::<usize>("count").unwrap()),
        "uniform" => Segments::indptr(&seg[..0]),
        k => panic!("{}: segments {k}", c.name),
    };
    let pooling: Pooling = c.get("pooling").unwrap().parse().unwrap();
    let weights = c
        .get("weights")
        .map(|f| read::<A>(f).expect("weights").into_iter().collect::<Vec<_>>());
    let mut pool: Pool<'_, A> = pooling.into();
    if let Some(w) = &weights {
        pool = pool.weighted(w);
    }
    if let Some(k) = c.num::<i64>("skip") {
        pool = pool.skip(k);
    }
    if let Some(f) = c.get("fill") {
        pool = pool.fill(match f {
            "inf" => A::from_f64(f64::INFINITY).unwrap(),
            "-inf" => A::from_f64(f64::NEG_INFINITY).unwrap(),
            "nan" => A::from_f64(f64::NAN).unwrap(),
            v => A::from_f64(v.parse().unwrap()).unwrap(),
        });
    }
    let axis: isize = c.num("axis").unwrap();
    let uniform = c.num::<usize>("len");
    let got = match c.op.as_str() {
        "gather_reduce" => {
            let idx = read::<i64>(c.get("indices").unwrap()).expect("indices");
            match uniform {
                Some(len) => data.gather_reduce(&idx, Segments::uniform(len), axis, pool),
                None => data.gather_reduce(&idx, segments, axis, pool),
            }
        }
        "segment_reduce" => data.segment_reduce(segments, axis, pool),
        // The gradient of the table, through a plan of the case's indices and segments.
        "backward" => {
            let idx = read::<i64>(c.get("indices").unwrap()).expect("indices");
            let plan = match c.num::<i64>("skip") {
                Some(k) => GatherReducePlan::new_skipping(data.shape(), &idx, k, segments, axis),
                None => GatherReducePlan::new(data.shape(), &idx, segments, axis),
            }
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
            let g = read::<A>(c.get("out_grad").unwrap()).expect("out_grad");
            let mut grad = ArrayD::zeros(data.raw_dim());
            match c.get("grad_kind").unwrap() {
                "dense" => plan.backward_into(&g, pool, &mut grad).map(|()| grad),
                "rows" => plan.backward_rows(&g, pool).map(|(rows, grads)| {
                    let want = read::<i64>(c.get("rows").unwrap()).expect("rows");
                    let want: Vec<usize> = want.iter().map(|&r| r as usize).collect();
                    assert_eq!(rows.to_vec(), want, "{}: the touched rows", c.name);
                    grads
                }),
                "arg" => plan
                    .apply_arg(&data, pool)
                    .and_then(|(_, arg)| plan.backward_arg_into(&g, &arg, &mut grad))
                    .map(|()| grad),
                k => panic!("{}: grad_kind {k}", c.name),
            }
        }
        op => panic!("{}: op {op}", c.name),
    };
    let got = got.unwrap_or_else(|e| panic!("{}: {e}", c.name));
    Some((got, expect.into_dimensionality::<IxDyn>().unwrap()))
}

fn same<A: PoolElement + Copy>(a: &ArrayD<A>, b: &ArrayD<A>) -> bool {
    let bits = |v: &A| {
        let f = v.to_f64().unwrap();
        if f.is_nan() { u64::MAX } else { f.to_bits() }
    };
    a.shape() == b.shape() && a.iter().zip(b).all(|(x, y)| bits(x) == bits(y))
}

/// Equal within `rel` of the largest magnitude of `b` (sums that cancel lose the rest).
fn close<A: PoolElement + Copy>(a: &ArrayD<A>, b: &ArrayD<A>, rel: f64) -> bool {
    let f = |v: &A| v.to_f64().unwrap();
    let scale = b.iter().map(|v| f(v).abs()).fold(0.0, f64::max);
    a.shape() == b.shape() && a.iter().zip(b).all(|(x, y)| (f(x) - f(y)).abs() <= rel * scale)
}

#[test]
fn every_torch_case_gives_torchs_output() {
    let all = cases();
    assert!(all.len() >= 100, "{} cases", all.len());
    for c in &all {
        // index_reduce_(mean)'s and segment_reduce(mean)'s backwards divide the gradient by
        // the count, where embedding_bag's (and decision 34) multiply by 1 / count: the
        // last bit may differ.
        let ulp =
            c.op == "backward" && (c.name.contains("index_reduce_mean") || c.name.contains("segment_mean"));
        let ok = if let Some((got, expect)) = run::<f32>(c) {
            (if ulp {
                close(&got, &expect, 1e-6)
            } else {
                same(&got, &expect)
            }) || panic!("{}: expected {expect:?}, got {got:?}", c.name)
        } else if let Some((got, expect)) = run::<f64>(c) {
            (if ulp {
                close(&got, &expect, 1e-15)
            } else {
                same(&got, &expect)
            }) || panic!("{}: expected {expect:?}, got {got:?}", c.name)
        } else {
            panic!("{}: data neither f32 nor f64", c.name)
        };
        assert!(ok);
    }
}
