//! The workloads W1-W8 of shared/BENCH-WORKLOADS.md, each in one criterion group with the
//! crate's allocating call, its `_into` call into a reused output, and a single-threaded
//! memcpy of the output's bytes (the physical limit), plus a size sweep.
//!
//! `cargo bench --bench gather` runs everything; `cargo bench --bench gather -- W1` one
//! workload. Compare ratios within a run, not absolute times across runs.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ndarray::{Array, Array1, ArrayD, ArrayView, Axis, IxDyn};
use ndarray_gather::prelude::*;

/// Deterministic uniform indices in `0..n` (a 64-bit LCG; fixed seed).
fn indices(count: usize, n: usize, seed: u64) -> Vec<i64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..count)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % n as u64) as i64
        })
        .collect()
}

fn data(shape: &[usize]) -> ArrayD<f32> {
    let n = shape.iter().product::<usize>();
    ArrayD::from_shape_vec(IxDyn(shape), (0..n).map(|i| (i % 65521) as f32).collect()).unwrap()
}

struct Workload<'a> {
    id: &'a str,
    out_bytes: usize,
    idx_bytes: usize,
}

/// One group: the allocating call, the `_into` call and a memcpy of the output bytes.
fn group<'a>(
    c: &mut Criterion,
    w: Workload<'a>,
    alloc: impl Fn() -> ArrayD<f32>,
    into: impl Fn(&mut ArrayD<f32>),
) {
    let mut g = c.benchmark_group(w.id);
    g.throughput(Throughput::Bytes((w.out_bytes + w.idx_bytes) as u64));
    if w.out_bytes > 1 << 20 {
        g.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    }
    let mut out = alloc();
    assert_eq!(out.len() * 4, w.out_bytes, "{}", w.id);
    g.bench_function("alloc", |b| b.iter(|| black_box(alloc())));
    g.bench_function("into", |b| b.iter(|| into(black_box(&mut out))));
    let src = vec![1.0f32; w.out_bytes / 4];
    let mut dst = vec![0.0f32; w.out_bytes / 4];
    g.bench_function("memcpy", |b| b.iter(|| dst.copy_from_slice(black_box(&src))));
    g.finish();
}

/// A Gather along `axis` as `gather_multiaxis_into`: the lowering users write for `_into`.
fn gather_into(input: &ArrayD<f32>, idx: &ArrayD<i64>, axis: usize, out: &mut ArrayD<f32>) {
    let q = idx.ndim();
    let r = input.ndim();
    let mut iv = input.view();
    for _ in 0..q {
        iv = iv.insert_axis(Axis(axis + 1));
    }
    let mut xv = idx.view();
    for _ in 0..=axis {
        xv = xv.insert_axis(Axis(0));
    }
    for _ in axis + 1..r {
        let end = xv.ndim();
        xv = xv.insert_axis(Axis(end));
    }
    let mut ov = out.view_mut().insert_axis(Axis(axis));
    iv.gather_multiaxis_into(&xv, &[axis], &mut ov).unwrap();
}

fn w1_embed(c: &mut Criterion) {
    let table = data(&[50000, 256]);
    let ids = Array::from_shape_vec((64, 512), indices(64 * 512, 50000, 1)).unwrap().into_dyn();
    let w = Workload { id: "W1_embed", out_bytes: 64 * 512 * 256 * 4, idx_bytes: 64 * 512 * 8 };
    group(c, w, || table.gather(&ids, 0).unwrap(), |out| gather_into(&table, &ids, 0, out));
}

fn w2_midaxis(c: &mut Criterion) {
    let x = data(&[64, 2048, 64]);
    let ids = Array1::from(indices(1024, 2048, 2)).into_dyn();
    let w = Workload { id: "W2_midaxis", out_bytes: 64 * 1024 * 64 * 4, idx_bytes: 1024 * 8 };
    group(c, w, || x.gather(&ids, 1).unwrap(), |out| gather_into(&x, &ids, 1, out));
}

fn elem(c: &mut Criterion, id: &str, axis: usize, seed: u64) {
    let x = data(&[2048, 2048]);
    let ids = Array::from_shape_vec((2048, 2048), indices(2048 * 2048, 2048, seed)).unwrap().into_dyn();
    let w = Workload { id, out_bytes: 2048 * 2048 * 4, idx_bytes: 2048 * 2048 * 8 };
    group(
        c,
        w,
        || x.take_along_axis(&ids, axis as isize).unwrap(),
        |out| x.gather_multiaxis_into(&ids, &[axis], out).unwrap(),
    );
}

fn w3_elem_last(c: &mut Criterion) {
    elem(c, "W3_elem_last", 1, 3);
}

fn w4_elem_first(c: &mut Criterion) {
    elem(c, "W4_elem_first", 0, 4);
}

fn w5_nd_pixels(c: &mut Criterion) {
    let x = data(&[1024, 1024, 4]);
    let n = 1_000_000;
    let ids = Array::from_shape_vec((n, 2), indices(2 * n, 1024, 5)).unwrap().into_dyn();
    let w = Workload { id: "W5_nd_pixels", out_bytes: n * 4 * 4, idx_bytes: n * 2 * 8 };
    // gather_nd lowers to input [1024, 1024, 4, 1] and indices [n, 1, 1, 2] on axes [0, 1].
    let iv = x.view().insert_axis(Axis(3));
    let xv = ids.view().insert_axis(Axis(1)).insert_axis(Axis(1));
    group(
        c,
        w,
        || x.gather_nd(&ids, 0).unwrap(),
        |out| {
            let mut ov = out.view_mut().insert_axis(Axis(1)).insert_axis(Axis(3));
            iv.gather_multiaxis_into(&xv, &[0, 1], &mut ov).unwrap()
        },
    );
}

