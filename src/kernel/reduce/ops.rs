//! What each pooling does, written once: an op starts an output element from the first
//! contributing value and combines each later one into it. The row walks of single runs
//! ([`runs`](super::runs), and every row source's blocks) apply it to slices, so that
//! the loops vectorize; rows of other layouts apply it lane by lane ([`Pooler::add`]).
//! [`with_op`] chooses the op of a call's pooling, once.
//!
//! [`Pooler::add`]: super::Pooler::add

use crate::pool::{PoolElement, Pooling};

/// What one pooling does to an output element `o`: start it from the first contributing
/// value `x`, combine a later one (weighted by `w` where `WEIGHTED`; recording position
/// `p` in the argmax `a` where `ARG`). Positions are `u32` in the row walks (8 lanes to a
/// vector, widened into the argmax output once the segment is done), `usize` on lanes.
pub(crate) trait RowOp<A> {
    const WEIGHTED: bool;
    const ARG: bool;
    /// Whether it adds its rows (`Sum`, `WeightedSum`: also `Mean` and `SqrtN`), so that a
    /// quantized row may add in FBGEMM's order.
    const SUM: bool = false;
    fn first_one<P: Copy>(o: &mut A, x: &A, w: &A, a: &mut P, p: P);
    fn next_one<P: Copy>(o: &mut A, x: &A, w: &A, a: &mut P, p: P);

    /// [`first_one`](Self::first_one) on a row (`a`: the argmax row where `ARG`, else
    /// anything).
    #[inline(always)]
    fn first(o: &mut [A], x: &[A], w: &A, a: &mut [u32], p: u32) {
        if Self::ARG {
            for ((o, x), a) in o.iter_mut().zip(x).zip(a) {
                Self::first_one(o, x, w, a, p);
            }
        } else {
            for (o, x) in o.iter_mut().zip(x) {
                Self::first_one(o, x, w, &mut 0, p);
            }
        }
    }

    /// [`next_one`](Self::next_one) on a row, as [`first`](Self::first).
    #[inline(always)]
    fn next(o: &mut [A], x: &[A], w: &A, a: &mut [u32], p: u32) {
        if Self::ARG {
            for ((o, x), a) in o.iter_mut().zip(x).zip(a) {
                Self::next_one(o, x, w, a, p);
            }
        } else {
            for (o, x) in o.iter_mut().zip(x) {
                Self::next_one(o, x, w, &mut 0, p);
            }
        }
    }
}

pub(crate) struct Sum;
pub(crate) struct WeightedSum;
pub(crate) struct Prod;
/// Max (`MAX`) or Min, with the argmax (`ARG`) or without.
pub(crate) struct Extremum<const MAX: bool, const ARG: bool>;

impl<A: PoolElement> RowOp<A> for Sum {
    const WEIGHTED: bool = false;
    const ARG: bool = false;
    const SUM: bool = true;
    #[inline(always)]
    fn first_one<P: Copy>(o: &mut A, x: &A, _: &A, _: &mut P, _: P) {
        *o = A::zero() + x.clone();
    }
    #[inline(always)]
    fn next_one<P: Copy>(o: &mut A, x: &A, _: &A, _: &mut P, _: P) {
        *o += x.clone();
    }
}

impl<A: PoolElement> RowOp<A> for WeightedSum {
    const WEIGHTED: bool = true;
    const ARG: bool = false;
    const SUM: bool = true;
    #[inline(always)]
    fn first_one<P: Copy>(o: &mut A, x: &A, w: &A, _: &mut P, _: P) {
        *o = A::zero() + w.clone() * x.clone();
    }
    #[inline(always)]
    fn next_one<P: Copy>(o: &mut A, x: &A, w: &A, _: &mut P, _: P) {
        *o += w.clone() * x.clone();
    }
}

impl<A: PoolElement> RowOp<A> for Prod {
    const WEIGHTED: bool = false;
    const ARG: bool = false;
    #[inline(always)]
    fn first_one<P: Copy>(o: &mut A, x: &A, _: &A, _: &mut P, _: P) {
        *o = x.clone();
    }
    #[inline(always)]
    fn next_one<P: Copy>(o: &mut A, x: &A, _: &A, _: &mut P, _: P) {
        *o *= x.clone();
    }
}

impl<A: PoolElement, const MAX: bool, const ARG: bool> RowOp<A> for Extremum<MAX, ARG> {
    const WEIGHTED: bool = false;
    const ARG: bool = ARG;
    #[inline(always)]
    fn first_one<P: Copy>(o: &mut A, x: &A, _: &A, a: &mut P, p: P) {
        *o = x.clone();
        if ARG {
            *a = p;
        }
    }
    /// A strictly better value, or a NaN over a number, replaces ([`better`]): a select,
    /// so that the loop vectorizes.
    #[inline(always)]
    fn next_one<P: Copy>(o: &mut A, x: &A, _: &A, a: &mut P, p: P) {
        let replace = better(MAX, o, x);
        if ARG {
            // A pair indexed by the comparison, not an `if`: from an `if`, LLVM writes
            // the argmax with a masked store (microcoded on AMD).
            *a = [*a, p][replace as usize];
            *o = [o.clone(), x.clone()][replace as usize].clone();
        } else {
            let kept = if replace { x.clone() } else { o.clone() };
            *o = kept;
        }
    }
}

/// `replace` for Max / Min: a strictly better value, or a NaN where there was none.
/// "Not worse, and the old value not a NaN" says both in two compares: `!(new <= old)`
/// holds for a greater and for a NaN `new`.
#[inline(always)]
#[allow(clippy::eq_op, clippy::neg_cmp_op_on_partial_ord)]
pub(crate) fn better<A: PartialOrd>(max: bool, old: &A, new: &A) -> bool {
    (if max { !(new <= old) } else { !(new >= old) }) && old == old
}

/// What runs with the op of a call's pooling (a closure generic over the op).
pub(crate) trait WithOp<A> {
    type Out;
    fn run<Op: RowOp<A>>(self) -> Self::Out;
}

/// Runs `f` with the op of `pooling` (weighted, with an argmax): the one place a
/// pooling becomes its op.
#[inline(always)]
pub(crate) fn with_op<A: PoolElement, F: WithOp<A>>(
    pooling: Pooling,
    weighted: bool,
    arg: bool,
    f: F,
) -> F::Out {
    match (pooling, weighted, arg) {
        (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, false, _) => f.run::<Sum>(),
        (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, true, _) => f.run::<WeightedSum>(),
        // Weights with Prod, Max or Min are refused before the kernel runs.
        (Pooling::Prod, ..) => f.run::<Prod>(),
        (Pooling::Max, _, false) => f.run::<Extremum<true, false>>(),
        (Pooling::Max, _, true) => f.run::<Extremum<true, true>>(),
        (Pooling::Min, _, false) => f.run::<Extremum<false, false>>(),
        (Pooling::Min, _, true) => f.run::<Extremum<false, true>>(),
    }
}
