//! Median times of the scatter workloads S1-S8 of shared/BENCH-WORKLOADS.md, one line
//! each: `id variant median_ns`, variants `scatter` (the crate's call, with the
//! destination reset before each call and that reset timed apart and subtracted) and
//! `memcpy` (one thread copying the updates' bytes). `benches/peers/scatter_peers.py`
//! prints the same lines for NumPy.
//!
//! `cargo run --release --example scatter_workloads [ID...]`

use std::hint::black_box;
use std::time::{Duration, Instant};

use ndarray::{Array, ArrayD, Dimension, IxDyn, arr0};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::{Add, Replace};

#[path = "../benches/workloads.rs"]
mod workloads;
use workloads::indices;

fn ids(shape: &[usize], n: usize, seed: u64) -> ArrayD<i64> {
    ArrayD::from_shape_vec(IxDyn(shape), indices(shape.iter().product(), n, seed)).unwrap()
}

fn data(shape: &[usize]) -> ArrayD<f32> {
    ArrayD::from_shape_fn(IxDyn(shape), |d| {
        (d.slice().iter().sum::<usize>() % 251) as f32 * 0.01
    })
}

/// The median of enough runs of `f` to fill about `budget` (at least 5); `f` returns the
/// time of its own timed part.
fn median(budget: Duration, mut f: impl FnMut() -> Duration) -> u128 {
    f();
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 1_000_000) {
        times.push(f().as_nanos());
    }
    times.sort_unstable();
    times[times.len() / 2]
}

/// Times `call` on a fresh copy of `pristine` each time (the copy is not timed).
fn time_scatter<A: Clone>(pristine: &ArrayD<A>, mut call: impl FnMut(&mut ArrayD<A>)) -> u128 {
    let mut x = pristine.clone();
    median(Duration::from_millis(1500), || {
        x.assign(pristine);
        let t = Instant::now();
        call(black_box(&mut x));
        t.elapsed()
    })
}

/// For calls far below a microsecond: batches of 1000 (the reset included, and timed
/// apart to be subtracted).
fn time_tiny(pristine: &ArrayD<f32>, mut call: impl FnMut(&mut ArrayD<f32>)) -> f64 {
    let mut x = pristine.clone();
    let batch = 1000;
    let reset = median(Duration::from_millis(300), || {
        let t = Instant::now();
        for _ in 0..batch {
            x.assign(black_box(pristine));
        }
        t.elapsed()
    });
    let both = median(Duration::from_millis(500), || {
        let t = Instant::now();
        for _ in 0..batch {
            x.assign(black_box(pristine));
            call(black_box(&mut x));
        }
        t.elapsed()
    });
    both.saturating_sub(reset) as f64 / batch as f64
}

fn memcpy(bytes: usize) -> u128 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    median(Duration::from_millis(800), || {
        let t = Instant::now();
        dst.copy_from_slice(black_box(&src));
        t.elapsed()
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let want = |id: &str| args.is_empty() || args.iter().any(|a| id.starts_with(a.as_str()));
    if want("S1") {
        let (t, i, u) = (
            ArrayD::<f32>::zeros(IxDyn(&[50000, 256])),
            ids(&[64, 512], 50000, 1),
            data(&[64, 512, 256]),
        );
        let s = time_scatter(&t, |x| x.scatter(&i, &u, 0, Add).unwrap());
        println!(
            "S1_embed_grad scatter {s}\nS1_embed_grad memcpy {}",
            memcpy(u.len() * 4)
        );
    }
    if want("S2") {
        let (t, i, u) = (
            data(&[2048, 2048]),
            ids(&[2048, 2048], 2048, 3),
            data(&[2048, 2048]),
        );
        let s = time_scatter(&t, |x| x.scatter_elements(&i, &u, 1, Add).unwrap());
        println!(
            "S2_elem_add scatter {s}\nS2_elem_add memcpy {}",
            memcpy(u.len() * 4)
        );
    }
    if want("S3") {
        let t = data(&[1024, 1024, 4]);
        let i = Array::from_shape_vec((1_000_000, 2), indices(2_000_000, 1024, 5)).unwrap();
        let u = data(&[1_000_000, 4]);
        let s = time_scatter(&t, |x| x.scatter_nd(&i, &u, 0, Replace).unwrap());
        println!(
            "S3_nd_replace scatter {s}\nS3_nd_replace memcpy {}",
            memcpy(u.len() * 4)
        );
    }
    if want("S4") {
        let (t, i, u) = (data(&[16]), ids(&[8], 16, 7), data(&[8]));
        let s = time_tiny(&t, |x| x.scatter_elements(&i, &u, 0, Add).unwrap());
        println!("S4_tiny scatter {s:.1}\nS4_tiny memcpy 0");
    }
    if want("S5") {
        let t = ArrayD::<f64>::zeros(IxDyn(&[1024]));
        let i = ids(&[16_777_216], 1024, 9);
        let one = arr0(1.0f64);
        let u = one.broadcast(16_777_216).unwrap();
        let s = time_scatter(&t, |x| x.scatter(&i, &u, 0, Add).unwrap());
        println!(
            "S5_histogram scatter {s}\nS5_histogram memcpy {}",
            memcpy(i.len() * 8)
        );
    }
    if want("S8") {
        let t = ArrayD::<f32>::zeros(IxDyn(&[8, 256, 256, 16]));
        let i = ids(&[8, 65536, 1, 2], 256, 11);
        let u = data(&[8, 65536, 1, 16]);
        let s = time_scatter(&t, |x| x.scatter_multiaxis(&i, &[2, 1], &u, Add).unwrap());
        println!(
            "S8_multiaxis_grad scatter {s}\nS8_multiaxis_grad memcpy {}",
            memcpy(u.len() * 4)
        );
    }
}
