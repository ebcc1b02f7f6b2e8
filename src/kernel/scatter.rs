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

use std::mem::needs_drop;
use std::sync::Mutex;

use super::blocks::{prefetch_block, prefetch_line};
use super::elements::{ROW_CHUNK, next_row_share};
use super::schedule::{self, Ranges};
use super::walk::{At, Visit, each_lane, positions, split_innermost, walk};
use super::{BadIndex, Operand, debug_check_reach, locate, span};
use crate::index::{GatherIndex, Raise, Resolve};
use crate::plan::{AxisTerm, Loop};
use crate::reduce::Reducer;

/// Index checks are handed out in ranges of about this many index bytes.
const CHECK_BYTES: usize = if cfg!(miri) { 64 } else { 1 << 18 };

/// Block lanes located ahead of their combination, at most.
const RING: usize = 64;

/// Destinations smaller than this (in bytes, whole span) stay in cache: a dense one with
/// more updates than elements is scattered into a copy, its indices checked on the way
/// (one pass over them, not two); any of them is written by one thread (each part would
/// re-read all indices and updates to write a cache-resident few).
const SMALL_DST_BYTES: usize = 1 << 20;

/// A scatter ready to run.
pub(crate) struct ScatterTask<'a, A, I> {
    outer: &'a [Loop],
    lane: Loop,
    axes: &'a [AxisTerm],
    dst: *mut A,
    upd: *const A,
    idx: *const I,
    /// The destination offsets one lane can reach, relative to its own offset.
    lane_reach: (isize, isize),
    /// The destination's lowest and highest element offsets.
    span: (isize, isize),
    /// Whether the destination's elements fill `span` (and there is at least one).
    dense: bool,
}

// SAFETY: a `ScatterTask` reads `A` (updates) and `I` through shared pointers, so it may
// cross threads when both are `Sync`; it writes `A` values of the destination, each
// element from exactly one thread (spans are disjoint), so `A` must be `Send`. The
// pointers are valid for the whole call that builds the task (`ScatterTask::new`).
unsafe impl<A: Send + Sync, I: Sync> Sync for ScatterTask<'_, A, I> {}

