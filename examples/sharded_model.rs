//! A DLRM-shaped model sharded per table over MPI ranks, planned, served and trained:
//! `mpirun -n 2 cargo run --release --features mpi --example sharded_model`.
//!
//! Seven tables of every size, eight features (two share a table). The planner places
//! them under a memory cap per rank (the largest goes row-wise or column-wise, tiny hot
//! ones are replicated, the rest table-wise); each rank loads only its blocks, serves its
//! own batch (checked against the single-process collection on the whole tables), then
//! trains with a fused row-wise Adagrad step until the loss has fallen.

use mpi::traits::*;
use ndarray::{Array2, s};
use ndarray_gather::bags::{Collection, Jagged};
use ndarray_gather::optim::RowwiseAdagrad;
use ndarray_gather::prelude::*;
use ndarray_gather::shard::{Placement, Planner, ShardedCollection, mpi};

/// Table `t`'s value at `(i, j)`: what a checkpoint would load.
fn value(t: usize, i: usize, j: usize) -> f32 {
    (((t * 7919 + i * 31 + j * 7) % 1000) as f32 - 500.0) / 5000.0
}

fn main() -> Result<(), GatherError> {
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let (me, ranks) = (world.rank() as usize, world.size() as usize);
    let tables = [
        (400_000, 64),
        (60_000, 32),
        (20_000, 32),
        (5_000, 16),
        (1_000, 16),
        (300, 8),
        (100, 8),
    ];
    let features = [
        (0, 20.0),
        (1, 4.0),
        (2, 2.0),
        (3, 1.0),
        (4, 1.0),
        (5, 3.0),
        (6, 1.0),
        (1, 2.0),
    ];
    let mut model = Collection::new();
    for &(n, d) in &tables {
        model = model.table(n, d);
    }
    for (f, &(t, _)) in features.iter().enumerate() {
        model = model.feature(t, if f % 3 == 1 { Pooling::Mean } else { Pooling::Sum });
    }
    let batch = 2048;
    let ids: Vec<f64> = features.iter().map(|f| f.1).collect();
    // 80 MB per rank: the 102 MB table (with its row-wise Adagrad state) fits none whole.
    let planner = Planner::new(ranks)
        .memory_per_rank(80 << 20)
        .batch(batch)
        .ids_per_bag(&ids)
        .optimizer_bytes_per_row(4);
    let placements = planner.plan(&model)?;
    let per_rank = planner.estimate(&model, &placements)?;
    if me == 0 {
        for (t, p) in placements.iter().enumerate() {
            println!("table {t} {:?}: {p:?}", tables[t]);
        }
        for (r, e) in per_rank.iter().enumerate() {
            println!(
                "rank {r}: reads {} MB, sends {} MB, holds {} MB a step (estimated)",
                e.read >> 20,
                e.sent >> 20,
                e.memory >> 20
            );
        }
    }
    // Each rank loads only its blocks.
    let shards = Placement::shards(&placements, &model, me);
    let blocks: Vec<Array2<f32>> = shards
        .iter()
        .map(|s| {
            Array2::from_shape_fn((s.rows.len(), s.cols.len()), |(i, j)| {
                value(s.table, s.rows.start + i, s.cols.start + j)
            })
        })
        .collect();
    let mut sc = ShardedCollection::new(&world, &model, &placements, blocks)?;

    // This rank's batch: each feature's bags of about its ids per bag, feature-major.
    let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ me as u64;
    let mut next = |m: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize % m.max(1)
    };
    let (mut values, mut lengths) = (Vec::new(), Vec::new());
    for &(t, hot) in &features {
        for _ in 0..batch {
            let len = 1 + next(2 * hot as usize);
            lengths.push(len as i64);
            values.extend((0..len).map(|_| next(tables[t].0) as i64));
        }
    }
    let jagged = Jagged::lengths(&values, &lengths, batch)?;

    // Serving: this rank's [2048, 208], checked where decision 62 says bits.
    let out = sc.gather_reduce(&jagged)?;
    let whole: Vec<Array2<f32>> = tables
        .iter()
        .enumerate()
        .map(|(t, &(n, d))| Array2::from_shape_fn((n, d), |(i, j)| value(t, i, j)))
        .collect();
    let single = model.gather_reduce(&whole, &jagged)?;
    let mut at = 0;
    for &(t, _) in &features {
        let d = tables[t].1;
        let (a, b) = (out.slice(s![.., at..at + d]), single.slice(s![.., at..at + d]));
        match placements[t] {
            Placement::Rows(_) => assert!(
                a.iter()
                    .zip(b)
                    .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()))
            ),
            _ => assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())),
        }
        at += d;
    }
    if me == 0 {
        println!(
            "served [{batch}, {}] on rank 0: {} KB sent, {} KB received",
            out.ncols(),
            sc.traffic().sent >> 10,
            sc.traffic().received >> 10
        );
    }

    // Training: pull every pooled row towards 0.1 (loss ½‖out − 0.1‖²), one fused step a
    // batch, one optimizer per block this rank holds.
    let mut opts: Vec<RowwiseAdagrad> = shards
        .iter()
        .map(|s| RowwiseAdagrad::new(s.rows.len(), 0.01))
        .collect();
    let plan = sc.plan(&jagged)?;
    let mut first = None;
    for step in 0..8 {
        let out = plan.apply(&sc)?;
        let grad = out.mapv(|v| v - 0.1);
        let mine = grad.iter().map(|g| (g * g) as f64).sum::<f64>() / 2.0;
        let mut loss = 0.0;
        world.all_reduce_into(&mine, &mut loss, mpi::collective::SystemOperation::sum());
        if me == 0 {
            println!("step {step}: loss {loss:.2}");
        }
        first.get_or_insert(loss);
        plan.step(&grad, &mut sc, &mut opts)?;
    }
    let last = plan
        .apply(&sc)?
        .mapv(|v| v - 0.1)
        .iter()
        .map(|g| (g * g) as f64)
        .sum::<f64>()
        / 2.0;
    let mut loss = 0.0;
    world.all_reduce_into(&last, &mut loss, mpi::collective::SystemOperation::sum());
    assert!(
        loss < 0.5 * first.unwrap_or(f64::MAX),
        "the loss fell from {first:?} to {loss}"
    );
    if me == 0 {
        println!("trained: loss {:.2} -> {loss:.2}", first.unwrap_or(0.0));
    }
    Ok(())
}
