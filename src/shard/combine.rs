//! A sharded gather-reduce: its positions routed to their owners ([`Routed`]), each owner
//! pooling its share of every segment with the crate's own gather-reduce, and the caller
//! combining the owners' partials in increasing rank order (decision 39).

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use ndarray::{ArrayD, ArrayView1, ArrayViewMut, Dimension, IxDyn};

use super::exchange::exchange;
use super::merge::Partials;
use super::{Route, ShardedTable, Spare, Traffic};
use crate::call::reduce::{Out, gather_reduce};
use crate::error::{GatherError, internal};
use crate::kernel::reduce::Pooler;
use crate::pool::{Pool, PoolElement, Pooling};
use crate::prepared::GatherReducePlan;
use crate::segments::{Checked, Segments};
use crate::table::PoolTable;

/// No local segment yet.
const NONE: u32 = u32::MAX;

/// A sharded gather-reduce's routing, both sides of it: made by a call, or kept by a
/// [`ShardedPlan`](super::ShardedPlan) for every apply.
pub(super) struct Routed {
    /// The caller's positions and local rows, grouped by owner.
    pub route: Route,
    /// This rank, which serves its own positions without an exchange.
    pub(super) me: usize,
    /// Each position's segment (0 where there is none: no segments).
    pub(super) segment: Vec<usize>,
    /// The number of segments, and how many kept positions each has.
    pub count: usize,
    pub(super) kept: Vec<usize>,
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
    pub(super) seg_starts: Vec<usize>,
    pub(super) batch_start: Vec<usize>,
}

