//! The gather-reduce kernel: each output segment's row is built by one thread, from its
//! positions' input rows in position order (so the bits do not depend on the thread
//! count), with the rows a few positions ahead prefetched. Two walks:
//!
//! - [`sorted`]: segments that are ranges of entries (offsets, starts, lengths, uniform
//!   segments, or a plan's CSR): threads claim chunks of segments, and each segment's row
//!   is accumulated in registers where it is a single run (up to 64 columns at a
//!   time), else in place (it stays in the L1 cache), and finished once;
//! - [`by_ids`]: one segment id per position, in any order: each thread owns a span of
//!   segments and walks every position, taking those whose id falls in its span (the
//!   scatter's way: no atomics, no sorting, no memory but the span's tallies).
//!
//! Its rooms: this file (the row geometry and the walks), `pool` (what a pooling does to
//! a row). Every offset it forms is an element by the contract of [`Geometry`].

mod adjoint;
mod attention;
mod heads;
mod ids;
mod ops;
mod planes;
mod pool;
mod quant;
mod runs;
mod sort;
mod source;

#[cfg(feature = "mpi")]
pub(crate) use self::adjoint::Injective;
pub(crate) use self::adjoint::{
    ArgRows, ByRow, Route, Scale, Target, backward, backward_arg, backward_each, backward_heads,
};
pub(crate) use self::attention::{Heads, RowBlocks, dot_rows, softmax, softmax_backward};
pub(crate) use self::heads::{head_span, sorted_heads};
pub(crate) use self::ids::by_ids;
use self::ids::walk_span;
pub(crate) use self::pool::{Pooler, Tally};
#[cfg(feature = "half")]
pub(crate) use self::quant::Halves;
pub(crate) use self::quant::{QRow, Quantized};
pub(crate) use self::runs::RowSource;
// (The sharded tables end their segments as the kernel does.)
#[cfg(feature = "mpi")]
#[cfg(feature = "mpi")]
pub(crate) use self::ops::better;
#[cfg(feature = "mpi")]
pub(crate) use self::ops::{Prod, RowOp, Sum};
pub(crate) use self::planes::{Fold, ROI_LANES, RoiFold, RoiPoints, SampleRows, roi_backward, roi_staged};
#[cfg(feature = "mpi")]
pub(crate) use self::pool::{End, divide_row};
pub(crate) use self::sort::Csr;
pub(crate) use self::source::{Entries, Erased, ErasedFn, Identity, Positions, Resolved, Row, Source};
use super::BadIndex;
use super::isa::Isa;
use super::prefetch::{prefetch_block, prefetch_line};
use super::schedule::run_ranges;
use crate::plan::policy::REDUCE_PREFETCH_MAX_BYTES;
use crate::plan::reduce::Lane;
use crate::pool::PoolElement;

/// Where the rows are: the input's row `r` starts at `x + r·x_step`, the output's segment
/// row `s` at `out + s·o_step` (its argmax row, if any, at `arg + s·o_step`), and a row is
/// the loops `outer` (outermost first) around the innermost loop `lane`.
///
/// The contract every `unsafe` block of the kernel relies on (its builder in `call/`
/// states it): for every `r < rows` and `s < segments`, every offset a row's loops form is
/// an element of the input, the output (and the argmax output, which has the output's
/// strides); distinct segments' rows share no element; the arrays outlive the kernel.
pub(crate) struct Geometry<A> {
    pub x: *const A,
    pub x_step: isize,
    pub rows: usize,
    pub out: *mut A,
    pub o_step: isize,
    pub segments: usize,
    pub arg: *mut usize,
    pub lane: Lane,
    pub outer: Vec<Lane>,
    /// How many positions ahead the walks ask for a row (the planner's
    /// [`ahead`](crate::plan::reduce::ahead)).
    pub ahead: usize,
}

// SAFETY: the kernel's threads read the input and write disjoint segments of the output
// (each segment is owned by one thread), so sharing the pointers is sharing `&[A]` and
// disjoint `&mut [A]`, which `A: Send + Sync` allows.
unsafe impl<A: Send + Sync> Sync for Geometry<A> {}

impl<A> Geometry<A> {
    /// Whether every row is a single run in input and output (and argmax): the slice
    /// loops of `runs` apply.
    fn runs(&self) -> bool {
        self.outer.is_empty() && self.lane.x == 1 && self.lane.o == 1
    }

    /// The input row `r`.
    #[inline(always)]
    fn x_row(&self, r: usize) -> *const A {
        self.x.wrapping_offset(r as isize * self.x_step)
    }

    /// The output (and argmax) row of segment `s`.
    #[inline(always)]
    fn out_row(&self, s: usize) -> (*mut A, *mut usize) {
        let at = s as isize * self.o_step;
        let arg = if self.arg.is_null() {
            self.arg
        } else {
            self.arg.wrapping_offset(at)
        };
        (self.out.wrapping_offset(at), arg)
    }

