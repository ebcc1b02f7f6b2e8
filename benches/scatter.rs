//! Criterion benches of the scatter workloads S1-S5, S8 of shared/BENCH-WORKLOADS.md: the
//! crate's scatter (the destination reset before each call, untimed) beside a 1-thread
//! memcpy of the updates' bytes (S5: the indices').
//!
//! `cargo bench -p ndarray-gather-benches --bench scatter`, or `... --bench scatter -- S3` for
//! one.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "workloads.rs"]
mod workloads;

fn scatter_groups(c: &mut Criterion) {
    for id in workloads::SCATTER_IDS {
        let (mut w, bytes) = workloads::build_scatter(id);
        let mut g = c.benchmark_group(id);
        g.throughput(Throughput::Bytes(bytes as u64));
        if bytes > 1 << 20 {
            g.sample_size(10)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(3));
        }
        g.bench_function("scatter", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    w.reset();
                    let t = Instant::now();
                    w.call();
                    total += t.elapsed();
                }
                total
            })
        });
        let (src, mut dst) = (vec![1u8; bytes], vec![0u8; bytes]);
        g.bench_function("memcpy", |b| b.iter(|| dst.copy_from_slice(black_box(&src))));
        g.finish();
    }
}

criterion_group!(scatters, scatter_groups);
criterion_main!(scatters);
