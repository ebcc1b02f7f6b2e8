//! Segments of contiguous rows (a row is one run of elements in both the input and the
//! output: axis 0 of a standard-layout table, the embedding bag's and the graph's case):
//! the pooling chosen once per chunk of segments, the row loop on slices, compiled for
//! the CPU's widest instruction set ([`Isa`]), so that it vectorizes. No argmax (that
//! runs on [`Pooler`]).

use std::ops::Range;

use super::{Entries, Geometry, Pooler, Tally};
use crate::kernel::BadIndex;
use crate::kernel::isa::Isa;
use crate::plan::policy::REDUCE_AHEAD;
use crate::pool::{PoolElement, Pooling};

/// What one pooling does to a row: start it from the first contributing row, combine a
/// later one (weighted by `w` where `WEIGHTED`).
trait RowOp<A> {
    const WEIGHTED: bool;
    fn first(o: &mut [A], x: &[A], w: &A);
    fn next(o: &mut [A], x: &[A], w: &A);
}

struct Sum;
struct WeightedSum;
struct Prod;
struct Max;
struct Min;

impl<A: PoolElement> RowOp<A> for Sum {
    const WEIGHTED: bool = false;
    #[inline(always)]
    fn first(o: &mut [A], x: &[A], _: &A) {
        for (o, x) in o.iter_mut().zip(x) {
            *o = A::zero() + x.clone();
        }
    }
    #[inline(always)]
    fn next(o: &mut [A], x: &[A], _: &A) {
        for (o, x) in o.iter_mut().zip(x) {
            *o += x.clone();
        }
    }
}

impl<A: PoolElement> RowOp<A> for WeightedSum {
    const WEIGHTED: bool = true;
    #[inline(always)]
    fn first(o: &mut [A], x: &[A], w: &A) {
        for (o, x) in o.iter_mut().zip(x) {
            *o = A::zero() + w.clone() * x.clone();
        }
    }
    #[inline(always)]
    fn next(o: &mut [A], x: &[A], w: &A) {
        for (o, x) in o.iter_mut().zip(x) {
            *o += w.clone() * x.clone();
        }
    }
}

impl<A: PoolElement> RowOp<A> for Prod {
    const WEIGHTED: bool = false;
    #[inline(always)]
    fn first(o: &mut [A], x: &[A], _: &A) {
        o.clone_from_slice(x);
    }
    #[inline(always)]
    fn next(o: &mut [A], x: &[A], _: &A) {
        for (o, x) in o.iter_mut().zip(x) {
            *o *= x.clone();
        }
    }
}

/// Max / Min: a strictly better value, or a NaN over a number, replaces (a select, so
/// that the loop vectorizes).
#[inline(always)]
#[allow(clippy::eq_op)]
fn keep<A: PoolElement, const MAX: bool>(o: &mut [A], x: &[A]) {
    for (o, x) in o.iter_mut().zip(x) {
        let better = if MAX { x > o } else { x < o };
        let replace = better || (x != x && o == o);
        let kept = if replace { x.clone() } else { o.clone() };
        *o = kept;
    }
}

impl<A: PoolElement> RowOp<A> for Max {
    const WEIGHTED: bool = false;
    #[inline(always)]
    fn first(o: &mut [A], x: &[A], _: &A) {
        o.clone_from_slice(x);
    }
    #[inline(always)]
    fn next(o: &mut [A], x: &[A], _: &A) {
        keep::<A, true>(o, x);
    }
}

impl<A: PoolElement> RowOp<A> for Min {
    const WEIGHTED: bool = false;
    #[inline(always)]
    fn first(o: &mut [A], x: &[A], _: &A) {
        o.clone_from_slice(x);
    }
    #[inline(always)]
    fn next(o: &mut [A], x: &[A], _: &A) {
        keep::<A, false>(o, x);
    }
}

