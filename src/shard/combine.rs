//! A sharded gather-reduce: its positions routed to their owners ([`Routed`]), each owner
//! pooling its share of every segment with the crate's own gather-reduce, and the caller
//! combining the owners' partials in increasing rank order (decision 39).

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use ndarray::{ArrayD, ArrayViewMut, Dimension, IxDyn};

use super::exchange::all_to_all;
use super::{Route, ShardedTable, Spare, Traffic};
use crate::error::{GatherError, internal};
use crate::ext::GatherReduceExt;
use crate::kernel::reduce::{End, Pooler, Tally, better, divide};
use crate::pool::{Pool, PoolElement, Pooling};
use crate::prepared::GatherReducePlan;
use crate::segments::{Checked, Segments};

/// No local segment yet.
const NONE: u32 = u32::MAX;

/// A sharded gather-reduce's routing, both sides of it: made by a call, or kept by a
/// [`ShardedPlan`](super::ShardedPlan) for every apply.
pub(super) struct Routed {
    /// The caller's positions and local rows, grouped by owner.
    pub route: Route,
    /// Each position's segment (0 where there is none: no segments).
    pub(super) segment: Vec<usize>,
    /// The number of segments.
    pub count: usize,
    /// For each owner in rank order, the global segment of each of its local segments.
    pub(super) global: Vec<usize>,
    /// How many local segments each owner has.
    pub(super) per_owner: Vec<usize>,
    /// The owner's side: the rows asked of it, in (source, position) order.
    pub ids: Vec<u64>,
    /// The asked rows' segments as CSR ranges, each source's segments after the previous
    /// sources' (the rows sorted by them: a call's routing).
    pub indptr: Vec<u64>,
    /// Or, for a plan's routing (the rows in each source's position order), each asked
    /// row's segment, numbered as `indptr`'s.
    pub owner_segs: Vec<u64>,
    /// Each source's segments, and where they and its rows start.
    pub(super) seg_counts: Vec<usize>,
    seg_starts: Vec<usize>,
    batch_start: Vec<usize>,
}

