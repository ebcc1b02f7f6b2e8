//! What one pooling does to a row of a single run (the register blocks of
//! [`runs`](super::runs) and their tails): start it from the first contributing row,
//! combine a later one into it, on slices, so that the loops vectorize.

use crate::pool::PoolElement;

/// What one pooling does to a row: start it from the first contributing row, combine a
/// later one (weighted by `w` where `WEIGHTED`; recording position `p` in the argmax row
/// `a` where `ARG`: a `u32` row of the walk's own, 8 lanes to a vector, widened into the
/// argmax output once the segment is done).
pub(crate) trait RowOp<A> {
    const WEIGHTED: bool;
    const ARG: bool;
    /// Whether it adds its rows (`Sum`, `WeightedSum`: also `Mean` and `SqrtN`), so that a
    /// quantized row may add in FBGEMM's order.
    const SUM: bool = false;
    fn first(o: &mut [A], x: &[A], w: &A, a: &mut [u32], p: u32);
    fn next(o: &mut [A], x: &[A], w: &A, a: &mut [u32], p: u32);
}

pub(super) struct Sum;
pub(super) struct WeightedSum;
pub(super) struct Prod;
/// Max (`MAX`) or Min, with the argmax (`ARG`) or without.
pub(super) struct Extremum<const MAX: bool, const ARG: bool>;

impl<A: PoolElement> RowOp<A> for Sum {
    const WEIGHTED: bool = false;
    const ARG: bool = false;
    const SUM: bool = true;
    #[inline(always)]
    fn first(o: &mut [A], x: &[A], _: &A, _: &mut [u32], _: u32) {
        for (o, x) in o.iter_mut().zip(x) {
            *o = A::zero() + x.clone();
        }
    }
    #[inline(always)]
    fn next(o: &mut [A], x: &[A], _: &A, _: &mut [u32], _: u32) {
        for (o, x) in o.iter_mut().zip(x) {
            *o += x.clone();
        }
    }
}

impl<A: PoolElement> RowOp<A> for WeightedSum {
    const WEIGHTED: bool = true;
    const ARG: bool = false;
    const SUM: bool = true;
    #[inline(always)]
    fn first(o: &mut [A], x: &[A], w: &A, _: &mut [u32], _: u32) {
        for (o, x) in o.iter_mut().zip(x) {
            *o = A::zero() + w.clone() * x.clone();
        }
    }
    #[inline(always)]
    fn next(o: &mut [A], x: &[A], w: &A, _: &mut [u32], _: u32) {
        for (o, x) in o.iter_mut().zip(x) {
            *o += w.clone() * x.clone();
        }
    }
}

impl<A: PoolElement> RowOp<A> for Prod {
    const WEIGHTED: bool = false;
    const ARG: bool = false;
    #[inline(always)]
    fn first(o: &mut [A], x: &[A], _: &A, _: &mut [u32], _: u32) {
        o.clone_from_slice(x);
    }
    #[inline(always)]
    fn next(o: &mut [A], x: &[A], _: &A, _: &mut [u32], _: u32) {
        for (o, x) in o.iter_mut().zip(x) {
            *o *= x.clone();
        }
    }
}

impl<A: PoolElement, const MAX: bool, const ARG: bool> RowOp<A> for Extremum<MAX, ARG> {
    const WEIGHTED: bool = false;
    const ARG: bool = ARG;
    #[inline(always)]
    fn first(o: &mut [A], x: &[A], _: &A, a: &mut [u32], p: u32) {
        o.clone_from_slice(x);
        if ARG {
            a.fill(p);
        }
    }
    /// A strictly better value, or a NaN over a number, replaces: a select, so that the
    /// loop vectorizes. "Not worse, and the old value not a NaN" says both in two compares:
    /// `!(x <= o)` holds for a greater `x` and for a NaN `x`.
    #[inline(always)]
    #[allow(clippy::eq_op, clippy::neg_cmp_op_on_partial_ord)]
    fn next(o: &mut [A], x: &[A], _: &A, a: &mut [u32], p: u32) {
        let better = |o: &A, x: &A| (if MAX { !(x <= o) } else { !(x >= o) }) && o == o;
        if ARG {
            // A pair indexed by the comparison, not an `if`: from an `if`, LLVM writes
            // the argmax with a masked store (microcoded on AMD).
            for ((o, x), a) in o.iter_mut().zip(x).zip(a) {
                let replace = better(o, x) as usize;
                *a = [*a, p][replace];
                *o = [o.clone(), x.clone()][replace].clone();
            }
        } else {
            for (o, x) in o.iter_mut().zip(x) {
                let kept = if better(o, x) { x.clone() } else { o.clone() };
                *o = kept;
            }
        }
    }
}
