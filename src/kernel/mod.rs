//! The kernel: executes a [`Plan`](crate::plan::Plan) by walking output lanes. It only
//! moves elements. Its rooms:
//!
//! - [`schedule`]: numbered jobs on the calling thread and the rayon pool, with panics
//!   and failures collected (shared with scatter);
//! - [`walk`]: the odometer that visits a range of positions lane by lane (shared with
//!   scatter);
//! - `blocks`: rows of whole block lanes as a prefetching pipeline;
//! - `elements`: the one-axis element loop and its CPU variants;
//! - `stage`: rows of lanes staged through a buffer: lanes that stride through the
//!   output, gathered contiguously and written along the output's memory order, and
//!   rows of a far-striding input axis, copied with the axis contiguous, and slabs of
//!   the input that a row of lanes re-reads (the planner's strips), copied once;
//! - `store`: stores and the guard for uninitialized output;
//! - `stream`: block copies with streaming stores, for outputs too large for the caches;
//! - `scatter`: the scatter kernel, on the same walk and scheduler;
//! - this file: [`Task`], which owns the bounds invariants, and the gather's lanes.
//!
//! The innermost loop of the plan is the *lane*. When the indices do not advance along it
//! (a block gather: ONNX Gather's trailing dimensions, GatherND's slices), the gathered
//! offset is resolved once per lane and the lane is a run copy, a `clone_from_slice` when
//! both sides are contiguous (a fixed-size array copy for blocks of 1-16 elements).
//! Otherwise every element resolves its own indices; with one gathered axis and a
//! contiguous lane that loop is branch-free and vectorizes.
//!
//! Work is split into ranges of flat output positions (in the loops' row-major order).
//! Small gathers run on the calling thread; large ones run on the calling thread *and* the
//! rayon pool.
//!
//! # Safety, in one place
//! [`Task::new`] is the only way to build a task. It takes the plan's loops and the very
//! views the plan was made from, and its contract (checked with `debug_assert!` where the
//! views allow) is what every `unsafe` block below relies on: every offset the loops and
//! the axis terms can form, with every resolved index below its axis length, is an
//! element of the input (and of the indices); the output has the loops' shape.

mod blocks;
mod elements;
mod scatter;
pub(crate) mod schedule;
mod stage;
mod store;
mod stream;
pub(crate) mod walk;

use std::mem::{MaybeUninit, needs_drop};

use self::elements::Axis1;
pub(crate) use self::elements::Isa;
pub(crate) use self::scatter::{SCATTER_TINY, ScatterTask, scatter_tiny};
use self::schedule::Ranges;
pub(crate) use self::stage::STAGE;
use self::stage::Stage;
use self::store::{InitGuard, store};
use self::walk::{At, Visit, each_lane, positions, split_innermost, walk};
use crate::index::{GatherIndex, Resolve};
use crate::plan::{AxisTerm, Loop};

/// An index was out of range; the caller rescans the indices to say which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadIndex;

/// How the kernel stores an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Store {
    /// `out` holds initialized elements: assign, dropping the old value.
    Assign,
    /// `out` is uninitialized, C-contiguous storage of exactly the output's length: write
    /// without dropping. If the gather stops (a bad index or a panic), every element
    /// written so far is dropped again, and the caller abandons the storage.
    Init,
}

/// Parallel gathers are handed out in ranges of about this many output bytes.
const CHUNK_BYTES: usize = if cfg!(miri) { 64 } else { 1 << 17 };

/// Staged gathers ([`Stage`]) are handed out in larger ranges: a staged group never spans
/// two ranges, and a range then holds whole groups (W3 from a transposed input: 16 rows
/// instead of 5) and fills whole output pages along the lanes it writes across (W1 into
/// a Fortran-order output: 3.6-4.3 -> 2.6 ms, W3 from a transposed input 4.1-5.0 ->
/// 3.3-3.5 ms, alternating runs). 4 MiB ranges doubled W8's time into a Fortran-order
/// output before its short-row tiles (`plan::tiled`); with them, 4 MiB and 1 MiB are
/// the same within the noise (W8 6.2-6.5 vs 5.8-7.0 ms, W1 2.6 ms both).
const STAGED_CHUNK_BYTES: usize = if cfg!(miri) { 64 } else { 1 << 20 };

