//! The caller's side of a sharded gather-reduce: each segment's partials combined in
//! increasing rank order (decision 39), its own partial already in the output, and the
//! segment ended (divided, or filled) while its row is in cache.

use super::Route;
use super::exchange::{Received, offsets};
use crate::error::{GatherError, internal};
use crate::kernel::reduce::{End, Pooler, Prod, RowOp, Sum, Tally, better, divide_row};
use crate::pool::{PoolElement, Pooling};

/// What the caller combines: its owners' partials, its own one in the output.
pub(super) struct Partials<'a, A> {
    /// The caller's routing (each owner's positions, for an argmax).
    pub route: &'a Route,
    /// Each position's segment, each segment's kept positions, and each owner's
    /// segments (increasing) back to back.
    pub segment: &'a [usize],
    pub kept: &'a [usize],
    pub global: &'a [usize],
    pub per_owner: &'a [usize],
    /// This rank, whose partial of each of its segments is in the output already (and
    /// its positions in the argmax, as the caller's).
    pub me: usize,
    /// The other owners' partial rows, one per segment of theirs in order (and, for an
    /// argmax, each value's position in its owner's share of the caller's positions).
    pub got: &'a Received<A>,
    pub got_arg: Option<&'a Received<u64>>,
}

impl<A: PoolElement + Copy> Partials<'_, A> {
    /// Combines every segment into `out` (rows of `w`; `at`, its argmax, for `Max` /
    /// `Min`): the owners before this rank into a row of their own first, then this
    /// rank's partial (in `out`), then the owners after it, each added (multiplied) in
    /// rank order from zero (one), as decision 39 orders them; `Max` / `Min` keep the
    /// first position of the best value, in any order. Then each segment ends as the
    /// single-process call ends it.
    pub fn merge(
        &self,
        op: &'static str,
        pooler: &Pooler<'_, A>,
        count: usize,
        w: usize,
        out: &mut [A],
        at: &mut [usize],
    ) -> Result<(), GatherError> {
        let ranks = self.per_owner.len();
        let tallies = tallies(self.route, self.segment, self.kept, pooler);
        let starts = offsets(self.per_owner);
        let mut cursor = starts.clone();
        let rows: Vec<&[A]> = (0..ranks).map(|o| self.got.from(o)).collect();
        let rel: Vec<&[u64]> = match self.got_arg {
            Some(g) => (0..ranks).map(|o| g.from(o)).collect(),
            None => Vec::new(),
        };
        let extremum = matches!(pooler.pooling, Pooling::Max | Pooling::Min);
        if extremum && rel.len() != ranks {
            return Err(internal(op, "no positions"));
        }
        let (max, prod) = (pooler.pooling == Pooling::Max, pooler.pooling == Pooling::Prod);
        let mut lower = vec![A::zero(); w];
        for s in 0..count {
            let (dst, mut pos) = (&mut out[s * w..(s + 1) * w], at.get_mut(s * w..(s + 1) * w));
            let mut has = |o: usize| {
                let k = cursor[o];
                let hit = k < starts[o] + self.per_owner[o] && self.global[k] == s;
                cursor[o] += usize::from(hit);
                hit.then_some(k - starts[o])
            };
            // (`started`: `dst` holds partials; `held`: `lower` does, the owners before
            // this rank's, for a segment it has a partial of.)
            let own = has(self.me).is_some();
            let (mut started, mut held) = (own, false);
            for o in (0..ranks).filter(|&o| o != self.me) {
                let Some(j) = has(o) else { continue };
                let src = &rows[o][j * w..(j + 1) * w];
                if extremum {
                    let (pos, owner_pos) = (pos.as_deref_mut().unwrap_or_default(), self.route.of(o));
                    let rel = &rel[o][j * w..(j + 1) * w];
                    for ((d, x), (p, &q)) in dst.iter_mut().zip(src).zip(pos.iter_mut().zip(rel)) {
                        let q = owner_pos[q as usize];
                        if !started || wins(max, (&*d, *p), (x, q)) {
                            (*d, *p) = (*x, q);
                        }
                    }
                } else if own && o < self.me {
                    fold_row(&mut lower, src, !held, prod);
                    held = true;
                    continue;
                } else {
                    if held {
                        fold_under(dst, &lower, prod);
                        held = false;
                    }
                    fold_row(dst, src, !started, prod);
                }
                started = true;
            }
            if held {
                fold_under(dst, &lower, prod);
            }
            end_row(pooler, &tallies[s], dst, pos, self.route.total);
        }
        Ok(())
    }
}