impl<'a, A: Clone + Send + Sync, I: GatherIndex> ScatterTask<'a, A, I> {
    /// A scatter over `loops` (from [`Plan::loops`](crate::plan::Plan::loops) with the
    /// updates' strides, or as for [`Task::new`](super::Task::new)) and `axes` of the plan
    /// made from `dst` (as the input) and `indices`.
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
    ) -> Self {
        debug_check_reach(loops, axes, dst.extent(), indices.extent());
        let (lane, outer) = split_innermost(loops);
        let mut lane_reach = span(&[lane.len], &[lane.inp]).unwrap_or((0, 0));
        for t in axes {
            let r = (t.len as isize).saturating_sub(1) * t.stride;
            lane_reach = (lane_reach.0 + r.min(0), lane_reach.1 + r.max(0));
        }
        let dst_span = span(dst.shape, dst.strides);
        let dst_len = dst.shape.iter().product::<usize>();
        ScatterTask {
            outer,
            lane,
            axes,
            dst: dst.ptr.cast_mut(),
            upd: updates,
            idx: indices.ptr,
            lane_reach,
            span: dst_span.unwrap_or((0, 0)),
            dense: dst_span.is_some_and(|(lo, hi)| (hi - lo) as usize + 1 == dst_len),
        }
    }

    /// Checks every index the scatter will read; `Err` if one is out of range. Reads only.
    pub fn check(&self) -> Result<(), BadIndex> {
        let total = positions(self.outer, &self.lane);
        if total == 0 || self.axes.is_empty() {
            return Ok(());
        }
        let per_lane = if self.lane.idx == 0 { 1 } else { self.lane.len };
        let bytes = (total / self.lane.len).saturating_mul(per_lane * size_of::<I>());
        let visit = |start: usize, end: usize| {
            let mut v = Check { task: self };
            // SAFETY: `ScatterTask::new`'s contract; `start..end` are positions.
            unsafe { walk(self.outer, self.lane.len, self.lane.idx == 0, start, end, &mut v) }
        };
        if !schedule::worth_parallel(bytes) {
            return visit(0, total);
        }
        let ranges = Ranges::new(total, bytes, CHECK_BYTES);
        schedule::run_jobs(ranges.count, false, |c| {
            let r = ranges.get(c);
            visit(r.start, r.end)
        })
        .finish()
    }

    /// Checks every index, then combines every update into the destination through
    /// `reducer`, in row-major order per element; `Err` (the destination unchanged) if an
    /// index is out of range. A panicking reducer leaves every element valid and
    /// propagates once the other threads have stopped.
    pub fn scatter<R: Reducer<A>>(&self, reducer: R) -> Result<(), BadIndex> {
        let (lo, hi) = self.span;
        let dst_len = (hi - lo) as usize + 1;
        let total = positions(self.outer, &self.lane);
        if self.dense
            && self.one_update()
            && dst_len < total
            && dst_len.saturating_mul(size_of::<u32>()) < SMALL_DST_BYTES
            && u32::try_from(total).is_ok()
            && schedule::worth_parallel(total.saturating_mul(size_of::<I>()))
        {
            return self.count_then_replay(reducer);
        }
        // A copy pays when making it costs less than a second pass over the positions.
        let private = self.dense
            && dst_len.saturating_mul(size_of::<A>()) < SMALL_DST_BYTES
            && dst_len < positions(self.outer, &self.lane);
        if !private {
            self.check()?;
            return self.run::<false, R>(self.dst, reducer); // unchecked: never `Err`
        }
        // SAFETY: the destination is dense: every offset in `lo..=hi` is an element.
        let mut copy: Vec<A> = (lo..=hi)
            .map(|o| unsafe { (*self.dst.offset(o)).clone() })
            .collect();
        // Offset `o` of the destination is element `o - lo` of the copy.
        self.run::<true, R>(copy.as_mut_ptr().wrapping_offset(-lo), reducer)?;
        for (o, v) in (lo..).zip(copy) {
            // SAFETY: as above; nothing else accesses the destination (`new`'s contract).
            unsafe { *self.dst.offset(o) = v };
        }
        Ok(())
    }

    /// Whether every position reads the same update (the updates broadcast from one
    /// value, as a histogram's `1.0`).
    fn one_update(&self) -> bool {
        self.outer
            .iter()
            .chain([&self.lane])
            .all(|l| l.out == 0 || l.len == 1)
    }

    /// A scatter of one update value into a small dense destination with more positions
    /// than elements (a histogram). Combining the same value into an element `c` times in
    /// a row gives a result that depends only on `c`, so the parts count the positions
    /// that land on each element (the positions split between them, a count array each,
    /// the indices checked on the way, the destination untouched), and then combine the
    /// value `c` times into each element (the elements split between them): the same
    /// bits as row-major order on any number of threads, with every thread reading its
    /// share of the indices once (S5's 16M indices into 1024 bins: 18-21 -> 10.4-11.8 ms,
    /// alternating runs).
    fn count_then_replay<R: Reducer<A>>(&self, reducer: R) -> Result<(), BadIndex> {
        let total = positions(self.outer, &self.lane);
        let (lo, hi) = self.span;
        let n = (hi - lo) as usize + 1;
        let parts = schedule::threads().clamp(1, total);
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
                    self.outer,
                    self.lane.len,
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
        let jobs = if schedule::worth_parallel(total.saturating_mul(size_of::<A>())) {
            schedule::threads()
        } else {
            1
        };
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

    /// Combines every update into `dst` (the destination or a dense copy of it, at the
    /// destination's offsets) through `reducer`. `CHECKED`: checks every index on the
    /// way, `Err` if one was bad (some elements of `dst` then hold updates and some may
    /// hold a bad index's fallback, position 0); otherwise indices were checked before.
    fn run<const CHECKED: bool, R: Reducer<A>>(&self, dst: *mut A, reducer: R) -> Result<(), BadIndex> {
        let total = positions(self.outer, &self.lane);
        if total == 0 {
            return Ok(());
        }
        // Rows of block lanes come whole, to be prefetched.
        let blocks = self.lane.idx == 0 && !self.axes.is_empty();
        let (lo, hi) = self.span;
        // Each part walks every position, so parts pay only when the updates' random
        // writes cost more than re-reading the indices: when the destination does not fit
        // in cache, and blocks fill at least a cache line. (A histogram's few bins are
        // written fastest by one thread, unless it adds one value (`count_then_replay`):
        // S5, before it was counted, took 47 ms on one, 135 ms on two; 71 ms when
        // each part first sorted a lane's positions into its own and others', without a
        // branch. S3's 16-byte points: 11.5 ms on one thread, 13 ms on two, where S8's
        // 64-byte blocks take 8.8 and 5.3.) Under Miri, parts whenever the work is large
        // enough, so that its tests reach them.
        let dst_bytes = ((hi - lo) as usize + 1).saturating_mul(size_of::<A>());
        let small_blocks = blocks && self.lane.len * size_of::<A>() < 64;
        let parts = if schedule::worth_parallel(total.saturating_mul(size_of::<A>()))
            && ((dst_bytes >= SMALL_DST_BYTES && !small_blocks) || cfg!(miri))
        {
            schedule::threads()
        } else {
            1
        };
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
            };
            // SAFETY: `ScatterTask::new`'s contract, `dst` the destination or a copy at
            // its offsets; indices were checked or are checked on the way (`Apply`); each
            // part writes only the elements in its own span of offsets.
            unsafe { walk(self.outer, self.lane.len, blocks, 0, total, &mut v) }
        };
        if parts == 1 {
            return part(0);
        }
        schedule::run_jobs(parts, false, part).finish()
    }
}

