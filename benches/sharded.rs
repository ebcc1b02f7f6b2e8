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
//! K3: K1's collection on R ranks (each `4096 / R` samples), the planner's placements and
//! every table row-wise; `K1local` (`mpirun -n 1`) the single-process K1 call.

use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::traits::*;
use ndarray::Array2;
use ndarray_gather::bags::{Collection, Jagged};
use ndarray_gather::prelude::*;
use ndarray_gather::shard::{Placement, Planner, Rows, ShardedCollection, ShardedTable};

#[path = "reduce_workloads.rs"]
mod workloads;
use workloads::{WIDTH, dlrm_batch, uniform};

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
    } else if which == "K3" || which == "K1local" {
        k3(&world, &which, iterations);
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

/// K3: K1's 26 tables and batch, each rank `4096 / R` of its samples (rank r the samples
/// `r · 4096 / R ..`), a `ShardedCollection`'s `gather_reduce` and its plan's
/// `apply_into`, with the planner's placements and with every table row-wise. `K1local`
/// (on one rank): the single-process `Collection` call on K1's whole batch.
fn k3<C: CommunicatorCollectives>(world: &C, which: &str, iterations: usize) {
    let (me, ranks) = (world.rank() as usize, world.size() as usize);
    let (sizes, values, lengths, batch) = dlrm_batch();
    let mut model = Collection::new();
    for &n in &sizes {
        model = model.table(n, WIDTH);
    }
    for t in 0..sizes.len() {
        model = model.feature(t, Pooling::Sum);
    }
    let table_value = |t: usize, i: usize, j: usize| value(i + 7 * t, j);
    if which == "K1local" {
        let tables: Vec<Array2<f32>> = sizes
            .iter()
            .enumerate()
            .map(|(t, &n)| Array2::from_shape_fn((n, WIDTH), |(i, j)| table_value(t, i, j)))
            .collect();
        let jagged = Jagged::lengths(&values, &lengths, batch).unwrap();
        let ms = time(world, iterations, || {
            std::hint::black_box(model.gather_reduce(&tables, &jagged).unwrap());
        });
        if me == 0 {
            println!("K1 single process {ms:.3} ms");
        }
        return;
    }
    // This rank's samples of every feature.
    let (per, features) = (batch / ranks, sizes.len());
    let first = me * per;
    let (mut my_values, mut my_lengths) = (Vec::new(), Vec::new());
    let mut at = 0usize;
    for f in 0..features {
        for b in 0..batch {
            let l = lengths[f * batch + b] as usize;
            if (first..first + per).contains(&b) {
                my_lengths.push(l as i64);
                my_values.extend_from_slice(&values[at..at + l]);
            }
            at += l;
        }
    }
    let jagged = Jagged::lengths(&my_values, &my_lengths, per).unwrap();
    let mean_ids = lengths.iter().sum::<i64>() as f64 / lengths.len() as f64;
    let planned = Planner::new(ranks)
        .batch(per)
        .ids_per_bag(&vec![mean_ids; features])
        .plan(&model)
        .unwrap();
    let rowwise: Vec<Placement> = sizes
        .iter()
        .map(|&n| Placement::Rows(Rows::even(n, ranks)))
        .collect();
    for (name, placements) in [("planner", planned), ("row-wise", rowwise)] {
        let blocks: Vec<Array2<f32>> = Placement::shards(&placements, &model, me)
            .iter()
            .map(|s| {
                Array2::from_shape_fn((s.rows.len(), s.cols.len()), |(i, j)| {
                    table_value(s.table, s.rows.start + i, s.cols.start + j)
                })
            })
            .collect();
        let sc = ShardedCollection::new(world, &model, &placements, blocks).unwrap();
        let call = time(world, iterations, || {
            std::hint::black_box(sc.gather_reduce(&jagged).unwrap());
        });
        let t = sc.traffic();
        let build = Instant::now();
        let plan = sc.plan(&jagged).unwrap();
        let build = build.elapsed().as_secs_f64() * 1e3;
        let mut out = Array2::<f32>::zeros((per, model.width()));
        let apply = time(world, iterations, || plan.apply_into(&sc, &mut out).unwrap());
        let ta = sc.traffic();
        if me == 0 {
            println!(
                "K3 {name} ranks {ranks} call {call:.3} ms (rank0 sent {} received {}), plan apply {apply:.3} ms (sent {} received {}), plan build {build:.1} ms",
                t.sent, t.received, ta.sent, ta.received
            );
        }
    }
}
