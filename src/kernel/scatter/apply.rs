//! One thread's part of a scatter: the updates that land in its span, combined in
//! row-major order, block lanes through a prefetching pipeline.

use std::mem::needs_drop;

use super::ScatterTask;
use super::span::owned;
use crate::index::{GatherIndex, Raise, Resolve};
use crate::kernel::prefetch::{lines_ahead, next_row_share, prefetch_block, prefetch_line};
use crate::kernel::walk::{At, Visit};
use crate::kernel::{BadIndex, locate};
use crate::plan::policy::{IN_FLIGHT_BYTES, ROW_CHUNK, SCATTER_RING};
use crate::plan::{AxisTerm, Loop};
use crate::reduce::Reducer;

/// One thread's part of a scatter: the updates that land in its span `own` of offsets,
/// combined into `dst` (the destination, or a copy of it at the same offsets). `CHECKED`:
/// a lane with a bad index fails once it is done (its updates went to position 0).
pub(crate) struct Apply<'t, 'a, A, I, R, const CHECKED: bool> {
    pub(super) task: &'t ScatterTask<'a, A, I>,
    pub(super) dst: *mut A,
    pub(super) reducer: R,
    pub(super) own: (isize, isize),
    /// Whether block pipelines prefetch the updates ahead
    /// ([`ScatterStrategy::prefetch_updates`](crate::plan::ScatterStrategy::prefetch_updates)).
    pub(super) prefetch_updates: bool,
}