/// Scatters of at most this many positions run [`scatter_tiny`]: the tiny gathers' bound
/// ([`TINY`](super::walk::TINY)), lower under Miri, so that its small tests still reach
/// the large scatter's paths.
pub(crate) const SCATTER_TINY: usize = if cfg!(miri) { 16 } else { super::walk::TINY };

/// A scatter of few positions (at most [`SCATTER_TINY`] where the caller chooses it; any
/// number is correct, only slower than [`ScatterTask`] for many): one pass checks every
/// index, a second one combines the updates in row-major order, without the spans, parts
/// and visitors a large scatter sets up, which a tiny one does not repay (S4's 8 updates:
/// ~2400 -> ~1550 instructions per call, with the plan's own loops).
///
/// # Safety
/// [`ScatterTask::new`]'s contract.
pub(crate) unsafe fn scatter_tiny<A: Clone, I: GatherIndex, R: Reducer<A>>(
    loops: &[Loop],
    axes: &[AxisTerm],
    dst: Operand<'_, A>,
    updates: *const A,
    indices: Operand<'_, I>,
    reducer: R,
) -> Result<(), BadIndex> {
    debug_check_reach(loops, axes, dst.extent(), indices.extent());
    let ops = (dst.ptr.cast_mut(), updates, indices.ptr);
    // One axis term by value, the common case (`scatter`, `scatter_elements`).
    // SAFETY: (both arms) forwarded, with the call's own axis terms.
    unsafe {
        match axes {
            [a] => tiny(loops, &[*a], ops, reducer),
            _ => tiny(loops, axes, ops, reducer),
        }
    }
}

/// [`scatter_tiny`]'s passes (inlined into each of its arms, so that one axis term given
/// by value is a constant loop).
///
/// # Safety
/// [`ScatterTask::new`]'s contract for `loops`, `axes` and the operands `(dst, updates,
/// indices)`.
#[inline(always)]
unsafe fn tiny<A: Clone, I: GatherIndex, R: Reducer<A>>(
    loops: &[Loop],
    axes: &[AxisTerm],
    (dst, updates, indices): (*mut A, *const A, *const I),
    reducer: R,
) -> Result<(), BadIndex> {
    let (lane, outer) = split_innermost(loops);
    // The destination offset of position `i` of the lane at `at`, and whether its index
    // was good (a bad one resolves to 0).
    let locate_at = |at: At, i: isize| {
        let p = at.step(&lane, i);
        // SAFETY: position `i` of the lane exists; its coordinate is an element of the
        // indices (`ScatterTask::new`'s contract).
        let (g, ok) = unsafe { locate::<I, Raise>(indices, axes, p.idx) };
        (p.inp + g, p.out, ok)
    };
    let mut good = true;
    each_lane(outer, |at| {
        for i in 0..lane.len as isize {
            good &= locate_at(at, i).2;
        }
        Ok(())
    })?;
    if !good {
        return Err(BadIndex);
    }
    each_lane(outer, |at| {
        for i in 0..lane.len as isize {
            let (d, u, _) = locate_at(at, i);
            // SAFETY: `d` is a destination element (every index was good), `u` an update;
            // the destination is ours alone and the updates do not alias it.
            unsafe { reducer.reduce(&mut *dst.offset(d), &*updates.offset(u)) };
        }
        Ok(())
    })
}

/// The destination (or its copy) as the parts share it.
struct Shared<A>(*mut A);

// SAFETY: the parts of a scatter write disjoint elements through it (see `ScatterTask`'s
// `Sync`), which therefore need only be `Send`.
unsafe impl<A: Send> Sync for Shared<A> {}

impl<A> Shared<A> {
    /// The pointer (a method, so that closures capture the `Sync` wrapper, not its field).
    fn get(&self) -> *mut A {
        self.0
    }
}

/// Elements whose updates [`replay`] combines side by side.
const CHAINS: usize = 32;