fn w6_batched(c: &mut Criterion) {
    let x = data(&[32, 4096, 128]);
    let ids = Array::from_shape_vec((32, 512), indices(32 * 512, 4096, 6)).unwrap().into_dyn();
    let w = Workload { id: "W6_batched", out_bytes: 32 * 512 * 128 * 4, idx_bytes: 32 * 512 * 8 };
    // gather_batched(axis 1, batch_dims 1) lowers to input [32, 4096, 1, 128] and indices
    // [32, 1, 512, 1] on axis 1.
    let iv = x.view().insert_axis(Axis(2));
    let xv = ids.view().insert_axis(Axis(1)).insert_axis(Axis(3));
    group(
        c,
        w,
        || x.gather_batched(&ids, 1, 1).unwrap(),
        |out| {
            let mut ov = out.view_mut().insert_axis(Axis(1));
            iv.gather_multiaxis_into(&xv, &[1], &mut ov).unwrap()
        },
    );
}

fn w7_tiny(c: &mut Criterion) {
    let x = ndarray::array![[0.0f32, 1.0, 2.0], [10.0, 11.0, 12.0], [20.0, 21.0, 22.0], [30.0, 31.0, 32.0]];
    let ids = ndarray::array![3_i64, 1];
    let mut g = c.benchmark_group("W7_tiny");
    g.bench_function("alloc", |b| b.iter(|| black_box(black_box(&x).gather(black_box(&ids), 0).unwrap())));
    let iv = x.view().insert_axis(Axis(1));
    let xv = ids.view().insert_axis(Axis(0)).insert_axis(Axis(2));
    let mut out = Array::<f32, _>::zeros((1, 2, 3));
    g.bench_function("into", |b| {
        b.iter(|| black_box(&iv).gather_multiaxis_into(black_box(&xv), &[0], &mut out).unwrap())
    });
    g.bench_function("ndarray_select", |b| b.iter(|| black_box(black_box(&x).select(Axis(0), &[3, 1]))));
    g.finish();
}

fn w8_multiaxis(c: &mut Criterion) {
    let x = data(&[8, 256, 256, 16]);
    let n = 65536;
    let ids = Array::from_shape_vec((8, n, 1, 2), indices(8 * n * 2, 256, 8)).unwrap().into_dyn();
    let w = Workload { id: "W8_multiaxis", out_bytes: 8 * n * 16 * 4, idx_bytes: 8 * n * 2 * 8 };
    group(
        c,
        w,
        || x.gather_multiaxis(&ids, &[2, 1]).unwrap(),
        |out| x.gather_multiaxis_into(&ids, &[2, 1], out).unwrap(),
    );
}

/// Time against output size, element gather and block gather, 4 KiB to 256 MiB: it
/// should grow linearly, with no cliff at the parallel threshold.
fn sweep(c: &mut Criterion) {
    let quick = std::env::var("SWEEP_MAX_MIB").ok().and_then(|s| s.parse::<usize>().ok()).unwrap_or(256);
    let mut g = c.benchmark_group("sweep");
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));
    let mut bytes = 4 << 10;
    while bytes <= quick << 20 {
        let n = bytes / 4;
        g.throughput(Throughput::Bytes(bytes as u64));
        // Element gather: a 1-D permutation-like gather.
        let x = Array1::from_iter((0..n).map(|i| i as f32));
        let ids = Array1::from(indices(n, n, 9));
        let mut out = Array1::<f32>::zeros(n);
        g.bench_with_input(BenchmarkId::new("element_into", bytes), &bytes, |b, _| {
            b.iter(|| x.gather_multiaxis_into(&ids, &[0], &mut out).unwrap())
        });
        // Block gather: rows of 256 floats.
        let rows = (n / 256).max(1);
        let table = Array::from_shape_fn((rows, 256), |(i, j)| (i + j) as f32);
        let rids = Array::from_shape_vec((1, rows, 1), indices(rows, rows, 10)).unwrap();
        let tv: ArrayView<f32, IxDyn> = table.view().insert_axis(Axis(1)).into_dyn();
        let mut bout = Array::<f32, _>::zeros(IxDyn(&[1, rows, 256]));
        g.bench_with_input(BenchmarkId::new("block_into", bytes), &bytes, |b, _| {
            b.iter(|| tv.gather_multiaxis_into(&rids.view().into_dyn(), &[0], &mut bout).unwrap())
        });
        drop((x, ids, out));
        bytes *= 4;
    }
    g.finish();
}

criterion_group!(
    workloads,
    w1_embed,
    w2_midaxis,
    w3_elem_last,
    w4_elem_first,
    w5_nd_pixels,
    w6_batched,
    w7_tiny,
    w8_multiaxis
);
criterion_group!(sizes, sweep);
criterion_main!(workloads, sizes);