/// `Ok` unless `CHECKED` and a lane's index was bad.
#[inline(always)]
pub(crate) fn verdict<const CHECKED: bool>(good: bool) -> Result<(), BadIndex> {
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
        let l = t.walk.lane;
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
    /// the task's) and its destination prefetched (if ours) a few lanes, [`IN_FLIGHT_BYTES`] of
    /// blocks, before its updates are combined (and its updates, where the part's
    /// `prefetch_updates` says so), so that random writes overlap; the indices are asked for further ahead. `K > 0`: blocks of `K`
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
        if !CHECKED && N > 0 && K > 0 && self.own.0 <= t.strategy.span.0 && t.strategy.span.1 < self.own.1 {
            // SAFETY: forwarded; the indices were checked before (`!CHECKED`) and this
            // part owns every destination.
            unsafe { self.all_ours::<N, K>(fixed, (row, count, at)) };
            return Ok(());
        }
        let axes: &[AxisTerm] = if N == 0 { t.walk.axes } else { fixed };
        // Everything the loop reads, in locals: the compiler cannot tell that writing
        // `A` values leaves the task alone, and would reload it (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
        let (dst, upd, idx, reducer) = (self.dst, t.upd, t.idx, self.reducer);
        let (n, (lo, hi)) = (if K > 0 { K } else { t.walk.lane.len }, self.own);
        let bytes = n * size_of::<A>();
        let ahead = (IN_FLIGHT_BYTES / bytes.max(1)).clamp(1, SCATTER_RING).min(count);
        let far = (ahead as isize + lines_ahead::<I>(row.idx)) * row.idx;
        let prefetch_updates = self.prefetch_updates;
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
                if prefetch_updates {
                    prefetch_block(upd.wrapping_offset(lane.out), bytes);
                }
            }
            d
        };
        let mut ring = [0isize; SCATTER_RING];
        for (k, r) in ring[..ahead].iter_mut().enumerate() {
            *r = locate_at(k);
        }
        for k in 0..count {
            let d0 = ring[k % SCATTER_RING];
            if k + ahead < count {
                ring[(k + ahead) % SCATTER_RING] = locate_at(k + ahead);
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
    /// only the destinations prefetched (the updates and indices stream in order:
    /// PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
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
        let ahead = (IN_FLIGHT_BYTES / (K * size_of::<A>()).max(1))
            .clamp(1, SCATTER_RING)
            .min(count);
        // The first destination of lane `k` (a bad index would resolve to position 0, but
        // none is left).
        let first = |k: usize| {
            // SAFETY: lane `k` of the row exists; its coordinate is an element of the
            // indices.
            let (g, _) = unsafe { locate::<I, Raise>(idx, fixed, at.idx + k as isize * row.idx) };
            at.inp + k as isize * row.inp + g
        };
        let mut ring = [0isize; SCATTER_RING];
        for (k, r) in ring[..ahead].iter_mut().enumerate() {
            *r = first(k);
            prefetch_line(dst.wrapping_offset(*r));
        }
        for k in 0..count {
            let d0 = ring[k % SCATTER_RING];
            if k + ahead < count {
                let d = first(k + ahead);
                prefetch_line(dst.wrapping_offset(d));
                ring[(k + ahead) % SCATTER_RING] = d;
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

    /// Positions `first..last` of a lane along one gathered axis `a` (scatter,
    /// scatter_elements, put_along_axis), the loop invariants hoisted. The axis term comes
    /// by value: through a reference, its length and stride are loaded again for every
    /// update (the stores might have changed them).
    ///
    /// # Safety
    /// As for [`Visit::lane`]; `A` has no drop glue.
    #[inline(always)]
    unsafe fn one_axis(&self, a: AxisTerm, at: At, first: usize, last: usize) -> Result<(), BadIndex> {
        let t = self.task;
        let (l, (lo, hi)) = (t.walk.lane, self.own);
        let (dst, reducer) = (self.dst, self.reducer);
        let (idx, upd) = (
            t.idx.wrapping_offset(at.idx + a.comp),
            t.upd.wrapping_offset(at.out),
        );
        let mut good = true;
        let far = lines_ahead::<I>(l.idx);
        // Position `i`'s destination offset (position 0 along the axis for a bad
        // index) and its update; the indices asked for 2 KiB ahead (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
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
        // the gather's row lanes do (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
        let next = t.walk.outer.last().map_or(0, |r| r.inp);
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
        verdict::<CHECKED>(good)
    }
}

/// Combines a block of `K` updates into `K` destination elements. For elements without
/// drop glue the updates are cloned into a local block first: the compiler, which cannot
/// tell that updates and destination do not overlap, then writes the block with one
/// store instead of `K`, and random writes, each holding a store-buffer entry until its
/// cache line arrives, keep more blocks in flight (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
#[inline(always)]
pub(crate) fn combine<A: Clone, R: Reducer<A>, const K: usize>(d: &mut [A; K], u: &[A; K], reducer: R) {
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

impl<A: Clone + Send + Sync, I: GatherIndex, R: Reducer<A>, const CHECKED: bool> Visit
    for Apply<'_, '_, A, I, R, CHECKED>
{
    /// A row of block lanes (see [`Apply::pipeline`]), with one or two axis terms by
    /// value, and blocks of 1-16 contiguous elements as fixed-size arrays.
    unsafe fn lanes(&mut self, row: Loop, count: usize, at: At) -> Result<(), BadIndex> {
        let l = self.task.walk.lane;
        let k = if l.inp == 1 && l.out == 1 { l.len } else { 0 };
        let rows = (row, count, at);
        // SAFETY: (every arm) forwarded; `fixed` holds this task's own axis terms, and `K`
        // is the lane's length where its strides are unit.
        unsafe {
            match (self.task.walk.axes, k) {
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
        let (l, (lo, hi)) = (t.walk.lane, self.own);
        if !CHECKED && (at.inp + t.lane_reach.1 < lo || at.inp + t.lane_reach.0 >= hi) {
            return Ok(()); // no destination of this lane is ours
        }
        if l.idx == 0 || t.walk.axes.is_empty() {
            // A block: one coordinate, destinations `d0 + i * l.inp`.
            // SAFETY: the coordinate is an element of the indices (checked, or checked
            // here: a bad one resolves to position 0).
            let (g, good) = unsafe { locate::<I, Raise>(t.idx, t.walk.axes, at.idx) };
            // SAFETY: `at.inp + g` is the lane's first destination, `at.out` its first
            // update.
            unsafe { self.block(at.inp + g, at.out, first..last) };
            return verdict::<CHECKED>(good);
        }
        if let ([a], false) = (t.walk.axes, needs_drop::<A>()) {
            // SAFETY: forwarded.
            return unsafe { self.one_axis(*a, at, first, last) };
        }
        let mut good = true;
        for i in first as isize..last as isize {
            // SAFETY: the coordinate is an element of the indices (checked, or checked
            // here: a bad one resolves to position 0).
            let (g, ok) = unsafe { locate::<I, Raise>(t.idx, t.walk.axes, at.idx + i * l.idx) };
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
