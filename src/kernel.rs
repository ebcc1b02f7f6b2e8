//! The kernel: executes a [`Plan`] by walking output lanes. It only moves elements.
//!
//! The innermost loop of the plan is the *lane*. When the indices do not advance along it
//! (a block gather: ONNX Gather's trailing dimensions, GatherND's slices), the gathered
//! offset is resolved once per lane and the lane is a run copy, a `clone_from_slice` when
//! both sides are contiguous (a fixed-size array copy for blocks of 1-16 elements). Rows
//! of whole blocks run as a pipeline: each block is located and prefetched a few lanes
//! before it is copied, so that reads from far-apart places (embedding rows, pixels)
//! overlap. Otherwise every element resolves its
//! own indices; with one gathered axis and a contiguous lane that loop is branch-free and
//! vectorizes (AVX2 / AVX-512 variants picked at run time on x86-64).
//!
//! Work is split into ranges of flat output positions (in the loops' row-major order).
//! Small gathers run on the calling thread; large ones run on the calling thread *and* the
//! rayon pool, which claim ranges from a shared counter, so the caller never idles waiting
//! for a worker to wake.

use std::mem::{MaybeUninit, needs_drop};
use std::ptr;

use crate::index::{GatherIndex, Resolve};
use crate::plan::{AxisTerm, Loop};
use crate::small::Small;

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

/// Gathers at or above this many bytes (output plus indices) may use the rayon pool.
/// (Under Miri, tiny, so that its tests reach the parallel path.)
#[cfg(feature = "rayon")]
pub(crate) const PARALLEL_MIN_BYTES: usize = if cfg!(miri) { 256 } else { 1 << 21 };
/// Parallel work is handed out in ranges of about this many output bytes.
#[cfg(feature = "rayon")]
const CHUNK_BYTES: usize = if cfg!(miri) { 64 } else { 1 << 17 };

/// A gather ready to run: the plan's loops and axis terms with the data pointers.
pub(crate) struct Task<'a, A, I> {
    pub outer: &'a [Loop],
    pub lane: Loop,
    pub axes: &'a [AxisTerm],
    pub inp: *const A,
    pub idx: *const I,
    pub out: *mut A,
    pub store: Store,
}

// SAFETY: a `Task` only reads `A` and `I` through shared pointers (so it may cross threads
// when both are `Sync`) and writes `A` values into disjoint output ranges, one range per
// thread at a time (so `A` must be `Send`). The pointers are valid for the whole call that
// builds the task (see `Task::run`).
unsafe impl<A: Send + Sync, I: Sync> Sync for Task<'_, A, I> {}

