//! Peak memory of the W1 embedding lookup ([50000, 256] f32 table, [64, 512] i64 ids,
//! output [64, 512, 256]), against the sizes of input, indices and output.
//!
//! `cargo run --release --example w1_peak` (Linux: reads VmHWM from /proc/self/status).

use ndarray::Array;
use ndarray_gather::prelude::*;

fn peak_kib() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let table = Array::from_shape_fn((50000, 256), |(i, j)| (i * 256 + j) as f32);
    let ids = Array::from_shape_fn((64, 512), |(i, j)| ((i * 7919 + j * 104729) % 50000) as i64);
    let before = peak_kib();
    let out = table.gather(&ids, 0).expect("W1 is valid");
    let after = peak_kib();
    let mib = |bytes: usize| bytes as f64 / (1 << 20) as f64;
    println!("input   {:8.1} MiB", mib(table.len() * 4));
    println!("indices {:8.1} MiB", mib(ids.len() * 8));
    println!("output  {:8.1} MiB", mib(out.len() * 4));
    if let (Some(b), Some(a)) = (before, after) {
        println!(
            "peak RSS before the call {:8.1} MiB, after {:8.1} MiB",
            b as f64 / 1024.0,
            a as f64 / 1024.0
        );
        println!("growth during the call   {:8.1} MiB", (a - b) as f64 / 1024.0);
    }
    std::hint::black_box(out);
}