    /// Asks for the row at `x` (the whole row when it is one contiguous lane).
    #[inline(always)]
    fn prefetch<B>(&self, x: *const B) {
        if self.outer.is_empty() && self.lane.x == 1 {
            prefetch_block(x, (self.lane.len * size_of::<B>()).min(REDUCE_PREFETCH_MAX_BYTES));
        } else {
            prefetch_line(x);
        }
    }

    /// Calls `f` with the input and output offsets of each lane of a row.
    #[inline(always)]
    fn lanes(&self, mut f: impl FnMut(isize, isize)) {
        if self.outer.is_empty() {
            f(0, 0)
        } else {
            outer(&self.outer, 0, 0, &mut f)
        }
    }

    /// `f(out, in)` for every element of the rows at `x` and `o`.
    ///
    /// # Safety
    /// `x` and `o` are rows of the contract; no other thread touches the output row.
    #[inline(always)]
    pub(crate) unsafe fn each_lane(&self, x: *const A, o: *mut A, mut f: impl FnMut(&mut A, &A)) {
        let l = self.lane;
        self.lanes(|xo, oo| {
            let (x, o) = (x.wrapping_offset(xo), o.wrapping_offset(oo));
            if l.x == 1 && l.o == 1 {
                // SAFETY: a contiguous lane of `l.len` elements of each row (the contract);
                // the output row is this thread's alone.
                let (x, o) = unsafe {
                    (
                        std::slice::from_raw_parts(x, l.len),
                        std::slice::from_raw_parts_mut(o, l.len),
                    )
                };
                for (o, x) in o.iter_mut().zip(x) {
                    f(o, x);
                }
            } else {
                for i in 0..l.len as isize {
                    // SAFETY: element `i` of the lane (the contract).
                    unsafe { f(&mut *o.offset(i * l.o), &*x.offset(i * l.x)) };
                }
            }
        });
    }

    /// `f(out, arg, in)` for every element of the rows at `x`, `o` and `arg`.
    ///
    /// # Safety
    /// As [`each_lane`](Self::each_lane); `arg` is the argmax row of `o`'s segment.
    #[inline(always)]
    pub(crate) unsafe fn each_lane_arg(
        &self,
        x: *const A,
        o: *mut A,
        arg: *mut usize,
        mut f: impl FnMut(&mut A, &mut usize, &A),
    ) {
        let l = self.lane;
        self.lanes(|xo, oo| {
            for i in 0..l.len as isize {
                // SAFETY: element `i` of the lane of each row (the contract; the argmax
                // output has the output's strides).
                unsafe {
                    f(
                        &mut *o.offset(oo + i * l.o),
                        &mut *arg.offset(oo + i * l.o),
                        &*x.offset(xo + i * l.x),
                    )
                };
            }
        });
    }

    /// `f(out, in, a)` for every element of the rows at `x` and `o`, `a` the element of
    /// the row at `arg`, which has the input's strides.
    ///
    /// # Safety
    /// As [`each_lane`](Self::each_lane); `arg` is a row of an array of the input's shape
    /// and strides along the lanes.
    #[inline(always)]
    pub(crate) unsafe fn each_lane_by(
        &self,
        x: *const A,
        arg: *const usize,
        o: *mut A,
        mut f: impl FnMut(&mut A, &A, usize),
    ) {
        let l = self.lane;
        self.lanes(|xo, oo| {
            for i in 0..l.len as isize {
                // SAFETY: element `i` of the lane of each row (the contract; the argmax
                // has the input's strides).
                unsafe {
                    f(
                        &mut *o.offset(oo + i * l.o),
                        &*x.offset(xo + i * l.x),
                        *arg.offset(xo + i * l.x),
                    )
                };
            }
        });
    }

    /// `f(out, arg)` for every element of the output row at `o` (and argmax row at `arg`,
    /// if not null).
    ///
    /// # Safety
    /// As [`each_lane_arg`](Self::each_lane_arg).
    #[inline(always)]
    pub(crate) unsafe fn each_out(
        &self,
        o: *mut A,
        arg: *mut usize,
        mut f: impl FnMut(&mut A, Option<&mut usize>),
    ) {
        let l = self.lane;
        self.lanes(|_, oo| {
            for i in 0..l.len as isize {
                let at = oo + i * l.o;
                // SAFETY: element `i` of the lane of the rows (the contract).
                unsafe {
                    let a = if arg.is_null() {
                        None
                    } else {
                        Some(&mut *arg.offset(at))
                    };
                    f(&mut *o.offset(at), a)
                };
            }
        });
    }
}

