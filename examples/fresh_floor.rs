//! What a fresh output costs on this machine before any gather writes into it: lower
//! bounds for the allocating calls of W1 and W8 (32 MiB outputs) and of W7 / P7 (six
//! `f32`s returned as an `ArrayD`).
//!
//! Prints the fastest tenth of many runs of
//! - W1, a 32 MiB output of `f32` (1 KiB rows):
//!   - `memcpy`: one thread copying 32 MiB into a reused buffer (the yardstick);
//!   - `memcpy 2T`: two threads each copying half into the reused buffer, and `memcpy
//!     2T, fresh` into a new buffer faulted in as below: what a fresh output adds to
//!     a call that writes at the speed of a copy;
//!   - `fill reused`: one thread filling a reused 32 MiB buffer;
//!   - `fill fresh`: a new 32 MiB buffer, backed by huge pages and faulted in as the
//!     crate's allocating calls do (Linux: `MADV_HUGEPAGE`, `MADV_POPULATE_WRITE`), filled
//!     once and freed, nothing read: the least any call that returns a new 32 MiB array
//!     can take here;
//!   - `populate fresh`: the same buffer faulted in and freed, never filled: the kernel
//!     zeroing its pages, which no call that returns a new 32 MiB array escapes (glibc
//!     maps every allocation of 32 MiB afresh);
//!   - `fill fresh, 4 KiB pages`: the same with a plain allocation (`vec![1.5; n]`);
//!   - the crate's W1 `gather_multiaxis_into` and allocating `gather`;
//! - W8, a 32 MiB output of 64-byte points read at random: the crate's `_into` and
//!   allocating calls, against their target;
//! - the floors of both allocating calls: their `_into` time plus what a fresh output
//!   adds to a 2-thread copy (`memcpy 2T, fresh` less `memcpy 2T`);
//! - W7 and P7, a 2 x 3 output:
//!   - `Vec`: six `f32`s cloned from a slice into a new `Vec`, freed;
//!   - `Array2`, `ArrayD`: the same `Vec` made an array (the `ArrayD` with given strides
//!     and no checks, as the crate makes it), freed: what `GatherPlan::apply` and an
//!     allocating gather pay before they gather anything;
//!   - the crate's W7 calls (`gather_multiaxis_into`, `gather`) and P7's
//!     (`apply_into`, `apply`).
//!
//! `cargo run --release --example fresh_floor`

#[path = "../benches/workloads.rs"]
mod workloads;

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::Instant;

use ndarray::{Array2, ArrayD, IxDyn, ShapeBuilder};

/// The fastest tenth of `runs` runs of `f`, each timed over `batch` calls, per call, in ns.
fn fastest_tenth(runs: usize, batch: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batch {
                f();
            }
            t.elapsed().as_secs_f64() * 1e9 / batch as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[runs / 10]
}

/// `src` copied into `dst` (of the same length, initialized or not) by two threads, one
/// half each, with glibc's `memcpy`.
fn copy_halves(dst: &mut [MaybeUninit<f32>], src: &[f32]) {
    assert_eq!(dst.len(), src.len());
    let (d0, d1) = dst.split_at_mut(dst.len() / 2);
    let (s0, s1) = src.split_at(d0.len());
    let copy = |d: &mut [MaybeUninit<f32>], s: &[f32]| {
        // SAFETY: `d` and `s` have the same length (split at the same point of slices of
        // equal length) and, one exclusive and one shared borrow, do not overlap;
        // `MaybeUninit<f32>` has the layout of `f32`.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), d.as_mut_ptr().cast::<f32>(), s.len()) }
    };
    std::thread::scope(|t| {
        t.spawn(|| copy(d1, s1));
        copy(d0, s0);
    });
}

/// A new buffer of `n` elements, backed by huge pages and faulted in as the crate's
/// allocating calls back their outputs of 4 MiB and more.
#[cfg(target_os = "linux")]
fn fresh_huge(n: usize) -> Vec<f32> {
    const HUGE_PAGE: usize = 2 << 20;
    let mut v: Vec<f32> = Vec::with_capacity(n);
    let base = v.as_mut_ptr() as usize;
    let skip = base.next_multiple_of(HUGE_PAGE) - base;
    let len = (n * size_of::<f32>()).saturating_sub(skip) & !(HUGE_PAGE - 1);
    if len > 0 {
        // SAFETY: the range lies inside the buffer's allocation and starts on a page
        // boundary; both calls only change how the kernel backs the buffer's pages.
        unsafe {
            let start = (base + skip) as *mut libc::c_void;
            libc::madvise(start, len, libc::MADV_HUGEPAGE);
            libc::madvise(start, len, libc::MADV_POPULATE_WRITE);
        }
    }
    v
}

