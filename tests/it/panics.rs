//! Panic safety: an element type whose `Clone` panics midway must not leak, double-drop
//! or expose uninitialized memory, serially or in parallel; `_into` leaves `out` valid.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use ndarray::{Array, Array2};
use ndarray_gather::prelude::*;

/// Live `Bomb`s, clones made, and the clone that panics.
static LIVE: AtomicIsize = AtomicIsize::new(0);
static CLONES: AtomicUsize = AtomicUsize::new(0);
static FUSE: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The counters are global: the tests that use them run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[derive(Debug, PartialEq)]
struct Bomb(Box<usize>);

impl Bomb {
    fn new(v: usize) -> Self {
        LIVE.fetch_add(1, Ordering::SeqCst);
        Bomb(Box::new(v))
    }
}

impl Clone for Bomb {
    fn clone(&self) -> Self {
        if CLONES.fetch_add(1, Ordering::SeqCst) == FUSE.load(Ordering::SeqCst) {
            panic!("clone number {} panics", FUSE.load(Ordering::SeqCst));
        }
        Bomb::new(*self.0)
    }
}

impl Drop for Bomb {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

fn arm(n: usize) {
    CLONES.store(0, Ordering::SeqCst);
    FUSE.store(n, Ordering::SeqCst);
}

/// Runs `f` with the n-th clone panicking, for several n; afterwards exactly the Bombs that
/// existed before are alive.
fn check(threads: usize, f: impl Fn() + Sync) {
    let pool = rayon_pool(threads);
    let before = LIVE.load(Ordering::SeqCst);
    let fuses: &[usize] = if cfg!(miri) { &[5] } else { &[0, 1, 7, 50, 333] };
    for &n in fuses {
        arm(n);
        let r = pool.install(|| catch_unwind(AssertUnwindSafe(&f)));
        let total = CLONES.load(Ordering::SeqCst);
        assert!(
            r.is_err() || total <= n,
            "no panic although clone {n} of {total} should have"
        );
        arm(usize::MAX);
        assert_eq!(
            LIVE.load(Ordering::SeqCst),
            before,
            "leak or double drop with fuse {n}, {threads} threads"
        );
    }
}

#[cfg(feature = "rayon")]
fn rayon_pool(n: usize) -> &'static rayon::ThreadPool {
    crate::support::threads::pool(n)
}

#[cfg(not(feature = "rayon"))]
struct NoPool;
#[cfg(not(feature = "rayon"))]
impl NoPool {
    fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
}
#[cfg(not(feature = "rayon"))]
fn rayon_pool(_: usize) -> NoPool {
    NoPool
}

const N: usize = if cfg!(miri) { 10 } else { 600 };

#[test]
fn allocating_gathers_drop_what_they_cloned() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let live = LIVE.load(Ordering::SeqCst);
    let a = Array::from_shape_fn((N, 8), |(i, j)| Bomb::new(i * 8 + j));
    let elem = Array::from_shape_fn((N, 8), |(i, j)| ((i + j) % 8) as i64);
    let rows = Array::from_shape_fn(N, |i| ((i * 7) % N) as i64);
    for threads in [1, 3] {
        check(threads, || drop(a.take_along_axis(&elem, 1).unwrap()));
        check(threads, || drop(a.gather(&rows, 0).unwrap()));
        check(threads, || {
            drop(a.t().gather(&rows.slice(ndarray::s![..8]), 1).unwrap())
        });
    }
    drop(a);
    assert_eq!(LIVE.load(Ordering::SeqCst), live);
}

/// Gathers of at most 64 positions take the kernel's tiny path (lane by lane, no ranges):
/// a panicking clone or a bad index midway drops exactly what was written.
#[test]
fn tiny_gathers_drop_what_they_cloned() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let live = LIVE.load(Ordering::SeqCst);
    let a = Array::from_shape_fn((6, 4), |(i, j)| Bomb::new(i * 4 + j));
    let rows = ndarray::array![5_i64, 0, 3, 3, 1];
    let elem = Array::from_shape_fn((6, 4), |(i, j)| ((i + 3 * j) % 4) as i64);
    // A clone that panics midway: 20 elements gathered, the sixth clone panics.
    check(1, || drop(a.gather(&rows, 0).unwrap()));
    check(1, || drop(a.take_along_axis(&elem, 1).unwrap()));
    let plan = GatherPlan::gather([6, 4], &rows, 0).unwrap();
    check(1, || drop(plan.apply(&a).unwrap()));
    // A bad index in the fourth row: the three rows before it were cloned, then dropped.
    let bad = ndarray::array![5_i64, 0, 3, 6, 1];
    arm(usize::MAX);
    let e = a.gather(&bad, 0).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 6, ref position, .. } if position == &vec![3]),
        "{e:?}"
    );
    assert_eq!(
        CLONES.load(Ordering::SeqCst),
        12,
        "three rows cloned before the bad index"
    );
    assert_eq!(LIVE.load(Ordering::SeqCst), live + 24);
    let mut bad_elem = elem.clone();
    bad_elem[[4, 2]] = -5;
    let e = a.take_along_axis(&bad_elem, 1).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: -5, ref position, .. } if position == &vec![4, 2]),
        "{e:?}"
    );
    assert_eq!(LIVE.load(Ordering::SeqCst), live + 24);
    drop(a);
    assert_eq!(LIVE.load(Ordering::SeqCst), live);
}