/// Combines `u` into each element of `xs` as many times in a row as `counts` says, the
/// elements of a group of [`CHAINS`] in turn, so that their combinations (each a chain of
/// dependent ones) overlap.
fn replay<A: Clone, R: Reducer<A>>(xs: &mut [A], counts: &[u32], u: &A, reducer: R) {
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
struct Count<'t, 'a, A, I> {
    task: &'t ScatterTask<'a, A, I>,
    counts: &'t mut [u32],
    lo: isize,
}

impl<A: Send + Sync, I: GatherIndex> Visit for Count<'_, '_, A, I> {
    unsafe fn lanes(&mut self, row: Loop, count: usize, at: At) -> Result<(), BadIndex> {
        for k in 0..count as isize {
            // SAFETY: forwarded: lane `k` of the row exists.
            unsafe { self.lane(at.step(&row, k), 0, self.task.lane.len)? };
        }
        Ok(())
    }

    unsafe fn lane(&mut self, at: At, first: usize, last: usize) -> Result<(), BadIndex> {
        let (t, counts) = (self.task, &mut *self.counts);
        let (l, base) = (t.lane, at.inp - self.lo);
        // A bad index resolves to position 0, a destination element, so that every
        // count's index is in bounds either way.
        let mut good = true;
        if let ([a], true) = (t.axes, l.idx != 0) {
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
                // destination's span, the counts' length (the destination is dense). (A
                // bounds check here cost S5's count 8.6 -> 11.0 ms on two threads.)
                unsafe { *counts.get_unchecked_mut(e) += 1 };
            }
        } else {
            for i in first as isize..last as isize {
                // SAFETY: the coordinate is an element of the indices (`new`'s contract).
                let (g, ok) = unsafe { locate::<I, Raise>(t.idx, t.axes, at.idx + i * l.idx) };
                good &= ok;
                counts[(base + i * l.inp + g) as usize] += 1;
            }
        }
        if good { Ok(()) } else { Err(BadIndex) }
    }
}

/// The index check: a lane is good if every coordinate it reads resolves.
struct Check<'t, 'a, A, I> {
    task: &'t ScatterTask<'a, A, I>,
}

impl<A: Send + Sync, I: GatherIndex> Visit for Check<'_, '_, A, I> {
    /// `count` block lanes along `row`, one coordinate each ([`check_row`]).
    unsafe fn lanes(&mut self, row: Loop, count: usize, at: At) -> Result<(), BadIndex> {
        let t = self.task;
        // One or two axis terms by value (S3: ~44 -> ~20 instructions per point).
        // SAFETY: (every arm) forwarded, with this task's own axis terms.
        let good = unsafe {
            match t.axes {
                [a] => check_row(t.idx, &[*a], row, count, at.idx),
                [a, b] => check_row(t.idx, &[*a, *b], row, count, at.idx),
                axes => check_row(t.idx, axes, row, count, at.idx),
            }
        };
        if good { Ok(()) } else { Err(BadIndex) }
    }

    unsafe fn lane(&mut self, at: At, first: usize, last: usize) -> Result<(), BadIndex> {
        let t = self.task;
        let (first, last) = if t.lane.idx == 0 { (0, 1) } else { (first, last) };
        let mut good = true;
        if let ([a], 1) = (t.axes, t.lane.idx) {
            // One axis, contiguous indices: a slice, checked branch-free (vectorizes).
            // SAFETY: the lane's indices `first..last` are elements of the indices.
            let run = unsafe {
                std::slice::from_raw_parts(t.idx.offset(at.idx + a.comp + first as isize), last - first)
            };
            for &v in run {
                good &= Raise::resolve_or_zero(v, a.len).1;
            }
            return if good { Ok(()) } else { Err(BadIndex) };
        }
        for i in first as isize..last as isize {
            // SAFETY: the lane's coordinates are elements of the indices (`new`'s contract).
            good &= unsafe { locate::<I, Raise>(t.idx, t.axes, at.idx + i * t.lane.idx) }.1;
        }
        if good { Ok(()) } else { Err(BadIndex) }
    }
}

/// Whether the coordinates of `count` lanes along `row`, the first at index offset `at`,
/// all resolve through `axes`; a tight loop that asks for the indices a few KiB ahead (the
/// hardware's own prefetch left S3's check at 5 ms for 16 MB of indices; 2 ms with this).
///
/// # Safety
/// The lanes' coordinates are elements of the indices at `idx`.
#[inline(always)]
unsafe fn check_row<I: GatherIndex>(
    idx: *const I,
    axes: &[AxisTerm],
    row: Loop,
    count: usize,
    at: isize,
) -> bool {
    let ahead = lines_ahead::<I>(row.idx);
    let mut good = true;
    for k in 0..count as isize {
        prefetch_line(idx.wrapping_offset(at + (k + ahead) * row.idx));
        // SAFETY: lane `k` of the row exists; its coordinate is an element of the indices.
        good &= unsafe { locate::<I, Raise>(idx, axes, at + k * row.idx) }.1;
    }
    good
}

/// One thread's part of a scatter: the updates that land in its span `own` of offsets,
/// combined into `dst` (the destination, or a copy of it at the same offsets). `CHECKED`:
/// a lane with a bad index fails once it is done (its updates went to position 0).
struct Apply<'t, 'a, A, I, R, const CHECKED: bool> {
    task: &'t ScatterTask<'a, A, I>,
    dst: *mut A,
    reducer: R,
    own: (isize, isize),
}

/// `Ok` unless `CHECKED` and a lane's index was bad.
#[inline(always)]
fn verdict<const CHECKED: bool>(good: bool) -> Result<(), BadIndex> {
    if CHECKED && !good { Err(BadIndex) } else { Ok(()) }
}