/// Builds segments `segs` of `e` into `g`'s output with pooling `p`, rows as slices.
///
/// # Safety
/// `g`'s rows are single runs (`outer` empty, unit lane strides) and it has no argmax;
/// `isa` runs on this CPU; the segments are below `g.segments` and this thread's alone.
pub(super) unsafe fn segments<A: PoolElement, E: Entries>(
    isa: Isa,
    g: &Geometry<A>,
    e: &E,
    p: &Pooler<'_, A>,
    segs: Range<usize>,
) -> Result<(), BadIndex> {
    // SAFETY: (every arm) forwarded; the op matches the pooling and its weights.
    unsafe {
        match (p.pooling, p.weights.is_some()) {
            (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, false) => {
                with_isa::<A, E, Sum>(isa, g, e, p, segs)
            }
            (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, true) => {
                with_isa::<A, E, WeightedSum>(isa, g, e, p, segs)
            }
            (Pooling::Prod, _) => with_isa::<A, E, Prod>(isa, g, e, p, segs),
            (Pooling::Max, _) => with_isa::<A, E, Max>(isa, g, e, p, segs),
            (Pooling::Min, _) => with_isa::<A, E, Min>(isa, g, e, p, segs),
        }
    }
}

/// # Safety
/// As [`segments`].
#[inline(always)]
unsafe fn with_isa<A: PoolElement, E: Entries, Op: RowOp<A>>(
    isa: Isa,
    g: &Geometry<A>,
    e: &E,
    p: &Pooler<'_, A>,
    segs: Range<usize>,
) -> Result<(), BadIndex> {
    // SAFETY: (every arm) the CPU has the variant's features (the caller's `isa`); the
    // rest is forwarded.
    unsafe {
        match isa {
            Isa::Base => run::<A, E, Op>(g, e, p, segs),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => run_avx2::<A, E, Op>(g, e, p, segs),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => run_avx512::<A, E, Op>(g, e, p, segs),
        }
    }
}

/// [`run`] compiled for AVX2.
///
/// # Safety
/// As [`segments`], on a CPU with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_avx2<A: PoolElement, E: Entries, Op: RowOp<A>>(
    g: &Geometry<A>,
    e: &E,
    p: &Pooler<'_, A>,
    segs: Range<usize>,
) -> Result<(), BadIndex> {
    // SAFETY: forwarded.
    unsafe { run::<A, E, Op>(g, e, p, segs) }
}

/// [`run`] compiled for AVX-512.
///
/// # Safety
/// As [`segments`], on a CPU with AVX-512 F, VL, DQ and BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
unsafe fn run_avx512<A: PoolElement, E: Entries, Op: RowOp<A>>(
    g: &Geometry<A>,
    e: &E,
    p: &Pooler<'_, A>,
    segs: Range<usize>,
) -> Result<(), BadIndex> {
    // SAFETY: forwarded.
    unsafe { run::<A, E, Op>(g, e, p, segs) }
}

/// The loop itself, inlined into each instruction-set variant.
///
/// # Safety
/// As [`segments`] (for any `isa`).
#[inline(always)]
unsafe fn run<A: PoolElement, E: Entries, Op: RowOp<A>>(
    g: &Geometry<A>,
    e: &E,
    p: &Pooler<'_, A>,
    segs: Range<usize>,
) -> Result<(), BadIndex> {
    let len = g.lane.len;
    let total = e.len();
    let one = A::one();
    let null = std::ptr::null_mut();
    for s in segs {
        let (o, _) = g.out_row(s);
        // SAFETY: segment `s`'s output row, a run of `len` elements (the contract of
        // `Geometry` and of this function), this thread's alone.
        let out = unsafe { std::slice::from_raw_parts_mut(o, len) };
        let mut tally = Tally::new();
        for k in e.segment(s) {
            if k + REDUCE_AHEAD < total {
                g.prefetch(g.x_row(e.peek(k + REDUCE_AHEAD)));
            }
            let Some((r, pos)) = e.entry(k)? else { continue };
            if r >= g.rows {
                return Err(BadIndex);
            }
            // SAFETY: input row `r < rows`, a run of `len` elements (the contract).
            let x = unsafe { std::slice::from_raw_parts(g.x_row(r), len) };
            let w = if Op::WEIGHTED {
                match &p.weights {
                    Some(w) => w[pos].clone(),
                    None => one.clone(),
                }
            } else {
                one.clone()
            };
            if tally.count == 0 {
                Op::first(out, x, &w);
            } else {
                Op::next(out, x, &w);
            }
            tally.count += 1;
            if Op::WEIGHTED {
                tally.weight += w.clone();
                tally.weight_sq += w.clone() * w;
            }
        }
        // SAFETY: the output row of segment `s` (as above); no argmax.
        unsafe { p.finish(g, o, null, &tally) };
    }
    Ok(())
}
