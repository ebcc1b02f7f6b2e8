//! Rows of whole block lanes (embedding rows, GatherND slices, pixels, points): each
//! lane resolves one coordinate and copies a run, as a pipeline that locates and
//! prefetches each block a few lanes before it is copied, so that reads from far-apart
//! places overlap.

use super::Task;
use crate::index::{GatherIndex, Resolve};
use crate::kernel::BadIndex;
use crate::kernel::prefetch::prefetch_block;
use crate::kernel::walk::At;
use crate::plan::policy::{GATHER_RING, IN_FLIGHT_BYTES};
use crate::plan::{AxisTerm, Loop};

impl<A: Clone + Send + Sync, I: GatherIndex> Task<'_, A, I> {
    /// `count` whole block lanes along `row`, the first at offsets `at`.
    ///
    /// # Safety
    /// The contract of [`Task::run`]; the `count` lanes exist; the lane is a block
    /// (`lane.idx == 0`, at least one axis).
    #[inline(never)]
    pub(super) unsafe fn block_row<R: Resolve, const INIT: bool>(
        &self,
        row: Loop,
        count: usize,
        at: At,
        written: &mut usize,
    ) -> Result<(), BadIndex> {
        // The axis terms by value for one or two axes (the usual cases), so that they stay
        // in registers: through `self` the compiler must reload them after every store.
        // SAFETY: (every arm) forwarded; `fixed` holds this task's own axis terms.
        // (`R::SPECIALIZED` is a constant: the other modes compile only the last arm.)
        unsafe {
            match *self.walk.axes {
                [a] if R::SPECIALIZED => self.block_row_with::<R, INIT, 1>(&[a], row, count, at, written),
                [a, b] if R::SPECIALIZED => {
                    self.block_row_with::<R, INIT, 2>(&[a, b], row, count, at, written)
                }
                _ => self.block_row_with::<R, INIT, 0>(&[], row, count, at, written),
            }
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
        at: At,
        written: &mut usize,
    ) -> Result<(), BadIndex> {
        let n = self.walk.lane.len;
        let axes: &[AxisTerm] = if N == 0 { self.walk.axes } else { fixed };
        let bytes = n * std::mem::size_of::<A>();
        let prefetch = cfg!(target_arch = "x86_64") && row.idx != 0 && self.walk.lane.inp == 1 && bytes > 0;
        // A pipeline: each lane's block is located (its indices read and checked once)
        // and prefetched `ahead` lanes before it is copied, [`IN_FLIGHT_BYTES`] of blocks in
        // flight (every cache line a contiguous block touches).
        let ahead = if prefetch {
            (IN_FLIGHT_BYTES / bytes).clamp(2, GATHER_RING)
        } else {
            1
        };
        let mut good = true;
        let locate = |k: usize| {
            let lane = at.step(&row, k as isize);
            // SAFETY: `lane.idx` is the indices offset of an existing lane; a bad index
            // counts as 0 and is reported at the end of the row.
            let (g, ok) = unsafe { self.locate::<R>(axes, lane.idx) };
            good &= ok;
            let s = lane.inp + g;
            if prefetch {
                prefetch_block(self.inp.wrapping_offset(s), bytes);
            }
            s
        };
        let lanes = (count, at.out, row.out);
        // SAFETY: `locate` gives the offsets of blocks at resolved indices (0 for a bad
        // one), in the input by `run`'s contract; the `count` lanes exist.
        unsafe {
            if !R::SPECIALIZED || self.walk.lane.inp != 1 || self.walk.lane.out != 1 {
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
    /// input offset `locate(k)`, calling `locate` `ahead` lanes (at most [`GATHER_RING`]) before
    /// the copy. The copy is of `K`-element arrays for `K > 0` (contiguous blocks of `K`
    /// elements), else by [`Task::copy`].
    ///
    /// # Safety
    /// The blocks `locate` gives and the lanes exist; for `K > 0`, the lane has `K`
    /// elements and unit strides.
    #[inline(always)]
    unsafe fn pipeline<const INIT: bool, const K: usize>(
        &self,
        (count, o_out, step): (usize, isize, isize),
        ahead: usize,
        mut locate: impl FnMut(usize) -> isize,
        written: &mut usize,
    ) {
        let mut ring = [0isize; GATHER_RING];
        let lead = ahead.min(count);
        for (k, r) in ring[..lead].iter_mut().enumerate() {
            *r = locate(k);
        }
        let mut copy = |k: usize, s: isize| {
            // SAFETY: by the contract above.
            unsafe {
                let (out, src) = (self.out.offset(o_out + k as isize * step), self.inp.offset(s));
                if K > 0 && INIT {
                    // The block is written whole, or (a clone panicked) not at all.
                    out.cast::<[A; K]>().write((*src.cast::<[A; K]>()).clone());
                    *written += K;
                } else if K > 0 {
                    (*out.cast::<[A; K]>()).clone_from(&*src.cast::<[A; K]>());
                    *written += K;
                } else {
                    self.copy::<INIT>(out, src, 0, self.walk.lane.len, written);
                }
            }
        };
        for k in 0..count - lead {
            let s = ring[k % GATHER_RING];
            ring[(k + lead) % GATHER_RING] = locate(k + lead);
            copy(k, s);
        }
        for k in count - lead..count {
            copy(k, ring[k % GATHER_RING]);
        }
    }
}
