//! The scheduler shared by gather and scatter: numbered jobs claimed from one counter by
//! the calling thread and the rayon pool's workers, with panics and failures collected.
//!
//! The caller works too, so `N - 1` helpers keep `N` threads busy on a pool of `N` (one per
//! core by default) whether or not the caller is one of the pool's own threads, and the
//! caller never idles waiting for a worker to wake. After the first failure (an `Err` or a
//! panic) no further job starts; the jobs already running finish. Which jobs completed is
//! reported, so that the caller can clean up after them before a panic is resumed.

#[cfg(feature = "rayon")]
use std::any::Any;

use std::sync::Mutex;

use super::BadIndex;
#[cfg(feature = "rayon")]
use crate::machine::threads;
use crate::plan::Ranges;

/// Runs `job(range, part)` for each range of `ranges` with its own part of `out` (`width`
/// elements per item: the part of range `c` is `out[start * width..end * width]`), on the
/// calling thread and the pool where `parallel`, else in order; `Err` if any job failed
/// (no job starts after the first failure).
pub(crate) fn run_parts<T: Send>(
    out: &mut [T],
    width: usize,
    ranges: &Ranges,
    parallel: bool,
    job: impl Fn(std::ops::Range<usize>, &mut [T]) -> Result<(), BadIndex> + Sync,
) -> Result<(), BadIndex> {
    let parts: Vec<Mutex<&mut [T]>> = out
        .chunks_mut((ranges.per * width).max(1))
        .map(Mutex::new)
        .collect();
    let one = |c: usize| {
        // Each part is locked once, by its own job: never poisoned.
        let mut to = parts[c].lock().map_err(|_| BadIndex)?;
        job(ranges.get(c), &mut to)
    };
    if parallel {
        run_jobs(ranges.count, false, one).finish()
    } else {
        (0..ranges.count).try_for_each(one)
    }
}

/// Runs `job(range)` for the items `0..n` in about `jobs` consecutive ranges: on the calling
/// thread where there is one range, else as [`run_jobs`]; `Err` if any job failed.
pub(crate) fn run_ranges(
    n: usize,
    jobs: usize,
    job: impl Fn(std::ops::Range<usize>) -> Result<(), BadIndex> + Sync,
) -> Result<(), BadIndex> {
    let per = range_len(n, jobs);
    let chunks = n.div_ceil(per);
    let one = |c: usize| job(c * per..((c + 1) * per).min(n));
    if chunks <= 1 {
        (0..chunks).try_for_each(one)
    } else {
        run_jobs(chunks, false, one).finish()
    }
}

/// The items of each of [`run_ranges`]' ranges (the last may have fewer): range `c` is
/// `c * per..`.
pub(crate) fn range_len(n: usize, jobs: usize) -> usize {
    n.div_ceil(jobs.max(1)).max(1)
}

/// How a parallel run of jobs ended.
pub(crate) struct Outcome {
    failed: bool,
    /// Per job, whether it completed; empty unless tracking was asked for.
    done: Vec<bool>,
    #[cfg(feature = "rayon")]
    panic: Option<Box<dyn Any + Send>>,
}

impl Outcome {
    /// Whether any job failed (returned `Err` or panicked).
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The jobs that completed, when tracking was asked for.
    pub fn completed(&self) -> impl Iterator<Item = usize> + '_ {
        self.done.iter().enumerate().filter(|(_, d)| **d).map(|(c, _)| c)
    }

    /// Resumes a job's panic, if any (after the caller has cleaned up); else `Err` if a
    /// job failed.
    pub fn finish(self) -> Result<(), BadIndex> {
        #[cfg(feature = "rayon")]
        if let Some(payload) = self.panic {
            std::panic::resume_unwind(payload);
        }
        if self.failed { Err(BadIndex) } else { Ok(()) }
    }
}

