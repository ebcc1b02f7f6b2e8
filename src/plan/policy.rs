//! Every tuning constant of the crate, named once, with its unit and why it has its value.
//! The measurements behind them are in PERFORMANCE.md (the anchors below); the kernel
//! reads these and decides nothing of its own.
//!
//! Under Miri and in fuzzing builds ([`SMALL_SIZES`]) several are small, so that small
//! inputs reach the paths they guard (parallel ranges, pipelines, staging, chunk
//! boundaries).

/// Whether the sizes below are the small ones: under Miri, whose tests are small, and in
/// builds for fuzzing (`cargo fuzz` sets `--cfg fuzzing`), whose inputs are: with native
/// sizes no fuzz input would reach a parallel range, a pipeline or a stage.
pub(crate) const SMALL_SIZES: bool = cfg!(any(miri, fuzzing));

// ---- The machine ------------------------------------------------------------------------

/// A cache line, in bytes: a fact of the machine (`machine.rs`), read here as every other
/// number.
pub(crate) use crate::machine::CACHE_LINE;

/// The most dimensions whose odometer or strides are kept in a fixed array on the stack
/// (a rank above it takes the heap): a `Small`'s or an `IxDyn`'s every access branches on
/// where its items are (PERFORMANCE.md#tiny-calls-store-forwarding).
pub(crate) const INLINE_RANK: usize = 8;

// ---- Sizes of a call --------------------------------------------------------------------

/// Calls of at most this many output positions run lane by lane in one loop, unstaged and
/// on the calling thread: their cost is their overhead (PERFORMANCE.md#tiny-calls-and-tiny-plans-w7-p7).
pub(crate) const TINY: usize = 64;

/// Scatters of at most this many positions take the two plain passes of the tiny scatter;
/// lower under Miri, so that its small tests reach the large scatter's paths.
pub(crate) const SCATTER_TINY: usize = if SMALL_SIZES { 16 } else { TINY };

/// Plans of at most this many output elements keep an input offset (`u32`) per element:
/// 256 bytes, one plain loop per apply (PERFORMANCE.md#tiny-calls-and-tiny-plans-w7-p7).
pub(crate) const PLAN_TINY: usize = 64;

/// Work of at least this many bytes may use the rayon pool: below it, waking the pool
/// costs more than a second core gains (PERFORMANCE.md#the-shape-of-a-call).
#[cfg(feature = "rayon")]
pub(crate) const PARALLEL_MIN_BYTES: usize = if SMALL_SIZES { 256 } else { 1 << 21 };

// ---- Parallel ranges (bytes) ------------------------------------------------------------

/// Gathers are handed out in ranges of about this many output bytes: enough to amortize
/// a claim, small enough to balance two threads.
pub(crate) const GATHER_RANGE_BYTES: usize = if SMALL_SIZES { 64 } else { 1 << 17 };

/// Staged gathers take larger ranges: whole groups, filling whole output pages along the
/// lanes they write across (PERFORMANCE.md#other-memory-orders-staging).
pub(crate) const STAGED_RANGE_BYTES: usize = if SMALL_SIZES { 64 } else { 1 << 20 };

/// A plan's indices are resolved on the pool's threads in ranges of this many index bytes.
pub(crate) const RESOLVE_RANGE_BYTES: usize = 1 << 18;

/// A table is quantized on the pool's threads in ranges of rows of about this many input
/// bytes.
pub(crate) const QUANTIZE_RANGE_BYTES: usize = if SMALL_SIZES { 64 } else { 1 << 20 };

/// A scatter's indices are checked in ranges of this many index bytes.
pub(crate) const CHECK_RANGE_BYTES: usize = if SMALL_SIZES { 64 } else { 1 << 18 };

// ---- Block lanes ------------------------------------------------------------------------

/// A gather's block pipeline locates and prefetches this many lanes (a power of two)
/// before it copies them, so that reads from far-apart rows overlap
/// (PERFORMANCE.md#block-gathers-w1-w2-w5-w6-w8).
pub(crate) const GATHER_RING: usize = 32;

/// A scatter's block pipeline locates this many lanes ahead of their combination.
pub(crate) const SCATTER_RING: usize = 64;