#[test]
fn a_bad_index_midway_drops_what_was_written() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let live = LIVE.load(Ordering::SeqCst);
    let a = Array::from_shape_fn((N, 8), |(i, j)| Bomb::new(i * 8 + j));
    let mut idx = Array::from_shape_fn((N, 8), |(i, j)| ((i + j) % 8) as i64);
    idx[[N - 2, 3]] = 8;
    for threads in [1, 3] {
        let e = rayon_pool(threads).install(|| a.take_along_axis(&idx, 1).unwrap_err());
        assert!(matches!(e, GatherError::IndexOutOfBounds { index: 8, .. }));
        assert_eq!(LIVE.load(Ordering::SeqCst), live + (N * 8) as isize);
        // Block lanes (whole rows): a row goes on past a bad index, writing position 0's
        // block there, and everything it wrote is dropped when the error is reported.
        let mut rows = Array::from_shape_fn(N, |i| ((i * 7) % N) as i64);
        rows[N - 3] = N as i64;
        let e = rayon_pool(threads).install(|| a.gather(&rows, 0).unwrap_err());
        assert!(
            matches!(e, GatherError::IndexOutOfBounds { index, ref position, .. }
                if index == N as i128 && position == &vec![N - 3]),
            "{e:?}"
        );
        assert_eq!(LIVE.load(Ordering::SeqCst), live + (N * 8) as isize);
    }
    drop(a);
    assert_eq!(LIVE.load(Ordering::SeqCst), live);
}

#[test]
fn into_leaves_out_valid_after_a_panic() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let a = Array::from_shape_fn((N, 8), |(i, j)| Bomb::new(i * 8 + j));
    let idx = Array::from_shape_fn((N, 8), |(i, j)| ((i * 3 + j) % 8) as i64);
    for threads in [1, 3] {
        let out = Mutex::new(Array2::from_shape_fn((N, 8), |_| Bomb::new(usize::MAX)));
        // Checked outside `check`, whose `catch_unwind` would swallow a failed assertion.
        let invalid = AtomicUsize::new(0);
        check(threads, || {
            let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
            let _ = catch_unwind(AssertUnwindSafe(|| a.gather_multiaxis_into(&idx, &[1], &mut *o)));
            // Every element is a valid Bomb: old or gathered.
            let bad = o.iter().filter(|b| *b.0 != usize::MAX && *b.0 >= N * 8).count();
            invalid.fetch_add(bad, Ordering::SeqCst);
            panic!("propagate");
        });
        assert_eq!(
            invalid.load(Ordering::SeqCst),
            0,
            "out holds elements that are neither old nor gathered"
        );
        // After a clean run, out holds exactly the gathered values.
        let mut out = out.into_inner().unwrap_or_else(|e| e.into_inner());
        a.gather_multiaxis_into(&idx, &[1], &mut out).unwrap();
        assert_eq!(out, a.take_along_axis(&idx, 1).unwrap());
    }
}

/// Above the parallel threshold (2 MiB of output), natively: the pool's threads stop on a
/// panic or a bad index, and the ranges other threads completed are dropped exactly once.
#[cfg(all(feature = "rayon", not(miri)))]
#[test]
fn parallel_gathers_above_the_threshold_drop_exactly_once() {
    const ROWS: usize = 40_000; // 320,000 Bombs of 8 bytes: 2.4 MiB of output
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let live = LIVE.load(Ordering::SeqCst);
    let a = Array::from_shape_fn((ROWS, 8), |(i, j)| Bomb::new(i * 8 + j));
    let elem = Array::from_shape_fn((ROWS, 8), |(i, j)| ((i + j) % 8) as i64);
    let rows = Array::from_shape_fn(ROWS, |i| ((i * 7) % ROWS) as i64);
    let pool = rayon_pool(2);
    for fuse in [0, 200_000, ROWS * 8 - 1] {
        let runs: [&(dyn Fn() + Sync); 2] = [&|| drop(a.take_along_axis(&elem, 1).unwrap()), &|| {
            drop(a.gather(&rows, 0).unwrap())
        }];
        for run in runs {
            arm(fuse);
            let r = pool.install(|| catch_unwind(AssertUnwindSafe(run)));
            assert!(r.is_err(), "clone {fuse} should have panicked");
            arm(usize::MAX);
            assert_eq!(
                LIVE.load(Ordering::SeqCst),
                live + (ROWS * 8) as isize,
                "fuse {fuse}"
            );
        }
    }
    // A bad index in the last rows: everything written elsewhere is dropped.
    let mut bad = elem.clone();
    bad[[ROWS - 2, 5]] = 8;
    let e = pool.install(|| a.take_along_axis(&bad, 1).unwrap_err());
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 8, ref position, .. } if position == &vec![ROWS - 2, 5])
    );
    assert_eq!(LIVE.load(Ordering::SeqCst), live + (ROWS * 8) as isize);
    drop(a);
    assert_eq!(LIVE.load(Ordering::SeqCst), live);
}
