//! A small DLRM-shaped batch served and trained through one `bags::Collection`: four
//! tables (two `f32`, one stored as Int8 rows, one shared by two features), five features,
//! 64 samples with 1-8 ids per (feature, sample); the pooled rows side by side, as
//! TorchRec's `EmbeddingBagCollection` gives its `KeyedTensor`, then a training step's
//! gradient rows per table.
//!
//! `cargo run --release --example dlrm`

use ndarray::Array2;
use ndarray_gather::bags::{Collection, Jagged, Table};
use ndarray_gather::prelude::*;
use ndarray_gather::quant::{QTable, Rowwise};

fn main() -> Result<(), GatherError> {
    let mut seed = 7_u64;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize % n
    };
    let shapes = [(10_000, 16), (500, 8), (100_000, 32), (50, 4)];
    let tables: Vec<Array2<f32>> = shapes
        .iter()
        .map(|&(n, d)| Array2::from_shape_fn((n, d), |(r, c)| ((r * 31 + c * 7) % 97) as f32 / 97.0 - 0.5))
        .collect();
    // The largest table is served from Int8 rows: 40 bytes a row instead of 128.
    let int8 = Rowwise::Int8.quantize(&tables[2])?;
    let served = [
        Table::from(tables[0].view()),
        Table::from(tables[1].view()),
        Table::from(QTable::new(&int8, Rowwise::Int8)?),
        Table::from(tables[3].view()),
    ];
    let model = shapes
        .iter()
        .fold(Collection::new(), |c, &(n, d)| c.table(n, d))
        .feature(0, Pooling::Sum)
        .feature(1, Pooling::Mean)
        .feature(2, Pooling::Sum.skip(-1)) // FBGEMM's pruned ids are -1
        .feature(3, Pooling::Max)
        .weighted_feature(0, Pooling::Sum); // a second feature of table 0, with per-id weights
    let batch = 64;
    let (mut values, mut lengths) = (Vec::new(), Vec::new());
    for (f, t) in [0, 1, 2, 3, 0].into_iter().enumerate() {
        for _ in 0..batch {
            let l = 1 + next(8);
            lengths.push(l as i64);
            // (Feature 2's pruned ids are -1, which it skips.)
            values.extend((0..l).map(|_| {
                if f == 2 && next(20) == 0 {
                    -1
                } else {
                    next(shapes[t].0) as i64
                }
            }));
        }
    }
    let weights: Vec<f32> = (0..values.len()).map(|p| 0.5 + (p % 3) as f32 * 0.25).collect();
    let jagged = Jagged::lengths(&values, &lengths, batch)?.weighted(&weights);
    let out = model.gather_reduce(&served, &jagged)?;
    println!(
        "serving: {} samples -> {:?} (feature columns 16 + 8 + 32 + 4 + 16)",
        batch,
        out.dim()
    );
    println!(
        "sample 0, first feature's first values: {:?}",
        &out.row(0).to_vec()[..4]
    );

    // Training on the f32 tables (Max has no backward: a training model sums or averages).
    let train = Collection::new()
        .table(shapes[0].0, shapes[0].1)
        .table(shapes[1].0, shapes[1].1)
        .feature(0, Pooling::Sum)
        .feature(1, Pooling::Mean)
        .weighted_feature(0, Pooling::Sum);
    let keep: Vec<usize> = [0, 1, 4]
        .iter()
        .flat_map(|&f| f * batch..(f + 1) * batch)
        .collect();
    let lens: Vec<i64> = keep.iter().map(|&b| lengths[b]).collect();
    let starts: Vec<usize> = lengths
        .iter()
        .scan(0, |at, &l| {
            let s = *at;
            *at += l as usize;
            Some(s)
        })
        .collect();
    let ids: Vec<i64> = keep
        .iter()
        .flat_map(|&b| values[starts[b]..starts[b] + lengths[b] as usize].to_vec())
        .collect();
    let w: Vec<f32> = keep
        .iter()
        .flat_map(|&b| weights[starts[b]..starts[b] + lengths[b] as usize].to_vec())
        .collect();
    let plan = train.plan(&Jagged::lengths(&ids, &lens, batch)?.weighted(&w))?; // checked and sorted once
    let pooled = plan.apply(&[tables[0].view(), tables[1].view()])?;
    let grad_out = pooled.mapv(|v| v * 0.01); // a stand-in for the model's gradient
    for (t, (rows, grads)) in plan.backward_rows(&grad_out)?.iter().enumerate() {
        println!(
            "table {t}: {} touched rows, gradient {:?}",
            rows.len(),
            grads.dim()
        );
    }
    Ok(())
}