impl<A: Clone + Send + Sync, I: GatherIndex, R: Reducer<A>, const CHECKED: bool>
    Apply<'_, '_, A, I, R, CHECKED>
{
    /// Combines positions `range` of a block lane whose destinations are `d0 + i * inp`
    /// and updates `u0 + i * out` (the lane's strides), those in our span only.
    ///
    /// # Safety
    /// The lane exists: `d0` is its destination at a checked coordinate (or at position
    /// 0, when `CHECKED`), `u0` its first update.
    #[inline(always)]
    unsafe fn block(&self, d0: isize, u0: isize, range: std::ops::Range<usize>) {
        let t = self.task;
        let l = t.lane;
        let mine = owned(d0, l.inp, range, self.own);
        if l.inp == 1 && l.out == 1 {
            // Contiguous on both sides: slices, which the compiler can vectorize.
            let n = mine.len();
            // SAFETY: the run is within the lane's destinations (ours alone) and its
            // updates, which do not overlap.
            let (d, u) = unsafe {
                (
                    std::slice::from_raw_parts_mut(self.dst.offset(d0 + mine.start as isize), n),
                    std::slice::from_raw_parts(t.upd.offset(u0 + mine.start as isize), n),
                )
            };
            for (x, v) in d.iter_mut().zip(u) {
                self.reducer.reduce(x, v);
            }
        } else {
            for i in mine {
                let i = i as isize;
                // SAFETY: destination `i` of the lane is in our span; update `i` exists.
                unsafe { self.apply(d0 + i * l.inp, u0 + i * l.out) };
            }
        }
    }

    /// Combines the update at offset `u` into the destination element at offset `d`.
    ///
    /// # Safety
    /// `d` is an element of the destination in this part's span, `u` one of the updates.
    #[inline(always)]
    unsafe fn apply(&self, d: isize, u: isize) {
        // SAFETY: by the contract above; only this thread writes element `d`, and the
        // updates do not alias the destination (nor its copy).
        unsafe {
            self.reducer
                .reduce(&mut *self.dst.offset(d), &*self.task.upd.offset(u))
        }
    }

    /// `count` block lanes along `row`, the first at `at`, as a pipeline: each block's
    /// coordinate is located (through the `N` axis terms in `fixed`, or for `N == 0`
    /// the task's) and its destination and updates prefetched (if ours) a few lanes,
    /// about 4 KiB of blocks, before its updates are combined, so that random writes
    /// overlap; the indices are asked for further ahead. `K > 0`: blocks of `K`
    /// contiguous elements, combined as fixed-size arrays (S3's points: a move, not a
    /// loop of four).
    ///
    /// # Safety
    /// The `count` lanes exist; `fixed` are the task's axis terms; for `K > 0` the lane
    /// has `K` elements and unit strides.
    #[inline(always)]
    unsafe fn pipeline<const N: usize, const K: usize>(
        &self,
        fixed: &[AxisTerm; N],
        (row, count, at): (Loop, usize, At),
    ) -> Result<(), BadIndex> {
        let t = self.task;
        if !CHECKED && N > 0 && K > 0 && self.own.0 <= t.span.0 && t.span.1 < self.own.1 {
            // SAFETY: forwarded; the indices were checked before (`!CHECKED`) and this
            // part owns every destination.
            unsafe { self.all_ours::<N, K>(fixed, (row, count, at)) };
            return Ok(());
        }
        let axes: &[AxisTerm] = if N == 0 { t.axes } else { fixed };
        // Everything the loop reads, in locals: the compiler cannot tell that writing
        // `A` values leaves the task alone (S3: ~80 -> ~70 instructions per point, fewer
        // spills; 8.4 -> 7.0 ms).
        let (dst, upd, idx, reducer) = (self.dst, t.upd, t.idx, self.reducer);
        let (n, (lo, hi)) = (if K > 0 { K } else { t.lane.len }, self.own);
        let bytes = n * size_of::<A>();
        let ahead = (4096 / bytes.max(1)).clamp(1, RING).min(count);
        let far = (ahead as isize + lines_ahead::<I>(row.idx)) * row.idx;
        let mut good = true;
        let mut locate_at = |k: usize| {
            let lane = at.step(&row, k as isize);
            prefetch_line(idx.wrapping_offset(lane.idx + far));
            // SAFETY: lane `k` of the row exists; its coordinate was checked, or is
            // checked here (a bad one resolves to position 0).
            let (g, ok) = unsafe { locate::<I, Raise>(idx, axes, lane.idx) };
            good &= ok;
            let d = lane.inp + g;
            if lo <= d && d < hi {
                prefetch_block(dst.wrapping_offset(d), bytes);
                prefetch_block(upd.wrapping_offset(lane.out), bytes);
            }
            d
        };
        let mut ring = [0isize; RING];
        for (k, r) in ring[..ahead].iter_mut().enumerate() {
            *r = locate_at(k);
        }
        for k in 0..count {
            let d0 = ring[k % RING];
            if k + ahead < count {
                ring[(k + ahead) % RING] = locate_at(k + ahead);
            }
            let u0 = at.out + k as isize * row.out;
            if K > 0 && lo <= d0 && d0 + K as isize <= hi {
                // SAFETY: the lane's `K` contiguous destinations are ours, its `K`
                // contiguous updates exist, and the two do not overlap.
                let (d, u) = unsafe {
                    (
                        &mut *dst.offset(d0).cast::<[A; K]>(),
                        &*upd.offset(u0).cast::<[A; K]>(),
                    )
                };
                combine(d, u, reducer);
            } else {
                // SAFETY: lane `k` of the row exists, its first destination is `d0`.
                unsafe { self.block(d0, u0, 0..n) };
            }
        }
        verdict::<CHECKED>(good)
    }

    /// [`Apply::pipeline`] for blocks of `K` contiguous elements when this part owns the
    /// whole destination and the indices were checked before: no ownership tests, and
    /// only the destinations prefetched (the updates and indices stream in order). S3's
    /// 1M points: 8.1-9.2 -> 4.8-6.5 ms with [`combine`]'s one store per point (the
    /// scatter workload, alternating runs; as in the CHANGELOG); the updates' and
    /// indices' prefetches made no difference either way.
    ///
    /// # Safety
    /// As for [`Apply::pipeline`]; every coordinate of the lanes was checked, and every
    /// destination element is this part's.
    #[inline(always)]
    unsafe fn all_ours<const N: usize, const K: usize>(
        &self,
        fixed: &[AxisTerm; N],
        (row, count, at): (Loop, usize, At),
    ) {
        let t = self.task;
        let (dst, upd, idx, reducer) = (self.dst, t.upd, t.idx, self.reducer);
        let ahead = (4096 / (K * size_of::<A>()).max(1)).clamp(1, RING).min(count);
        // The first destination of lane `k` (a bad index would resolve to position 0, but
        // none is left).
        let first = |k: usize| {
            // SAFETY: lane `k` of the row exists; its coordinate is an element of the
            // indices.
            let (g, _) = unsafe { locate::<I, Raise>(idx, fixed, at.idx + k as isize * row.idx) };
            at.inp + k as isize * row.inp + g
        };
        let mut ring = [0isize; RING];
        for (k, r) in ring[..ahead].iter_mut().enumerate() {
            *r = first(k);
            prefetch_line(dst.wrapping_offset(*r));
        }
        for k in 0..count {
            let d0 = ring[k % RING];
            if k + ahead < count {
                let d = first(k + ahead);
                prefetch_line(dst.wrapping_offset(d));
                ring[(k + ahead) % RING] = d;
            }
            let u0 = at.out + k as isize * row.out;
            // SAFETY: the lane's `K` contiguous destinations are elements of the
            // destination (ours), its `K` contiguous updates exist, and the two do not
            // overlap.
            let (d, u) = unsafe {
                (
                    &mut *dst.offset(d0).cast::<[A; K]>(),
                    &*upd.offset(u0).cast::<[A; K]>(),
                )
            };
            combine(d, u, reducer);
        }
    }
}

