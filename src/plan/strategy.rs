//! The strategy of a task, chosen from its loops: whether (and how) its rows go through a
//! buffer, whether its block copies stream, and which way a scatter runs.

use std::mem::needs_drop;

use super::policy::*;
use super::{AxisTerm, Loop};

/// The threads a job list may use: the current rayon pool's (1 without the feature).
#[inline]
pub(crate) fn threads() -> usize {
    #[cfg(feature = "rayon")]
    {
        rayon::current_num_threads()
    }
    #[cfg(not(feature = "rayon"))]
    {
        1
    }
}

/// Whether work of `bytes` bytes should run in parallel.
#[inline]
pub(crate) fn worth_parallel(bytes: usize) -> bool {
    #[cfg(feature = "rayon")]
    {
        bytes >= PARALLEL_MIN_BYTES && threads() > 1
    }
    #[cfg(not(feature = "rayon"))]
    {
        let _ = bytes;
        false
    }
}

/// What a gather task does besides walking its loops, chosen once per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Strategy {
    /// Whether rows of lanes go through a buffer, and which side ([`Stage::of`]).
    pub staged: Stage,
    /// Whether contiguous block copies stream into the output ([`stream_pays`] decides
    /// per run).
    pub stream: bool,
    /// Whether the one-axis element loop runs its CPU-specific variants.
    pub wide: bool,
}

impl Strategy {
    /// The strategy of a task of `total` positions over `lane`, the `outer` loops around
    /// it and `axes`, for elements of `A`; `can_stream` says whether this CPU and `A`
    /// stream at all (asked only where the rest allows it).
    #[inline(always)]
    pub fn of<A>(
        lane: &Loop,
        outer: &[Loop],
        axes: &[AxisTerm],
        total: usize,
        can_stream: impl FnOnce() -> bool,
    ) -> Strategy {
        // A tiny task runs lane by lane, unstaged: deciding how to stage costs it time.
        let staged = if total <= TINY {
            Stage::No
        } else {
            Stage::of::<A>(lane, outer, axes)
        };
        let stream = staged == Stage::No
            && lane.idx == 0
            && !axes.is_empty()
            && (lane.inp, lane.out) == (1, 1)
            && lane.len * size_of::<A>() >= STREAM_MIN_LANE_BYTES
            && total.saturating_mul(size_of::<A>()) >= STREAM_MIN_BYTES
            && can_stream();
        // (A lane staged for its output is contiguous in the buffer.)
        let one_axis = axes.len() == 1 && lane.idx == 1 && (lane.out == 1 || staged == Stage::Output);
        Strategy {
            staged,
            stream,
            wide: one_axis && lane.len >= ISA_MIN_LANE,
        }
    }

    /// The bytes of the ranges a parallel run of this task hands out, for a task of
    /// `bytes` bytes over `total` positions, `row` of them in each row of lanes.
    pub fn range_bytes(self, bytes: usize, total: usize, row: usize) -> usize {
        match self.staged {
            Stage::No => GATHER_RANGE_BYTES,
            Stage::Output | Stage::Input => STAGED_RANGE_BYTES,
            // A range per row of lanes (a strip), so that each slab is copied once.
            Stage::Slab => bytes / total * row,
        }
    }
}

/// Whether a run of `bytes` bytes at address `dst` pays for streaming: a long run, or one
/// of whole lines from a line boundary (a run with few whole lines has partial lines
/// whose plain stores interfere with the streamed ones).
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline]
pub(crate) fn stream_pays(dst: usize, bytes: usize) -> bool {
    bytes >= STREAM_RUN_BYTES
        || (bytes >= STREAM_LINES_BYTES && dst.is_multiple_of(64) && bytes.is_multiple_of(64))
}

/// How a scatter runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScatterWay {
    /// One update value into a small dense destination with more positions than elements
    /// (a histogram): count the positions per element, then replay the value.
    Histogram,
    /// Into a private copy of a small dense destination, the indices checked on the way
    /// (one pass over them, not two), written back if all were good.
    Private,
    /// In place, after a read-only pass that checks every index.
    InPlace,
}

impl ScatterWay {
    /// The way of a scatter of `total` positions into a destination of `dst_len`
    /// elements' span, `dense` if its elements fill that span, `one_update` if every
    /// position reads the same update.
    pub fn of<A, I>(dense: bool, one_update: bool, dst_len: usize, total: usize) -> ScatterWay {
        if dense
            && one_update
            && dst_len < total
            && dst_len.saturating_mul(size_of::<u32>()) < SMALL_DST_BYTES
            && u32::try_from(total).is_ok()
            && worth_parallel(total.saturating_mul(size_of::<I>()))
        {
            return ScatterWay::Histogram;
        }
        // A copy pays when making it costs less than a second pass over the positions.
        if dense && dst_len.saturating_mul(size_of::<A>()) < SMALL_DST_BYTES && dst_len < total {
            ScatterWay::Private
        } else {
            ScatterWay::InPlace
        }
    }
}

