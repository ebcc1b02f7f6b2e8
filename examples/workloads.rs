//! Median times of the benchmark workloads W1-W8, one line each, for the peer comparison
//! (`benches/peers/compare.sh`); `cargo run --release --example workloads [ID...]`.
//!
//! Each line: `id variant median_ns`, variants `alloc`, `into`, `plan_into` and
//! `plan_build` (the prepared gather, P3-P8, and building its plan), `memcpy` (a
//! single-threaded copy of the output's bytes) and `memcpy2` (the same copy split in two
//! halves over two threads, one of them spawned for the copy; not for W7); for W1, W3
//! and W8 also `into_f_out` (into a Fortran-order output) and for W3 `into_t_in` (from a
//! transposed input).
//! `workloads W9` times W9 at 4, 16 and 64 indices per row: `method`, `plan_into`,
//! `plan_alloc` and `slice_loop` (the floor: a plain loop over contiguous slices).

use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "../benches/workloads.rs"]
mod workloads;

/// The median of enough runs to fill about `budget` (at least 5).
fn median(budget: Duration, mut f: impl FnMut()) -> u128 {
    f();
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 1_000_000) {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_nanos());
    }
    times.sort_unstable();
    times[times.len() / 2]
}

/// For calls far below a microsecond, the median of batches of 1000, divided.
fn median_tiny(f: &mut impl FnMut()) -> f64 {
    let batch = 1000;
    median(Duration::from_millis(500), || {
        for _ in 0..batch {
            f();
        }
    }) as f64
        / batch as f64
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let budget = Duration::from_millis(1500);
    // W9 (not in `IDS`: three row lengths, and a slice loop for its floor), by name only.
    if args.iter().any(|a| a.starts_with("W9")) {
        for k in [4, 16, 64] {
            for (what, mut f) in workloads::w9(k) {
                let ns = median(budget, || {
                    for _ in 0..20 {
                        f();
                    }
                }) as f64
                    / 20.0;
                println!("W9_k{k} {what} {ns:.1}");
            }
        }
    }
    for id in workloads::IDS
        .iter()
        .filter(|id| args.is_empty() || args.iter().any(|a| id.starts_with(a.as_str())))
    {
        let mut w = workloads::build(id);
        let src = workloads::numpy_like(w.out_bytes / 4, |_| 1.0f32);
        let mut dst = workloads::numpy_like(w.out_bytes / 4, |_| 0.0f32);
        let alloc = &w.alloc;
        let build = &w.plan_build;
        let plan_alloc = &w.plan_alloc;
        let (a, i, p, pa, b, m) = if *id == "W7_tiny" {
            (
                median_tiny(&mut || drop(black_box(alloc()))),
                median_tiny(&mut w.into),
                median_tiny(&mut w.plan_into),
                median_tiny(&mut || plan_alloc()),
                median_tiny(&mut || build()),
                median_tiny(&mut || dst.copy_from_slice(black_box(&src))),
            )
        } else {
            (
                median(budget, || drop(black_box(alloc()))) as f64,
                median(budget, &mut w.into) as f64,
                median(budget, &mut w.plan_into) as f64,
                median(budget, plan_alloc) as f64,
                median(budget, build) as f64,
                median(budget, || dst.copy_from_slice(black_box(&src))) as f64,
            )
        };
        println!("{id} alloc {a:.1}");
        println!("{id} into {i:.1}");
        println!("{id} plan_into {p:.1}");
        println!("{id} plan_alloc {pa:.1}");
        println!("{id} plan_build {b:.1}");
        println!("{id} memcpy {m:.1}");
        for (what, mut f) in workloads::orders(id) {
            println!("{id} {what} {:.1}", median(budget, &mut f) as f64);
        }
        if *id != "W7_tiny" {
            let half = src.len() / 2;
            let m2 = median(budget, || {
                let ((d0, d1), (s0, s1)) = (dst.split_at_mut(half), src.split_at(half));
                std::thread::scope(|s| {
                    s.spawn(|| d1.copy_from_slice(black_box(s1)));
                    d0.copy_from_slice(black_box(s0));
                });
            });
            println!("{id} memcpy2 {:.1}", m2 as f64);
        }
    }
}
