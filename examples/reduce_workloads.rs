//! Median times of the gather-reduce workloads B1-B4, G1-G4, R1 of
//! shared/BENCH-WORKLOADS.md, one line each: `id variant median_ns`, variants `alloc`,
//! `into`, `plan_into`, `plan_build` (the crate), `hand1` / `hand2` (hand-written fused
//! Rust loops on one and two threads) and `memcpy` (one thread copying the output's
//! bytes). `benches/peers/reduce_peers.py` prints the same lines for PyTorch.
//!
//! `cargo run --release --example reduce_workloads [ID...]`

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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
