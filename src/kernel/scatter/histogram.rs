//! A histogram of one value: the positions that land on each element counted (the
//! positions split between threads), then the value combined that many times into each
//! element (the elements split between them).

use std::sync::Mutex;

use super::{ScatterTask, Shared};
use crate::index::{GatherIndex, Raise, Resolve};
use crate::kernel::prefetch::{lines_ahead, prefetch_line};
use crate::kernel::schedule;
use crate::kernel::walk::{At, Visit, walk};
use crate::kernel::{BadIndex, locate};
use crate::plan::Loop;
use crate::plan::policy::CHAINS;
use crate::reduce::Reducer;

impl<A: Clone + Send + Sync, I: GatherIndex> ScatterTask<'_, A, I> {
    /// A scatter of one update value into a small dense destination with more positions
    /// than elements (a histogram). Combining the same value into an element `c` times in
    /// a row gives a result that depends only on `c`, so the parts count the positions
    /// that land on each element (the positions split between them, a count array each,
    /// the indices checked on the way, the destination untouched), and then combine the
    /// value `c` times into each element (the elements split between them): the same
    /// bits as row-major order on any number of threads, with every thread reading its
    /// share of the indices once (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
    pub(crate) fn count_then_replay<R: Reducer<A>>(&self, reducer: R) -> Result<(), BadIndex> {
        let total = self.walk.positions();
        let (lo, hi) = self.strategy.span;
        let n = (hi - lo) as usize + 1;
        let parts = self.strategy.count_parts;
        let per = total.div_ceil(parts);
        let counts: Vec<Mutex<Vec<u32>>> = (0..parts).map(|_| Mutex::new(Vec::new())).collect();
        schedule::run_jobs(parts, false, |p| {
            let mut mine = vec![0u32; n];
            let mut v = Count {
                task: self,
                counts: &mut mine,
                lo,
            };
            // SAFETY: `ScatterTask::new`'s contract; the range holds positions.
            unsafe {
                walk(
                    self.walk.outer,
                    self.walk.lane.len,
                    false,
                    p * per,
                    ((p + 1) * per).min(total),
                    &mut v,
                )?
            };
            *counts[p].lock().unwrap_or_else(|e| e.into_inner()) = mine;
            Ok(())
        })
        .finish()?;
        let mut counts = counts
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()));
        let mut sum = counts.next().unwrap_or_default();
        for c in counts {
            // No overflow: the counts add up to `total`, which fits in a `u32`.
            sum.iter_mut().zip(c).for_each(|(s, c)| *s += c);
        }
        // SAFETY: every position reads this one update (`one_update`).
        let u = unsafe { &*self.upd };
        let dst = Shared(self.dst.wrapping_offset(lo));
        let jobs = self.strategy.replay_jobs;
        let per = n.div_ceil(jobs).next_multiple_of(CHAINS);
        schedule::run_jobs(n.div_ceil(per), false, |j| {
            let range = j * per..((j + 1) * per).min(n);
            // SAFETY: the destination is dense, so offsets `lo..=hi` are its elements, and
            // ours alone (`new`'s contract); each job takes its own range of them.
            let xs = unsafe { std::slice::from_raw_parts_mut(dst.get().add(range.start), range.len()) };
            replay(xs, &sum[range], u, reducer);
            Ok(())
        })
        .finish()
    }
}

/// Combines `u` into each element of `xs` as many times in a row as `counts` says, the
/// elements of a group of [`CHAINS`] in turn, so that their combinations (each a chain of
/// dependent ones) overlap.
pub(crate) fn replay<A: Clone, R: Reducer<A>>(xs: &mut [A], counts: &[u32], u: &A, reducer: R) {
    let u = u.clone();
    for (xs, counts) in xs.chunks_mut(CHAINS).zip(counts.chunks(CHAINS)) {
        let common = counts.iter().copied().min().unwrap_or(0);
        for _ in 0..common {
            for x in xs.iter_mut() {
                reducer.reduce(x, &u);
            }
        }
        for (x, &c) in xs.iter_mut().zip(counts) {
            for _ in common..c {
                reducer.reduce(x, &u);
            }
        }
    }
}

/// Counts the positions that land on each destination element (at offset `lo + e` for
/// count `e`), checking their indices.
pub(crate) struct Count<'t, 'a, A, I> {
    pub(crate) task: &'t ScatterTask<'a, A, I>,
    pub(crate) counts: &'t mut [u32],
    pub(crate) lo: isize,
}

impl<A: Send + Sync, I: GatherIndex> Visit for Count<'_, '_, A, I> {
    unsafe fn lanes(&mut self, row: Loop, count: usize, at: At) -> Result<(), BadIndex> {
        for k in 0..count as isize {
            // SAFETY: forwarded: lane `k` of the row exists.
            unsafe { self.lane(at.step(&row, k), 0, self.task.walk.lane.len)? };
        }
        Ok(())
    }

    unsafe fn lane(&mut self, at: At, first: usize, last: usize) -> Result<(), BadIndex> {
        let (t, counts) = (self.task, &mut *self.counts);
        let (l, base) = (t.walk.lane, at.inp - self.lo);
        // A bad index resolves to position 0, a destination element, so that every
        // count's index is in bounds either way.
        let mut good = true;
        if let ([a], true) = (t.walk.axes, l.idx != 0) {
            // One gathered axis, the loop invariants hoisted; the indices asked for 2 KiB
            // ahead, as in `Apply::lane`.
            let idx = t.idx.wrapping_offset(at.idx + a.comp);
            let far = lines_ahead::<I>(l.idx);
            let (len, stride) = (a.len, a.stride);
            let (step, inp) = (l.idx, l.inp);
            for i in first as isize..last as isize {
                prefetch_line(idx.wrapping_offset((i + far) * step));
                // SAFETY: index `i` of the lane exists.
                let (g, ok) = Raise::resolve_or_zero(unsafe { *idx.offset(i * step) }, len);
                good &= ok;
                let e = (base + i * inp + g as isize * stride) as usize;
                debug_assert!(e < counts.len());
                // SAFETY: `at.inp + i * inp + g * stride` with `g` below the axis length
                // is a destination element (`new`'s contract), so `e` is below the
                // destination's span, the counts' length (the destination is dense). (No
                // bounds check in this hot loop: PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages.)
                unsafe { *counts.get_unchecked_mut(e) += 1 };
            }
        } else {
            for i in first as isize..last as isize {
                // SAFETY: the coordinate is an element of the indices (`new`'s contract).
                let (g, ok) = unsafe { locate::<I, Raise>(t.idx, t.walk.axes, at.idx + i * l.idx) };
                good &= ok;
                counts[(base + i * l.inp + g) as usize] += 1;
            }
        }
        if good { Ok(()) } else { Err(BadIndex) }
    }
}