impl Routed {
    /// Routes `route`'s positions into the checked `segs`: each owner's segments numbered
    /// densely in increasing order, then the rows and local segments sent to
    /// their owners, sorted by segment for a call (`plan` false: the owner pools ranges)
    /// or in position order for a plan (whose owner sorts them once, and whose backward
    /// adds in position order). Collective (after the agreement on errors).
    pub fn new<C, A, D, J: crate::index::GatherIndex>(
        table: &ShardedTable<'_, C, A, D>,
        segs: &Checked<'_, J>,
        route: Route,
        plan: bool,
        traffic: &mut Traffic,
    ) -> Routed
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
    {
        let (comm, chunk, ranks) = (table.comm, table.chunk, table.rows.ranks());
        let mut spare = table.spare.borrow_mut();
        let count = segs.count();
        let mut segment = std::mem::take(&mut spare.segment);
        segs.ids_into(route.total, &mut segment);
        // (With no segments, no position belongs to one: nothing travels.)
        let route = if count == 0 {
            Route {
                positions: Vec::new(),
                ids: Vec::new(),
                counts: vec![0; ranks],
                total: route.total,
            }
        } else {
            route
        };
        let mut route = route;
        let mut first = vec![NONE; count];
        let (mut local, mut global, mut per_owner) = (
            std::mem::take(&mut spare.local),
            Vec::new(),
            Vec::with_capacity(ranks),
        );
        local.clear();
        let mut at = 0;
        for o in 0..ranks {
            let (start, n) = (global.len(), route.counts[o]);
            // The owner's segments numbered in increasing order of the caller's, so that
            // the caller combines their partials into its output in order, not at random.
            for &p in &route.positions[at..at + n] {
                let s = segment[p];
                if first[s] == NONE {
                    first[s] = 0;
                    global.push(s);
                }
            }
            // (In order of first appearance already where the segments are ranges.)
            if !global[start..].is_sorted() {
                global[start..].sort_unstable();
            }
            for (k, &s) in global[start..].iter().enumerate() {
                first[s] = k as u32;
            }
            local.extend(route.positions[at..at + n].iter().map(|&p| first[segment[p]]));
            for &s in &global[start..] {
                first[s] = NONE;
            }
            let k = global.len() - start;
            per_owner.push(k);
            // The owner's positions by local segment (stable: position order within
            // each), so that it pools sorted ranges rather than sorting ids itself.
            let segs = &local[at..at + n];
            if !plan && segs.windows(2).any(|w| w[0] > w[1]) {
                let mut next = vec![0usize; k + 1];
                for &s in segs {
                    next[s as usize + 1] += 1;
                }
                for i in 0..k {
                    next[i + 1] += next[i];
                }
                let mut order = vec![0usize; n];
                for (i, &s) in segs.iter().enumerate() {
                    order[next[s as usize]] = i;
                    next[s as usize] += 1;
                }
                let permute = |v: &mut [usize]| {
                    let old = v.to_vec();
                    v.iter_mut().zip(&order).for_each(|(x, &i)| *x = old[i]);
                };
                permute(&mut route.positions[at..at + n]);
                let old: Vec<u64> = route.ids[at..at + n].to_vec();
                route.ids[at..at + n]
                    .iter_mut()
                    .zip(&order)
                    .for_each(|(x, &i)| *x = old[i]);
                let old: Vec<u32> = local[at..at + n].to_vec();
                local[at..at + n]
                    .iter_mut()
                    .zip(&order)
                    .for_each(|(x, &i)| *x = old[i]);
            }
            at += n;
        }
        let ids = all_to_all(
            comm,
            &route.ids,
            &route.counts,
            chunk,
            traffic,
            std::mem::take(&mut spare.asked),
        );
        let segs_in = all_to_all(
            comm,
            &local,
            &route.counts,
            chunk,
            traffic,
            std::mem::take(&mut spare.asked_segs),
        );
        // The owner's side: each source's segments after the previous sources', as CSR
        // ranges of the rows asked (every local segment has a position).
        let (mut indptr, mut offset) = (vec![0u64], 0usize);
        let (mut seg_counts, mut seg_starts, mut batch_start) = (Vec::new(), Vec::new(), Vec::new());
        let mut from = 0;
        let mut owner_segs = Vec::new();
        for &n in &segs_in.counts {
            let batch = &segs_in.values[from..from + n];
            let k = batch.iter().map(|&s| s as usize + 1).max().unwrap_or(0);
            if plan {
                owner_segs.extend(batch.iter().map(|&s| (offset + s as usize) as u64));
            }
            let mut sizes = vec![0u64; k];
            for &s in batch {
                sizes[s as usize] += 1;
            }
            for c in sizes {
                indptr.push(indptr[indptr.len() - 1] + c);
            }
            batch_start.push(from);
            seg_starts.push(offset);
            seg_counts.push(k);
            offset += k;
            from += n;
        }
        spare.local = local;
        spare.asked_segs = segs_in.values;
        Routed {
            route,
            segment,
            count,
            global,
            per_owner,
            ids: ids.values,
            indptr,
            owner_segs,
            seg_counts,
            seg_starts,
            batch_start,
        }
    }

    /// Returns a call's buffers to the table for its next call.
    pub fn give_back<A>(self, spare: &mut Spare<A>) {
        spare.positions = self.route.positions;
        spare.ids = self.route.ids;
        spare.segment = self.segment;
        spare.asked = self.ids;
    }