/// Ranges of at most this many positions copy their block lanes one by one: a tiny gather
/// does not repay the pipeline's set-up. Low under Miri, so that its tests run the pipeline.
pub(crate) const PIPELINE_MIN: usize = if SMALL_SIZES { 8 } else { 64 };

/// The bytes of blocks a gather's or a scatter's pipeline keeps in flight (located and
/// prefetched ahead of their copy): enough lines to cover a miss's latency, few enough to
/// stay within the core's line buffers and L1 (PERFORMANCE.md#block-gathers-w1-w2-w5-w6-w8).
pub(crate) const IN_FLIGHT_BYTES: usize = 4096;

/// The most lanes ahead at which a scatter asks for the indices of a row of block lanes
/// ([`INDEX_AHEAD_BYTES`] of them), so that tiny index steps do not reach past the row.
pub(crate) const INDEX_AHEAD_MAX_LANES: usize = 256;

/// Contiguous runs of at most this many elements are cloned one by one: for `Copy`
/// elements a slice copy is a `memcpy` call, slower for a few bytes.
pub(crate) const SHORT_RUN: usize = 8;

// ---- Element lanes ----------------------------------------------------------------------

/// The element loop runs in chunks of this many index bytes (under Miri few enough that its
/// small tests cross chunks).
pub(crate) const ELEMENT_CHUNK_BYTES: usize = if SMALL_SIZES { 64 } else { 1024 };

/// A lane that reads (or, scattering, writes) one contiguous row runs in chunks of this
/// many elements, each asking for its share of the next lane's row
/// (PERFORMANCE.md#element-gathers-along-the-last-axis-w3-p3).
pub(crate) const ROW_CHUNK: usize = if SMALL_SIZES { 8 } else { 128 };

/// Rows of at most this many bytes are prefetched for the next lane: a longer one would
/// not stay in the cache until its turn (about twice L1, well inside L2).
pub(crate) const NEXT_ROW_BYTES: usize = 64 << 10;

/// Element lanes of at least this many positions run the CPU-specific loop variants.
pub(crate) const ISA_MIN_LANE: usize = 16;

/// The longest element lanes that run a row of lanes per kernel call when each reads one
/// contiguous row (W9: 4-64 indices per row); longer ones, W3's 2048, run lane by lane
/// with the next row and the indices prefetched.
pub(crate) const ELEMENT_ROWS_MAX_LANE: usize = 256;

// ---- Staging (elements) -----------------------------------------------------------------

/// The most elements a staged tile holds, and the longest lane staged whole: 16 KiB of
/// `f32`, within L1 beside the lines being written.
pub(crate) const STAGE: usize = if SMALL_SIZES { 64 } else { 4096 };

/// The least lanes an output-staged group holds: each output line along the group is
/// written whole, even for bytes (PERFORMANCE.md#other-memory-orders-staging).
pub(crate) const OUTPUT_LANES: usize = if SMALL_SIZES { 4 } else { 64 };

/// The most rows an input-staged group holds (a parallel range of W3 holds 16).
pub(crate) const INPUT_ROWS: usize = 16;

/// The most elements an input-staged group holds: 256 KiB of `f32`, within L2.
pub(crate) const INPUT_STAGE: usize = if SMALL_SIZES { 64 } else { 1 << 16 };

/// The least stride, in elements, of an axis worth input-staging: a cache line of `f32`.
pub(crate) const INPUT_MIN_STRIDE: usize = 16;

/// Axis positions ahead at which an input-staged copy prefetches every line of its rows
/// (PERFORMANCE.md#other-memory-orders-staging).
pub(crate) const INPUT_AHEAD: isize = 8;

/// Positions along the lanes ahead at which an output-staged move prefetches the run it
/// will write: each position's run is on a page of its own.
pub(crate) const OUT_AHEAD: usize = 8;

/// The side of the squares an output-staged move transposes through registers: 4 x 4
/// elements, four loads and four stores of one vector each for `f32`.
pub(crate) const SQUARE: usize = 4;

/// Lanes ahead at which a slab's rows prefetch their indices and output: each lane's are
/// on another page, where the hardware's prefetcher does not follow.
pub(crate) const SLAB_LANES_AHEAD: isize = 8;

// ---- Tiles, strips and slabs (elements) -------------------------------------------------

/// The lane's length in a tile of a Fortran-order output of a C-order input.
pub(crate) const TILE_LANE: usize = 64;

