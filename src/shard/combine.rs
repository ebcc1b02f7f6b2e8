//! A sharded gather-reduce: each owner pools its share of every segment with the crate's
//! own gather-reduce, and the caller combines the owners' partials in increasing rank
//! order (decision 39).

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use ndarray::{ArrayD, Dimension, IxDyn};

use super::exchange::all_to_all;
use super::{Route, ShardedTable, Traffic};
use crate::error::{GatherError, internal};
use crate::ext::GatherReduceExt;
use crate::kernel::reduce::{End, Pooler, Tally, better, divide};
use crate::pool::{Pool, PoolElement, Pooling};
use crate::segments::{Checked, Segments};

/// No local segment yet.
const NONE: u32 = u32::MAX;

/// The sharded gather-reduce of `route`'s positions into `segs` (checked on every rank),
/// into an output of `shape` (and its argmax, with `arg`).
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(super) fn reduce<C, A, D, J>(
    table: &ShardedTable<'_, C, A, D>,
    op: &'static str,
    segs: &Checked<'_, J>,
    route: &Route,
    pool: Pool<'_, A>,
    arg: bool,
    shape: Vec<usize>,
    traffic: &mut Traffic,
) -> Result<(ArrayD<A>, Option<ArrayD<usize>>), GatherError>
where
    C: Communicator + CommunicatorCollectives,
    A: PoolElement + Equivalence + Copy + Default,
    D: Dimension,
    J: crate::index::GatherIndex,
{
    let (comm, chunk, ranks) = (table.comm, table.chunk, table.rows.ranks());
    let positions = route.total;
    let count = segs.count();
    // (With no segments, no position belongs to one: nothing travels.)
    let segment = segs.to_ids(positions);
    let empty = Route {
        positions: Vec::new(),
        ids: Vec::new(),
        counts: vec![0; ranks],
        total: positions,
    };
    let route = if count == 0 { &empty } else { route };
    // Per owner, its positions' segments renumbered densely in order of first appearance
    // (`local`), and the global segment of each local one (`global`).
    let mut first = vec![NONE; count];
    let (mut local, mut global, mut per_owner) = (
        Vec::with_capacity(route.positions.len()),
        Vec::new(),
        Vec::with_capacity(ranks),
    );
    for o in 0..ranks {
        let start = global.len();
        for &p in route.of(o) {
            let s = segment[p];
            if first[s] == NONE {
                first[s] = (global.len() - start) as u32;
                global.push(s);
            }
            local.push(first[s]);
        }
        for &s in &global[start..] {
            first[s] = NONE;
        }
        per_owner.push(global.len() - start);
    }
    let weights: Option<Vec<A>> = pool
        .weights
        .as_ref()
        .map(|w| route.positions.iter().map(|&p| w[p]).collect());
    // To the owners: rows, local segments, weights.
    let ids = all_to_all(comm, &route.ids, &route.counts, chunk, traffic);
    let segs_in = all_to_all(comm, &local, &route.counts, chunk, traffic);
    let weights_in = weights.map(|w| all_to_all(comm, &w, &route.counts, chunk, traffic));
    // The owner's side: every source's positions as one gather-reduce by ids, each
    // source's local segments after the previous sources'.
    let mut offset = 0u32;
    let mut batch_start = Vec::with_capacity(ranks);
    let mut seg_starts = Vec::with_capacity(ranks);
    let mut owner_segs = Vec::with_capacity(segs_in.values.len());
    let mut from = 0;
    let mut seg_counts = Vec::with_capacity(ranks);
    for &n in &segs_in.counts {
        let batch = &segs_in.values[from..from + n];
        let k = batch.iter().map(|&s| s + 1).max().unwrap_or(0);
        batch_start.push(from);
        seg_starts.push(offset);
        owner_segs.extend(batch.iter().map(|&s| s + offset));
        seg_counts.push(k as usize);
        offset += k;
        from += n;
    }
    let owner_pool: Pool<'_, A> = match (pool.pooling, &weights_in) {
        (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, Some(w)) => Pooling::Sum.weighted(&w.values),
        (Pooling::Sum | Pooling::Mean | Pooling::SqrtN, None) => Pooling::Sum.into(),
        (p, _) => p.into(),
    };
    let extremum = matches!(pool.pooling, Pooling::Max | Pooling::Min);
    let segments = Segments::ids(&owner_segs, offset as usize);
    let w = table.row_len();
    let (partials, partial_arg) = if extremum {
        let (m, a) = table
            .local
            .gather_reduce_arg(&ids.values, segments, 0, owner_pool)?;
        // Each partial's position relative to its source's batch, as the source counts.
        let mut rel = Vec::with_capacity(a.len());
        for (s, &n) in seg_counts.iter().enumerate() {
            let rows = &a
                .as_slice()
                .ok_or_else(|| internal(op, "a fresh argmax not in standard layout"))?
                [seg_starts[s] as usize * w..(seg_starts[s] as usize + n) * w];
            rel.extend(rows.iter().map(|&q| (q - batch_start[s]) as u64));
        }
        (m.into_raw_vec_and_offset().0, Some(rel))
    } else {
        let m = table.local.gather_reduce(&ids.values, segments, 0, owner_pool)?;
        (m.into_raw_vec_and_offset().0, None)
    };
    // Back to the sources: one partial row per (segment, owner), and its positions.
    let sizes: Vec<usize> = seg_counts.iter().map(|&n| n * w).collect();
    let got = all_to_all(comm, &partials, &sizes, chunk, traffic);
    let got_arg = partial_arg.map(|a| all_to_all(comm, &a, &sizes, chunk, traffic));
    // The caller's side: the partials in increasing rank order.
    let pooler = Pooler::of(pool, positions);
    let mut out = vec![A::zero(); shape.iter().product()];
    let mut at = vec![0usize; if extremum { out.len() } else { 0 }];
    let mut seen = vec![false; count];
    let mut g = 0;
    for (o, &segments) in per_owner.iter().enumerate() {
        let rows = got.from(o);
        let owner_pos = route.of(o);
        for j in 0..segments {
            let s = global[g + j];
            let (dst, src) = (&mut out[s * w..(s + 1) * w], &rows[j * w..(j + 1) * w]);
            let fresh = !seen[s];
            seen[s] = true;
            match pooler.pooling {
                Pooling::Sum | Pooling::Mean | Pooling::SqrtN => {
                    for (d, x) in dst.iter_mut().zip(src) {
                        if fresh {
                            *d = A::zero() + *x;
                        } else {
                            *d += *x;
                        }
                    }
                }
                Pooling::Prod => {
                    for (d, x) in dst.iter_mut().zip(src) {
                        if fresh {
                            *d = *x;
                        } else {
                            *d *= *x;
                        }
                    }
                }
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
        }
        g += segments;
    }
    // Each segment ends as the single-process call ends it: its count and weight sums
    // over the caller's kept positions, in position order.
    let mut tallies: Vec<Tally<A>> = (0..count).map(|_| Tally::new()).collect();
    let mut kept = vec![false; positions];
    for &p in &route.positions {
        kept[p] = true;
    }
    for p in (0..positions).filter(|&p| kept[p]) {
        let t = &mut tallies[segment[p]];
        t.count += 1;
        if let Some(w) = &pooler.weights {
            t.weight += w[p];
            t.weight_sq += w[p] * w[p];
        }
    }
    for (s, tally) in tallies.iter().enumerate() {
        let (row, pos) = (&mut out[s * w..(s + 1) * w], at.get_mut(s * w..(s + 1) * w));
        match pooler.end(tally) {
            End::Fill => {
                row.fill(pooler.fill);
                if let Some(pos) = pos {
                    pos.fill(positions);
                }
            }
            End::Keep => {}
            End::Divide(d) => row.iter_mut().for_each(|v| *v = divide(v, &d, pooler.integral)),
            End::Zero => row.fill(A::zero()),
        }
    }
    let out =
        ArrayD::from_shape_vec(IxDyn(&shape), out).map_err(|_| internal(op, "an output of another size"))?;
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

/// Whether `new` (a value and the caller's position it came from) replaces `old` in a
/// `Max` (`max`) or `Min`: a strictly better value or a first NaN ([`better`]), or the
/// same value (or another NaN) from an earlier position, so that the first position wins
/// whichever owner held it.
#[inline(always)]
#[allow(clippy::eq_op)]
fn wins<A: PartialOrd>(max: bool, (old, p): (&A, usize), (new, q): (&A, usize)) -> bool {
    better(max, old, new) || (q < p && (new == old || (old != old && new != new)))
}
