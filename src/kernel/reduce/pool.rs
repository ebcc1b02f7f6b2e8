//! A segment's pooling, one row at a time: `first` starts a segment's output row from its
//! first contributing row, `next` combines each later one into it (in position order),
//! `finish` divides (`Mean`, `SqrtN`) and `empty` fills a segment without rows.

use ndarray::ArrayView1;

use super::Geometry;
use super::ops::{RowOp, WithOp, with_op};
use crate::pool::{PoolElement, Pooling};

/// The pooling of one call, as the kernel applies it.
pub(crate) struct Pooler<'w, A> {
    pub pooling: Pooling,
    pub weights: Option<ArrayView1<'w, A>>,
    pub fill: A,
    /// Whether `A` is an integer type (0.5 converts to zero): its division by zero gives
    /// zero instead of panicking.
    pub integral: bool,
    /// What an empty segment's argmax says: the number of positions.
    pub positions: usize,
}

/// A segment's running count and weight sums (for the divisors of `Mean` and `SqrtN`).
#[derive(Debug, Clone)]
pub(crate) struct Tally<A> {
    pub count: usize,
    pub weight: A,
    pub weight_sq: A,
}

impl<A: PoolElement> Tally<A> {
    #[inline(always)]
    pub fn new() -> Self {
        Tally {
            count: 0,
            weight: A::zero(),
            weight_sq: A::zero(),
        }
    }

    /// Counts one more contribution, of weight `w` where the pooling is weighted.
    #[inline(always)]
    pub fn push(&mut self, weighted: bool, w: &A) {
        self.count += 1;
        if weighted {
            self.weight += w.clone();
            self.weight_sq += w.clone() * w.clone();
        }
    }
}

impl<'w, A: PoolElement> Pooler<'w, A> {
    /// The pooling of `pool` for a call of `positions` positions.
    /// Per-head weights (`[P, H]`, `H != 1`) weigh nothing here: the caller walks each
    /// head with [`Pool::head`](crate::pool::Pool::head)'s pooler.
    pub fn of(pool: crate::pool::Pool<'w, A>, positions: usize) -> Self {
        Pooler {
            pooling: pool.pooling,
            weights: pool
                .weights
                .filter(|w| w.ncols() == 1)
                .map(|w| w.index_axis_move(ndarray::Axis(1), 0)),
            fill: pool.fill.unwrap_or_else(A::zero),
            integral: A::from_f64(0.5).is_none_or(|h| h.is_zero()),
            positions,
        }
    }

    /// Position `p`'s weight where `weighted` (an op's: the pool has weights), else one.
    #[inline(always)]
    pub fn weight_of(&self, weighted: bool, p: usize) -> A {
        match &self.weights {
            Some(w) if weighted => w[p].clone(),
            _ => A::one(),
        }
    }

    /// Combines position `p`'s row at `x` into the output row at `o` (argmax row at
    /// `arg`, if any) as the `tally.count`-th contribution of its segment, lane by lane
    /// with the pooling's op ([`with_op`]).
    ///
    /// # Safety
    /// `x` and `o` (and `arg`) are rows of `g`'s input and output: every offset the row's
    /// lanes form from them is an element; no other thread touches the output row.
    #[inline(always)]
    pub unsafe fn add(
        &self,
        g: &Geometry<A>,
        x: *const A,
        o: *mut A,
        arg: *mut usize,
        p: usize,
        tally: &mut Tally<A>,
    ) {
        /// One row's lanes, the op chosen.
        struct Lanes<'r, 'w, A> {
            pooler: &'r Pooler<'w, A>,
            g: &'r Geometry<A>,
            x: *const A,
            o: *mut A,
            arg: *mut usize,
            p: usize,
            tally: &'r mut Tally<A>,
        }
        impl<A: PoolElement> WithOp<A> for Lanes<'_, '_, A> {
            type Out = ();
            #[inline(always)]
            fn run<Op: RowOp<A>>(self) {
                let Lanes {
                    pooler,
                    g,
                    x,
                    o,
                    arg,
                    p,
                    tally,
                } = self;
                let w = pooler.weight_of(Op::WEIGHTED, p);
                let first = tally.count == 0;
                // SAFETY: (every call) `add`'s contract, which every `each_lane` needs.
                unsafe {
                    match (Op::ARG, first) {
                        (true, true) => g.each_lane_arg(x, o, arg, |o, a, x| Op::first_one(o, x, &w, a, p)),
                        (true, false) => g.each_lane_arg(x, o, arg, |o, a, x| Op::next_one(o, x, &w, a, p)),
                        (false, true) => g.each_lane(x, o, |o, x| Op::first_one(o, x, &w, &mut 0, p)),
                        (false, false) => g.each_lane(x, o, |o, x| Op::next_one(o, x, &w, &mut 0, p)),
                    }
                }
                tally.push(Op::WEIGHTED, &w);
            }
        }
        let lanes = Lanes {
            pooler: self,
            g,
            x,
            o,
            arg,
            p,
            tally,
        };
        with_op(self.pooling, self.weights.is_some(), !arg.is_null(), lanes);
    }