/// Block lanes of ranges of at most this many positions are copied one by one, not
/// through the prefetching pipeline of [`Task::block_row`], whose set-up a tiny gather
/// does not repay (W7's 6 positions: 38 -> 34 ns through a plan). Low under Miri, so
/// that its small tests still run the pipeline.
const PIPELINE_MIN: usize = if cfg!(miri) { 8 } else { 64 };

/// A gather ready to run: the plan's loops and axis terms with the data pointers.
pub(crate) struct Task<'a, A, I> {
    outer: &'a [Loop],
    lane: Loop,
    axes: &'a [AxisTerm],
    inp: *const A,
    idx: *const I,
    out: *mut A,
    store: Store,
    /// The element loop's variant, chosen once per call.
    isa: Isa,
    /// Whether rows of lanes go through a buffer, and which side ([`Stage::of`]).
    staged: Stage,
    /// Whether contiguous block copies stream into the output ([`stream`]).
    stream: bool,
}

// SAFETY: a `Task` only reads `A` and `I` through shared pointers (so it may cross threads
// when both are `Sync`) and writes `A` values into disjoint output ranges, one range per
// thread at a time (so `A` must be `Send`). The pointers are valid for the whole call that
// builds the task (the contract of `Task::new`).
unsafe impl<A: Send + Sync, I: Sync> Sync for Task<'_, A, I> {}

/// An array operand as the kernel sees it: its first element, and its shape and strides,
/// which bound the offsets the kernel may form from it.
#[derive(Clone, Copy)]
pub(crate) struct Operand<'v, T> {
    pub ptr: *const T,
    pub shape: &'v [usize],
    pub strides: &'v [isize],
}

impl<'v, T> Operand<'v, T> {
    /// The operand of an array or view.
    pub fn of<D: ndarray::Dimension>(a: &'v ndarray::ArrayRef<T, D>) -> Self {
        Operand {
            ptr: a.as_ptr(),
            shape: a.shape(),
            strides: a.strides(),
        }
    }

    /// The operand at `ptr` with `layout`.
    #[inline]
    pub fn new(layout: crate::plan::Layout<'v>, ptr: *const T) -> Self {
        Operand {
            ptr,
            shape: layout.shape,
            strides: layout.strides,
        }
    }

    fn extent(&self) -> (&'v [usize], &'v [isize]) {
        (self.shape, self.strides)
    }
}

/// The lowest and highest element offsets of `shape` with `strides` (`None` if empty).
pub(crate) fn span(shape: &[usize], strides: &[isize]) -> Option<(isize, isize)> {
    let mut lo_hi = (0isize, 0isize);
    for (&n, &s) in shape.iter().zip(strides) {
        let reach = (n.checked_sub(1)? as isize) * s;
        if reach < 0 {
            lo_hi.0 += reach
        } else {
            lo_hi.1 += reach
        }
    }
    Some(lo_hi)
}

/// The lowest and highest offsets the strides `stride` picks from `loops` can form.
fn loop_reach(loops: &[Loop], stride: fn(&Loop) -> isize) -> (isize, isize) {
    let (mut lo, mut hi) = (0isize, 0isize);
    for l in loops {
        let r = (l.len as isize - 1) * stride(l);
        if r < 0 { lo += r } else { hi += r }
    }
    (lo, hi)
}

