//! Criterion benches of the gather-reduce workloads B1-B4, G1-G4, R1 of
//! shared/BENCH-WORKLOADS.md: the crate's calls beside the hand-written fused loops and a
//! 1-thread memcpy of the output's bytes.
//!
//! `cargo bench -p ndarray-gather-benches --bench reduce`, or `... --bench reduce -- G1` for
//! one.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "reduce_workloads.rs"]
mod reduce_workloads;

fn reduce_groups(c: &mut Criterion) {
    for id in reduce_workloads::REDUCE_IDS {
        let mut w = reduce_workloads::build_reduce(id);
        let mut g = c.benchmark_group(id);
        g.throughput(Throughput::Bytes(w.out_bytes as u64));
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        for (name, f) in &mut w.variants {
            g.bench_function(*name, |b| b.iter(&mut *f));
        }
        let (src, mut dst) = (vec![1u8; w.out_bytes], vec![0u8; w.out_bytes]);
        g.bench_function("memcpy", |b| b.iter(|| dst.copy_from_slice(black_box(&src))));
        g.finish();
    }
}

criterion_group!(reduces, reduce_groups);
criterion_main!(reduces);