/// Combines a block of `K` updates into `K` destination elements. For elements without
/// drop glue the updates are cloned into a local block first: the compiler, which cannot
/// tell that updates and destination do not overlap, then writes the block with one
/// store instead of `K`, and random writes, each holding a store-buffer entry until its
/// cache line arrives, keep four times as many blocks in flight (S3's 16-byte points:
/// 6.7-8.9 -> 4.8-5.8 ms for the scatter pass without the index check, alternating runs).
#[inline(always)]
fn combine<A: Clone, R: Reducer<A>, const K: usize>(d: &mut [A; K], u: &[A; K], reducer: R) {
    if !needs_drop::<A>() {
        let u = u.clone();
        for (x, v) in d.iter_mut().zip(&u) {
            reducer.reduce(x, v);
        }
    } else {
        for (x, v) in d.iter_mut().zip(u) {
            reducer.reduce(x, v);
        }
    }
}

/// How many lanes `row_idx` elements of `I` apart reach about 2 KiB ahead in the indices
/// (at least one): the distance at which a scatter asks for them. (The hardware's own
/// prefetch leaves index streams waiting on memory on this VM: S3's index check took
/// 5 ms for 16 MB of indices, 2 ms with these prefetches. The gather's block pipeline,
/// which reads its indices a few lanes ahead anyway, gained nothing measurable.)
fn lines_ahead<I>(row_idx: isize) -> isize {
    let step = (row_idx.unsigned_abs() * size_of::<I>()).max(1);
    (2048 / step).clamp(1, 256) as isize
}

