//! The gather kernel: [`Task`], which owns the bounds invariants and runs a plan's loops
//! over ranges of output positions. Its rooms: `lane` (one lane at a time), `blocks`
//! (rows of block lanes as a prefetching pipeline), `elements` (the one-axis element loop
//! and its CPU variants), `stage` (rows of lanes staged through a buffer).

mod blocks;
mod elements;
mod lane;
mod stage;

use std::mem::needs_drop;

use self::elements::Isa;

use self::lane::Gather;
use super::schedule;
use super::store::store;
use super::walk::{Visit, Walk, each_lane, walk};
use super::{BadIndex, Operand, Store, debug_check_reach, locate, stream};
use crate::index::{GatherIndex, Resolve};
use crate::plan::policy::SHORT_RUN;
use crate::plan::{AxisTerm, Loop, Run, Strategy, split_innermost};

/// A gather ready to run: the plan's loops and axis terms with the data pointers.
pub(crate) struct Task<'a, A, I> {
    /// The plan's loops and axis terms.
    walk: Walk<'a>,
    inp: *const A,
    idx: *const I,
    out: *mut A,
    store: Store,
    /// The element loop's variant, chosen once per call.
    isa: Isa,
    /// How rows go through a buffer and whether block copies stream (the planner's).
    strategy: Strategy,
}

// SAFETY: a `Task` only reads `A` and `I` through shared pointers (so it may cross threads
// when both are `Sync`) and writes `A` values into disjoint output ranges, one range per
// thread at a time (so `A` must be `Send`). The pointers are valid for the whole call that
// builds the task (the contract of `Task::new`).
unsafe impl<A: Send + Sync, I: Sync> Sync for Task<'_, A, I> {}

impl<'a, A: Clone + Send + Sync, I: GatherIndex> Task<'a, A, I> {
    /// A task over `loops` (from [`Plan::loops`](crate::plan::Plan::loops), or a tiny
    /// plan's own dimensions after [`Plan::set_out_strides`](crate::plan::Plan::set_out_strides):
    /// any loops over the plan's positions; none for rank 0) and `axes` of the plan made
    /// from `input` and `indices`, run as `strategy` (the planner's
    /// [`Strategy::of`] for these loops and axes) says. For [`Store::Init`] of elements with drop glue, the
    /// loops visit the positions in row-major order (what a range has written is dropped
    /// again, as a run of the C-contiguous output, after a failure); otherwise in any
    /// order ([`Plan::loops_any_order`](crate::plan::Plan::loops_any_order),
    /// [`strips`](crate::plan::strips)).
    ///
    /// # Safety
    /// - the plan was made from these very operands (`Plan::new` with their shapes and
    ///   strides, or with views whose offsets are the same), so that every offset the
    ///   loops' `inp` / `idx` strides and the axis terms can form, with resolved indices
    ///   below each axis length, is an element of `input` / `indices` (checked here with
    ///   `debug_assert!`);
    /// - `out` points to storage of the output shape with the loops' `out` strides, in
    ///   which distinct positions are distinct elements (initialized for
    ///   [`Store::Assign`]; C-contiguous, uninitialized and of exactly the output's
    ///   length for [`Store::Init`]), aliasing neither view, and nothing else accesses it
    ///   while the task runs.
    ///
    /// Inlined, with the helpers it calls: made out of line, the task was copied to its
    /// caller in 16-byte loads right after its lane's 8-byte stores, and waited for them
    /// (PERFORMANCE.md#tiny-calls-store-forwarding).
    #[inline(always)]
    pub unsafe fn new(
        loops: &'a [Loop],
        axes: &'a [AxisTerm],
        strategy: Strategy,
        input: Operand<'_, A>,
        indices: Operand<'_, I>,
        out: *mut A,
        store: Store,
    ) -> Self {
        let (lane, outer) = split_innermost(loops);
        debug_check_reach(loops, axes, input.extent(), indices.extent());
        Task {
            walk: Walk { outer, lane, axes },
            inp: input.ptr,
            idx: indices.ptr,
            out,
            store,
            isa: if strategy.wide { Isa::detect() } else { Isa::Base },
            strategy,
        }
    }