/// The parts (threads) a scatter of `total` positions of `A` into a destination span of
/// `dst_bytes` bytes runs in. Each part walks every position, so parts pay only when the
/// updates' random writes cost more than re-reading the indices: when the destination
/// does not fit in the last-level cache and blocks fill at least a cache line
/// (PERFORMANCE.md#scatters).
/// Under Miri, parts whenever the work is large enough, so that its tests reach them.
pub(crate) fn scatter_parts<A>(total: usize, dst_bytes: usize, block_bytes: Option<usize>) -> usize {
    let small_blocks = block_bytes.is_some_and(|b| b < SMALL_BLOCK_BYTES);
    if worth_parallel(total.saturating_mul(size_of::<A>()))
        && ((dst_bytes >= PARTS_MIN_DST_BYTES && !small_blocks) || SMALL_SIZES)
    {
        threads()
    } else {
        1
    }
}

/// Whether a scatter's block pipelines, in `parts` parts of a destination span of
/// `dst_bytes` bytes, prefetch the updates of the blocks ahead: not when one part reads
/// them all, in order, into a destination out of cache
/// ([`UPDATES_PREFETCH_MAX_DST_BYTES`]).
pub(crate) fn scatter_prefetches_updates(parts: usize, dst_bytes: usize) -> bool {
    parts > 1 || dst_bytes < UPDATES_PREFETCH_MAX_DST_BYTES
}

/// How many lanes of `n` elements an output-staged group holds: as many as [`STAGE`]
/// holds (a tile), at least [`OUTPUT_LANES`] (whole lanes up to [`STAGE`] long, their
/// group up to 1 MiB of `f32`, within L2).
pub(crate) fn output_group(n: usize) -> usize {
    (STAGE / n.max(1)).max(OUTPUT_LANES)
}

/// How a task's rows go through a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    No,
    Output,
    Input,
    Slab,
}

impl Stage {
    /// How a task over `lane`, the `outer` loops around it and `axes` stages its rows.
    /// Only elements without drop glue are staged (the buffer is abandoned on a bad index
    /// or a panic, and assigning moves over old elements without dropping them).
    /// - [`Stage::Output`]: the lane strides through the output while its row moves
    ///   through it more densely, and the lane fits the buffer;
    /// - [`Stage::Input`]: a contiguous element lane gathers along one axis of at least
    ///   [`INPUT_MIN_STRIDE`] elements' stride, from rows a unit stride apart; each row reads
    ///   at least as many elements as the axis has, and a group of rows fits the buffer;
    /// - [`Stage::Slab`]: the row and lane around one axis form a
    ///   [`slab`](crate::plan::slab).
    pub fn of<A>(lane: &Loop, outer: &[Loop], axes: &[crate::plan::AxisTerm]) -> Stage {
        let Some(row) = outer.last() else {
            return Stage::No;
        };
        if needs_drop::<A>() || size_of::<A>() == 0 || row.len < 2 {
            return Stage::No;
        }
        if lane.len >= 2
            && lane.len <= STAGE
            && row.out.unsigned_abs() < lane.out.unsigned_abs()
            && lane.out.unsigned_abs() > 1
        {
            return Stage::Output;
        }
        if let [a] = axes
            && (lane.out, lane.idx, lane.inp) == (1, 1, 0)
            && row.inp.unsigned_abs() == 1
            && a.stride.unsigned_abs() >= INPUT_MIN_STRIDE
            && lane.len >= a.len
            && a.len * 2 <= INPUT_STAGE
        {
            return Stage::Input;
        }
        if let [a] = axes
            && crate::plan::slab(row, lane, a)
        {
            return Stage::Slab;
        }
        Stage::No
    }

    /// The buffer's size in elements for a task with these axis terms.
    pub fn capacity(self, axes: &[crate::plan::AxisTerm], lane_len: usize) -> usize {
        match (self, axes) {
            (Stage::Output, _) => output_group(lane_len) * lane_len,
            (Stage::Input, [a]) => (INPUT_STAGE / a.len).min(INPUT_ROWS) * a.len,
            (Stage::Slab, [a]) => a.len * lane_len,
            _ => 0,
        }
    }
}

/// How many jobs a gather-reduce by sorted segments runs in, gathering `bytes` bytes into
/// `segments` segments: one (the calling thread) when small, else jobs of about
/// [`REDUCE_JOB_BYTES`], at least two per thread.
pub(crate) fn reduce_jobs(bytes: usize, segments: usize) -> usize {
    if !worth_parallel(bytes) {
        return 1;
    }
    let want = bytes.div_ceil(super::policy::REDUCE_JOB_BYTES).max(2 * threads());
    want.min(segments).max(1)
}

/// How many spans of segments a gather-reduce by ids runs in, gathering `bytes` bytes into
/// `segments` segments: each span's thread walks every position, so one per thread.
pub(crate) fn reduce_spans(bytes: usize, segments: usize) -> usize {
    if worth_parallel(bytes) {
        threads().min(segments).max(1)
    } else {
        1
    }
}

/// Whether a gather-reduce by ids into an output of `out_bytes` bytes sorts its positions
/// by segment (and then walks them as sorted segments) rather than walking the ids.
pub(crate) fn reduce_sorts(out_bytes: usize) -> bool {
    out_bytes >= super::policy::REDUCE_SORT_MIN_OUT_BYTES
}