/// The odometer over a row's outer loops (rows of rank 3 and more, or strided layouts).
fn outer(dims: &[Lane], x: isize, o: isize, f: &mut dyn FnMut(isize, isize)) {
    match dims.split_first() {
        None => f(x, o),
        Some((d, rest)) => {
            for i in 0..d.len as isize {
                outer(rest, x + i * d.x, o + i * d.o, f);
            }
        }
    }
}

/// Builds every segment of `e` into `g`'s output in `jobs` chunks of segments (claimed by
/// the calling thread and the rayon pool).
pub(crate) fn sorted<A: PoolElement, E: Entries>(
    g: &Geometry<A>,
    e: &E,
    p: &Pooler<'_, A>,
    jobs: usize,
) -> Result<(), BadIndex> {
    sorted_from(g, e, p, jobs, &runs::Input)
}

/// [`walk_segments`] with the geometry's own input rows.
///
/// # Safety
/// As [`walk_segments`].
pub(crate) unsafe fn walk_input<A: PoolElement, E: Entries>(
    g: &Geometry<A>,
    e: &E,
    p: &Pooler<'_, A>,
    segs: std::ops::Range<usize>,
) -> Result<(), BadIndex> {
    // SAFETY: the caller's.
    unsafe { walk_segments(g, e, p, segs, &runs::Input) }
}

/// [`sorted`] with rows from a source of their own (quantized, half floats: `f32` output
/// rows that are single runs, `Err` otherwise, which its caller's construction rules out).
pub(crate) fn sorted_quantized<E: Entries, R: RowSource<f32>>(
    g: &Geometry<f32>,
    e: &E,
    p: &Pooler<'_, f32>,
    jobs: usize,
    rows: &R,
) -> Result<(), BadIndex> {
    sorted_from(g, e, p, jobs, rows)
}

/// [`sorted`] with rows from `rows` (a source other than the input needs rows that are
/// single runs: `Err` otherwise).
fn sorted_from<A: PoolElement, E: Entries, R: RowSource<A>>(
    g: &Geometry<A>,
    e: &E,
    p: &Pooler<'_, A>,
    jobs: usize,
    rows: &R,
) -> Result<(), BadIndex> {
    // SAFETY: the ranges of segments are disjoint, one job each.
    run_ranges(g.segments, jobs, |segs| unsafe {
        walk_segments(g, e, p, segs, rows)
    })
}

/// Builds the segments `segs` of `e` into `g`'s output on this thread, rows from `rows`
/// (one job of a sorted walk: a call's, or a collection's schedule over its features).
///
/// # Safety
/// No other thread builds any segment of `segs` of this output meanwhile.
pub(crate) unsafe fn walk_segments<A: PoolElement, E: Entries, R: RowSource<A>>(
    g: &Geometry<A>,
    e: &E,
    p: &Pooler<'_, A>,
    segs: std::ops::Range<usize>,
    rows: &R,
) -> Result<(), BadIndex> {
    // (An argmax runs in `u32` there.)
    let runs = g.runs() && (g.arg.is_null() || u32::try_from(p.positions).is_ok());
    if !runs && !R::INPUT {
        return Err(BadIndex);
    }
    if segs.end > g.segments {
        return Err(BadIndex);
    }
    if runs {
        // SAFETY: rows that are single runs, the ISA detected on this CPU, and this job
        // alone builds these segments (the caller's contract; below `segments`, checked
        // above).
        return unsafe { runs::dispatch(Isa::detect(), g, p, &runs::Sorted { e, segs, rows }) };
    }
    for s in segs {
        // SAFETY: `s < segments` (checked above), and this job alone builds segment `s`
        // (the caller's contract).
        unsafe { segment(g, e, p, s)? };
    }
    Ok(())
}

/// Builds segment `s`.
///
/// # Safety
/// `s < g.segments`, and no other thread touches segment `s`.
#[inline(always)]
unsafe fn segment<A: PoolElement, E: Entries>(
    g: &Geometry<A>,
    e: &E,
    p: &Pooler<'_, A>,
    s: usize,
) -> Result<(), BadIndex> {
    let (o, arg) = g.out_row(s);
    let mut tally = Tally::new();
    let total = e.len();
    for k in e.segment(s) {
        let ahead = k + g.ahead;
        if ahead < total {
            g.prefetch(g.x_row(e.peek(ahead)));
        }
        let Some((r, pos)) = e.entry(k) else { continue };
        if r >= g.rows {
            return Err(BadIndex);
        }
        // SAFETY: `r < rows` and `s < segments` (the contract); segment `s` is ours.
        unsafe { p.add(g, g.x_row(r), o, arg, pos, &mut tally) };
    }
    // SAFETY: as above.
    unsafe { p.finish(g, o, arg, &tally) };
    Ok(())
}
