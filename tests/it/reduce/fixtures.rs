//! PyTorch's own results (`tests/fixtures/REDUCE_MANIFEST.txt`, written by
//! `generate_torch.py`): `F.embedding_bag`, `torch.segment_reduce`, `index_reduce_` /
//! `index_add_` / `scatter_reduce_(include_self=False)` on fresh zeros. Every case must
//! give the recorded output, bit for bit.

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

#[test]
fn every_torch_case_gives_torchs_output() {
    let all = cases();
    assert!(all.len() >= 70, "{} cases", all.len());
    for c in &all {
        let ok = if let Some((got, expect)) = run::<f32>(c) {
            same(&got, &expect) || panic!("{}: expected {expect:?}, got {got:?}", c.name)
        } else if let Some((got, expect)) = run::<f64>(c) {
            same(&got, &expect) || panic!("{}: expected {expect:?}, got {got:?}", c.name)
        } else {
            panic!("{}: data neither f32 nor f64", c.name)
        };
        assert!(ok);
    }
}
