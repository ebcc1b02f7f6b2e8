//! Criterion benches: the workloads W1-W9 of shared/BENCH-WORKLOADS.md, each in one group
//! with the crate's allocating call, its `_into` call into a reused output, the prepared
//! gather's `apply_into` (P3-P8) and the building of its plan, the memory-order variants
//! (`into_f_out`, `into_t_in`), and a
//! single-threaded memcpy of the output's bytes (the physical limit); plus a size sweep
//! and prepared gathers of runs of consecutive indices.
//!
//! `cargo bench -p ndarray-gather-benches --bench gather` runs everything; `-- W1` after it one
//! workload. Compare ratios within one run, not absolute times across runs.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ndarray::{Array, Array1, Axis};
use ndarray_gather::prelude::*;

#[path = "workloads.rs"]
mod workloads;

fn workload_groups(c: &mut Criterion) {
    for id in workloads::IDS {
        let mut w = workloads::build(id);
        let mut g = c.benchmark_group(w.id);
        g.throughput(Throughput::Bytes((w.out_bytes + w.idx_bytes) as u64));
        if w.out_bytes > 1 << 20 {
            g.sample_size(20)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(3));
        }
        g.bench_function("alloc", |b| b.iter(|| black_box((w.alloc)())));
        g.bench_function("into", |b| b.iter(&mut w.into));
        g.bench_function("plan_into", |b| b.iter(&mut w.plan_into));
        g.bench_function("plan_alloc", |b| b.iter(&w.plan_alloc));
        g.bench_function("plan_build", |b| b.iter(&w.plan_build));
        // W1, W3, W8 into a Fortran-order output, W3 from a transposed input.
        for (what, mut f) in workloads::orders(id) {
            g.bench_function(what, |b| b.iter(&mut f));
        }
        let src = vec![1.0f32; w.out_bytes / 4];
        let mut dst = vec![0.0f32; w.out_bytes / 4];
        g.bench_function("memcpy", |b| b.iter(|| dst.copy_from_slice(black_box(&src))));
        if id == "W7_tiny" {
            let x = ndarray::array![
                [0.0f32, 1.0, 2.0],
                [10.0, 11.0, 12.0],
                [20.0, 21.0, 22.0],
                [30.0, 31.0, 32.0]
            ];
            g.bench_function("ndarray_select", |b| {
                b.iter(|| black_box(black_box(&x).select(Axis(0), &[3, 1])))
            });
        }
        g.finish();
    }
    // W9: short rows along the last axis, against the slice loop that is its floor.
    for k in [4, 16, 64] {
        let mut g = c.benchmark_group(format!("W9_k{k}"));
        for (what, mut f) in workloads::w9(k) {
            g.bench_function(what, |b| b.iter(&mut f));
        }
        g.finish();
    }
}

/// Time against output size, element gather and block gather, 4 KiB to 256 MiB
/// (`SWEEP_MAX_MIB` lowers the top): it should grow linearly, with no cliff at the
/// parallel threshold.
fn sweep(c: &mut Criterion) {
    let max = std::env::var("SWEEP_MAX_MIB")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(256);
    let mut g = c.benchmark_group("sweep");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    let mut bytes = 4 << 10;
    while bytes <= max << 20 {
        let n = bytes / 4;
        g.throughput(Throughput::Bytes(bytes as u64));
        let x = Array1::from_iter((0..n).map(|i| i as f32));
        let ids = Array1::from(workloads::indices(n, n, 9));
        let mut out = Array1::<f32>::zeros(n);
        g.bench_with_input(BenchmarkId::new("element_into", bytes), &bytes, |b, _| {
            b.iter(|| x.gather_multiaxis_into(&ids, &[0], &mut out).unwrap())
        });
        let rows = (n / 256).max(1);
        let table = Array::from_shape_fn((rows, 1, 256), |(i, _, j)| (i + j) as f32);
        let rids = Array::from_shape_vec((1, rows, 1), workloads::indices(rows, rows, 10)).unwrap();
        let mut bout = Array::<f32, _>::zeros((1, rows, 256));
        g.bench_with_input(BenchmarkId::new("block_into", bytes), &bytes, |b, _| {
            b.iter(|| table.gather_multiaxis_into(&rids, &[0], &mut bout).unwrap())
        });
        bytes *= 4;
    }
    g.finish();
}

/// A prepared `take_along_axis` over W3's [2048, 2048] whose indices shuffle runs of
/// `run` consecutive columns (patches), against a memcpy of the output: runs of 8 or more
/// are copied as blocks.
fn runs(c: &mut Criterion) {
    let mut g = c.benchmark_group("runs");
    g.sample_size(20);
    let x = Array::from_shape_fn((2048, 2048), |(i, j)| (i * 2048 + j) as f32);
    let mut out = Array::<f32, _>::zeros((2048, 2048));
    for run in [1, 2, 4, 8, 16, 2048] {
        let blocks = 2048 / run;
        let ids = Array::from_shape_fn((2048, 2048), |(i, j)| {
            (((j / run) * 7919 + i * 31) % blocks * run + j % run) as i64
        });
        let plan = GatherPlan::take_along_axis([2048, 2048], &ids, 1).unwrap();
        g.bench_with_input(BenchmarkId::new("plan_into", run), &run, |b, _| {
            b.iter(|| plan.apply_into(&x, &mut out).unwrap())
        });
    }
    let (src, mut dst) = (vec![1f32; 2048 * 2048], vec![0f32; 2048 * 2048]);
    g.bench_function("memcpy", |b| b.iter(|| dst.copy_from_slice(black_box(&src))));
    g.finish();
}

criterion_group!(workloads_group, workload_groups);
criterion_group!(sizes, sweep, runs);
criterion_main!(workloads_group, sizes);