    /// Runs the whole gather: tiny, serially or in parallel, as the strategy says.
    pub fn run<R: Resolve>(&self) -> Result<(), BadIndex> {
        let total = self.walk.positions();
        if total == 0 {
            return Ok(());
        }
        let ranges = match self.strategy.run {
            Run::Tiny => {
                // SAFETY: `Task::new`'s contract.
                return unsafe {
                    match self.store {
                        Store::Assign => self.run_tiny::<R, false>(),
                        Store::Init => self.run_tiny::<R, true>(),
                    }
                };
            }
            // SAFETY: `Task::new`'s contract; one range covers everything.
            Run::Serial => return unsafe { self.run_range::<R>(0, total) },
            Run::Parallel(ranges) => ranges,
        };
        // Ranges completed, so that a failure elsewhere can drop their elements.
        let track = self.store == Store::Init && needs_drop::<A>();
        let outcome = schedule::run_jobs(ranges.count, track, |c| {
            let r = ranges.get(c);
            // SAFETY: every range is claimed once and ranges are disjoint.
            unsafe { self.run_range::<R>(r.start, r.end) }
        });
        if outcome.failed() {
            // A range stopped (bad index or panic) and dropped what it wrote; the caller
            // abandons uninitialized output, so drop the ranges that completed.
            for c in outcome.completed() {
                let r = ranges.get(c);
                // SAFETY: range `c` completed, so its elements are initialized, and
                // nothing else will drop them: the output is abandoned by the caller.
                unsafe {
                    std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                        self.out.add(r.start),
                        r.len(),
                    ))
                };
            }
        }
        outcome.finish()
    }

    /// Gathers every position of a tiny task ([`Run::Tiny`]), lane by lane,
    /// without the range and staging set-up of [`Task::walk_range`]: its cost is its
    /// overhead (PERFORMANCE.md#tiny-calls-store-forwarding).
    ///
    /// # Safety
    /// `Task::new`'s contract.
    unsafe fn run_tiny<R: Resolve, const INIT: bool>(&self) -> Result<(), BadIndex> {
        let mut v = Gather::<A, I, R, INIT>::new(self, self.out);
        // SAFETY: `Task::new`'s contract, for the visitor's lanes, which `each_lane` passes
        // whole.
        each_lane(self.walk.outer, |at| unsafe { v.lane(at, 0, self.walk.lane.len) })?;
        v.guard.disarm();
        Ok(())
    }

    /// Gathers the output positions `start..end` (row-major over the loops).
    ///
    /// # Safety
    /// `Task::new`'s contract; no other thread writes these positions.
    unsafe fn run_range<R: Resolve>(&self, start: usize, end: usize) -> Result<(), BadIndex> {
        // SAFETY: forwarded; the store mode is fixed at compile time for the loops.
        unsafe {
            match self.store {
                Store::Assign => self.walk_range::<R, false>(start, end),
                Store::Init => self.walk_range::<R, true>(start, end),
            }
        }
    }

    /// [`Task::run_range`] for one store mode (`INIT` for [`Store::Init`]).
    ///
    /// # Safety
    /// As for [`Task::run_range`].
    unsafe fn walk_range<R: Resolve, const INIT: bool>(
        &self,
        start: usize,
        end: usize,
    ) -> Result<(), BadIndex> {
        // For `Store::Init` the output is contiguous and `start <= len`; for
        // `Store::Assign` the guard's pointer is never used.
        let base = if INIT {
            self.out.wrapping_add(start)
        } else {
            self.out
        };
        let mut v = Gather::<A, I, R, INIT>::new(self, base);
        v.stage = Vec::with_capacity(self.strategy.staged.capacity(self.walk.axes, self.walk.lane.len));
        // Streamed lines are ordered before the range is reported done, or unwinds.
        let _fence = self.strategy.stream.then_some(stream::Fence);
        // SAFETY: `Task::new`'s contract, for the visitor's lanes.
        unsafe {
            walk(
                self.walk.outer,
                self.walk.lane.len,
                self.strategy.rows,
                start,
                end,
                &mut v,
            )?
        };
        v.guard.disarm();
        Ok(())
    }

    /// The input offset selected through `axes` by the coordinate at indices offset `at`
    /// (a bad index counts as 0) and whether every index was good, without a branch.
    ///
    /// # Safety
    /// `at + comp` is an element of the indices for every axis term.
    #[inline(always)]
    unsafe fn locate<R: Resolve>(&self, axes: &[AxisTerm], at: isize) -> (isize, bool) {
        // SAFETY: forwarded.
        unsafe { locate::<I, R>(self.idx, axes, at) }
    }

    /// Copies positions `first..last` of a block lane from `src` (the block's input
    /// position 0) to `out` (the lane's output position 0); adds the elements written to
    /// `written` (per element where a panic could leave them behind).
    ///
    /// # Safety
    /// Both lanes exist with the plan's lane strides; `out` is initialized unless `INIT`.
    #[inline(always)]
    unsafe fn copy<const INIT: bool>(
        &self,
        out: *mut A,
        src: *const A,
        first: usize,
        last: usize,
        written: &mut usize,
    ) {
        let l = self.walk.lane;
        let count_each = INIT && needs_drop::<A>();
        // SAFETY: by the contract above.
        unsafe {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            if self.strategy.stream && l.inp == 1 && l.out == 1 && stream::pays(out.add(first), last - first)
            {
                // (`Task::new` checked that the elements stream: no drop glue.)
                stream::clone_run(out.add(first), src.add(first), last - first);
                *written += last - first;
                return;
            }
            if l.inp == 1 && l.out == 1 && !INIT && last - first > SHORT_RUN {
                let d = std::slice::from_raw_parts_mut(out.add(first), last - first);
                d.clone_from_slice(std::slice::from_raw_parts(src.add(first), last - first));
            } else if l.inp == 1 && l.out == 1 && !count_each {
                // Into fresh storage, contiguous: unit strides the compiler can see (a
                // plain copy for `Copy` types).
                for i in first..last {
                    out.add(i).write((*src.add(i)).clone());
                }
            } else {
                for i in first as isize..last as isize {
                    store::<A, INIT>(out.offset(i * l.out), &*src.offset(i * l.inp));
                    if count_each {
                        *written += 1;
                    }
                }
            }
        }
        if !count_each {
            *written += last - first;
        }
    }
}
