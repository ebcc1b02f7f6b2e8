//! The strategy of a task, chosen from its loops before the kernel runs: how a gather
//! runs (tiny, serial or in ranges), whether (and how) its rows go through a buffer,
//! whether its block copies stream, and which way a scatter runs and in how many parts.
//! The kernel reads what these say and decides nothing of its own.

use std::mem::needs_drop;

use super::policy::*;
use super::{AxisTerm, Loop, positions, split_innermost};
use crate::machine::{self, threads};

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

/// Whether a gather of `total` output positions is tiny: it runs lane by lane over its
/// plan's own dimensions, unstaged, on the calling thread (its cost is its overhead).
/// The one comparison with [`TINY`].
#[inline(always)]
pub(crate) fn is_tiny(total: usize) -> bool {
    total <= TINY
}

/// Whether a prepared gather of `out_len` output elements keeps an input offset per
/// element (a plain loop per apply). The one comparison with [`PLAN_TINY`].
#[inline(always)]
pub(crate) fn keeps_offsets(out_len: usize) -> bool {
    out_len <= PLAN_TINY
}

/// How a gather task runs its positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Run {
    /// Lane by lane over every position, without ranges, staging or pipelines.
    Tiny,
    /// One range of every position, on the calling thread.
    Serial,
    /// These ranges, claimed by the pool's threads.
    Parallel(Ranges),
}

/// What a gather task does besides walking its loops, chosen once per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Strategy {
    /// Tiny, serial or parallel.
    pub run: Run,
    /// Whether rows of lanes go through a buffer, and which side ([`Stage::of`]).
    pub staged: Stage,
    /// Whether rows of lanes are handed to the kernel whole: staged rows, or rows of block
    /// lanes long enough to repay the locating and prefetching pipeline.
    pub rows: bool,
    /// Whether contiguous block copies stream into the output ([`stream_pays`] decides
    /// per run).
    pub stream: bool,
    /// Whether the one-axis element loop runs its CPU-specific variants.
    pub wide: bool,
}

impl Strategy {
    /// The strategy of a gather over `loops` (as the kernel will walk them) and `axes`,
    /// for elements of `A` and indices of `I`.
    #[inline(always)]
    pub fn of<A, I>(loops: &[Loop], axes: &[AxisTerm]) -> Strategy {
        let (lane, outer) = split_innermost(loops);
        let total = positions(outer, &lane);
        // (A lane staged for its output is contiguous in the buffer.)
        let one_axis =
            |staged| axes.len() == 1 && lane.idx == 1 && (lane.out == 1 || staged == Stage::Output);
        let wide = |staged| one_axis(staged) && lane.len >= ISA_MIN_LANE;
        if is_tiny(total) {
            // Deciding how to stage, stream or split would cost a tiny task its time.
            return Strategy {
                run: Run::Tiny,
                staged: Stage::No,
                rows: false,
                stream: false,
                wide: wide(Stage::No),
            };
        }
        let staged = Stage::of::<A>(&lane, outer, axes);
        let blocks = lane.idx == 0 && !axes.is_empty();
        let stream = staged == Stage::No
            && blocks
            && (lane.inp, lane.out) == (1, 1)
            && lane.len * size_of::<A>() >= STREAM_MIN_LANE_BYTES
            && total.saturating_mul(size_of::<A>()) >= STREAM_MIN_BYTES
            && machine::streams::<A>()
            && machine::available();
        let idx_bytes = usize::from(!axes.is_empty() && lane.idx != 0) * size_of::<I>();
        let bytes = total.saturating_mul(size_of::<A>() + idx_bytes);
        let run = if worth_parallel(bytes) {
            // One row: the lane and the loop around it, if any (a 1-D output is one lane).
            let row = positions(&outer[outer.len().saturating_sub(1)..], &lane);
            let range_bytes = match staged {
                Stage::No => GATHER_RANGE_BYTES,
                Stage::Output | Stage::Input => STAGED_RANGE_BYTES,
                // A range per row of lanes (a strip), so that each slab is copied once.
                Stage::Slab => bytes / total * row,
            };
            let ranges = Ranges::new(total, bytes, range_bytes);
            Run::Parallel(if staged == Stage::Output {
                // Whole groups: a range that starts or ends inside one gathers those lanes
                // element by element, striding through the output.
                ranges.in_multiples_of(output_group(lane.len) * lane.len)
            } else {
                ranges
            })
        } else {
            Run::Serial
        };
        // Short element lanes that each read one contiguous row (GatherElements along the
        // last axis with few indices per row): a row of them per kernel call.
        let element_rows = staged == Stage::No
            && matches!(axes, [a] if a.stride == 1)
            && (lane.inp, lane.idx, lane.out) == (0, 1, 1)
            && lane.len <= ELEMENT_ROWS_MAX_LANE
            && !needs_drop::<A>();
        Strategy {
            run,
            staged,
            rows: staged != Stage::No || (blocks && total > PIPELINE_MIN) || element_rows,
            stream,
            wide: wide(staged) || element_rows,
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
        || (bytes >= STREAM_LINES_BYTES && dst.is_multiple_of(CACHE_LINE) && bytes.is_multiple_of(CACHE_LINE))
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
    /// In place, the indices checked before (a plan's resolved positions): no check pass.
    Checked,
}

/// How a scatter runs, chosen once per call: its way, its parts (threads), and how its
/// passes split and prefetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScatterStrategy {
    pub way: ScatterWay,
    /// The destination's lowest and highest element offsets.
    pub span: (isize, isize),
    /// The parts (threads) the combining pass runs in, each owning a contiguous share of
    /// the span ([`ScatterStrategy::parts`]).
    pub parts: usize,
    /// Whether block pipelines prefetch the updates of the blocks ahead: not when one part
    /// reads them all, in order, into a destination out of cache
    /// ([`UPDATES_PREFETCH_MAX_DST_BYTES`]).
    pub prefetch_updates: bool,
    /// The ranges of the read-only check pass ([`ScatterWay::InPlace`]), or `None` to check
    /// on the calling thread.
    pub check: Option<Ranges>,
    /// A histogram's counting parts and replaying jobs ([`ScatterWay::Histogram`]).
    pub count_parts: usize,
    pub replay_jobs: usize,
}

impl ScatterStrategy {
    /// The strategy of a scatter over `loops` (with the updates as the output) and `axes`
    /// into a destination of `dst_shape` and `dst_strides`, for elements of `A` and
    /// indices of `I`; `checked` if every index was checked before (a plan's).
    pub fn of<A, I>(
        loops: &[Loop],
        axes: &[AxisTerm],
        dst_shape: &[usize],
        dst_strides: &[isize],
        checked: bool,
    ) -> ScatterStrategy {
        let (lane, outer) = split_innermost(loops);
        let total = positions(outer, &lane);
        let span = crate::layout::span(dst_shape, dst_strides);
        let dst_len = dst_shape.iter().product::<usize>();
        // Whether the destination's elements fill their span (and there is at least one).
        let dense = span.is_some_and(|(lo, hi)| (hi - lo) as usize + 1 == dst_len);
        let span = span.unwrap_or((0, 0));
        let span_len = (span.1 - span.0) as usize + 1;
        // Whether every position reads the same update (a histogram's `1.0`).
        let one_update = outer.iter().chain([&lane]).all(|l| l.out == 0 || l.len == 1);
        let way = match ScatterWay::of::<A, I>(dense, one_update, span_len, total) {
            // Checked indices need neither a check pass nor a private copy to check into.
            ScatterWay::InPlace | ScatterWay::Private if checked => ScatterWay::Checked,
            way => way,
        };
        let dst_bytes = span_len.saturating_mul(size_of::<A>());
        let blocks = lane.idx == 0 && !axes.is_empty();
        let parts = Self::parts::<A>(total, dst_bytes, blocks.then(|| lane.len * size_of::<A>()));
        // The check pass reads each lane's indices: one coordinate per block lane.
        let per_lane = if lane.idx == 0 { 1 } else { lane.len };
        let check_bytes = (total / lane.len.max(1)).saturating_mul(per_lane * size_of::<I>());
        let histogram_threads = if worth_parallel(total.saturating_mul(size_of::<A>())) {
            threads()
        } else {
            1
        };
        ScatterStrategy {
            way,
            span,
            parts,
            prefetch_updates: parts > 1 || dst_bytes < UPDATES_PREFETCH_MAX_DST_BYTES,
            check: worth_parallel(check_bytes).then(|| Ranges::new(total, check_bytes, CHECK_RANGE_BYTES)),
            count_parts: threads().clamp(1, total.max(1)),
            replay_jobs: histogram_threads,
        }
    }