/// The cross loop's length in a tile: whole output lines along it; with [`TILE_LANE`], a
/// tile of `f32`s fills [`STAGE`] (PERFORMANCE.md#other-memory-orders-staging).
pub(crate) const TILE_CROSS: usize = 64;

/// The row's length in a tile of short lanes around a short cross loop (W8's pixels).
pub(crate) const SHORT_ROW: usize = 256;

/// The most elements a slab holds: 1 MiB of `f32`, within L2
/// (PERFORMANCE.md#element-gathers-along-another-axis-w4).
pub(crate) const SLAB: usize = if SMALL_SIZES { 64 } else { 1 << 18 };

// ---- Plans ------------------------------------------------------------------------------

/// Shorter runs of consecutive positions in a plan stay element by element; runs of this
/// many or more are copied as blocks (PERFORMANCE.md#prepared-gathers).
pub(crate) const MIN_RUN: usize = 8;

// ---- Scatters ---------------------------------------------------------------------------

/// Destinations smaller than this many bytes (whole span) stay in cache: a dense one with
/// more updates than elements is scattered into a copy, its indices checked on the way;
/// any of them is written by one thread (PERFORMANCE.md#scatters).
pub(crate) const SMALL_DST_BYTES: usize = 1 << 20;

/// Elements whose histogram counts are replayed side by side, so that their chains of
/// dependent combinations overlap.
pub(crate) const CHAINS: usize = 32;

/// Destinations smaller than this many bytes (whole span) stay in the last-level cache:
/// their random writes cost less than a second thread walking every position again, so
/// one thread scatters into them (S9, PERFORMANCE.md#scatters).
pub(crate) const PARTS_MIN_DST_BYTES: usize = 16 << 20;

/// A scatter's block pipeline whose part owns a whole destination of at least this size
/// (out of cache) leaves the updates of the blocks ahead to the hardware prefetcher: it
/// reads them all, in order, while each destination block's prefetch is a miss that holds
/// a line buffer (S1 on one thread, PERFORMANCE.md#scatters). A part
/// that owns a share reads a scattered subset of the updates, and a destination in cache
/// leaves the buffers free: both still prefetch them (no difference measured either way).
pub(crate) const UPDATES_PREFETCH_MAX_DST_BYTES: usize = PARTS_MIN_DST_BYTES;

/// Blocks narrower than this many bytes (a cache line) are "small": each thread re-reading
/// every index does not pay for them (PERFORMANCE.md#scatters).
pub(crate) const SMALL_BLOCK_BYTES: usize = CACHE_LINE;

// ---- Outputs ----------------------------------------------------------------------------

/// Gathers that write at least this many bytes stream their block copies: smaller outputs
/// stay in the caches, where the caller will read them (PERFORMANCE.md#block-gathers-w1-w2-w5-w6-w8).
pub(crate) const STREAM_MIN_BYTES: usize = 16 << 20;

/// Block lanes of at least this many bytes are worth streaming at all (two lines).
pub(crate) const STREAM_MIN_LANE_BYTES: usize = 128;

/// A run streams when it has at least this many bytes, wherever it starts ...
#[cfg_attr(any(miri, not(target_arch = "x86_64")), allow(dead_code))]
pub(crate) const STREAM_RUN_BYTES: usize = 1024;

/// ... or at least this many bytes of whole lines from a line boundary: fewer whole lines
/// and the plain stores of a run's partial lines interfere with the streamed ones.
#[cfg_attr(any(miri, not(target_arch = "x86_64")), allow(dead_code))]
pub(crate) const STREAM_LINES_BYTES: usize = 256;

/// Fresh outputs of at least this many bytes are advised into transparent huge pages and
/// faulted in at once, as NumPy does from 4 MiB (PERFORMANCE.md#fresh-outputs-allocating-calls).
#[cfg_attr(any(miri, not(target_os = "linux")), allow(dead_code))]
pub(crate) const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// A transparent huge page on x86-64 Linux, in bytes.
#[cfg_attr(any(miri, not(target_os = "linux")), allow(dead_code))]
pub(crate) const HUGE_PAGE_BYTES: usize = 2 << 20;

/// How far ahead, in index bytes, a scatter's passes ask for the lanes' indices: the
/// hardware's own prefetch leaves index streams waiting on memory (PERFORMANCE.md#scatters).
pub(crate) const INDEX_AHEAD_BYTES: usize = 2048;