    /// Pools the routed positions of `table` with `pool` into an output of `shape` (and
    /// its argmax, with `arg`): the weights travel to the owners, each owner pools its
    /// share (through `owner_plan` where one was made), the partials travel back and are
    /// combined in rank order, into `into` (the output's elements in row-major order: a
    /// caller's standard-layout output, `None` returned) or a fresh array. Collective
    /// (after the agreement on errors).
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    pub fn pool<C, A, D>(
        &self,
        table: &ShardedTable<'_, C, A, D>,
        op: &'static str,
        pool: Pool<'_, A>,
        arg: bool,
        shape: Vec<usize>,
        owner_plan: Option<&GatherReducePlan>,
        into: Option<&mut [A]>,
        traffic: &mut Traffic,
    ) -> Result<(Option<ArrayD<A>>, Option<ArrayD<usize>>), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
    {
        let (comm, chunk, route) = (table.comm, table.chunk, &self.route);
        let positions = route.total;
        let weights: Option<Vec<A>> = pool
            .weights
            .as_ref()
            .map(|w| route.positions.iter().map(|&p| w[p]).collect());
        let weights_in = weights.map(|w| all_to_all(comm, &w, &route.counts, chunk, traffic, Vec::new()));
        // The owner's side: every source's positions as one gather-reduce by ids.
        let owner_pool: Pool<'_, A> = match (pool.pooling, &weights_in) {
            (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, Some(w)) => Pooling::Sum.weighted(&w.values),
            (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, None) => Pooling::Sum.into(),
            (p, _) => p.into(),
        };
        let extremum = matches!(pool.pooling, Pooling::Max | Pooling::Min);
        let segments = Segments::indptr(&self.indptr);
        let w = table.row_len();
        let local = &table.local;
        // (A failure here, which the agreement rules out, still takes part in the
        // exchanges below, with zeros, so that no rank waits alone; it is returned after.)
        let owned: Result<(Vec<A>, Option<Vec<u64>>), GatherError> = (|| {
            Ok(if extremum {
                let (m, a) = match owner_plan {
                    Some(plan) => plan.apply_arg(local, owner_pool)?,
                    None => local.gather_reduce_arg(&self.ids, segments, 0, owner_pool)?,
                };
                // Each partial's position relative to its source's batch, as the source
                // counts.
                let a = a
                    .as_slice()
                    .ok_or_else(|| internal(op, "a fresh argmax not in standard layout"))?;
                let mut rel = Vec::with_capacity(a.len());
                for (s, &n) in self.seg_counts.iter().enumerate() {
                    let rows = &a[self.seg_starts[s] * w..(self.seg_starts[s] + n) * w];
                    rel.extend(rows.iter().map(|&q| (q - self.batch_start[s]) as u64));
                }
                (m.into_raw_vec_and_offset().0, Some(rel))
            } else {
                // Into the partials of the table's last call.
                // (Its old values are overwritten: `apply_into` writes every partial row.)
                let mut buf = std::mem::take(&mut table.spare.borrow_mut().partials);
                buf.resize(self.indptr.len().saturating_sub(1) * w, A::zero());
                let mut dim = D::zeros(local.ndim());
                dim.slice_mut()[0] = self.indptr.len() - 1;
                dim.slice_mut()[1..].copy_from_slice(&local.shape()[1..]);
                let mut view = ArrayViewMut::from_shape(dim, &mut buf[..])
                    .map_err(|_| internal(op, "partials of another size"))?;
                match owner_plan {
                    Some(plan) => plan.apply_into(local, owner_pool, &mut view)?,
                    None => local.gather_reduce_into(&self.ids, segments, 0, owner_pool, &mut view)?,
                }
                (buf, None)
            })
        })();
        let total = self.seg_counts.iter().sum::<usize>() * w;
        let (partials, partial_arg, failed) = match owned {
            Ok((p, a)) => (p, a, None),
            Err(e) => (
                vec![A::zero(); total],
                extremum.then(|| vec![0u64; total]),
                Some(e),
            ),
        };
        // Back to the sources: one partial row per (segment, owner), and its positions.
        let sizes: Vec<usize> = self.seg_counts.iter().map(|&n| n * w).collect();
        let got_buf = std::mem::take(&mut table.spare.borrow_mut().got);
        let got = all_to_all(comm, &partials, &sizes, chunk, traffic, got_buf);
        let got_arg = partial_arg.map(|a| all_to_all(comm, &a, &sizes, chunk, traffic, Vec::new()));
        if !extremum {
            table.spare.borrow_mut().partials = partials;
        }
        if let Some(e) = failed {
            return Err(e);
        }
        // The caller's side: the partials in increasing rank order.
        let (count, segment, global) = (self.count, &self.segment, &self.global);
        let pooler = Pooler::of(pool, positions);
        // (Every element of the output is written below: a partial or the fill.)
        let len: usize = shape.iter().product();
        let fresh = !matches!(&into, Some(o) if o.len() == len);
        let mut fresh_out = Vec::new();
        let out: &mut [A] = match into {
            Some(o) if o.len() == len => o,
            _ => {
                fresh_out.resize(len, A::zero());
                &mut fresh_out
            }
        };
        let mut at = vec![0usize; if extremum { out.len() } else { 0 }];
        let mut seen = vec![false; count];
        // Each segment ends as the single-process call ends it: its count and weight sums
        // over the caller's kept positions, in position order; after its last owner's
        // partial (`NONE`: it has none), while its row is still in cache.
        let tallies = tallies(count, route, segment, &pooler);
        let mut last = vec![NONE; count];
        let mut g = 0;
        for (o, &segments) in self.per_owner.iter().enumerate() {
            global[g..g + segments].iter().for_each(|&s| last[s] = o as u32);
            g += segments;
        }
        let end = |s: usize, row: &mut [A], pos: Option<&mut [usize]>| {
            end_row(&pooler, &tallies[s], row, pos, positions)
        };
        let mut g = 0;
        for (o, &segments) in self.per_owner.iter().enumerate() {
            let rows = got.from(o);
            let owner_pos = route.of(o);
            for j in 0..segments {
                let s = global[g + j];
                let (dst, src) = (&mut out[s * w..(s + 1) * w], &rows[j * w..(j + 1) * w]);
                let fresh = !seen[s];
                seen[s] = true;
                match pooler.pooling {
                    Pooling::Sum | Pooling::Mean | Pooling::SqrtN => fold_row(dst, src, fresh, false),
                    Pooling::Prod => fold_row(dst, src, fresh, true),
                    Pooling::Max | Pooling::Min => {
                        let max = pooler.pooling == Pooling::Max;
                        let rel = &got_arg
                            .as_ref()
                            .ok_or_else(|| internal(op, "no positions"))?
                            .from(o)[j * w..(j + 1) * w];
                        let pos = &mut at[s * w..(s + 1) * w];
                        for ((d, x), (p, &q)) in dst.iter_mut().zip(src).zip(pos.iter_mut().zip(rel)) {
                            let q = owner_pos[q as usize];
                            if fresh || wins(max, (&*d, *p), (x, q)) {
                                (*d, *p) = (*x, q);
                            }
                        }
                    }
                }
                if last[s] == o as u32 {
                    end(s, &mut out[s * w..(s + 1) * w], at.get_mut(s * w..(s + 1) * w));
                }
            }
            g += segments;
        }
        table.spare.borrow_mut().got = got.values;
        for s in (0..count).filter(|&s| last[s] == NONE) {
            end(s, &mut out[s * w..(s + 1) * w], at.get_mut(s * w..(s + 1) * w));
        }
        let out = if fresh {
            Some(
                ArrayD::from_shape_vec(IxDyn(&shape), fresh_out)
                    .map_err(|_| internal(op, "an output of another size"))?,
            )
        } else {
            None
        };
        let arg = if arg {
            Some(
                ArrayD::from_shape_vec(IxDyn(&shape), at)
                    .map_err(|_| internal(op, "an argmax of another size"))?,
            )
        } else {
            None
        };
        Ok((out, arg))
    }
}