fn main() {
    let n = 8 << 20;
    let src = vec![0.5f32; n];
    let mut dst = vec![0f32; n];
    let memcpy = fastest_tenth(40, 1, || dst.copy_from_slice(black_box(&src)));
    let row = |what: &str, ns: f64| println!("{what:24}{:8.2}{:10.2}", ns / 1e6, ns / memcpy);
    println!("W1, 32 MiB output            ms  x memcpy");
    row("memcpy 1T", memcpy);
    let mut reused: Vec<MaybeUninit<f32>> = vec![MaybeUninit::new(0.0); n];
    let memcpy2 = fastest_tenth(40, 1, || copy_halves(&mut reused, black_box(&src)));
    drop(reused);
    row("memcpy 2T", memcpy2);
    #[cfg(target_os = "linux")]
    let fresh2 = {
        let ns = fastest_tenth(40, 1, || {
            let mut v = fresh_huge(n);
            copy_halves(&mut v.spare_capacity_mut()[..n], black_box(&src));
            // SAFETY: `copy_halves` initialized the first `n` elements.
            unsafe { v.set_len(n) };
            black_box(&v);
        });
        row("memcpy 2T, fresh", ns);
        ns
    };
    row("fill reused", fastest_tenth(40, 1, || dst.fill(black_box(1.5))));
    #[cfg(target_os = "linux")]
    row(
        "fill fresh",
        fastest_tenth(40, 1, || {
            let mut v = fresh_huge(n);
            v.resize(n, black_box(1.5));
            black_box(&v);
        }),
    );
    #[cfg(target_os = "linux")]
    row(
        "populate fresh",
        fastest_tenth(40, 1, || drop(black_box(fresh_huge(n)))),
    );
    let plain = || drop(black_box(vec![black_box(1.5f32); n]));
    row("fill fresh, 4 KiB pages", fastest_tenth(10, 1, plain));
    // A workload's `_into` and allocating calls, printed; its `_into` time returned.
    let calls = |id: &str, name: &str| {
        let mut w = workloads::build(id);
        let into = fastest_tenth(40, 1, &mut w.into);
        row(&format!("{name} _into"), into);
        let alloc = fastest_tenth(40, 1, || drop(black_box((w.alloc)())));
        row(&format!("{name} allocating"), alloc);
        into
    };
    let w1_into = calls("W1_embed", "W1");
    println!(
        "(target: allocating <= _into + memcpy 1T = {:.2} ms)",
        (w1_into + memcpy) / 1e6
    );
    let into = calls("W8_multiaxis", "W8");
    println!("(target: allocating <= 1.5 x _into = {:.2} ms)", 1.5 * into / 1e6);
    #[cfg(target_os = "linux")]
    {
        println!(
            "floors: a new 32 MiB output written on two threads at the speed of a copy \
             (memcpy 2T, fresh) takes {:.2} ms, {:.2} ms more than a reused one;",
            fresh2 / 1e6,
            (fresh2 - memcpy2) / 1e6
        );
        println!(
            "  W1 _into + that = {:.2} ms, W8 _into + that = {:.2} ms",
            (w1_into + fresh2 - memcpy2) / 1e6,
            (into + fresh2 - memcpy2) / 1e6
        );
    }
    drop((src, dst));

    let six = [0f32, 1., 2., 10., 11., 12.];
    let strides = IxDyn(&[3, 1]);
    let vec = fastest_tenth(200, 1000, || drop(black_box(black_box(&six[..]).to_vec())));
    let array2 = fastest_tenth(200, 1000, || {
        let v = black_box(&six[..]).to_vec();
        drop(black_box(Array2::from_shape_vec((2, 3), v)));
    });
    let array_d = fastest_tenth(200, 1000, || {
        let v = black_box(&six[..]).to_vec();
        let shape = IxDyn(&[2, 3]).strides(strides.clone());
        // SAFETY: six elements in C order for a 2 x 3 array with C-order strides.
        drop(black_box(unsafe { ArrayD::from_shape_vec_unchecked(shape, v) }));
    });
    let mut w7 = workloads::build("W7_tiny");
    let into = fastest_tenth(200, 1000, &mut w7.into);
    let alloc = fastest_tenth(200, 1000, || drop(black_box((w7.alloc)())));
    let apply_into = fastest_tenth(200, 1000, &mut w7.plan_into);
    let apply = fastest_tenth(200, 1000, &w7.plan_alloc);
    println!();
    println!("W7 / P7, 2 x 3 output      ns");
    println!("Vec                   {vec:8.1}");
    println!("Array2                {array2:8.1}");
    println!("ArrayD                {array_d:8.1}");
    println!("W7 _into              {into:8.1}");
    println!("W7 allocating         {alloc:8.1}");
    println!("P7 apply_into         {apply_into:8.1}");
    println!("P7 apply              {apply:8.1}");
}