/// Debug builds: asserts that every offset `loops` and `axes` can form lies within
/// `input` (and, for the indices' offsets, within `indices`), each given as shape and
/// strides. This is the bounds invariant every kernel's `unsafe` relies on.
pub(crate) fn debug_check_reach(
    loops: &[Loop],
    axes: &[AxisTerm],
    input: (&[usize], &[isize]),
    indices: (&[usize], &[isize]),
) {
    if !cfg!(debug_assertions) || loops.iter().any(|l| l.len == 0) {
        return;
    }
    let within = |(lo, hi): (isize, isize), view: Option<(isize, isize)>| {
        view.is_some_and(|(vlo, vhi)| vlo <= lo && hi <= vhi)
    };
    // Each axis term adds its own resolved offset to the input's...
    let (mut lo, mut hi) = loop_reach(loops, |l| l.inp);
    for t in axes {
        let r = (t.len as isize - 1) * t.stride;
        (lo, hi) = (lo + r.min(0), hi + r.max(0));
    }
    debug_assert!(
        within((lo, hi), span(input.0, input.1)),
        "input offsets {lo}..={hi} outside the input"
    );
    // ... and reads one component of the coordinate at its own offset.
    if !axes.is_empty() {
        let (mut lo, mut hi) = loop_reach(loops, |l| l.idx);
        lo += axes.iter().map(|t| t.comp.min(0)).min().unwrap_or(0);
        hi += axes.iter().map(|t| t.comp.max(0)).max().unwrap_or(0);
        debug_assert!(
            within((lo, hi), span(indices.0, indices.1)),
            "indices offsets {lo}..={hi} outside the indices"
        );
    }
}

impl<'a, A: Clone + Send + Sync, I: GatherIndex> Task<'a, A, I> {
    /// A task over `loops` (from [`Plan::loops`](crate::plan::Plan::loops), or a tiny
    /// plan's own dimensions after [`Plan::set_out_strides`](crate::plan::Plan::set_out_strides):
    /// any loops over the plan's positions; none for rank 0) and `axes` of the plan made
    /// from `input` and `indices`. For [`Store::Init`] of elements with drop glue, the
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
    /// (W7's `_into` 89 -> 83 ns, alternating runs).
    #[inline(always)]
    pub unsafe fn new(
        loops: &'a [Loop],
        axes: &'a [AxisTerm],
        input: Operand<'_, A>,
        indices: Operand<'_, I>,
        out: *mut A,
        store: Store,
    ) -> Self {
        let (lane, outer) = split_innermost(loops);
        debug_check_reach(loops, axes, input.extent(), indices.extent());
        // A tiny task runs lane by lane, unstaged ([`Task::run_tiny`]; W7's `_into` spent
        // 4% of its time deciding how it would stage).
        let total = positions(outer, &lane);
        let staged = if total <= walk::TINY {
            Stage::No
        } else {
            Stage::of::<A>(&lane, outer, axes)
        };
        let stream = staged == Stage::No
            && lane.idx == 0
            && !axes.is_empty()
            && (lane.inp, lane.out) == (1, 1)
            && lane.len * size_of::<A>() >= 128
            && total.saturating_mul(size_of::<A>()) >= stream::STREAM_MIN_BYTES
            && stream::streams::<A>()
            && stream::available();
        // (A lane staged for its output is contiguous in the buffer.)
        let one_axis = axes.len() == 1 && lane.idx == 1 && (lane.out == 1 || staged == Stage::Output);
        Task {
            outer,
            lane,
            axes,
            inp: input.ptr,
            idx: indices.ptr,
            out,
            store,
            isa: if one_axis && lane.len >= 16 {
                Isa::detect()
            } else {
                Isa::Base
            },
            staged,
            stream,
        }
    }

    /// Whether lanes are blocks: one coordinate each (the indices do not advance).
    fn blocks(&self) -> bool {
        self.lane.idx == 0 && !self.axes.is_empty()
    }