impl<A: Clone + Send + Sync, I: GatherIndex, R: Reducer<A>, const CHECKED: bool> Visit
    for Apply<'_, '_, A, I, R, CHECKED>
{
    /// A row of block lanes (see [`Apply::pipeline`]), with one or two axis terms by
    /// value, and blocks of 1-16 contiguous elements as fixed-size arrays.
    unsafe fn lanes(&mut self, row: Loop, count: usize, at: At) -> Result<(), BadIndex> {
        let l = self.task.lane;
        let k = if l.inp == 1 && l.out == 1 { l.len } else { 0 };
        let rows = (row, count, at);
        // SAFETY: (every arm) forwarded; `fixed` holds this task's own axis terms, and `K`
        // is the lane's length where its strides are unit.
        unsafe {
            match (self.task.axes, k) {
                ([a], 1) => self.pipeline::<1, 1>(&[*a], rows),
                ([a], 2) => self.pipeline::<1, 2>(&[*a], rows),
                ([a], 4) => self.pipeline::<1, 4>(&[*a], rows),
                ([a], 8) => self.pipeline::<1, 8>(&[*a], rows),
                ([a], 16) => self.pipeline::<1, 16>(&[*a], rows),
                ([a], _) => self.pipeline::<1, 0>(&[*a], rows),
                ([a, b], 1) => self.pipeline::<2, 1>(&[*a, *b], rows),
                ([a, b], 2) => self.pipeline::<2, 2>(&[*a, *b], rows),
                ([a, b], 4) => self.pipeline::<2, 4>(&[*a, *b], rows),
                ([a, b], 8) => self.pipeline::<2, 8>(&[*a, *b], rows),
                ([a, b], 16) => self.pipeline::<2, 16>(&[*a, *b], rows),
                ([a, b], _) => self.pipeline::<2, 0>(&[*a, *b], rows),
                _ => self.pipeline::<0, 0>(&[], rows),
            }
        }
    }

    #[inline(always)]
    unsafe fn lane(&mut self, at: At, first: usize, last: usize) -> Result<(), BadIndex> {
        let t = self.task;
        let (l, (lo, hi)) = (t.lane, self.own);
        if !CHECKED && (at.inp + t.lane_reach.1 < lo || at.inp + t.lane_reach.0 >= hi) {
            return Ok(()); // no destination of this lane is ours
        }
        if l.idx == 0 || t.axes.is_empty() {
            // A block: one coordinate, destinations `d0 + i * l.inp`.
            // SAFETY: the coordinate is an element of the indices (checked, or checked
            // here: a bad one resolves to position 0).
            let (g, good) = unsafe { locate::<I, Raise>(t.idx, t.axes, at.idx) };
            // SAFETY: `at.inp + g` is the lane's first destination, `at.out` its first
            // update.
            unsafe { self.block(at.inp + g, at.out, first..last) };
            return verdict::<CHECKED>(good);
        }
        if let ([a], false) = (t.axes, needs_drop::<A>()) {
            // One gathered axis (scatter, scatter_elements, put_along_axis), the loop
            // invariants hoisted.
            // The axis term by value: through the reference, its length and stride were
            // loaded again for every update (the stores might have changed them).
            let (a, dst, reducer) = (*a, self.dst, self.reducer);
            let (idx, upd) = (
                t.idx.wrapping_offset(at.idx + a.comp),
                t.upd.wrapping_offset(at.out),
            );
            let mut good = true;
            let far = lines_ahead::<I>(l.idx);
            // Position `i`'s destination offset (position 0 along the axis for a bad
            // index) and its update; the indices asked for 2 KiB ahead (S5's 128 MB of
            // indices: 49 -> 21 ms, S2 11 -> 8 ms).
            let mut at_i = |i: isize| {
                prefetch_line(idx.wrapping_offset((i + far) * l.idx));
                // SAFETY: index `i` of the lane exists.
                let (g, ok) = Raise::resolve_or_zero(unsafe { *idx.offset(i * l.idx) }, a.len);
                good &= ok;
                (
                    at.inp + i * l.inp + g as isize * a.stride,
                    upd.wrapping_offset(i * l.out),
                )
            };
            // A lane whose destinations are one contiguous row (scatter_elements along
            // the last axis, S2) writes it at random, each line a miss of its own unless
            // it came in before: each chunk asks for its share of the next lane's row, as
            // the gather's row lanes do.
            // (S2 on two threads: 5.0-5.3 -> 3.3-4.1 ms, alternating runs; without the
            // indices' prefetch above for such lanes, 3.7-4.0 ms.)
            let next = t.outer.last().map_or(0, |r| r.inp);
            let share = if l.inp == 0 && a.stride == 1 {
                next_row_share::<A>(a.len, last - first, next)
            } else {
                0
            };
            let next_row = dst.wrapping_offset(at.inp + next).cast::<u8>();
            let chunks = (first..last).step_by(ROW_CHUNK).enumerate();
            let chunks = chunks.map(|(c, i)| (c, i as isize..(i + ROW_CHUNK).min(last) as isize));
            let reach = (at.inp + t.lane_reach.0, at.inp + t.lane_reach.1);
            if lo <= reach.0 && reach.1 < hi {
                // This part owns every destination the lane can reach (the whole
                // destination, or the lane's row): no ownership test at all.
                for (c, range) in chunks {
                    if share > 0 {
                        prefetch_block(next_row.wrapping_add(c * share), share);
                    }
                    for i in range {
                        let (d, u) = at_i(i);
                        // SAFETY: `d` is a destination element the lane reaches, so in
                        // our span; update `i` of the lane exists and does not alias it.
                        unsafe { reducer.reduce(&mut *dst.offset(d), &*u) };
                    }
                }
                return verdict::<CHECKED>(good);
            }
            // No branch on ownership (it is random when the destinations are, and a
            // mispredicted branch costs more than the update): an update that is not ours
            // goes to a scratch value, a copy of the lane's first update. (Not of a
            // destination element: a part's first offset need not be one of the view's
            // elements, and memory between them may belong to another view.)
            // SAFETY: position `first` of the lane exists (`first < last`), so its update
            // does.
            let mut scratch = unsafe { (*upd.offset(first as isize * l.out)).clone() };
            let scratch: *mut A = &mut scratch;
            for (c, range) in chunks {
                if share > 0 {
                    prefetch_block(next_row.wrapping_add(c * share), share);
                }
                for i in range {
                    let (d, u) = at_i(i);
                    let slot = if lo <= d && d < hi {
                        dst.wrapping_offset(d)
                    } else {
                        scratch
                    };
                    // SAFETY: `slot` is destination element `d`, in our span, or the
                    // scratch value; update `i` of the lane exists and aliases neither.
                    unsafe { reducer.reduce(&mut *slot, &*u) };
                }
            }
            return verdict::<CHECKED>(good);
        }
        let mut good = true;
        for i in first as isize..last as isize {
            // SAFETY: the coordinate is an element of the indices (checked, or checked
            // here: a bad one resolves to position 0).
            let (g, ok) = unsafe { locate::<I, Raise>(t.idx, t.axes, at.idx + i * l.idx) };
            good &= ok;
            let d = at.inp + i * l.inp + g;
            if lo <= d && d < hi {
                // SAFETY: `d` is a destination element in our span; update `i` exists.
                unsafe { self.apply(d, at.out + i * l.out) };
            }
        }
        verdict::<CHECKED>(good)
    }
}

