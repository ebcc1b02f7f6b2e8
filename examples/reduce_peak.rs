//! Peak memory a gather-reduce call adds: G1 (a graph sum, 1M edges into [100000, 64] f32,
//! its ids sorted by the call) and B1 (embedding bags from a [1000000, 64] table), against
//! the sizes of output and of the rows a gather would have materialized.
//!
//! `cargo run --release --example reduce_peak [G1|B1]` (Linux: reads VmHWM from
//! /proc/self/status; one workload per process, so that each peak is its own).

use ndarray::{Array1, Array2};
use ndarray_gather::prelude::*;

#[path = "../benches/reduce_workloads.rs"]
mod reduce_workloads;

fn peak_kib() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "G1".into());
    let mib = |bytes: usize| bytes as f64 / (1 << 20) as f64;
    let (before, after, out_bytes, gathered) = if which == "B1" {
        let table = Array2::from_shape_fn((1_000_000, 64), |(r, c)| (r + c) as f32);
        let lens: Vec<i64> = reduce_workloads::uniform(16384, 64, 11)
            .into_iter()
            .map(|l| l + 1)
            .collect();
        let mut starts = Vec::new();
        let mut at = 0;
        for l in lens {
            starts.push(at);
            at += l;
        }
        let idx = Array1::from(reduce_workloads::uniform(at as usize, 1_000_000, 12));
        let before = peak_kib();
        let out = table
            .gather_reduce(&idx, Segments::starts(&starts), 0, Pooling::Sum)
            .unwrap();
        let after = peak_kib();
        (before, after, out.len() * 4, idx.len() * 64 * 4)
    } else {
        let x = Array2::from_shape_fn((100_000, 64), |(r, c)| (r + c) as f32);
        let src = Array1::from(reduce_workloads::uniform(1_000_000, 100_000, 21));
        let dst = Array1::from(reduce_workloads::uniform(1_000_000, 100_000, 22));
        let before = peak_kib();
        let out = x
            .gather_reduce(&src, Segments::ids(&dst, 100_000), 0, Pooling::Sum)
            .unwrap();
        let after = peak_kib();
        (before, after, out.len() * 4, src.len() * 64 * 4)
    };
    println!(
        "{which}: output {:8.1} MiB; a gather would have materialized {:8.1} MiB",
        mib(out_bytes),
        mib(gathered)
    );
    if let (Some(b), Some(a)) = (before, after) {
        println!(
            "growth of the peak during the call {:8.1} MiB",
            (a - b) as f64 / 1024.0
        );
    }
}