    /// Runs the whole gather, serially or in parallel.
    pub fn run<R: Resolve>(&self) -> Result<(), BadIndex> {
        let total = positions(self.outer, &self.lane);
        if total == 0 {
            return Ok(());
        }
        if total <= walk::TINY {
            // SAFETY: `Task::new`'s contract.
            return unsafe {
                match self.store {
                    Store::Assign => self.run_tiny::<R, false>(),
                    Store::Init => self.run_tiny::<R, true>(),
                }
            };
        }
        let idx_bytes = usize::from(!self.axes.is_empty() && self.lane.idx != 0) * size_of::<I>();
        let bytes = total.saturating_mul(size_of::<A>() + idx_bytes);
        if !schedule::worth_parallel(bytes) {
            // SAFETY: `Task::new`'s contract; one range covers everything.
            return unsafe { self.run_range::<R>(0, total) };
        }
        let chunk = match self.staged {
            Stage::No => CHUNK_BYTES,
            Stage::Output | Stage::Input => STAGED_CHUNK_BYTES,
            // A range per row of lanes (a strip), so that each slab is copied once.
            Stage::Slab => bytes / total * positions(&self.outer[self.outer.len() - 1..], &self.lane),
        };
        let mut ranges = Ranges::new(total, bytes, chunk);
        if self.staged == Stage::Output {
            // Whole groups: a range that starts or ends inside one gathers those lanes
            // element by element, striding through the output (a tenth of W3's time into a
            // Fortran-order output, in groups of whole lanes).
            ranges = ranges.in_multiples_of(stage::output_group(self.lane.len) * self.lane.len);
        }
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

    /// Gathers every position of a tiny task (at most [`walk::TINY`]), lane by lane,
    /// without the range and staging set-up of [`Task::walk_range`]: its cost is its
    /// overhead (W7's `_into` 91 -> 85 ns, its plan's `apply_into` 34 -> 28 ns).
    ///
    /// # Safety
    /// `Task::new`'s contract.
    unsafe fn run_tiny<R: Resolve, const INIT: bool>(&self) -> Result<(), BadIndex> {
        let mut v = Gather::<A, I, R, INIT>::new(self, self.out);
        // SAFETY: `Task::new`'s contract, for the visitor's lanes, which `each_lane` passes
        // whole.
        each_lane(self.outer, |at| unsafe { v.lane(at, 0, self.lane.len) })?;
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
        v.stage = Vec::with_capacity(self.staged.capacity(self.axes, self.lane.len));
        let rows = self.staged != Stage::No || (self.blocks() && end - start > PIPELINE_MIN);
        // Streamed lines are ordered before the range is reported done, or unwinds.
        let _fence = self.stream.then_some(stream::Fence);
        // SAFETY: `Task::new`'s contract, for the visitor's lanes.
        unsafe { walk(self.outer, self.lane.len, rows, start, end, &mut v)? };
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
        let l = self.lane;
        let count_each = INIT && needs_drop::<A>();
        // SAFETY: by the contract above.
        unsafe {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            if self.stream && l.inp == 1 && l.out == 1 && stream::pays(out.add(first), last - first) {
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

/// Contiguous runs of at most this many elements are cloned one by one, not as a slice:
/// for `Copy` elements, a slice is a `memcpy` call (W7's 12-byte rows).
const SHORT_RUN: usize = 8;

/// The offset selected through `axes` by the coordinate at indices offset `at` of `idx`
/// (a bad index counts as 0) and whether every index was good, without a branch.
///
/// # Safety
/// `idx + at + comp` is an element of the indices for every axis term.
#[inline(always)]
pub(crate) unsafe fn locate<I: GatherIndex, R: Resolve>(
    idx: *const I,
    axes: &[AxisTerm],
    at: isize,
) -> (isize, bool) {
    let (mut off, mut good) = (0isize, true);
    for a in axes {
        // SAFETY: by the contract above.
        let (i, ok) = R::resolve_or_zero(unsafe { *idx.offset(at + a.comp) }, a.len);
        off += i as isize * a.stride;
        good &= ok;
    }
    (off, good)
}

/// The gather's visitor: one range of a task, with the guard over what it has written.
struct Gather<'t, 'a, A, I, R, const INIT: bool> {
    task: &'t Task<'a, A, I>,
    guard: InitGuard<A>,
    /// The buffer of a staged task's rows (unallocated otherwise).
    stage: Vec<A>,
    _mode: std::marker::PhantomData<R>,
}

impl<'t, 'a, A, I, R, const INIT: bool> Gather<'t, 'a, A, I, R, INIT> {
    /// A visitor of `task`'s range whose first output element is at `base`.
    fn new(task: &'t Task<'a, A, I>, base: *mut A) -> Self {
        Gather {
            task,
            guard: InitGuard::new(base, INIT && needs_drop::<A>()),
            stage: Vec::new(),
            _mode: std::marker::PhantomData,
        }
    }
}

impl<A: Clone + Send + Sync, I: GatherIndex, R: Resolve, const INIT: bool> Visit
    for Gather<'_, '_, A, I, R, INIT>
{
    #[inline(always)]
    unsafe fn lanes(&mut self, row: Loop, count: usize, at: At) -> Result<(), BadIndex> {
        let written = &mut self.guard.written;
        // SAFETY: forwarded; the walk asks for whole rows only of staged tasks (whose
        // buffer `walk_range` allocated) and of block lanes.
        unsafe {
            let buf = self.stage.spare_capacity_mut().as_mut_ptr();
            match self.task.staged {
                Stage::Output => self.task.stage_row::<R>(row, count, at, buf, written),
                Stage::Input => self.task.stage_inputs::<R, INIT>(row, count, at, buf, written),
                Stage::Slab => self.task.stage_slab::<R, INIT>(row, count, at, buf, written),
                Stage::No => self.task.block_row::<R, INIT>(row, count, at, written),
            }
        }
    }

    /// Gathers positions `first..last` of the lane; counts the elements written (per
    /// element where a panic could leave them behind, that is for `INIT` with drop glue).
    #[inline(always)]
    unsafe fn lane(&mut self, at: At, first: usize, last: usize) -> Result<(), BadIndex> {
        let t = self.task;
        let (l, f) = (t.lane, first as isize);
        let written = &mut self.guard.written;
        let count_each = INIT && needs_drop::<A>();
        // SAFETY: (for the whole body) `Task::new`'s contract bounds every offset formed
        // from the loops and the axis terms; resolved indices are `< len` by `Resolve`
        // (0 for a bad one, which is reported).
        unsafe {
            let out = t.out.offset(at.out);
            if l.idx == 0 || t.axes.is_empty() {
                // A block: one coordinate for the whole run.
                let (g, ok) = t.locate::<R>(t.axes, at.idx);
                if !ok {
                    return Err(BadIndex);
                }
                t.copy::<INIT>(out, t.inp.offset(at.inp + g), first, last, written);
                return Ok(());
            }
            if let [a] = t.axes {
                // One gathered axis (GatherElements, take_along_axis, 1-D take).
                let (idx, inp) = (t.idx.offset(at.idx + a.comp), t.inp.offset(at.inp));
                if l.out == 1 && l.idx == 1 && !count_each {
                    let n = last - first;
                    let run = Axis1 {
                        inp: inp.offset(f * l.inp),
                        step: l.inp,
                        len: a.len,
                        stride: a.stride,
                        // (The slab prefetches its lanes' indices itself.)
                        past_end: t.staged != Stage::Slab,
                        next: t.outer.last().map_or(0, |r| r.inp),
                    };
                    let out = std::slice::from_raw_parts_mut(out.add(first).cast::<MaybeUninit<A>>(), n);
                    let idx = std::slice::from_raw_parts(idx.add(first), n);
                    let isa = if n >= 16 { t.isa } else { Isa::Base };
                    *written += n;
                    return if run.fill_with::<I, R, INIT>(isa, out, idx) {
                        Ok(())
                    } else {
                        Err(BadIndex)
                    };
                }
            }
            for i in f..last as isize {
                let (g, ok) = t.locate::<R>(t.axes, at.idx + i * l.idx);
                if !ok {
                    return Err(BadIndex);
                }
                store::<A, INIT>(out.offset(i * l.out), &*t.inp.offset(at.inp + i * l.inp + g));
                if count_each {
                    *written += 1;
                }
            }
        }
        if !count_each {
            *written += last - first;
        }
        Ok(())
    }
}