// ---- Gather-reduce ----------------------------------------------------------------------

/// How many positions ahead a gather-reduce asks for the input row (and, by ids, the
/// output row) it will read: random rows wait on memory, and the rows of the next
/// positions are known (PERFORMANCE.md#gather-reduce).
pub(crate) const REDUCE_AHEAD: usize = 16;

/// How many bytes of rows ahead a gather-reduce's walks ask for, where that is more than
/// [`REDUCE_AHEAD`] positions (narrow rows: 32 positions of 128-byte rows, B5), at most
/// [`REDUCE_AHEAD_MAX`] positions (PERFORMANCE.md#gather-reduce).
pub(crate) const REDUCE_AHEAD_BYTES: usize = 4096;
/// The most positions ahead a gather-reduce asks for a row.
pub(crate) const REDUCE_AHEAD_MAX: usize = 64;

/// How many positions ahead the sort of ids into CSR asks for the entry it will write: each
/// position's entry lands at a random place of the sorted array (PERFORMANCE.md#gather-reduce).
pub(crate) const SORT_AHEAD: usize = 16;

/// Columns of a single-run row that the gather-reduce accumulates in registers at a
/// time (eight AVX2 registers of `f32`), walking the segment's positions once per block;
/// a half and a quarter block follow, and the rest of a row accumulates in place. With an
/// argmax, blocks are a quarter of this wide (PERFORMANCE.md#gather-reduce).
pub(crate) const REDUCE_BLOCK: usize = if SMALL_SIZES { 8 } else { 64 };

/// At most this many bytes of a row are asked for ahead (a longer row's later lines are
/// found by the hardware's own prefetch once the row is being read).
pub(crate) const REDUCE_PREFETCH_MAX_BYTES: usize = 1024;

/// Gather-reduces by sorted segments run in jobs of about this many gathered bytes, so
/// that the threads' shares even out however the segments' lengths vary.
pub(crate) const REDUCE_JOB_BYTES: usize = if SMALL_SIZES { 64 } else { 1 << 18 };

/// A gather-reduce by ids whose output has at least this many bytes sorts its positions by
/// segment first (a counting sort, 4 bytes per position): combining into random rows of
/// an output this large misses the caches on every position, while sorted positions build
/// each row once, in order (G1: PERFORMANCE.md#gather-reduce).
pub(crate) const REDUCE_SORT_MIN_OUT_BYTES: usize = if SMALL_SIZES { 64 } else { 1 << 20 };

/// A gather-reduce walked by ids in several spans sorts each span's positions out first
/// (one counting pass) where rows have at most this many bytes: a narrow row's time is its
/// position's bookkeeping, which every span's thread paid for every position (R2's 16-byte
/// rows 1.5x faster); 256-byte rows are memory-bound and the pass costs 5%
/// (PERFORMANCE.md#gather-reduce).
pub(crate) const REDUCE_SPAN_SORT_MAX_ROW_BYTES: usize = 64;

// ---- Sharded tables ---------------------------------------------------------------------

/// The most elements one round of a sharded call's all-to-all moves per rank: MPI's counts
/// and displacements are 32-bit, so larger exchanges run in rounds of at most this many,
/// well under 2^31.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) const SHARD_CHUNK_ELEMENTS: usize = 1 << 30;

/// How many positions a walk of per-head weights (decision 55) takes in one group: every
/// head of a group is walked while its rows are in the L1 / L2 cache (32 rows of 256 bytes:
/// 8 KiB).
pub(crate) const HEAD_GROUP_ENTRIES: usize = 32;

/// The most bytes of a row that a walk of per-head weights asks for at once.
pub(crate) const HEAD_ROW_MAX_BYTES: usize = 1024;

/// The points of one job of an interpolating gather walked by planes (`sample`): its
/// corners (12 bytes each, 4 to 16 per point) stay in the L1 cache while every channel
/// reads them.
pub(crate) const SAMPLE_BLOCK: usize = 512;

/// The channels of an NCHW input staged as rows per job of `sample`'s forward: a line per
/// pixel, so that a point's corners are 4 lines.
pub(crate) const SAMPLE_STAGE_BYTES: usize = 64;
