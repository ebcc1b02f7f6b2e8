//! The walk by ids (decision 15's ids in any order, into an output that stays in the
//! caches): each thread owns a span of segments and combines the positions whose ids fall
//! in it, in position order; narrow rows have each span's positions counted out first.

use super::runs;
use super::{Geometry, Pooler, Source, Tally};
use crate::index::GatherIndex;
use crate::kernel::BadIndex;
use crate::kernel::isa::Isa;
use crate::kernel::schedule::{range_len, run_ranges};
use crate::pool::PoolElement;

/// Builds every segment from one id per position (`ids`, checked to be below the segment
/// count), in `spans` spans of segments, each walking every position, or (`sorted`) its
/// own positions, sorted out by span first.
pub(crate) fn by_ids<A: PoolElement, S: Source, J: GatherIndex>(
    g: &Geometry<A>,
    rows: &S,
    ids: ndarray::ArrayView1<'_, J>,
    p: &Pooler<'_, A>,
    spans: usize,
    sorted: bool,
) -> Result<(), BadIndex> {
    let runs = g.runs() && g.arg.is_null();
    let isa = if runs { Isa::detect() } else { Isa::Base };
    let ids = ids.as_standard_layout();
    let ids = ids.as_slice().ok_or(BadIndex)?;
    let per = range_len(g.segments, spans);
    let by_span = sorted.then(|| BySpan::of(ids, g.segments, per)).flatten();
    run_ranges(g.segments, spans, |span| {
        let order = by_span.as_ref().map(|b| b.of_span(span.start / per));
        if runs {
            // SAFETY: rows that are single runs, `isa` detected on this CPU, and this job
            // alone builds the span's segments (below `segments`).
            return unsafe {
                runs::dispatch(
                    isa,
                    g,
                    p,
                    &runs::ById {
                        rows,
                        ids,
                        order,
                        span,
                    },
                )
            };
        }
        walk_span(
            g,
            rows,
            ids,
            order,
            span,
            |r, s, q, tally| {
                let (o, arg) = g.out_row(s);
                // SAFETY: `r < rows`, `s` in this job's span, below `segments` (the
                // contract); the span's segments are this job's alone.
                unsafe { p.add(g, g.x_row(r), o, arg, q, tally) };
            },
            |s, tally| {
                let (o, arg) = g.out_row(s);
                // SAFETY: as above.
                unsafe { p.finish(g, o, arg, tally) };
            },
        )
    })
}

/// Each span's positions, in increasing order: the positions counting-sorted by span (one
/// pass counts, one places), so that a span's thread reads its own positions only.
struct BySpan {
    /// Span `c`'s positions are `order[starts[c]..starts[c + 1]]`.
    starts: Vec<usize>,
    order: Vec<u32>,
}

impl BySpan {
    /// The positions of `ids` (each below `segments`) by span of `per` segments; `None`
    /// where positions or segments do not fit `u32`.
    fn of<J: GatherIndex>(ids: &[J], segments: usize, per: usize) -> Option<Self> {
        if ids.len() > u32::MAX as usize || segments > u32::MAX as usize {
            return None;
        }
        // `v / per` by a multiply: exact for 32-bit `v` and `per` with the rounded-up
        // inverse (Lemire, Kaser and Kurz, "Faster remainder by direct computation").
        let inverse = (per > 1).then(|| u64::MAX / per as u64 + 1);
        let span = |v: &J| {
            let v = v.wrapped();
            inverse.map_or(v, |m| ((u128::from(v) * u128::from(m)) >> 64) as u64) as usize
        };
        let mut starts = vec![0usize; segments.div_ceil(per) + 1];
        for v in ids {
            *starts.get_mut(span(v) + 1)? += 1;
        }
        for c in 1..starts.len() {
            starts[c] += starts[c - 1];
        }
        let mut next = starts.clone();
        let mut order = vec![0u32; ids.len()];
        for (q, v) in ids.iter().enumerate() {
            let at = next.get_mut(span(v))?;
            *order.get_mut(*at)? = q as u32;
            *at += 1;
        }
        Some(BySpan { starts, order })
    }

    /// Span `c`'s positions.
    fn of_span(&self, c: usize) -> &[u32] {
        match (self.starts.get(c), self.starts.get(c + 1)) {
            (Some(&a), Some(&b)) => &self.order[a..b],
            _ => &[],
        }
    }
}

/// The walk of one span of segments by ids: for each position `q` whose id falls in `span`,
/// in increasing order, `add(r, s, q, tally)` with its row `r` (below `g.rows`), its
/// segment `s` (in `span`) and that segment's tally, the rows [`REDUCE_AHEAD`] positions
/// ahead asked for; then `finish(s, tally)` for each of the span's segments. `Err` for a
/// row out of range (which the call's check rules out).
#[inline(always)]
pub(super) fn walk_span<A: PoolElement, S: Source, J: GatherIndex>(
    g: &Geometry<A>,
    rows: &S,
    ids: &[J],
    order: Option<&[u32]>,
    span: std::ops::Range<usize>,
    mut add: impl FnMut(usize, usize, usize, &mut Tally<A>),
    mut finish: impl FnMut(usize, &Tally<A>),
) -> Result<(), BadIndex> {
    let mut tallies: Vec<Tally<A>> = span.clone().map(|_| Tally::new()).collect();
    // The positions to read: the span's own (in order), or every one.
    let positions = order.map_or(ids.len(), <[u32]>::len);
    let at = |k: usize| order.map_or(k, |o| o[k] as usize);
    let (start, len) = (span.start as u64, span.len() as u64);
    // One unsigned compare: a negative id wraps to a huge value, outside any span.
    let id = |q: usize| {
        let v = ids[q].wrapped().wrapping_sub(start);
        (v < len).then(|| v as usize + span.start)
    };
    for k in 0..positions {
        // Rows read at random are asked for ahead (the output, under
        // `REDUCE_SORT_MIN_OUT_BYTES` here, stays in the caches).
        let ahead = k + g.ahead;
        if !S::IN_ORDER && ahead < positions && id(at(ahead)).is_some() {
            g.prefetch(g.x_row(rows.peek(at(ahead))));
        }
        let q = at(k);
        let Some(s) = id(q) else { continue };
        let Some(r) = rows.row(q) else { continue };
        if r >= g.rows {
            return Err(BadIndex);
        }
        add(r, s, q, &mut tallies[s - span.start]);
    }
    for (s, tally) in span.zip(&tallies) {
        finish(s, tally);
    }
    Ok(())
}
