//! The scatter kernel: the gather's walk run backwards. The plan is the matching gather's,
//! with the destination as its input and the updates as its output; each position
//! combines `updates[o]` into `destination[p(o)]` through a reducer.
//!
//! Determinism by construction: the destination's memory is cut into one contiguous span
//! of offsets per thread, and each thread walks *all* positions in row-major order,
//! applying only the updates that land in its own span. Every element is therefore
//! written by one thread, its updates combined in row-major order: the result is that of
//! applying the updates one at a time, bit for bit, on any number of threads, without
//! atomics or locks. A lane whose destinations cannot reach a thread's span (known from
//! its offset alone) is skipped without reading its indices.
//!
//! A bad index must be reported before anything is written. A destination that is small
//! and dense (its elements fill its span of memory) is copied, and the copy is scattered
//! into while every index is checked, in one pass over the indices; the copy is written
//! back only if all were good. Any other destination is scattered into in place, after a
//! read-only pass that checks every index ([`ScatterTask::check`]).
//!
//! One exception to "each thread walks all positions": a histogram of one value (every
//! position reads the same update) is counted, the positions split between threads, and
//! then replayed, the elements split between them ([`ScatterTask::count_then_replay`]):
//! `c` combinations of the same value give the same bits in any order of positions.
//!
//! Its rooms: this file ([`ScatterTask`] and its choice of way), `check` (the read-only
//! index pass), `histogram` (count, then replay), `tiny` (few positions), `apply` (the
//! combining pipeline) and `span` (which positions land in a thread's span).

mod apply;
mod check;
mod histogram;
mod span;
mod tiny;

use self::apply::Apply;
pub(crate) use self::tiny::scatter_tiny;
use super::schedule;
use super::walk::{Walk, walk};
use super::{BadIndex, Operand, debug_check_reach};
use crate::index::GatherIndex;
use crate::layout::span;
use crate::plan::{AxisTerm, Loop, ScatterStrategy, ScatterWay, split_innermost};
use crate::reduce::Reducer;

/// A scatter ready to run.
pub(crate) struct ScatterTask<'a, A, I> {
    /// The plan's loops and axis terms.
    walk: Walk<'a>,
    dst: *mut A,
    upd: *const A,
    idx: *const I,
    /// The destination offsets one lane can reach, relative to its own offset.
    lane_reach: (isize, isize),
    /// The way, parts and passes the planner chose ([`ScatterStrategy::of`] for these
    /// loops, axes and destination).
    strategy: ScatterStrategy,
}

// SAFETY: a `ScatterTask` reads `A` (updates) and `I` through shared pointers, so it may
// cross threads when both are `Sync`; it writes `A` values of the destination, each
// element from exactly one thread (spans are disjoint), so `A` must be `Send`. The
// pointers are valid for the whole call that builds the task (`ScatterTask::new`).
unsafe impl<A: Send + Sync, I: Sync> Sync for ScatterTask<'_, A, I> {}

impl<'a, A: Clone + Send + Sync, I: GatherIndex> ScatterTask<'a, A, I> {
    /// A scatter over `loops` (from [`Plan::loops`](crate::plan::Plan::loops) with the
    /// updates' strides, or as for [`Task::new`](super::Task::new)) and `axes` of the plan
    /// made from `dst` (as the input) and `indices`, run as `strategy` says.
    ///
    /// # Safety
    /// The plan was made from these very operands (`Plan::build` with the shapes and
    /// strides of `dst` and `indices`), so that every offset the loops' `inp` / `idx`
    /// strides and the axis terms can form, with resolved indices below each axis length,
    /// is an element of `dst` / `indices` (checked here with `debug_assert!`); `updates`
    /// points to the plan's output shape with the loops' `out` strides. `dst.ptr` comes
    /// from an exclusive borrow (it may be written through), so none of the others alias
    /// it, and nothing else accesses it while the task runs.
    pub unsafe fn new(
        loops: &'a [Loop],
        axes: &'a [AxisTerm],
        dst: Operand<'_, A>,
        updates: *const A,
        indices: Operand<'_, I>,
        strategy: ScatterStrategy,
    ) -> Self {
        debug_check_reach(loops, axes, dst.extent(), indices.extent());
        let (lane, outer) = split_innermost(loops);
        let mut lane_reach = span(&[lane.len], &[lane.inp]).unwrap_or((0, 0));
        for t in axes {
            let r = (t.len as isize).saturating_sub(1) * t.stride;
            lane_reach = (lane_reach.0 + r.min(0), lane_reach.1 + r.max(0));
        }
        ScatterTask {
            walk: Walk { outer, lane, axes },
            dst: dst.ptr.cast_mut(),
            upd: updates,
            idx: indices.ptr,
            lane_reach,
            strategy,
        }
    }

