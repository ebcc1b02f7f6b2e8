#![no_main]

//! `bags::Collection` over random collections and batches (valid or not): the call, its
//! `_into` and its plan against each feature's single `gather_reduce`, bit for bit, or an
//! error where any single call (or the batch) fails; the plan's backward against each
//! feature's single plan's backward in feature order.

use arbitrary::Arbitrary;
use ndarray::{Array2, s};
use ndarray_gather::bags::{Collection, Jagged, Table};
use ndarray_gather::prelude::*;
use ndarray_gather::quant::{QTable, Rowwise};

#[path = "../../tests/it/support/pooling.rs"]
#[allow(dead_code)]
mod pooling;

#[derive(Debug, Arbitrary)]
struct Input {
    widths: [u8; 3],
    rows: [u8; 3],
    /// (table, pooling, skip, fill, weighted)
    features: Vec<(u8, u8, bool, bool, bool)>,
    batch: u8,
    lengths: Vec<u8>,
    values: Vec<i8>,
    weights: Vec<i8>,
    table_values: Vec<i8>,
}

/// A feature: its table, pooling, skip, fill and whether it is weighted.
type Spec = (usize, Pooling, Option<i64>, Option<f32>, bool);

fn pool_of<'w>(&(_, pooling, skip, fill, _): &Spec, w: Option<&'w [f32]>) -> Pool<'w, f32> {
    pooling::pool_of(pooling, w, skip, fill)
}

libfuzzer_sys::fuzz_target!(|input: Input| {
    let shapes: Vec<(usize, usize)> = (0..3)
        .map(|t| (input.rows[t] as usize % 9, input.widths[t] as usize % 20))
        .collect();
    let value = |i: usize| {
        *input
            .table_values
            .get(i % input.table_values.len().max(1))
            .unwrap_or(&1) as f32
            / 4.0
    };
    let f32s: Vec<Array2<f32>> = shapes[..2]
        .iter()
        .map(|&(n, d)| Array2::from_shape_fn((n, d), |(r, c)| value(r * 7 + c)))
        .collect();
    let q = Rowwise::Int8
        .quantize(&Array2::from_shape_fn(shapes[2], |(r, c)| value(r * 5 + c + 3)))
        .unwrap();
    let tables = [
        Table::from(f32s[0].view()),
        Table::from(f32s[1].view()),
        Table::from(QTable::new(&q, Rowwise::Int8).unwrap()),
    ];
    let poolings = Pooling::ALL;
    let specs: Vec<Spec> = input
        .features
        .iter()
        .take(5)
        .map(|&(t, p, skip, fill, w)| {
            let pooling = poolings[p as usize % 6];
            let weighted = w && matches!(pooling, Pooling::Sum | Pooling::Mean | Pooling::SqrtN);
            (
                t as usize % 3,
                pooling,
                skip.then_some(-1),
                fill.then_some(-2.0),
                weighted,
            )
        })
        .collect();
    let collection = specs.iter().fold(
        shapes.iter().fold(Collection::new(), |c, &(n, d)| c.table(n, d)),
        |c, spec| {
            if spec.4 {
                c.weighted_feature(spec.0, pool_of(spec, None))
            } else {
                c.feature(spec.0, pool_of(spec, None))
            }
        },
    );
    let batch = input.batch as usize % 4;
    let lengths: Vec<i64> = input.lengths.iter().take(20).map(|&l| (l % 4) as i64).collect();
    let values: Vec<i64> = input.values.iter().map(|&v| v as i64 % 10).collect();
    let weights: Vec<f32> = (0..values.len())
        .map(|p| *input.weights.get(p).unwrap_or(&1) as f32 / 8.0)
        .collect();
    let Ok(jagged) = Jagged::lengths(&values, &lengths, batch) else {
        let total: i64 = lengths.iter().sum();
        assert!(
            total != values.len() as i64
                || (batch == 0 && !lengths.is_empty())
                || (batch > 0 && lengths.len() % batch != 0)
        );
        return;
    };
    let jagged = jagged.weighted(&weights);
    // The reference: each feature's single call, or the first error.
    let reference = || -> Result<Array2<f32>, ()> {
        if batch > 0 && lengths.len() / batch != specs.len() {
            return Err(());
        }
        let mut out = Array2::zeros((batch, collection.width()));
        let (mut at, mut col) = (0, 0);
        for (f, spec) in specs.iter().enumerate() {
            let lens = &lengths[f * batch..(f + 1) * batch];
            let n = lens.iter().sum::<i64>() as usize;
            let ids = &values[at..at + n];
            let p = pool_of(spec, spec.4.then(|| &weights[at..at + n]));
            let d = shapes[spec.0].1;
            let got = match &tables[spec.0] {
                Table::F32(x) => x.gather_reduce(ids, Segments::lengths(lens), 0, p),
                Table::Quantized(q) => q.gather_reduce(ids, Segments::lengths(lens), p),
            }
            .map_err(|_| ())?;
            out.slice_mut(s![.., col..col + d]).assign(&got);
            at += n;
            col += d;
        }
        Ok(out)
    };
    let want = reference();
    let got = collection.gather_reduce(&tables, &jagged);
    match (&want, &got) {
        (Ok(w), Ok(g)) => assert_eq!(w.mapv(f32::to_bits), g.mapv(f32::to_bits)),
        (Err(()), Err(_)) => {}
        (w, g) => panic!("expected {w:?}, got {g:?}"),
    }
    let Ok(want) = want else { return };
    let mut into = Array2::from_elem(want.dim(), 7.0f32);
    collection
        .gather_reduce_into(&tables, &jagged, &mut into)
        .unwrap();
    assert_eq!(into.mapv(f32::to_bits), want.mapv(f32::to_bits));
    let plan = collection.plan(&jagged).unwrap();
    assert_eq!(
        plan.apply(&tables).unwrap().mapv(f32::to_bits),
        want.mapv(f32::to_bits)
    );
    // The backward, where every feature has one.
    if specs
        .iter()
        .all(|s| matches!(s.1, Pooling::Sum | Pooling::Mean | Pooling::SqrtN))
    {
        let grad_out = want.mapv(|v| v * 0.5 + 1.0);
        let mut grads: Vec<Array2<f32>> = shapes.iter().map(|&s| Array2::zeros(s)).collect();
        let mut views: Vec<_> = grads.iter_mut().map(|g| g.view_mut()).collect();
        plan.backward_into(&grad_out, &mut views).unwrap();
        let mut refs: Vec<Array2<f32>> = shapes.iter().map(|&s| Array2::zeros(s)).collect();
        let (mut at, mut col) = (0, 0);
        for (f, spec) in specs.iter().enumerate() {
            let lens = &lengths[f * batch..(f + 1) * batch];
            let n = lens.iter().sum::<i64>() as usize;
            let ids = &values[at..at + n];
            let d = shapes[spec.0].1;
            let single = match spec.2 {
                Some(k) => GatherReducePlan::new_skipping(shapes[spec.0], ids, k, Segments::lengths(lens), 0),
                None => GatherReducePlan::new(shapes[spec.0], ids, Segments::lengths(lens), 0),
            }
            .unwrap();
            let p = pool_of(spec, spec.4.then(|| &weights[at..at + n]));
            single
                .backward_into(&grad_out.slice(s![.., col..col + d]), p, &mut refs[spec.0])
                .unwrap();
            at += n;
            col += d;
        }
        for (g, r) in grads.iter().zip(&refs) {
            assert_eq!(g.mapv(f32::to_bits), r.mapv(f32::to_bits));
        }
    }
});
