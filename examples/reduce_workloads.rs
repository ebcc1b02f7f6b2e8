//! Median times of the gather-reduce workloads B1-B4, G1-G4, R1 of
//! shared/BENCH-WORKLOADS.md, one line each: `id variant median_ns`, variants `alloc`,
//! `into`, `plan_into`, `plan_build` (the crate), `hand1` / `hand2` (hand-written fused
//! Rust loops on one and two threads) and `memcpy` (one thread copying the output's
//! bytes). `benches/peers/reduce_peers.py` prints the same lines for PyTorch.
//!
//! `cargo run --release --example reduce_workloads [ID...]`
//!
//! `cargo run --release --example reduce_workloads -- --peak G1` (or `B1`) instead prints
//! the growth of the process's peak memory (VmHWM, Linux) during one allocating call,
//! against the output's bytes and the bytes a gather would have materialized; one
//! workload per process, so that each peak is its own.

use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "../benches/reduce_workloads.rs"]
mod reduce_workloads;

/// The median of enough runs of `f` to fill about `budget` (at least 5).
fn median(budget: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 10_000) {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_nanos());
    }
    times.sort_unstable();
    times[times.len() / 2] as f64
}

fn peak_kib() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--peak") {
        let id = args.get(1).map_or("G1", String::as_str);
        let mut w = reduce_workloads::build_reduce(if id == "B1" { "B1_bag_sum" } else { "G1_graph_sum" });
        let (_, alloc) = w
            .variants
            .iter_mut()
            .find(|(name, _)| *name == "alloc")
            .expect("an allocating call");
        let before = peak_kib();
        alloc();
        let after = peak_kib();
        let mib = |bytes: usize| bytes as f64 / (1 << 20) as f64;
        println!(
            "{id}: output {:.1} MiB, a gather would materialize {:.1} MiB",
            mib(w.out_bytes),
            mib(w.gathered_bytes)
        );
        if let (Some(b), Some(a)) = (before, after) {
            println!(
                "growth of the peak during the call {:.1} MiB",
                (a - b) as f64 / 1024.0
            );
        }
        return;
    }
    for id in reduce_workloads::REDUCE_IDS
        .iter()
        .filter(|id| args.is_empty() || args.iter().any(|a| id.starts_with(a.as_str())))
    {
        let mut w = reduce_workloads::build_reduce(id);
        for (name, f) in &mut w.variants {
            println!("{id} {name} {:.1}", median(Duration::from_millis(1500), f));
        }
        let (src, mut dst) = (vec![1u8; w.out_bytes], vec![0u8; w.out_bytes]);
        let m = median(Duration::from_millis(500), || {
            dst.copy_from_slice(black_box(&src))
        });
        println!("{id} memcpy {m:.1}");
    }
}