/// Runs `job(c)` once for every `c` in `0..jobs` on the calling thread and up to
/// `threads() - 1` rayon workers. With `track`, the outcome says which jobs completed.
///
/// Without the `rayon` feature the jobs run in order on the calling thread (and a panic
/// simply unwinds through this function).
pub(crate) fn run_jobs(
    jobs: usize,
    track: bool,
    job: impl Fn(usize) -> Result<(), BadIndex> + Sync,
) -> Outcome {
    #[cfg(feature = "rayon")]
    {
        parallel(jobs, track, job)
    }
    #[cfg(not(feature = "rayon"))]
    {
        let mut done = vec![false; if track { jobs } else { 0 }];
        for c in 0..jobs {
            if job(c).is_err() {
                return Outcome { failed: true, done };
            }
            if let Some(d) = done.get_mut(c) {
                *d = true;
            }
        }
        Outcome { failed: false, done }
    }
}

#[cfg(feature = "rayon")]
fn parallel(jobs: usize, track: bool, job: impl Fn(usize) -> Result<(), BadIndex> + Sync) -> Outcome {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let panic = Mutex::new(None);
    let done: Vec<AtomicBool> = (0..if track { jobs } else { 0 })
        .map(|_| AtomicBool::new(false))
        .collect();
    let work = || {
        loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= jobs || failed.load(Ordering::Relaxed) {
                return;
            }
            match catch_unwind(AssertUnwindSafe(|| job(c))) {
                Ok(Ok(())) => {
                    if let Some(d) = done.get(c) {
                        d.store(true, Ordering::Release);
                    }
                }
                Ok(Err(BadIndex)) => failed.store(true, Ordering::Relaxed),
                Err(payload) => {
                    failed.store(true, Ordering::Relaxed);
                    panic
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(payload);
                }
            }
        }
    };
    let helpers = threads().saturating_sub(1).min(jobs.saturating_sub(1));
    rayon::in_place_scope(|s| {
        for _ in 0..helpers {
            s.spawn(|_| work());
        }
        work();
    });
    Outcome {
        failed: failed.into_inner(),
        done: done.into_iter().map(AtomicBool::into_inner).collect(),
        panic: panic.into_inner().unwrap_or_else(|e| e.into_inner()),
    }
}

/// `a()` and `b()`, `b` on a rayon worker beside `a` where there is more than one thread
/// (`rayon::join`), else one after the other.
pub(crate) fn both<RA: Send, RB: Send>(
    a: impl FnOnce() -> RA + Send,
    b: impl FnOnce() -> RB + Send,
) -> (RA, RB) {
    #[cfg(feature = "rayon")]
    if threads() > 1 {
        return rayon::join(a, b);
    }
    (a(), b())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_everything_once() {
        for (total, bytes, chunk) in [(1, 4, 64), (10, 40, 8), (1000, 4000, 128), (7, 7 << 20, 1 << 17)] {
            let r = Ranges::new(total, bytes, chunk);
            let mut next = 0;
            for c in 0..r.count {
                let g = r.get(c);
                assert_eq!(g.start, next);
                assert!(!g.is_empty());
                next = g.end;
            }
            assert_eq!(next, total, "{r:?}");
        }
        // Whole granules where two ranges remain.
        let r = Ranges::new(1000, 4000, 128).in_multiples_of(96);
        assert_eq!((r.per, r.count, r.get(10)), (96, 11, 960..1000));
        let r = Ranges::new(100, 400, 128).in_multiples_of(100);
        assert_eq!((r.per, r.count), (25, 4));
    }

    #[test]
    fn every_job_runs_once_and_failures_are_reported() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let runs: Vec<AtomicUsize> = (0..37).map(|_| AtomicUsize::new(0)).collect();
        let out = run_jobs(37, true, |c| {
            runs[c].fetch_add(1, Ordering::Relaxed);
            Ok(())
        });
        assert!(!out.failed());
        assert_eq!(out.completed().count(), 37);
        assert!(runs.iter().all(|r| r.load(Ordering::Relaxed) == 1));
        assert_eq!(out.finish(), Ok(()));

        let out = run_jobs(37, true, |c| if c == 5 { Err(BadIndex) } else { Ok(()) });
        assert!(out.failed());
        assert!(out.completed().all(|c| c != 5));
        assert_eq!(out.finish(), Err(BadIndex));
    }
}
