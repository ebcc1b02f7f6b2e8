//! A segment's pooling, one row at a time: `first` starts a segment's output row from its
//! first contributing row, `next` combines each later one into it (in position order),
//! `finish` divides (`Mean`, `SqrtN`) and `empty` fills a segment without rows.

use ndarray::ArrayView1;

use super::Geometry;
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

/// `replace` for Max / Min: a strictly better value, or a NaN where there was none
/// (`!(new <= old)` holds for a greater and for a NaN `new`).
#[inline(always)]
#[allow(clippy::eq_op, clippy::neg_cmp_op_on_partial_ord)]
pub(crate) fn better<A: PartialOrd>(max: bool, old: &A, new: &A) -> bool {
    (if max { !(new <= old) } else { !(new >= old) }) && old == old
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

    /// Position `p`'s weight (the pool has weights).
    #[inline(always)]
    fn weight(&self, p: usize) -> Option<A> {
        // The weights' length is checked against the positions before the kernel runs.
        self.weights.as_ref().map(|w| w[p].clone())
    }

    /// Combines position `p`'s row at `x` into the output row at `o` (argmax row at
    /// `arg`, if any) as the `tally.count`-th contribution of its segment.
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
        let w = self.weight(p);
        let first = tally.count == 0;
        tally.count += 1;
        if let Some(w) = &w {
            tally.weight += w.clone();
            tally.weight_sq += w.clone() * w.clone();
        }
        // SAFETY: the caller's contract, which every `each_lane` below needs.
        unsafe {
            match (self.pooling, w) {
                (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, None) => {
                    if first {
                        g.each_lane(x, o, |o, x| *o = A::zero() + x.clone());
                    } else {
                        g.each_lane(x, o, |o, x| *o += x.clone());
                    }
                }
                (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, Some(w)) => {
                    if first {
                        g.each_lane(x, o, |o, x| *o = A::zero() + w.clone() * x.clone());
                    } else {
                        g.each_lane(x, o, |o, x| *o += w.clone() * x.clone());
                    }
                }
                // Weights with Prod, Max or Min are refused before the kernel runs.
                (Pooling::Prod, _) => {
                    if first {
                        g.each_lane(x, o, |o, x| *o = x.clone());
                    } else {
                        g.each_lane(x, o, |o, x| *o *= x.clone());
                    }
                }
                (Pooling::Max | Pooling::Min, _) => {
                    let max = self.pooling == Pooling::Max;
                    if first {
                        g.each_lane(x, o, |o, x| *o = x.clone());
                        if !arg.is_null() {
                            g.each_out(o, arg, |_, a| {
                                if let Some(a) = a {
                                    *a = p;
                                }
                            });
                        }
                    } else if arg.is_null() {
                        g.each_lane(x, o, |o, x| {
                            let keep = if better(max, o, x) { x.clone() } else { o.clone() };
                            *o = keep;
                        });
                    } else {
                        g.each_lane_arg(x, o, arg, |o, a, x| {
                            let replace = better(max, o, x);
                            let keep = if replace { x.clone() } else { o.clone() };
                            *o = keep;
                            *a = if replace { p } else { *a };
                        });
                    }
                }
            }
        }
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