impl<A: Clone + Send + Sync, I: GatherIndex> Task<'_, A, I> {
    /// Number of output elements.
    fn len(&self) -> usize {
        self.outer.iter().map(|l| l.len).product::<usize>() * self.lane.len
    }

    /// Runs the whole gather, serially or in parallel.
    ///
    /// # Safety
    /// - `inp` points to an array for which every offset `Σ position * inp stride` over the
    ///   loops, plus `Σ resolved index * axis stride` over the axis terms with every
    ///   resolved index `< len`, is in bounds; `idx` likewise for every offset
    ///   `Σ position * idx stride + comp`;
    /// - `out` points to storage of the output shape in which distinct loop positions are
    ///   distinct elements (initialized for [`Store::Assign`]; C-contiguous, uninitialized
    ///   and of exactly `self.len()` elements for [`Store::Init`]), not aliasing `inp`;
    /// - nothing else accesses `out` during the call.
    pub unsafe fn run<R: Resolve>(&self) -> Result<(), BadIndex> {
        let total = self.len();
        if total == 0 {
            return Ok(());
        }
        #[cfg(feature = "rayon")]
        {
            let bytes = total.saturating_mul(
                std::mem::size_of::<A>()
                    + usize::from(!self.axes.is_empty() && self.lane.idx != 0) * std::mem::size_of::<I>(),
            );
            if bytes >= PARALLEL_MIN_BYTES && rayon::current_num_threads() > 1 {
                // SAFETY: forwarded from this function's contract.
                return unsafe { self.run_parallel::<R>(total, bytes) };
            }
        }
        // SAFETY: forwarded from this function's contract; one range covers everything.
        unsafe { self.run_range::<R>(0, total) }
    }

    /// Splits `0..total` into ranges claimed by the calling thread and rayon's workers.
    #[cfg(feature = "rayon")]
    unsafe fn run_parallel<R: Resolve>(&self, total: usize, bytes: usize) -> Result<(), BadIndex> {
        use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
        use std::sync::Mutex;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

        let chunks = bytes.div_ceil(CHUNK_BYTES).clamp(2, total);
        let per = total.div_ceil(chunks);
        let chunks = total.div_ceil(per);
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let panic = Mutex::new(None);
        // Ranges completed, so that a panic elsewhere can drop their elements.
        let track = self.store == Store::Init && needs_drop::<A>();
        let done: Vec<AtomicBool> = (0..if track { chunks } else { 0 })
            .map(|_| AtomicBool::new(false))
            .collect();
        let work = || {
            loop {
                let c = next.fetch_add(1, Ordering::Relaxed);
                if c >= chunks || failed.load(Ordering::Relaxed) {
                    return;
                }
                let (start, end) = (c * per, ((c + 1) * per).min(total));
                // SAFETY: every range is claimed once, ranges are disjoint, and the
                // contract of `run` holds for each of them.
                match catch_unwind(AssertUnwindSafe(|| unsafe { self.run_range::<R>(start, end) })) {
                    Ok(Ok(())) => {
                        if track {
                            done[c].store(true, Ordering::Release);
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
        // The calling thread works too, so N - 1 helpers keep N threads busy on a pool of N
        // (one per core by default) whether or not the caller is one of the pool's own.
        let helpers = rayon::current_num_threads() - 1;
        rayon::in_place_scope(|s| {
            for _ in 0..helpers.min(chunks - 1) {
                s.spawn(|_| work());
            }
            work();
        });
        let failed = failed.into_inner();
        if failed {
            // A range stopped (bad index or panic) and dropped what it wrote; the caller
            // abandons uninitialized output, so drop the ranges that completed.
            for (c, _) in done.iter().enumerate().filter(|(_, d)| d.load(Ordering::Acquire)) {
                let (start, end) = (c * per, ((c + 1) * per).min(total));
                // SAFETY: range `c` completed, so its elements are initialized, and nothing
                // else will drop them: the output is abandoned by the caller.
                unsafe {
                    ptr::drop_in_place(ptr::slice_from_raw_parts_mut(self.out.add(start), end - start))
                };
            }
        }
        if let Some(payload) = panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
            resume_unwind(payload);
        }
        if failed { Err(BadIndex) } else { Ok(()) }
    }

    /// Gathers the output positions `start..end` (row-major over the loops).
    ///
    /// # Safety
    /// The contract of [`Task::run`], and no other thread writes these positions.
    unsafe fn run_range<R: Resolve>(&self, start: usize, end: usize) -> Result<(), BadIndex> {
        // SAFETY: forwarded; the store mode is fixed at compile time for the loops.
        unsafe {
            match self.store {
                Store::Assign => self.walk::<R, false>(start, end),
                Store::Init => self.walk::<R, true>(start, end),
            }
        }
    }

    /// [`Task::run_range`] for one store mode (`INIT` for [`Store::Init`]).
    unsafe fn walk<R: Resolve, const INIT: bool>(&self, start: usize, end: usize) -> Result<(), BadIndex> {
        let lane_len = self.lane.len;
        let mut guard = InitGuard {
            // SAFETY (pointer arithmetic): for `Store::Init` the output is contiguous and
            // `start <= len`; for `Store::Assign` the pointer is never used.
            base: if INIT {
                unsafe { self.out.add(start) }
            } else {
                self.out
            },
            written: 0,
            armed: INIT && needs_drop::<A>(),
        };
        // The innermost outer loop is walked as rows of lanes; an odometer over the other
        // outer loops moves from row to row. Start at the lane holding `start`.
        let (row, upper) = match self.outer.split_last() {
            Some((row, upper)) => (*row, upper),
            None => (
                Loop {
                    len: 1,
                    ..Loop::default()
                },
                &[][..],
            ),
        };
        let lane_no = start / lane_len;
        let mut first = start % lane_len;
        let mut c = lane_no % row.len;
        let mut coord: Small<usize> = upper.iter().map(|_| 0).collect();
        let (mut r_out, mut r_inp, mut r_idx) = (0isize, 0isize, 0isize);
        let mut rem = lane_no / row.len;
        for (k, l) in coord.iter_mut().zip(upper).rev() {
            *k = rem % l.len;
            rem /= l.len;
            r_out += *k as isize * l.out;
            r_inp += *k as isize * l.inp;
            r_idx += *k as isize * l.idx;
        }
        let blocks = self.lane.idx == 0 && !self.axes.is_empty();
        let mut remaining = end - start;
        loop {
            let at = c as isize;
            let (mut o_out, mut o_inp, mut o_idx) =
                (r_out + at * row.out, r_inp + at * row.inp, r_idx + at * row.idx);
            while c < row.len && remaining > 0 {
                if blocks && first == 0 && remaining >= lane_len {
                    // Whole block lanes: a loop of their own.
                    let k = (row.len - c).min(remaining / lane_len);
                    // SAFETY: lanes `c..c + k` of this row exist and are whole blocks.
                    unsafe { self.block_row::<R, INIT>(row, k, (o_out, o_inp, o_idx), &mut guard.written)? };
                    c += k;
                    remaining -= k * lane_len;
                    let k = k as isize;
                    o_out += k * row.out;
                    o_inp += k * row.inp;
                    o_idx += k * row.idx;
                    continue;
                }
                let last = lane_len.min(first + remaining);
                // SAFETY: the offsets are those of a valid outer position (the odometer
                // never leaves the loops' bounds) and `first..last` is within the lane.
                unsafe { self.lane::<R, INIT>(o_out, o_inp, o_idx, first, last, &mut guard.written)? };
                remaining -= last - first;
                first = 0;
                c += 1;
                o_out += row.out;
                o_inp += row.inp;
                o_idx += row.idx;
            }
            if remaining == 0 {
                break;
            }
            c = 0;
            for (k, l) in coord.iter_mut().zip(upper).rev() {
                *k += 1;
                r_out += l.out;
                r_inp += l.inp;
                r_idx += l.idx;
                if *k < l.len {
                    break;
                }
                *k = 0;
                r_out -= l.len as isize * l.out;
                r_inp -= l.len as isize * l.inp;
                r_idx -= l.len as isize * l.idx;
            }
        }
        guard.armed = false;
        Ok(())
    }

    /// `count` whole block lanes along `row`, the first at offsets `at`: each lane
    /// resolves one coordinate and copies a run. Lanes are embedding rows, GatherND
    /// slices, pixels or points, read from far-apart places, so the block a few lanes
    /// ahead is prefetched (on x86-64), to keep several reads in flight.
    ///
    /// # Safety
    /// The contract of [`Task::walk`]; the `count` lanes exist; the lane is a block
    /// (`lane.idx == 0`, at least one axis).
    #[inline(never)]
    unsafe fn block_row<R: Resolve, const INIT: bool>(
        &self,
        row: Loop,
        count: usize,
        at: (isize, isize, isize),
        written: &mut usize,
    ) -> Result<(), BadIndex> {
        // The axis terms by value for one or two axes (the usual cases), so that they stay
        // in registers: through `self` the compiler must reload them after every store.
        // SAFETY: forwarded; `fixed` holds this task's own axis terms.
        match *self.axes {
            [a] => unsafe { self.block_row_with::<R, INIT, 1>(&[a], row, count, at, written) },
            [a, b] => unsafe { self.block_row_with::<R, INIT, 2>(&[a, b], row, count, at, written) },
            _ => unsafe { self.block_row_with::<R, INIT, 0>(&[], row, count, at, written) },
        }
    }

    /// [`Task::block_row`] with `N` axis terms in `fixed` (or, for `N == 0`, those of
    /// `self`).
    ///
    /// # Safety
    /// The contract of [`Task::block_row`]; `fixed` are the task's axis terms.
    #[inline(always)]
    unsafe fn block_row_with<R: Resolve, const INIT: bool, const N: usize>(
        &self,
        fixed: &[AxisTerm; N],
        row: Loop,
        count: usize,
        at: (isize, isize, isize),
        written: &mut usize,
    ) -> Result<(), BadIndex> {
        let n = self.lane.len;
        // The input offset of the block of the lane at indices offset `o`, and whether its
        // indices were good (a bad one counts as 0 and is reported at the end of the row).
        // SAFETY: `o` is the indices offset of an existing lane.
        let gathered = |o: isize| unsafe {
            // A fixed-length array iterates without a loop.
            if N == 0 {
                self.locate::<R>(self.axes, o)
            } else {
                self.locate::<R>(fixed, o)
            }
        };
        let bytes = n * std::mem::size_of::<A>();
        let prefetch = cfg!(target_arch = "x86_64") && row.idx != 0 && self.lane.inp == 1 && bytes > 0;
        // A pipeline: each lane's block is located (its indices read and checked once)
        // and prefetched `ahead` lanes before it is copied, about 4 KiB of blocks in
        // flight (every cache line a contiguous block touches).
        let ahead = if prefetch {
            (4096 / bytes).clamp(2, RING)
        } else {
            1
        };
        let mut good = true;
        let (o_out, o_inp, o_idx) = at;
        let locate = |k: usize| {
            let j = k as isize;
            let (g, ok) = gathered(o_idx + j * row.idx);
            good &= ok;
            let s = o_inp + j * row.inp + g;
            if prefetch {
                prefetch_block(self.inp.wrapping_offset(s), bytes);
            }
            s
        };
        let lanes = (count, o_out, row.out);
        // SAFETY: `locate` gives the offsets of blocks at resolved indices (0 for a bad
        // one), in the input by `run`'s contract; the `count` lanes exist.
        unsafe {
            if INIT || self.lane.inp != 1 || self.lane.out != 1 {
                self.pipeline::<INIT, 0>(lanes, ahead, locate, written)
            } else {
                // Short blocks (pixels, points, small channel vectors) as fixed-size
                // copies, a move or two instead of a call.
                match n {
                    1 => self.pipeline::<INIT, 1>(lanes, ahead, locate, written),
                    2 => self.pipeline::<INIT, 2>(lanes, ahead, locate, written),
                    4 => self.pipeline::<INIT, 4>(lanes, ahead, locate, written),
                    8 => self.pipeline::<INIT, 8>(lanes, ahead, locate, written),
                    16 => self.pipeline::<INIT, 16>(lanes, ahead, locate, written),
                    _ => self.pipeline::<INIT, 0>(lanes, ahead, locate, written),
                }
            }
        }
        if good { Ok(()) } else { Err(BadIndex) }
    }

    /// Copies `count` block lanes, the `k`-th at output offset `o_out + k * step` from
    /// input offset `locate(k)`, calling `locate` `ahead` lanes (at most [`RING`]) before
    /// the copy. The copy is of `K`-element arrays for `K > 0` (contiguous blocks of `K`
    /// elements into an initialized output), else by [`Task::copy`].
    ///
    /// # Safety
    /// The blocks `locate` gives and the lanes exist; for `K > 0`, the lane has `K`
    /// elements and unit strides and `INIT` is false.
    #[inline(always)]
    unsafe fn pipeline<const INIT: bool, const K: usize>(
        &self,
        (count, o_out, step): (usize, isize, isize),
        ahead: usize,
        mut locate: impl FnMut(usize) -> isize,
        written: &mut usize,
    ) {
        let mut ring = [0isize; RING];
        let lead = ahead.min(count);
        for (k, r) in ring[..lead].iter_mut().enumerate() {
            *r = locate(k);
        }
        let mut copy = |k: usize, s: isize| {
            // SAFETY: by the contract above.
            unsafe {
                let (out, src) = (self.out.offset(o_out + k as isize * step), self.inp.offset(s));
                if K > 0 {
                    (*out.cast::<[A; K]>()).clone_from(&*src.cast::<[A; K]>());
                    *written += K;
                } else {
                    self.copy::<INIT>(out, src, 0, self.lane.len, written);
                }
            }
        };
        for k in 0..count - lead {
            let s = ring[k % RING];
            ring[(k + lead) % RING] = locate(k + lead);
            copy(k, s);
        }
        for k in count - lead..count {
            copy(k, ring[k % RING]);
        }
    }

    /// The input offset selected by the coordinate at indices offset `at`.
    #[inline(always)]
    unsafe fn gathered<R: Resolve>(&self, at: isize) -> Result<isize, BadIndex> {
        // SAFETY: forwarded.
        match unsafe { self.locate::<R>(self.axes, at) } {
            (off, true) => Ok(off),
            (_, false) => Err(BadIndex),
        }
    }

    /// The input offset selected through `axes` by the coordinate at indices offset `at`
    /// (a bad index counts as 0) and whether every index was good, without a branch.
    ///
    /// # Safety
    /// `at + comp` is an element of the indices for every axis term.
    #[inline(always)]
    unsafe fn locate<R: Resolve>(&self, axes: &[AxisTerm], at: isize) -> (isize, bool) {
        let (mut off, mut good) = (0isize, true);
        for a in axes {
            // SAFETY: by the contract above.
            let (i, ok) = R::resolve_or_zero(unsafe { *self.idx.offset(at + a.comp) }, a.len);
            off += i as isize * a.stride;
            good &= ok;
        }
        (off, good)
    }

    /// Gathers positions `first..last` of the lane at the given outer offsets; adds the
    /// number of elements written to `written` (per element where a panic could leave
    /// them behind, that is for `INIT` with drop glue).
    #[inline(always)]
    unsafe fn lane<R: Resolve, const INIT: bool>(
        &self,
        o_out: isize,
        o_inp: isize,
        o_idx: isize,
        first: usize,
        last: usize,
        written: &mut usize,
    ) -> Result<(), BadIndex> {
        let l = self.lane;
        let f = first as isize;
        let count_each = INIT && needs_drop::<A>();
        // SAFETY (for the whole body): `run`'s contract bounds every offset formed from the
        // loops and the axis terms; resolved indices are `< len` by `Resolve`.
        unsafe {
            let out = self.out.offset(o_out);
            if l.idx == 0 || self.axes.is_empty() {
                // A block: one coordinate for the whole run.
                let src = self.inp.offset(o_inp + self.gathered::<R>(o_idx)?);
                self.copy::<INIT>(out, src, first, last, written);
                return Ok(());
            } else if let [a] = self.axes {
                // One gathered axis (GatherElements, take_along_axis, 1-D take).
                let (idx, inp) = (self.idx.offset(o_idx + a.comp), self.inp.offset(o_inp));
                if l.out == 1 && l.idx == 1 && !count_each {
                    let n = last - first;
                    let run = Axis1 {
                        inp: inp.offset(f * l.inp),
                        step: l.inp,
                        len: a.len,
                        stride: a.stride,
                    };
                    let out = std::slice::from_raw_parts_mut(out.add(first).cast::<MaybeUninit<A>>(), n);
                    let idx = std::slice::from_raw_parts(idx.add(first), n);
                    return if run.dispatch::<I, R, INIT>(out, idx) {
                        *written += last - first;
                        Ok(())
                    } else {
                        Err(BadIndex)
                    };
                }
                for i in f..last as isize {
                    let j = R::resolve(*idx.offset(i * l.idx), a.len).ok_or(BadIndex)?;
                    store::<A, INIT>(
                        out.offset(i * l.out),
                        &*inp.offset(i * l.inp + j as isize * a.stride),
                    );
                    if count_each {
                        *written += 1;
                    }
                }
            } else {
                for i in f..last as isize {
                    let g = self.gathered::<R>(o_idx + i * l.idx)?;
                    store::<A, INIT>(out.offset(i * l.out), &*self.inp.offset(o_inp + i * l.inp + g));
                    if count_each {
                        *written += 1;
                    }
                }
            }
        }
        if !count_each {
            *written += last - first;
        }
        Ok(())
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
            if l.inp == 1 && l.out == 1 && !INIT {
                let d = std::slice::from_raw_parts_mut(out.add(first), last - first);
                d.clone_from_slice(std::slice::from_raw_parts(src.add(first), last - first));
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

/// One gathered axis over a run of contiguous output elements:
/// `out[i] = inp[i * step + resolve(idx[i]) * stride]` (GatherElements and
/// take_along_axis lanes, 1-D takes).
///
/// The loop has no branch (a bad index reads position 0 and is reported at the end) and
/// takes `out` and `idx` as slices, so the compiler knows they alias nothing and vectorizes
/// it, with gather instructions where the CPU has them: on x86-64 it is also compiled for
/// AVX2 and AVX-512 and the widest is chosen at run time.
#[derive(Clone, Copy)]
struct Axis1<A> {
    inp: *const A,
    step: isize,
    len: usize,
    stride: isize,
}

impl<A: Clone> Axis1<A> {
    /// Fills `out` from `idx`; `false` if an index was out of range (every element of
    /// `out` is written all the same).
    ///
    /// # Safety
    /// `out` is initialized unless `INIT`; every `inp + i * step + j * stride` with
    /// `i < out.len()`, `j < len` is an element of the input, which `out` does not
    /// overlap; `len > 0`; `idx.len() == out.len()`.
    #[inline(always)]
    unsafe fn dispatch<I: GatherIndex, R: Resolve, const INIT: bool>(
        self,
        out: &mut [MaybeUninit<A>],
        idx: &[I],
    ) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if out.len() >= 16 {
                if has!("avx512f") && has!("avx512vl") && has!("avx512dq") && has!("avx512bw") {
                    // SAFETY: the CPU has the features `fill_avx512` is compiled for; the
                    // rest is this function's contract.
                    return unsafe { self.fill_avx512::<I, R, INIT>(out, idx) };
                }
                if has!("avx2") {
                    // SAFETY: as above, for AVX2.
                    return unsafe { self.fill_avx2::<I, R, INIT>(out, idx) };
                }
            }
        }
        // SAFETY: this function's contract.
        unsafe { self.fill::<I, R, INIT>(out, idx) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
    unsafe fn fill_avx512<I: GatherIndex, R: Resolve, const INIT: bool>(
        self,
        out: &mut [MaybeUninit<A>],
        idx: &[I],
    ) -> bool {
        // SAFETY: forwarded.
        unsafe { self.fill::<I, R, INIT>(out, idx) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn fill_avx2<I: GatherIndex, R: Resolve, const INIT: bool>(
        self,
        out: &mut [MaybeUninit<A>],
        idx: &[I],
    ) -> bool {
        // SAFETY: forwarded.
        unsafe { self.fill::<I, R, INIT>(out, idx) }
    }

    /// The loop itself, inlined into each instruction-set variant.
    #[inline(always)]
    unsafe fn fill<I: GatherIndex, R: Resolve, const INIT: bool>(
        self,
        out: &mut [MaybeUninit<A>],
        idx: &[I],
    ) -> bool {
        let Axis1 {
            inp,
            step,
            len,
            stride,
        } = self;
        let mut good = true;
        for (i, (o, &v)) in out.iter_mut().zip(idx).enumerate() {
            let (j, ok) = R::resolve_or_zero(v, len);
            good &= ok;
            // SAFETY: `j < len` (0 for a bad index, and `len > 0`), so this is an element
            // of the input by the contract of `dispatch`; `o` is initialized unless `INIT`.
            unsafe {
                store::<A, INIT>(
                    o.as_mut_ptr(),
                    &*inp.offset(i as isize * step + j as isize * stride),
                )
            };
        }
        good
    }
}

/// The most lanes [`Task::block_row`] locates before it copies them (a power of two).
const RING: usize = 32;

/// Asks the CPU to start loading the `bytes` bytes at `p` into cache (a hint: it never
/// faults and changes no memory, so `p` may be any address). A no-op off x86-64.
#[inline(always)]
fn prefetch_block<A>(p: *const A, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = p.cast::<i8>();
        // SAFETY (all three): prefetches only; the addresses are computed without
        // dereferencing. The lines of the first and the last byte, and any between.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(bytes.saturating_sub(1))) };
        let mut at = 64;
        while at + 1 < bytes {
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(at)) };
            at += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

/// Stores a clone of `v` at `dst`, assigning (dropping the old value) or initializing.
///
/// # Safety
/// `dst` is valid for writes, and initialized unless `INIT`.
#[inline(always)]
unsafe fn store<A: Clone, const INIT: bool>(dst: *mut A, v: &A) {
    let v = v.clone();
    // SAFETY: by the contract above.
    unsafe {
        if INIT {
            ptr::write(dst, v);
        } else {
            *dst = v;
        }
    }
}

/// Drops the elements a range wrote into uninitialized output if a clone panics midway.
struct InitGuard<A> {
    base: *mut A,
    written: usize,
    armed: bool,
}

impl<A> Drop for InitGuard<A> {
    fn drop(&mut self) {
        if self.armed {
            // SAFETY: armed only for `Store::Init`, where the range writes its elements in
            // memory order from `base`, so the first `written` are initialized; the caller
            // abandons the output, so they are dropped exactly once.
            unsafe { ptr::drop_in_place(ptr::slice_from_raw_parts_mut(self.base, self.written)) }
        }
    }
}
