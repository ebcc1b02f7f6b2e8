//! Median times of the scatter workloads S1-S5, S8 of shared/BENCH-WORKLOADS.md, one line
//! each: `id variant median_ns`, variants `scatter` (the crate's call; the destination is
//! reset before each call, untimed) and `memcpy` (one thread copying the updates' bytes;
//! for S5 the indices'). `benches/peers/scatter_peers.py` prints the same lines for NumPy
//! and ONNX Runtime.
//!
//! `cargo run --release --example scatter_workloads [ID...]`

use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "../benches/workloads.rs"]
mod workloads;

/// The median of enough runs of `f` to fill about `budget` (at least 5); `f` returns the
/// time of its own timed part.
fn median(budget: Duration, mut f: impl FnMut() -> Duration) -> f64 {
    f();
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 1_000_000) {
        times.push(f().as_nanos());
    }
    times.sort_unstable();
    times[times.len() / 2] as f64
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    for id in workloads::SCATTER_IDS
        .iter()
        .filter(|id| args.is_empty() || args.iter().any(|a| id.starts_with(a.as_str())))
    {
        let (mut w, bytes) = workloads::build_scatter(id);
        // Calls far below a microsecond are timed in batches of 1000, resets timed apart
        // and subtracted; others one by one after an untimed reset.
        let batch = if *id == "S4_tiny" { 1000 } else { 1 };
        let ns = if batch == 1 {
            median(Duration::from_millis(1500), || {
                w.reset();
                let t = Instant::now();
                w.call();
                t.elapsed()
            })
        } else {
            let mut time = |call: bool| {
                median(Duration::from_millis(500), || {
                    let t = Instant::now();
                    for _ in 0..batch {
                        w.reset();
                        if call {
                            w.call();
                        }
                    }
                    t.elapsed()
                })
            };
            let (both, reset) = (time(true), time(false));
            (both - reset).max(0.0) / batch as f64
        };
        println!("{id} scatter {ns:.1}");
        let (src, mut dst) = (vec![1u8; bytes], vec![0u8; bytes]);
        let m = median(Duration::from_millis(800), || {
            let t = Instant::now();
            for _ in 0..batch {
                dst.copy_from_slice(black_box(&src));
            }
            t.elapsed()
        });
        println!("{id} memcpy {:.1}", m / batch as f64);
    }
}