/// The positions `i` in `range` whose offset `d0 + i * step` lies in `lo..hi`, in order
/// (they are consecutive: offsets are monotone in `i`).
#[inline(always)]
fn owned(
    d0: isize,
    step: isize,
    range: std::ops::Range<usize>,
    (lo, hi): (isize, isize),
) -> std::ops::Range<usize> {
    let (a, b) = (range.start as isize, range.end as isize);
    if a < b {
        // Most blocks lie wholly inside or outside the span: no division then.
        let (p, q) = (d0 + a * step, d0 + (b - 1) * step);
        let (min, max) = (p.min(q), p.max(q));
        if lo <= min && max < hi {
            return range;
        }
        if max < lo || min >= hi {
            return range.start..range.start;
        }
    }
    let (first, last) = match step {
        0 if lo <= d0 && d0 < hi => (a, b),
        0 => (a, a),
        // d0 + i s >= lo  <=>  i >= ceil((lo - d0) / s);  d0 + i s < hi  <=>  i < ceil((hi - d0) / s)
        s if s > 0 => (ceil_div(lo - d0, s), ceil_div(hi - d0, s)),
        // s < 0: d0 - i |s| < hi  <=>  i > (d0 - hi) / |s|;  d0 - i |s| >= lo  <=>  i <= (d0 - lo) / |s|
        s => ((d0 - hi).div_euclid(-s) + 1, (d0 - lo).div_euclid(-s) + 1),
    };
    let (first, last) = (first.clamp(a, b), last.clamp(a, b));
    first as usize..last.max(first) as usize
}

/// `ceil(a / b)` for `b > 0`.
fn ceil_div(a: isize, b: isize) -> isize {
    -((-a).div_euclid(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_picks_exactly_the_positions_in_the_span() {
        for d0 in -12..12 {
            for step in -4..=4 {
                for (lo, hi) in [(-5, 3), (0, 1), (2, 9), (4, 4), (-20, 20)] {
                    let want: Vec<usize> = (1..9)
                        .filter(|&i| (lo..hi).contains(&(d0 + i as isize * step)))
                        .collect();
                    let got: Vec<usize> = owned(d0, step, 1..9, (lo, hi)).collect();
                    assert_eq!(got, want, "d0 {d0} step {step} span {lo}..{hi}");
                }
            }
        }
    }
}