    /// The parts (threads) a scatter of `total` positions of `A` into a destination span
    /// of `dst_bytes` bytes runs in. Each part walks every position, so parts pay only
    /// when the updates' random writes cost more than re-reading the indices: when the
    /// destination does not fit in the last-level cache and blocks fill at least a cache
    /// line (PERFORMANCE.md#scatters). With small sizes, parts whenever the work is large
    /// enough, so that small tests reach them.
    fn parts<A>(total: usize, dst_bytes: usize, block_bytes: Option<usize>) -> usize {
        let small_blocks = block_bytes.is_some_and(|b| b < SMALL_BLOCK_BYTES);
        if worth_parallel(total.saturating_mul(size_of::<A>()))
            && ((dst_bytes >= PARTS_MIN_DST_BYTES && !small_blocks) || SMALL_SIZES)
        {
            threads()
        } else {
            1
        }
    }
}

impl ScatterWay {
    /// The way of a scatter of `total` positions into a destination of `dst_len`
    /// elements' span, `dense` if its elements fill that span, `one_update` if every
    /// position reads the same update.
    fn of<A, I>(dense: bool, one_update: bool, dst_len: usize, total: usize) -> ScatterWay {
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

/// `0..total` cut into `count` ranges of `per` (the last shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ranges {
    pub total: usize,
    pub per: usize,
    pub count: usize,
}

impl Ranges {
    /// Ranges of about `chunk_bytes` each for `total` items of `bytes` bytes in all; at
    /// least two when `total >= 2`.
    pub fn new(total: usize, bytes: usize, chunk_bytes: usize) -> Ranges {
        let want = bytes.div_ceil(chunk_bytes.max(1)).clamp(2, total.max(2));
        let per = total.div_ceil(want).max(1);
        Ranges {
            total,
            per,
            count: total.div_ceil(per),
        }
    }

    /// The same ranges rounded up to whole multiples of `granule` items (a staged group
    /// of lanes), where at least two remain; unchanged otherwise.
    pub fn in_multiples_of(self, granule: usize) -> Ranges {
        let per = self.per.next_multiple_of(granule.max(1));
        let count = self.total.div_ceil(per);
        if count < 2 {
            return self;
        }
        Ranges { per, count, ..self }
    }

    /// Range `c`.
    pub fn get(&self, c: usize) -> std::ops::Range<usize> {
        (c * self.per).min(self.total)..((c + 1) * self.per).min(self.total)
    }
}
