//! The gather-reduce's planner: a row's dimensions merged into loops (the gather's own
//! merging), and the walk a call takes (sorted segments, ids sorted first, or ids walked
//! as they come) with its jobs or spans. The kernel (`kernel/reduce/`) walks what it says.

use super::policy::{
    REDUCE_AHEAD, REDUCE_AHEAD_BYTES, REDUCE_AHEAD_MAX, REDUCE_JOB_BYTES, REDUCE_SORT_MIN_OUT_BYTES,
    REDUCE_SPAN_SORT_MAX_ROW_BYTES,
};
use super::{Loop, merge, worth_parallel};
use crate::machine::threads;

/// One loop of a row: its length and the strides (in elements) of input and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lane {
    pub len: usize,
    pub x: isize,
    pub o: isize,
}

/// The loops of a row: the input's dimensions but `axis`, with the input's strides `x`
/// and the output's `o`, merged as the gather merges its loops (unit dimensions dropped,
/// neighbours that step as one joined); the innermost is the lane. A row of one element
/// is a lane of one, contiguous (a single run).
pub(crate) fn row_loops(shape: &[usize], x: &[isize], o: &[isize], axis: usize) -> (Lane, Vec<Lane>) {
    let dims = (0..shape.len()).filter(|&d| d != axis).map(|d| Loop {
        len: shape[d],
        out: o[d],
        inp: x[d],
        idx: 0,
    });
    let mut lanes: Vec<Lane> = merge(dims)
        .iter()
        .map(|l| Lane {
            len: l.len,
            x: l.inp,
            o: l.out,
        })
        .collect();
    match lanes.pop() {
        Some(lane) if lane.len != 1 => (lane, lanes),
        _ => (Lane { len: 1, x: 1, o: 1 }, lanes),
    }
}

/// How a gather-reduce walks its positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReduceWalk {
    /// Segments that are ranges of positions, built in `jobs` chunks of segments.
    Sorted { jobs: usize },
    /// Ids sorted into CSR first (beside a fresh output's allocation), then built as
    /// sorted segments in `jobs` chunks; if they cannot be sorted (positions beyond `u32`,
    /// no memory), walked by ids in `spans`.
    SortIds { jobs: usize, spans: Spans },
    /// Ids walked as they come, in `spans` spans of segments.
    ByIds { spans: Spans },
}

/// The spans of segments of a walk by ids, one thread's each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spans {
    pub count: usize,
    /// Whether each span's positions are sorted out first (one counting pass over the ids),
    /// so that its thread reads its own only; else each thread reads every position.
    pub sorted: bool,
}

impl ReduceWalk {
    /// The walk of a gather-reduce into `segments` segments (given `by_ids`, or as ranges)
    /// that gathers `entries` rows of `row_bytes` bytes into an output of `out_bytes`.
    pub fn of(
        by_ids: bool,
        segments: usize,
        entries: usize,
        row_bytes: usize,
        out_bytes: usize,
    ) -> ReduceWalk {
        let bytes = entries.saturating_mul(row_bytes);
        if !by_ids {
            ReduceWalk::Sorted {
                jobs: jobs(bytes, segments),
            }
        } else if out_bytes >= REDUCE_SORT_MIN_OUT_BYTES {
            // Combining into random rows of an output this large misses the caches on
            // every position; sorted positions build each row once, in order.
            ReduceWalk::SortIds {
                jobs: jobs(bytes, segments),
                spans: spans(bytes, segments, row_bytes),
            }
        } else {
            ReduceWalk::ByIds {
                spans: spans(bytes, segments, row_bytes),
            }
        }
    }
}

/// Whether a `Sum` by ids (no weights, no fill) of rows of `row_bytes` into an output of
/// `out_bytes` is the scatter's `index_add` into zeros: the same additions in position
/// order (`0 + x` first), and where the output stays in the caches and rows are narrow,
/// a position is a third of the walk by ids' bookkeeping (R2: PERFORMANCE.md#gather-reduce).
pub(crate) fn sums_by_scatter(row_bytes: usize, out_bytes: usize) -> bool {
    row_bytes <= REDUCE_SPAN_SORT_MAX_ROW_BYTES && out_bytes < REDUCE_SORT_MIN_OUT_BYTES
}

/// How many jobs a gather-reduce by sorted segments runs in, gathering `bytes` bytes into
/// `segments` segments: one (the calling thread) when small, else jobs of about
/// [`REDUCE_JOB_BYTES`], at least two per thread.
pub(crate) fn jobs(bytes: usize, segments: usize) -> usize {
    if !worth_parallel(bytes) {
        return 1;
    }
    let want = bytes.div_ceil(REDUCE_JOB_BYTES).max(2 * threads());
    want.min(segments).max(1)
}

/// The spans of segments a gather-reduce by ids runs in, gathering `bytes` bytes in rows
/// of `row_bytes` into `segments` segments: one per thread; their positions sorted out
/// first where rows are narrow (a position's bookkeeping, not its bytes, is its time).
fn spans(bytes: usize, segments: usize, row_bytes: usize) -> Spans {
    let count = if worth_parallel(bytes) {
        threads().min(segments).max(1)
    } else {
        1
    };
    Spans {
        count,
        sorted: count > 1 && row_bytes <= REDUCE_SPAN_SORT_MAX_ROW_BYTES,
    }
}

/// How many positions ahead a gather-reduce's walks ask for the row they will read, for
/// rows of `row_bytes`: [`REDUCE_AHEAD`], or as many as make [`REDUCE_AHEAD_BYTES`] of
/// narrower rows (at most [`REDUCE_AHEAD_MAX`]): a narrow row's position is done sooner,
/// so the same distance in positions is less time for memory to answer.
pub(crate) fn ahead(row_bytes: usize) -> usize {
    (REDUCE_AHEAD_BYTES / row_bytes.max(1)).clamp(REDUCE_AHEAD, REDUCE_AHEAD_MAX)
}

/// Whether an interpolating gather walks channel planes (each channel's pixels, with the
/// corners of a block of points reused across channels: NCHW) rather than rows (a pixel's
/// channels through the gather-reduce walk: channels-last): the planes where a channel's
/// elements lie farther apart than a pixel's.
pub(crate) fn samples_by_planes(channel: isize, pixel: isize) -> bool {
    channel.unsigned_abs() > pixel.unsigned_abs()
}