    /// Checks every index, then combines every update into the destination through
    /// `reducer`, in row-major order per element, the way the planner chose
    /// ([`ScatterWay`]); `Err` (the destination unchanged) if an index is out of range. A
    /// panicking reducer leaves every element valid and propagates once the other threads
    /// have stopped.
    pub fn scatter<R: Reducer<A>>(&self, reducer: R) -> Result<(), BadIndex> {
        let (lo, hi) = self.strategy.span;
        match self.strategy.way {
            ScatterWay::Histogram => self.count_then_replay(reducer),
            ScatterWay::InPlace => {
                self.check()?;
                self.run::<false, R>(self.dst, reducer) // unchecked: never `Err`
            }
            // The indices were checked before the task was made.
            ScatterWay::Checked => self.run::<false, R>(self.dst, reducer),
            ScatterWay::Private => {
                // SAFETY: the destination is dense: every offset in `lo..=hi` is an element.
                let mut copy: Vec<A> = (lo..=hi)
                    .map(|o| unsafe { (*self.dst.offset(o)).clone() })
                    .collect();
                // Offset `o` of the destination is element `o - lo` of the copy.
                self.run::<true, R>(copy.as_mut_ptr().wrapping_offset(-lo), reducer)?;
                for (o, v) in (lo..).zip(copy) {
                    // SAFETY: as above; nothing else accesses the destination (`new`'s
                    // contract).
                    unsafe { *self.dst.offset(o) = v };
                }
                Ok(())
            }
        }
    }

    /// Combines every update into `dst` (the destination or a dense copy of it, at the
    /// destination's offsets) through `reducer`. `CHECKED`: checks every index on the
    /// way, `Err` if one was bad (some elements of `dst` then hold updates and some may
    /// hold a bad index's fallback, position 0); otherwise indices were checked before.
    fn run<const CHECKED: bool, R: Reducer<A>>(&self, dst: *mut A, reducer: R) -> Result<(), BadIndex> {
        let total = self.walk.positions();
        if total == 0 {
            return Ok(());
        }
        // Rows of block lanes come whole, to be prefetched.
        let blocks = self.walk.blocks();
        let (lo, hi) = self.strategy.span;
        let (parts, prefetch_updates) = (self.strategy.parts, self.strategy.prefetch_updates);
        let width = (hi - lo) / parts as isize + 1;
        let dst = Shared(dst);
        let part = |p: usize| {
            let own = (
                lo + p as isize * width,
                (lo + (p as isize + 1) * width).min(hi + 1),
            );
            let mut v = Apply::<A, I, R, CHECKED> {
                task: self,
                dst: dst.get(),
                reducer,
                own,
                prefetch_updates,
            };
            // SAFETY: `ScatterTask::new`'s contract, `dst` the destination or a copy at
            // its offsets; indices were checked or are checked on the way (`Apply`); each
            // part writes only the elements in its own span of offsets.
            unsafe { walk(self.walk.outer, self.walk.lane.len, blocks, 0, total, &mut v) }
        };
        if parts == 1 {
            return part(0);
        }
        schedule::run_jobs(parts, false, part).finish()
    }
}

/// The destination (or its copy) as the parts share it.
pub(crate) struct Shared<A>(*mut A);

// SAFETY: the parts of a scatter write disjoint elements through it (see `ScatterTask`'s
// `Sync`), which therefore need only be `Send`.
unsafe impl<A: Send> Sync for Shared<A> {}

impl<A> Shared<A> {
    /// The pointer (a method, so that closures capture the `Sync` wrapper, not its field).
    fn get(&self) -> *mut A {
        self.0
    }
}
