//! Embedding bags and a graph layer on a table sharded over MPI ranks:
//! `mpirun -n 2 cargo run --release --features mpi --example sharded_bags`.
//!
//! Each rank holds an even share of a [100_000, 64] table's rows, pools its own batch of
//! bags (ids anywhere in the table), aggregates a graph's messages by destination, and
//! checks the bags against the whole table gathered on one rank. Every call is collective.

use mpi::traits::*;
use ndarray::Array2;
use ndarray_gather::prelude::*;
use ndarray_gather::shard::mpi;
use ndarray_gather::shard::{Rows, ShardedTable};

fn main() -> Result<(), GatherError> {
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let (rank, ranks) = (world.rank() as usize, world.size() as usize);
    let (n, width) = (100_000, 64);
    let value = |i: usize, j: usize| ((i * 31 + j * 7) % 1000) as f32 / 1000.0;
    let rows = Rows::even(n, ranks);
    let mine = rows.range(rank);
    let local = Array2::from_shape_fn((mine.len(), width), |(i, j)| value(mine.start + i, j));
    let table = ShardedTable::new(&world, local, rows)?;

    // This rank's batch: 4096 bags of 1..=32 ids (a different batch on every rank).
    let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ rank as u64;
    let mut next = |m: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize % m
    };
    let (mut ids, mut starts) = (Vec::new(), Vec::new());
    for _ in 0..4096 {
        starts.push(ids.len() as i64);
        for _ in 0..1 + next(32) {
            ids.push(next(n) as i64);
        }
    }
    let bags = table.gather_reduce(&ids, Segments::starts(&starts), Pooling::Sum)?;
    let bag_traffic = table.traffic();

    // The same bags on the whole table, on this rank alone: Max is bit for bit the
    // single-process result on any number of ranks; Sum differs only in the order in
    // which the owners' partial sums are added (rank order).
    let whole = Array2::from_shape_fn((n, width), |(i, j)| value(i, j));
    let (m, arg) = table.gather_reduce_arg(&ids, Segments::starts(&starts), Pooling::Max)?;
    let (m1, arg1) = whole.gather_reduce_arg(&ids, Segments::starts(&starts), 0, Pooling::Max)?;
    assert!(
        m == m1 && arg == arg1,
        "rank {rank}: max differs from the single-process call"
    );
    let single = whole.gather_reduce(&ids, Segments::starts(&starts), 0, Pooling::Sum)?;
    let worst = (&bags - &single).iter().fold(0f32, |a, d| a.max(d.abs()));

    // A graph layer: mean of the features of each edge's source, by destination.
    let edges = 200_000;
    let src: Vec<i64> = (0..edges).map(|_| next(n) as i64).collect();
    let dst: Vec<i64> = (0..edges).map(|_| next(1000) as i64).collect();
    let h = table.gather_reduce(&src, Segments::ids(&dst, 1000), Pooling::Mean)?;
    println!(
        "rank {rank}/{ranks}: {} bags (sum within {worst:e} of one process, max equal), \
         sent {} B and received {} B for them; graph layer {:?}",
        bags.nrows(),
        bag_traffic.sent,
        bag_traffic.received,
        h.dim()
    );
    Ok(())
}
