//! What S3's random writes cost on this machine without any scatter around them: a lower
//! bound for `scatter_nd` of 1M 16-byte points into a [1024, 1024, 4] f32 image.
//!
//! Prints the fastest tenth of 200 runs of
//! - `memcpy`: one thread copying the updates' 16 MB (the yardstick);
//! - `writes 1T`: one thread storing each point at a precomputed destination (no index
//!   read or checked, no ownership test), in the updates' order, prefetching 16 ahead;
//! - `writes 2T`: the same points sorted beforehand (untimed) into two lists, one per half
//!   of the image, each written by its own thread: the most two threads can do,
//!   before a scatter reads and checks 16 MB of indices and routes the points;
//! - `scatter`: the crate's `scatter_nd(.., Replace)` (indices checked, all or nothing);
//!
//! each also as a multiple of `memcpy`.
//!
//! `cargo run --release --example scatter_floor`

#[path = "../benches/workloads.rs"]
mod workloads;

use std::hint::black_box;
use std::time::Instant;

use ndarray::Array;
use ndarray_gather::{prelude::*, reduce::Replace};

/// The fastest tenth of `runs` calls of `f`, each returning the time of its timed part.
fn fastest_tenth(runs: usize, mut f: impl FnMut() -> f64) -> f64 {
    let mut times: Vec<f64> = (0..runs).map(|_| f()).collect();
    times.sort_by(f64::total_cmp);
    times[runs / 10]
}

/// The time `f` takes, in ms.
fn ms(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

/// Stores `upd[k]` at block `at[k]` of `dst`, prefetching the block 16 points ahead.
fn write(dst: &mut [[f32; 4]], at: &[u32], upd: &[[f32; 4]]) {
    for (k, (&d, u)) in at.iter().zip(upd).enumerate() {
        #[cfg(target_arch = "x86_64")]
        if let Some(&next) = at.get(k + 16) {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            // SAFETY: a prefetch only hints, at any address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(dst.as_ptr().wrapping_add(next as usize).cast()) };
        }
        dst[d as usize] = *u;
    }
}

fn main() {
    let (h, w, n) = (1024usize, 1024usize, 1_000_000usize);
    // S3's points, from the benchmark's generator and seed.
    let points = Array::from_shape_vec((n, 2), workloads::indices(n * 2, h, 5)).expect("n x 2");
    let upd = Array::from_shape_fn((n, 4), |(i, j)| (i * 4 + j) as f32);
    let blocks: Vec<[f32; 4]> = upd.rows().into_iter().map(|r| [r[0], r[1], r[2], r[3]]).collect();
    let at: Vec<u32> = points
        .rows()
        .into_iter()
        .map(|p| (p[0] as usize * w + p[1] as usize) as u32)
        .collect();
    let half = (h * w / 2) as u32;
    let (mut lo, mut hi) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for (&d, b) in at.iter().zip(&blocks) {
        let (list, d) = if d < half {
            (&mut lo, d)
        } else {
            (&mut hi, d - half)
        };
        list.0.push(d);
        list.1.push(*b);
    }
    let pristine = vec![[0f32; 4]; h * w];
    let mut image = pristine.clone();
    let src = vec![1u8; n * 16];
    let mut dst = vec![0u8; n * 16];

    let memcpy = fastest_tenth(200, || ms(|| dst.copy_from_slice(black_box(&src))));
    let one = fastest_tenth(200, || {
        image.copy_from_slice(&pristine);
        ms(|| write(&mut image, &at, &blocks))
    });
    let two = fastest_tenth(200, || {
        image.copy_from_slice(&pristine);
        let (a, b) = image.split_at_mut(half as usize);
        ms(|| {
            std::thread::scope(|scope| {
                scope.spawn(|| write(a, &lo.0, &lo.1));
                write(b, &hi.0, &hi.1);
            })
        })
    });
    let pristine_nd = Array::<f32, _>::zeros((h, w, 4));
    let mut x = pristine_nd.clone();
    let crate_s3 = fastest_tenth(200, || {
        x.assign(&pristine_nd);
        ms(|| x.scatter_nd(&points, &upd, 0, Replace).expect("S3 is valid"))
    });
    for (what, t) in [
        ("memcpy", memcpy),
        ("writes 1T", one),
        ("writes 2T", two),
        ("scatter", crate_s3),
    ] {
        println!("{what:>10}  {t:6.2} ms  {:5.2}x memcpy", t / memcpy);
    }
}