    /// Ends a segment's output row at `o`: the divisor of `Mean` / `SqrtN`, or the fill
    /// of an empty segment.
    ///
    /// # Safety
    /// As [`add`](Self::add).
    #[inline(always)]
    pub unsafe fn finish(&self, g: &Geometry<A>, o: *mut A, arg: *mut usize, tally: &Tally<A>) {
        // SAFETY: the caller's contract, which every `each_out` below needs.
        unsafe {
            match self.end(tally) {
                End::Fill => g.each_out(o, arg, |o, a| {
                    *o = self.fill.clone();
                    if let Some(a) = a {
                        *a = self.positions;
                    }
                }),
                End::Keep => {}
                End::Divide(d) => g.each_out(o, arg, |o, _| *o = divide(o, &d, self.integral)),
                End::Zero => g.each_out(o, arg, |o, _| *o = A::zero()),
            }
        }
    }

    /// What ends a segment of `tally`: the fill (empty), nothing, a division, or zero.
    #[inline(always)]
    pub fn end(&self, tally: &Tally<A>) -> End<A> {
        if tally.count == 0 {
            return End::Fill;
        }
        let weighted = self.weights.is_some();
        let divisor = match self.pooling {
            Pooling::Mean if weighted => Some(tally.weight.clone()),
            Pooling::Mean => A::from_usize(tally.count),
            Pooling::SqrtN => {
                let n = if weighted {
                    tally.weight_sq.to_f64().unwrap_or(f64::NAN)
                } else {
                    tally.count as f64
                };
                A::from_f64(n.sqrt())
            }
            _ => return End::Keep,
        };
        match divisor {
            Some(d) if !(self.integral && d.is_zero()) => End::Divide(d),
            // An integer divided by zero gives zero; a count beyond the range of `A` (a
            // small integer type) exceeds every sum, which truncates to zero.
            _ => End::Zero,
        }
    }
}

/// How a segment's output row ends ([`Pooler::end`]).
pub(crate) enum End<A> {
    /// Empty: the fill (and the argmax sentinel).
    Fill,
    /// As accumulated.
    Keep,
    /// Divided by the value (`divide`).
    Divide(A),
    /// Zero (an integer divided by zero, or by a count beyond its type).
    Zero,
}

/// A segment's output row (a run) divided by `d` ([`End::Divide`]), on a slice so that
/// the loop vectorizes.
#[inline(always)]
pub(crate) fn divide_row<A: PoolElement>(row: &mut [A], d: &A, integral: bool) {
    if integral {
        for o in row {
            *o = divide(o, d, true);
        }
    } else {
        for o in row {
            *o = o.clone() / d.clone();
        }
    }
}

/// `a / d`; for integers without the overflow of `MIN / -1` (which wraps to `MIN`, as
/// Rust's wrapping division does).
#[inline(always)]
pub(crate) fn divide<A: PoolElement>(a: &A, d: &A, integral: bool) -> A {
    if integral && let (Some(x), Some(y)) = (a.to_i128(), d.to_i128()) {
        return x
            .checked_div(y)
            .and_then(A::from_i128)
            .unwrap_or_else(|| a.clone());
    }
    a.clone() / d.clone()
}