/// Each of `count` segments' tally over the caller's kept positions (`route`'s, of
/// segments `segment`): counts, and the weights' sums in position order.
pub(super) fn tallies<A: PoolElement + Copy>(
    count: usize,
    route: &Route,
    segment: &[usize],
    pooler: &Pooler<'_, A>,
) -> Vec<Tally<A>> {
    let mut tallies: Vec<Tally<A>> = (0..count).map(|_| Tally::new()).collect();
    let Some(w) = &pooler.weights else {
        // Counts alone: in any order.
        for &p in &route.positions {
            tallies[segment[p]].count += 1;
        }
        return tallies;
    };
    let mut kept = vec![false; route.total];
    for &p in &route.positions {
        kept[p] = true;
    }
    for p in (0..route.total).filter(|&p| kept[p]) {
        let t = &mut tallies[segment[p]];
        t.count += 1;
        t.weight += w[p];
        t.weight_sq += w[p] * w[p];
    }
    tallies
}

/// Ends a segment's combined `row` (and its positions `pos`, for an argmax) as the
/// single-process call ends it, from its `tally`: filled where it has no position,
/// divided for a `Mean` / `SqrtN`.
fn end_row<A: PoolElement + Copy>(
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
        End::Divide(d) if !pooler.integral => row.iter_mut().for_each(|v| *v /= d),
        End::Divide(d) => row.iter_mut().for_each(|v| *v = divide(v, &d, true)),
        End::Zero => row.fill(A::zero()),
    }
}

/// Combines an owner's partial row `src` into the output row `dst`: the first (`fresh`)
/// from zero, or as it is for a product (`prod`); later ones added or multiplied. On
/// slices and out of line, so that each loop vectorizes (with the branches inside the
/// element loop, the combine took a quarter of D2's time).
#[inline(never)]
fn fold_row<A: PoolElement + Copy>(dst: &mut [A], src: &[A], fresh: bool, prod: bool) {
    match (fresh, prod) {
        (true, false) => dst.iter_mut().zip(src).for_each(|(d, x)| *d = A::zero() + *x),
        (false, false) => dst.iter_mut().zip(src).for_each(|(d, x)| *d += *x),
        (true, true) => dst.copy_from_slice(src),
        (false, true) => dst.iter_mut().zip(src).for_each(|(d, x)| *d *= *x),
    }
}

/// Whether `new` (a value and the caller's position it came from) replaces `old` in a
/// `Max` (`max`) or `Min`: a strictly better value or a first NaN ([`better`]), or the
/// same value (or another NaN) from an earlier position, so that the first position wins
/// whichever owner held it.
#[inline(always)]
#[allow(clippy::eq_op)]
fn wins<A: PartialOrd>(max: bool, (old, p): (&A, usize), (new, q): (&A, usize)) -> bool {
    better(max, old, new) || (q < p && (new == old || (old != old && new != new)))
}
