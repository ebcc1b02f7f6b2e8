//! The sharded workloads D1-D3 of shared/BENCH-WORKLOADS.md, one machine:
//! `cargo build --release -p ndarray-gather-benches --features mpi --example sharded`, then
//! `RAYON_NUM_THREADS=1 mpirun -n R --oversubscribe target/release/examples/sharded [D1|D2|D3|local]`.
//!
//! D1: B1's table (1M x 64 f32) sharded by `Rows::even`, each rank 8192 of B1's bags
//! (rank r the bags `8192 r..` of B1's 16384, wrapping), `gather_reduce` (Sum). D2: G2's
//! graph (100k nodes, 1M edges) sharded by `Rows::even`, each rank the edges whose `dst` it
//! owns, a `ShardedPlan`'s `apply_into` (Mean). D3: `scatter` (Add) of D1's gradient rows
//! (one row per position). `local`: each rank's own single-process calls on its batch,
//! with the whole table (rank 0 only prints: the local time a rank's work takes). Each
//! line: the workload, the rank count, the median over the ranks' slowest of each
//! iteration (ms), and this rank's traffic (bytes sent / received per call).

use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::traits::*;
use ndarray::Array2;
use ndarray_gather::prelude::*;
use ndarray_gather::shard::{Rows, ShardedTable};

#[path = "reduce_workloads.rs"]
mod workloads;
use workloads::{WIDTH, uniform};

/// The median over iterations of the slowest rank's time, in ms.
fn time<C: CommunicatorCollectives>(comm: &C, iterations: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        comm.barrier();
        let t = Instant::now();
        f();
        let mine = t.elapsed().as_secs_f64() * 1e3;
        let mut slowest = 0.0f64;
        comm.all_reduce_into(&mine, &mut slowest, SystemOperation::max());
        times.push(slowest);
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// B1's table's row `i` (values in `[0, 1)`, as the workloads' table).
fn value(i: usize, j: usize) -> f32 {
    ((i * 131 + j * 7) % 1021) as f32 / 1021.0
}

fn main() {
    let universe = mpi::initialize().expect("MPI initializes");
    let world = universe.world();
    let (me, ranks) = (world.rank() as usize, world.size() as usize);
    let which = std::env::args().nth(1).unwrap_or_else(|| "D1".into());
    let iterations: usize = std::env::var("ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(21);
    let print = |line: String| {
        if me == 0 {
            println!("{line}");
        }
    };
    if which == "D1" || which == "D3" || which == "local" {
        let n = 1_000_000;
        let rows = Rows::even(n, ranks);
        let mine = rows.range(me);
        let local = Array2::from_shape_fn((mine.len(), WIDTH), |(i, j)| value(mine.start + i, j));
        let mut table = ShardedTable::new(&world, local, rows).unwrap();
        // B1's bags (lengths 1..=64) and ids; this rank's 8192 of them.
        let lens: Vec<i64> = uniform(16384, 64, 11).into_iter().map(|l| l + 1).collect();
        let total: usize = lens.iter().map(|&l| l as usize).sum();
        let ids = uniform(total, n, 12);
        let mut at = vec![0usize];
        for &l in &lens {
            at.push(at.last().unwrap() + l as usize);
        }
        let first = (8192 * me) % 16384;
        let my_ids: Vec<i64> = ids[at[first]..at[first + 8192]].to_vec();
        let starts: Vec<i64> = (first..first + 8192)
            .map(|b| (at[b] - at[first]) as i64)
            .collect();
        match which.as_str() {
            "D1" => {
                let ms = time(&world, iterations, || {
                    std::hint::black_box(
                        table
                            .gather_reduce(&my_ids, Segments::starts(&starts), Pooling::Sum)
                            .unwrap(),
                    );
                });
                let t = table.traffic();
                print(format!(
                    "D1 ranks {ranks} {ms:.3} ms  rank0 sent {} received {}",
                    t.sent, t.received
                ));
            }
            "D3" => {
                let grads = Array2::from_elem((my_ids.len(), WIDTH), 1e-3f32);
                let ms = time(&world, iterations, || {
                    table.scatter(&my_ids, &grads, reduce::Add).unwrap()
                });
                let t = table.traffic();
                print(format!(
                    "D3 ranks {ranks} {ms:.3} ms  rank0 sent {} received {}",
                    t.sent, t.received
                ));
            }
            _ => {
                // The same batch on the whole table, this rank alone (its local work).
                let whole = Array2::from_shape_fn((n, WIDTH), |(i, j)| value(i, j));
                let mut out = Array2::<f32>::zeros((8192, WIDTH));
                let ms = time(&world, iterations, || {
                    whole
                        .gather_reduce_into(&my_ids, Segments::starts(&starts), 0, Pooling::Sum, &mut out)
                        .unwrap()
                });
                let alloc = time(&world, iterations, || {
                    std::hint::black_box(
                        whole
                            .gather_reduce(&my_ids, Segments::starts(&starts), 0, Pooling::Sum)
                            .unwrap(),
                    );
                });
                print(format!(
                    "local D1-batch ranks {ranks} {ms:.3} ms into, {alloc:.3} ms allocating (single-process calls)"
                ));
            }
        }
    } else if which == "D2" {
        let (nodes, edges) = (100_000, 1_000_000);
        let rows = Rows::even(nodes, ranks);
        let mine = rows.range(me);
        let local = Array2::from_shape_fn((mine.len(), WIDTH), |(i, j)| value(mine.start + i, j));
        let table = ShardedTable::new(&world, local, rows.clone()).unwrap();
        let src = uniform(edges, nodes, 21);
        let dst = uniform(edges, nodes, 22);
        // This rank's edges: those whose destination it owns, destinations renumbered
        // to its own rows.
        let keep: Vec<usize> = (0..edges)
            .filter(|&e| rows.owner(dst[e] as usize) == Some(me))
            .collect();
        let my_src: Vec<i64> = keep.iter().map(|&e| src[e]).collect();
        let my_dst: Vec<i64> = keep.iter().map(|&e| dst[e] - mine.start as i64).collect();
        let build = Instant::now();
        let plan = table.plan(&my_src, Segments::ids(&my_dst, mine.len())).unwrap();
        let build = build.elapsed().as_secs_f64() * 1e3;
        let mut h = Array2::<f32>::zeros((mine.len(), WIDTH));
        let ms = time(&world, iterations, || {
            plan.apply_into(&table, Pooling::Mean, &mut h).unwrap()
        });
        let t = plan.traffic();
        print(format!(
            "D2 ranks {ranks} {ms:.3} ms (plan build {build:.1} ms on rank 0)  rank0 sent {} received {}",
            t.sent, t.received
        ));
    }
}