/// Each segment's tally over the caller's kept positions (`route`'s, of segments
/// `segment`, `kept[s]` of them in segment `s`): counts, and the weights' sums in
/// position order.
pub(super) fn tallies<A: PoolElement + Copy>(
    route: &Route,
    segment: &[usize],
    kept: &[usize],
    pooler: &Pooler<'_, A>,
) -> Vec<Tally<A>> {
    let mut tallies: Vec<Tally<A>> = kept
        .iter()
        .map(|&count| Tally {
            count,
            ..Tally::new()
        })
        .collect();
    let Some(w) = &pooler.weights else {
        return tallies;
    };
    let mut routed = vec![false; route.total];
    for &p in &route.positions {
        routed[p] = true;
    }
    for p in (0..route.total).filter(|&p| routed[p]) {
        let t = &mut tallies[segment[p]];
        t.weight += w[p];
        t.weight_sq += w[p] * w[p];
    }
    tallies
}

/// Ends a segment's combined `row` (and its positions `pos`, for an argmax) as the
/// single-process call ends it, from its `tally`: filled where it has no position,
/// divided for a `Mean` / `SqrtN`.
pub(super) fn end_row<A: PoolElement + Copy>(
    pooler: &Pooler<'_, A>,
    tally: &Tally<A>,
    row: &mut [A],
    pos: Option<&mut [usize]>,
    positions: usize,
) {
    match pooler.end(tally) {
        End::Fill => {
            row.fill(pooler.fill);
            if let Some(pos) = pos {
                pos.fill(positions);
            }
        }
        End::Keep => {}
        End::Divide(d) => divide_row(row, &d, pooler.integral),
        End::Zero => row.fill(A::zero()),
    }
}

/// Combines an owner's partial row `src` into the output row `dst`: the first (`fresh`)
/// from zero, or as it is for a product (`prod`); later ones added or multiplied. On
/// slices and out of line, so that each loop vectorizes (with the branches inside the
/// element loop, the combine took a quarter of D2's time).
/// (The ops of `Sum` and `Prod`, as a walk combines its rows.)
#[inline(never)]
pub(super) fn fold_row<A: PoolElement + Copy>(dst: &mut [A], src: &[A], fresh: bool, prod: bool) {
    let one = A::one();
    match (fresh, prod) {
        (true, false) => Sum::first(dst, src, &one, &mut [], 0),
        (false, false) => Sum::next(dst, src, &one, &mut [], 0),
        (true, true) => Prod::first(dst, src, &one, &mut [], 0),
        (false, true) => Prod::next(dst, src, &one, &mut [], 0),
    }
}

/// Puts the combined partials of the owners before this rank, `lower`, in front of this
/// rank's partial in `dst`: `lower + dst` (`lower * dst`), the operands in rank order.
#[inline(never)]
fn fold_under<A: PoolElement + Copy>(dst: &mut [A], lower: &[A], prod: bool) {
    if prod {
        dst.iter_mut().zip(lower).for_each(|(d, x)| *d = *x * *d);
    } else {
        dst.iter_mut().zip(lower).for_each(|(d, x)| *d = *x + *d);
    }
}

/// Whether `new` (a value and the caller's position it came from) replaces `old` in a
/// `Max` (`max`) or `Min`: a strictly better value or a first NaN ([`better`]), or the
/// same value (or another NaN) from an earlier position, so that the first position wins
/// whichever owner held it.
#[inline(always)]
#[allow(clippy::eq_op)]
pub(super) fn wins<A: PartialOrd>(max: bool, (old, p): (&A, usize), (new, q): (&A, usize)) -> bool {
    better(max, old, new) || (q < p && (new == old || (old != old && new != new)))
}
