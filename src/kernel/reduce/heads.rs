//! Per-head walks (decision 55): weights of shape `[P, H]` weigh each head's slice of the
//! rows, so a head is a geometry of its own with its own column of weights. Walking one
//! head after another over all segments would read each row's lines one at a time; here
//! every head of a small group of positions is walked while the group's rows are cached.
//! (The backward's twin is [`backward_heads`](super::backward_heads).)

use super::{Entries, Geometry, Pooler, runs, walk_segments};
use crate::kernel::BadIndex;
use crate::kernel::prefetch::prefetch_block;
use crate::kernel::schedule::run_ranges;
use crate::plan::policy::{HEAD_GROUP_ENTRIES, HEAD_ROW_MAX_BYTES};
use crate::pool::PoolElement;

/// The bytes of a row that a walk of per-head geometries `gs` asks for at once: from the
/// first head's slice to the end of the last's (rows whose heads are not runs: a line).
pub(crate) fn head_span<A>(gs: &[Geometry<A>]) -> usize {
    match (gs.first(), gs.last()) {
        (Some(first), Some(last)) if last.runs() => {
            let span = (last.x as usize).saturating_sub(first.x as usize) + last.lane.len * size_of::<A>();
            span.min(HEAD_ROW_MAX_BYTES)
        }
        _ => 64,
    }
}

/// [`sorted`](super::sorted) of one geometry per head: each job walks its segments in
/// groups of about [`HEAD_GROUP_ENTRIES`] positions, every head of a group while the
/// group's rows are in the cache, the next group's whole rows asked for first.
pub(crate) fn sorted_heads<A: PoolElement, E: Entries>(
    gs: &[Geometry<A>],
    e: &E,
    ps: &[Pooler<'_, A>],
    jobs: usize,
) -> Result<(), BadIndex> {
    let Some(first) = gs.first() else {
        return Ok(());
    };
    let span = head_span(gs);
    // The group from segment `a`: up to the segment that reaches the group's positions.
    let group = |a: usize, end: usize| {
        let start = e.segment(a).start;
        (a + 1..end)
            .find(|&t| e.segment(t).start - start >= HEAD_GROUP_ENTRIES)
            .unwrap_or(end)
    };
    let ask = |segs: std::ops::Range<usize>| {
        for k in segs.flat_map(|s| e.segment(s)) {
            if let Some((r, _)) = e.entry(k).filter(|&(r, _)| r < first.rows) {
                prefetch_block(first.x_row(r), span);
            }
        }
    };
    run_ranges(first.segments, jobs, |segs| {
        let end = segs.end;
        let mut at = (segs.start, group(segs.start, end));
        while at.0 < end {
            let (a, b) = at;
            at = if b < end { (b, group(b, end)) } else { (end, end) };
            ask(at.0..at.1);
            for (g, p) in gs.iter().zip(ps) {
                // SAFETY: the ranges of segments are disjoint, one job each, and so are
                // their groups.
                unsafe { walk_segments(g, e, p, a..b, &runs::Input)? };
            }
        }
        Ok(())
    })
}