impl Routed {
    /// Routes `route`'s positions into the checked `segs`: each owner's segments numbered
    /// densely in increasing order, then the rows and local segments sent to
    /// their owners, sorted by segment for a call (`plan` false: the owner pools ranges)
    /// or in position order for a plan (whose owner sorts them once, and whose backward
    /// adds in position order). Collective (after the agreement on errors).
    pub fn new<C, A, D, T, J: crate::index::GatherIndex>(
        table: &ShardedTable<'_, C, A, D, T>,
        segs: &Checked<'_, J>,
        route: Route,
        plan: bool,
        traffic: &mut Traffic,
    ) -> Routed
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
        T: PoolTable<A, D>,
    {
        let (comm, ranks) = (table.comm, table.rows.ranks());
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
        let mut local = std::mem::take(&mut spare.local);
        let (kept, global, per_owner) = number_segments(&mut route, &segment, count, plan, &mut local);
        let (asked, asked_segs) = (
            std::mem::take(&mut spare.asked),
            std::mem::take(&mut spare.asked_segs),
        );
        let ids = table.send(&route.ids, &route.counts, true, traffic, asked);
        let segs_in = table.send(&local, &route.counts, true, traffic, asked_segs);
        let side = OwnerSide::of(&segs_in.counts, &segs_in.values, plan);
        spare.local = local;
        spare.asked_segs = segs_in.values;
        Routed {
            route,
            me: comm.rank() as usize,
            segment,
            count,
            kept,
            global,
            per_owner,
            ids: ids.values,
            indptr: side.indptr,
            owner_segs: side.owner_segs,
            seg_counts: side.seg_counts,
            seg_starts: side.seg_starts,
            batch_start: side.batch_start,
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
    /// its argmax, with `arg`): the weights travel to the owners, each owner pools what
    /// the others asked of it (through `plans` where a plan made them) and what this rank
    /// asked of itself straight into the output, the partials travel back and are
    /// combined in rank order ([`Partials::merge`]), into `into` (the output's elements in
    /// row-major order: a caller's standard-layout output, `None` returned) or a fresh
    /// array. Collective (after the agreement on errors).
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    pub fn pool<C, A, D, T>(
        &self,
        table: &ShardedTable<'_, C, A, D, T>,
        op: &'static str,
        pool: Pool<'_, A>,
        arg: bool,
        shape: Vec<usize>,
        plans: Option<OwnerPlans<'_>>,
        into: Option<&mut [A]>,
        traffic: &mut Traffic,
    ) -> Result<(Option<ArrayD<A>>, Option<ArrayD<usize>>), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
        T: PoolTable<A, D>,
    {
        let (comm, chunk, route, me) = (table.comm, table.chunk, &self.route, self.me);
        // ([P] weights: the call checked that the weights have one column.)
        let weights: Option<Vec<A>> = pool
            .weights
            .as_ref()
            .map(|w| route.positions.iter().map(|&p| w[[p, 0]]).collect());
        let weights_in = weights
            .as_ref()
            .map(|w| exchange(comm, w, &route.counts, true, chunk, traffic, Vec::new()));
        let extremum = matches!(pool.pooling, Pooling::Max | Pooling::Min);
        let w = table.row_len();
        let served_w = weights_in.as_ref().map(|r| &r.values[..]);
        // (A failure here, which the agreement rules out, still takes part in the
        // exchanges below, with zeros, so that no rank waits alone; it is returned after.)
        let owned = self.serve(table, op, pool.pooling, plans, served_w);
        let total = self.seg_counts.iter().sum::<usize>() * w;
        let (partials, partial_arg, failed) = match owned {
            Ok((p, a)) => (p, a, None),
            Err(e) => (
                vec![A::zero(); total],
                extremum.then(|| vec![0u64; total]),
                Some(e),
            ),
        };
        // Back to the sources: one partial row per (segment, other owner), and its
        // positions.
        let sizes: Vec<usize> = self.seg_counts.iter().map(|&n| n * w).collect();
        let got_buf = std::mem::take(&mut table.spare.borrow_mut().got);
        let got = exchange(comm, &partials, &sizes, false, chunk, traffic, got_buf);
        let got_arg = partial_arg.map(|a| exchange(comm, &a, &sizes, false, chunk, traffic, Vec::new()));
        if !extremum {
            table.spare.borrow_mut().partials = partials;
        }
        if let Some(e) = failed {
            return Err(e);
        }
        // The caller's side: its own partials straight into the output, then the others'
        // in rank order around them.
        let count = self.count;
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
        let own_w = weights
            .as_ref()
            .map(|w| &w[route.start(me)..][..route.of(me).len()]);
        self.pool_own(table, op, pool.pooling, plans, own_w, out, &mut at)?;
        let partials = Partials {
            route,
            segment: &self.segment,
            kept: &self.kept,
            global: &self.global,
            per_owner: &self.per_owner,
            me,
            got: &got,
            got_arg: got_arg.as_ref(),
        };
        let merged = partials.merge(op, &Pooler::of(pool, route.total), count, w, out, &mut at);
        table.spare.borrow_mut().got = got.values;
        merged?;
        let out = fresh
            .then(|| shaped(op, &shape, fresh_out, "an output of another size"))
            .transpose()?;
        let arg = arg
            .then(|| shaped(op, &shape, at, "an argmax of another size"))
            .transpose()?;
        Ok((out, arg))
    }

    /// The owner's side of [`pool`](Self::pool): what the other ranks asked of this one,
    /// pooled with their weights (`served_w`, in the order asked) through `plans` where a
    /// plan made them, into the table's kept partials buffer (or, for `Max` / `Min`, fresh
    /// partials and each one's position relative to its source's batch).
    fn serve<C, A, D, T>(
        &self,
        table: &ShardedTable<'_, C, A, D, T>,
        op: &'static str,
        pooling: Pooling,
        plans: Option<OwnerPlans<'_>>,
        served_w: Option<&[A]>,
    ) -> Result<(Vec<A>, Option<Vec<u64>>), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
        T: PoolTable<A, D>,
    {
        let owner_pool = |w| owner_pool(pooling, w);
        let (w, local, me) = (table.row_len(), &table.local, self.me);
        // The positions and segments the ranks before this one asked of it (a plan's
        // first served plan; its second, the rest).
        let (pb, nb) = (self.batch_start[me], self.seg_starts[me]);
        let split = served_w.map(|w| w.split_at(pb)).unzip();
        let segments = Segments::indptr(&self.indptr);
        if matches!(pooling, Pooling::Max | Pooling::Min) {
            let (m, a) = match plans {
                Some(p) => {
                    let (w0, w1) = split;
                    let (m0, a0) = p.served[0].apply_arg(local, owner_pool(w0))?;
                    let (m1, a1) = p.served[1].apply_arg(local, owner_pool(w1))?;
                    let a = a0.iter().copied().chain(a1.iter().map(|&q| q + pb)).collect();
                    (m0.iter().chain(m1.iter()).copied().collect(), a)
                }
                None => {
                    let ids = ArrayView1::from(&self.ids[..]);
                    let (m, a) =
                        gather_reduce(op, local, &ids, &segments, 0, owner_pool(served_w), Out::Arg)?
                            .with_arg(op)?;
                    (m.iter().copied().collect(), a.iter().copied().collect::<Vec<_>>())
                }
            };
            // Each partial's position relative to its source's batch, as the source
            // counts.
            let mut rel = Vec::with_capacity(a.len());
            for (s, &n) in self.seg_counts.iter().enumerate() {
                let rows = &a[self.seg_starts[s] * w..(self.seg_starts[s] + n) * w];
                rel.extend(rows.iter().map(|&q| (q - self.batch_start[s]) as u64));
            }
            return Ok((m, Some(rel)));
        }
        // Into the partials of the table's last call.
        // (Its old values are overwritten: `apply_into` writes every partial row.)
        let mut buf = std::mem::take(&mut table.spare.borrow_mut().partials);
        let n = self.indptr.len().saturating_sub(1);
        buf.resize(n * w, A::zero());
        let view = |n, b| rows_view(op, rows_of(local.dim().slice(), n), b);
        match plans {
            Some(p) => {
                let (w0, w1) = split;
                let (b0, b1) = buf.split_at_mut(nb * w);
                p.served[0].apply_into(local, owner_pool(w0), &mut view(nb, b0)?)?;
                p.served[1].apply_into(local, owner_pool(w1), &mut view(n - nb, b1)?)?;
            }
            None => {
                let mut all = view(n, &mut buf[..])?;
                let ids = ArrayView1::from(&self.ids[..]);
                let pool = owner_pool(served_w);
                gather_reduce(op, local, &ids, &segments, 0, pool, Out::Into(&mut all))?;
            }
        }
        Ok((buf, None))
    }

    /// The caller's own positions (weights `own_w`) pooled straight into `out` (the
    /// output's elements in row-major order), and for `Max` / `Min` each element's position
    /// into `at`.
    #[allow(clippy::too_many_arguments)]
    fn pool_own<C, A, D, T>(
        &self,
        table: &ShardedTable<'_, C, A, D, T>,
        op: &'static str,
        pooling: Pooling,
        plans: Option<OwnerPlans<'_>>,
        own_w: Option<&[A]>,
        out: &mut [A],
        at: &mut [usize],
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
        T: PoolTable<A, D>,
    {
        let (route, me, count, local) = (&self.route, self.me, self.count, &table.local);
        let (own_pos, own_ids) = (route.of(me), route.ids_of(me));
        if own_pos.is_empty() {
            return Ok(());
        }
        let owner_pool = |w| owner_pool(pooling, w);
        // (A call's own positions are sorted by segment: as CSR ranges over every
        // segment of the output.)
        let mut indptr = Vec::new();
        if plans.is_none() {
            indptr.resize(count + 1, 0usize);
            own_pos.iter().for_each(|&p| indptr[self.segment[p] + 1] += 1);
            (0..count).for_each(|s| indptr[s + 1] += indptr[s]);
        }
        let segments = Segments::indptr(&indptr);
        if matches!(pooling, Pooling::Max | Pooling::Min) {
            let (m, a) = match plans {
                Some(p) => p.own.apply_arg(local, owner_pool(own_w))?,
                None => {
                    let ids = ArrayView1::from(own_ids);
                    gather_reduce(op, local, &ids, &segments, 0, owner_pool(own_w), Out::Arg)?.with_arg(op)?
                }
            };
            out.iter_mut().zip(m.iter()).for_each(|(o, &v)| *o = v);
            // (A segment with no position of this rank's has a position past them.)
            at.iter_mut()
                .zip(a.iter())
                .for_each(|(o, &q)| *o = own_pos.get(q).copied().unwrap_or(0));
        } else {
            let mut view = rows_view(op, rows_of(local.dim().slice(), count), out)?;
            match plans {
                Some(p) => p.own.apply_into(local, owner_pool(own_w), &mut view)?,
                None => {
                    let ids = ArrayView1::from(own_ids);
                    gather_reduce(
                        op,
                        local,
                        &ids,
                        &segments,
                        0,
                        owner_pool(own_w),
                        Out::Into(&mut view),
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// The dimension of `n` rows of a table of `shape` (its row shape after the first axis).
fn rows_of<D: Dimension>(shape: &[usize], n: usize) -> D {
    let mut dim = D::zeros(shape.len());
    dim.slice_mut()[0] = n;
    dim.slice_mut()[1..].copy_from_slice(&shape[1..]);
    dim
}

/// The owner's plans a [`ShardedPlan`](super::ShardedPlan) keeps: for the rows this
/// rank's own positions read (their segments the caller's), and for those the ranks
/// before it and after it asked of it (each sorted by segment once; the backward adds
/// them before and after its own).
#[derive(Clone, Copy)]
pub(super) struct OwnerPlans<'a> {
    pub own: &'a GatherReducePlan,
    pub served: &'a [GatherReducePlan; 2],
}

/// The pool an owner pools with: plain sums (the caller divides), with each position's
/// weight `w`; `Prod`, `Max` and `Min` as they are.
pub(super) fn owner_pool<A>(pooling: Pooling, w: Option<&[A]>) -> Pool<'_, A> {
    match (pooling, w) {
        (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, Some(w)) => Pooling::Sum.weighted(w),
        (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, None) => Pooling::Sum.into(),
        (p, _) => p.into(),
    }
}

/// `rows` as an array of `dim` (rows of the table's row shape).
fn rows_view<'b, A, D: Dimension>(
    op: &'static str,
    dim: D,
    rows: &'b mut [A],
) -> Result<ArrayViewMut<'b, A, D>, GatherError> {
    ArrayViewMut::from_shape(dim, rows).map_err(|_| internal(op, "rows of another size"))
}

/// Numbers each owner's segments densely, in increasing order of the caller's (so that the
/// caller combines their partials into its output in order, not at random), into `local`
/// (each routed position's local segment); a call's (`plan` false) positions are then
/// sorted by it within each owner. Returns each segment's kept positions, each owner's
/// global segments in rank order, and how many each owner has.
fn number_segments(
    route: &mut Route,
    segment: &[usize],
    count: usize,
    plan: bool,
    local: &mut Vec<u32>,
) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let ranks = route.counts.len();
    let mut first = vec![NONE; count];
    let mut kept = vec![0usize; count];
    let (mut global, mut per_owner) = (Vec::new(), Vec::with_capacity(ranks));
    local.clear();
    let mut at = 0;
    for o in 0..ranks {
        let (start, n) = (global.len(), route.counts[o]);
        for &p in &route.positions[at..at + n] {
            let s = segment[p];
            kept[s] += 1;
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
        if !plan && local[at..at + n].windows(2).any(|w| w[0] > w[1]) {
            sort_by_segment(route, &mut local[at..at + n], at, k);
        }
        at += n;
    }
    (kept, global, per_owner)
}

/// An owner's positions (from `at`, as many as `segs`) by local segment, stable (position
/// order within each), so that the owner pools sorted ranges rather than sorting ids
/// itself: a counting sort over its `k` segments.
fn sort_by_segment(route: &mut Route, segs: &mut [u32], at: usize, k: usize) {
    let n = segs.len();
    let mut next = vec![0usize; k + 1];
    for &s in segs.iter() {
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
    fn permute<T: Copy>(v: &mut [T], order: &[usize]) {
        let old = v.to_vec();
        v.iter_mut().zip(order).for_each(|(x, &i)| *x = old[i]);
    }
    permute(&mut route.positions[at..at + n], &order);
    permute(&mut route.ids[at..at + n], &order);
    permute(segs, &order);
}

/// The owner's side of a routing: each source's segments after the previous sources', as
/// CSR ranges of the rows asked (every local segment has a position), and for a plan each
/// asked row's segment.
struct OwnerSide {
    indptr: Vec<u64>,
    owner_segs: Vec<u64>,
    seg_counts: Vec<usize>,
    seg_starts: Vec<usize>,
    batch_start: Vec<usize>,
}

impl OwnerSide {
    /// From the local segments each source sent (`counts` of them from each, back to back
    /// in `values`).
    fn of(counts: &[usize], values: &[u32], plan: bool) -> OwnerSide {
        let (mut indptr, mut offset) = (vec![0u64], 0usize);
        let (mut seg_counts, mut seg_starts, mut batch_start) = (Vec::new(), Vec::new(), Vec::new());
        let mut from = 0;
        let mut owner_segs = Vec::new();
        for &n in counts {
            let batch = &values[from..from + n];
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
        OwnerSide {
            indptr,
            owner_segs,
            seg_counts,
            seg_starts,
            batch_start,
        }
    }
}

/// `values` as an array of `shape` (their number is the shape's: else an internal error,
/// `what`).
fn shaped<V>(
    op: &'static str,
    shape: &[usize],
    values: Vec<V>,
    what: &'static str,
) -> Result<ArrayD<V>, GatherError> {
    ArrayD::from_shape_vec(IxDyn(shape), values).map_err(|_| internal(op, what))
}
