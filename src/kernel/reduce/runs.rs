//! Segments of contiguous rows (a row is one run of elements in both the input and the
//! output: axis 0 of a standard-layout table, the embedding bag's and the graph's case):
//! the pooling chosen once per chunk of segments, the row loop on slices, compiled for
//! the CPU's widest instruction set ([`Isa`]), so that it vectorizes. Sorted segments
//! accumulate blocks of up to [`REDUCE_BLOCK`] columns in locals (registers: a row's sum
//! is not stored and reloaded at every position, and fewer instructions per position let
//! the CPU overlap more rows' misses); what each pooling does to a row is in
//! [`ops`](super::ops). Both walks (segments as ranges, and by ids) run here for such
//! rows; other layouts run on [`Pooler`]'s lanes.

use std::ops::Range;

use super::ops::{RowOp, WithOp, with_op};
use super::pool::{End, divide_row};
use super::{Entries, Geometry, Pooler, Source, Tally, walk_span};
use crate::index::GatherIndex;
use crate::kernel::BadIndex;
use crate::kernel::isa::Isa;
use crate::kernel::prefetch::prefetch_block;
use crate::plan::policy::{REDUCE_BLOCK, REDUCE_PREFETCH_MAX_BYTES};
use crate::pool::PoolElement;

/// A walk over rows that are single runs: `walk` is inlined into each instruction-set
/// variant, for each pooling's op.
pub(super) trait Walker<A>: Sync {
    /// # Safety
    /// `g`'s rows are single runs (`outer` empty, unit lane strides, the argmax array, if
    /// any, with the output's strides, its positions below `u32::MAX`, and the walk
    /// [`Sorted`]); the walk's segments are below `g.segments` and this thread's alone.
    unsafe fn walk<Op: RowOp<A>>(&self, g: &Geometry<A>, p: &Pooler<'_, A>) -> Result<(), BadIndex>;
}

/// Runs `w` with the op of `p`'s pooling, compiled for `isa`.
///
/// # Safety
/// The contract of [`Walker::walk`]; `isa` runs on this CPU.
pub(super) unsafe fn dispatch<A: PoolElement, W: Walker<A>>(
    isa: Isa,
    g: &Geometry<A>,
    p: &Pooler<'_, A>,
    w: &W,
) -> Result<(), BadIndex> {
    /// The walk, its op chosen (`with_op`).
    struct Run<'r, 'w, A, W> {
        isa: Isa,
        g: &'r Geometry<A>,
        p: &'r Pooler<'w, A>,
        w: &'r W,
    }
    impl<A: PoolElement, W: Walker<A>> WithOp<A> for Run<'_, '_, A, W> {
        type Out = Result<(), BadIndex>;
        #[inline(always)]
        fn run<Op: RowOp<A>>(self) -> Self::Out {
            // SAFETY: `dispatch`'s contract, forwarded; the op is the pooling's, its
            // weights' and argmax's (`with_op`).
            unsafe { with_isa::<A, W, Op>(self.isa, self.g, self.p, self.w) }
        }
    }
    with_op(
        p.pooling,
        p.weights.is_some(),
        !g.arg.is_null(),
        Run { isa, g, p, w },
    )
}

/// # Safety
/// As [`dispatch`].
#[inline(always)]
unsafe fn with_isa<A: PoolElement, W: Walker<A>, Op: RowOp<A>>(
    isa: Isa,
    g: &Geometry<A>,
    p: &Pooler<'_, A>,
    w: &W,
) -> Result<(), BadIndex> {
    // SAFETY: (every arm) the CPU has the variant's features (the caller's `isa`); the
    // rest is forwarded.
    unsafe {
        match isa {
            Isa::Base => w.walk::<Op>(g, p),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => walk_avx2::<A, W, Op>(g, p, w),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => walk_avx512::<A, W, Op>(g, p, w),
        }
    }
}

/// [`Walker::walk`] compiled for x86-64-v3 (AVX2, FMA, F16C: a `mul_add` is one instruction).
///
/// # Safety
/// As [`dispatch`], on a CPU with AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn walk_avx2<A: PoolElement, W: Walker<A>, Op: RowOp<A>>(
    g: &Geometry<A>,
    p: &Pooler<'_, A>,
    w: &W,
) -> Result<(), BadIndex> {
    // SAFETY: forwarded.
    unsafe { w.walk::<Op>(g, p) }
}

/// [`Walker::walk`] compiled for AVX-512.
///
/// # Safety
/// As [`dispatch`], on a CPU with AVX-512 F, VL, DQ and BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
unsafe fn walk_avx512<A: PoolElement, W: Walker<A>, Op: RowOp<A>>(
    g: &Geometry<A>,
    p: &Pooler<'_, A>,
    w: &W,
) -> Result<(), BadIndex> {
    // SAFETY: forwarded.
    unsafe { w.walk::<Op>(g, p) }
}

/// Where a position's row goes: its segment's output block `o` (and argmax block `a`,
/// where the op keeps one), the pooling, the position, and the segment's tally.
pub(crate) struct Slot<'s, 'w, A> {
    pub p: &'s Pooler<'w, A>,
    pub o: &'s mut [A],
    pub a: &'s mut [u32],
    pub pos: usize,
    pub tally: &'s mut Tally<A>,
}

impl<A: PoolElement> Slot<'_, '_, A> {
    /// Combines row `x` (the block's columns) into the block as the segment's next
    /// contribution, weighted by `w`, and counts it.
    #[inline(always)]
    pub fn pool<Op: RowOp<A>>(self, x: &[A], w: &A) {
        // Positions fit `u32` where there is an argmax (the walk's contract).
        if self.tally.count == 0 {
            Op::first(self.o, x, w, self.a, self.pos as u32);
        } else {
            Op::next(self.o, x, w, self.a, self.pos as u32);
        }
        self.tally.push(Op::WEIGHTED, w);
    }

    /// The position's weight where `Op` is weighted, else one.
    #[inline(always)]
    pub fn weight<Op: RowOp<A>>(&self) -> A {
        self.p.weight_of(Op::WEIGHTED, self.pos)
    }
}

/// Where a sorted walk's rows come from: the input array of the [`Geometry`]
/// ([`Input`]), or another source of rows of `A` (quantized rows: [`Quantized`]) that the
/// same walk, blocks and poolings read. A source other than the input is read only where
/// rows are single runs.
pub(crate) trait RowSource<A>: Sync {
    /// Whether the rows are the geometry's input (any layout, through the lanes' loops).
    const INPUT: bool;
    /// Asks for `bytes` bytes' worth of row `r`'s columns from `c`.
    fn prefetch(&self, g: &Geometry<A>, r: usize, c: usize, bytes: usize);
    /// Combines columns `c..c + to.o.len()` of row `r` into `to` (its position's
    /// contribution to its segment).
    ///
    /// # Safety
    /// The contract of [`Walker::walk`]; `r < g.rows`, `c + to.o.len()` at most the row's
    /// length.
    unsafe fn combine<Op: RowOp<A>>(&self, g: &Geometry<A>, r: usize, c: usize, to: Slot<'_, '_, A>);
}

/// The geometry's own input rows.
pub(super) struct Input;

impl<A: PoolElement> RowSource<A> for Input {
    const INPUT: bool = true;

    #[inline(always)]
    fn prefetch(&self, g: &Geometry<A>, r: usize, c: usize, bytes: usize) {
        prefetch_block(g.x_row(r).wrapping_add(c), bytes);
    }

    #[inline(always)]
    unsafe fn combine<Op: RowOp<A>>(&self, g: &Geometry<A>, r: usize, c: usize, to: Slot<'_, '_, A>) {
        // SAFETY: `r < rows`, so `to.o.len()` elements from column `c` are its row's (the
        // caller's contract).
        let x = unsafe { std::slice::from_raw_parts(g.x_row(r).add(c), to.o.len()) };
        let w = to.weight::<Op>();
        to.pool::<Op>(x, &w);
    }
}

/// The rows of `g` as slices: input row `r`, output row of segment `s`.
///
/// # Safety
/// The contract of [`Walker::walk`]; `r < rows`, `s < segments`, and segment `s` is this
/// thread's alone; the caller drops the slices before it builds another of row `s`.
#[inline(always)]
unsafe fn rows_of<'b, A>(g: &Geometry<A>, r: usize, s: usize) -> (&'b [A], &'b mut [A]) {
    let len = g.lane.len;
    // SAFETY: single runs of `len` elements (the contract of `Geometry` and of the
    // caller), the output's this thread's alone.
    unsafe {
        (
            std::slice::from_raw_parts(g.x_row(r), len),
            std::slice::from_raw_parts_mut(g.out_row(s).0, len),
        )
    }
}

/// Ends segment `s`'s rows as [`Pooler::finish`] does, a division on the row as a slice
/// (so that it vectorizes).
///
/// # Safety
/// The contract of [`Walker::walk`]; `s < segments` is this thread's.
#[inline(always)]
unsafe fn end_row<A: PoolElement>(g: &Geometry<A>, p: &Pooler<'_, A>, s: usize, tally: &Tally<A>) {
    let (o, a) = g.out_row(s);
    match p.end(tally) {
        End::Keep => {}
        End::Divide(d) => {
            // SAFETY: segment `s`'s output row, a run of `len` elements, this thread's.
            divide_row(
                unsafe { std::slice::from_raw_parts_mut(o, g.lane.len) },
                &d,
                p.integral,
            );
        }
        // SAFETY: as above.
        End::Fill | End::Zero => unsafe { p.finish(g, o, a, tally) },
    }
}

/// Widens the positions `arg` (a block's or the tail's argmax) into the `usize` argmax
/// output at `a`.
///
/// # Safety
/// `a` starts `arg.len()` elements of an argmax row this thread alone writes.
#[inline(always)]
unsafe fn widen(a: *mut usize, arg: &[u32]) {
    // SAFETY: the caller's.
    let a = unsafe { std::slice::from_raw_parts_mut(a, arg.len()) };
    for (a, &v) in a.iter_mut().zip(arg) {
        *a = v as usize;
    }
}

/// Segments that are ranges of entries (`sorted`): `segs` of `e`, rows from `rows`.
pub(super) struct Sorted<'e, E, R> {
    pub e: &'e E,
    pub segs: Range<usize>,
    pub rows: &'e R,
}

impl<A: PoolElement, E: Entries, R: RowSource<A>> Walker<A> for Sorted<'_, E, R> {
    #[inline(always)]
    unsafe fn walk<Op: RowOp<A>>(&self, g: &Geometry<A>, p: &Pooler<'_, A>) -> Result<(), BadIndex> {
        let len = g.lane.len;
        // The argmax of the tail columns (widened into the output at a segment's end).
        let mut arg = vec![0u32; if Op::ARG { len % (REDUCE_BLOCK / 4) } else { 0 }];
        for s in self.segs.clone() {
            // Blocks of columns accumulate in registers (whole blocks, then a half and a
            // quarter block, so that rows of 16 or 32 columns have one too), the rest
            // of the row in place.
            let mut c = 0;
            let mut tally = None;
            // Argmax blocks are a quarter block wide, repeated: LLVM keeps 16 values and
            // their 16 positions in registers, where it keeps arrays of 32 in memory.
            while !Op::ARG && c + REDUCE_BLOCK <= len {
                // SAFETY: columns `c..c + REDUCE_BLOCK` of the rows (the contract).
                tally = Some(unsafe { self.block::<A, Op, REDUCE_BLOCK>(g, p, s, c) }?);
                c += REDUCE_BLOCK;
            }
            if !Op::ARG && c + REDUCE_BLOCK / 2 <= len {
                // SAFETY: as above.
                tally = Some(unsafe { self.block::<A, Op, { REDUCE_BLOCK / 2 }>(g, p, s, c) }?);
                c += REDUCE_BLOCK / 2;
            }
            while c + REDUCE_BLOCK / 4 <= len {
                // SAFETY: as above.
                tally = Some(unsafe { self.block::<A, Op, { REDUCE_BLOCK / 4 }>(g, p, s, c) }?);
                c += REDUCE_BLOCK / 4;
            }
            let tally = match tally {
                Some(t) if c == len => t,
                // SAFETY: the columns from `c` (the contract).
                _ => unsafe { self.tail::<A, Op>(g, p, s, c, &mut arg) }?,
            };
            // SAFETY: segment `s`'s rows (as above).
            unsafe { end_row(g, p, s, &tally) };
        }
        Ok(())
    }
}

impl<E: Entries, R> Sorted<'_, E, R> {
    /// Segment `s`'s positions in order: asks for `bytes` bytes from column `c` of the
    /// row `g.ahead` positions on, and calls `f(r, pos)` with each position's row
    /// (checked below `g.rows`), skipped positions left out.
    #[inline(always)]
    fn each_row<A>(
        &self,
        g: &Geometry<A>,
        s: usize,
        c: usize,
        bytes: usize,
        mut f: impl FnMut(usize, usize),
    ) -> Result<(), BadIndex>
    where
        R: RowSource<A>,
    {
        let (e, total) = (self.e, self.e.len());
        for k in e.segment(s) {
            if k + g.ahead < total {
                self.rows.prefetch(g, e.peek(k + g.ahead), c, bytes);
            }
            let Some((r, pos)) = e.entry(k) else { continue };
            if r >= g.rows {
                return Err(BadIndex);
            }
            f(r, pos);
        }
        Ok(())
    }

    /// Columns `c..c + K` of segment `s`'s row, accumulated in locals over the segment's
    /// positions and stored once (the argmax widened on the way); the segment's tally.
    /// Each block asks for its own columns of the rows ahead.
    ///
    /// # Safety
    /// The contract of [`Walker::walk`], `s` one of this walk's segments, `c + K` at most
    /// the row's length.
    #[inline(always)]
    unsafe fn block<A: PoolElement, Op: RowOp<A>, const K: usize>(
        &self,
        g: &Geometry<A>,
        p: &Pooler<'_, A>,
        s: usize,
        c: usize,
    ) -> Result<Tally<A>, BadIndex>
    where
        R: RowSource<A>,
    {
        let mut acc: [A; K] = std::array::from_fn(|_| A::zero());
        let mut arg = [0u32; K];
        let mut tally = Tally::new();
        self.each_row(
            g,
            s,
            c,
            K * size_of::<A>(),
            #[inline(always)]
            |r, pos| {
                // SAFETY: `r < rows`, and `K` columns from `c` are the row's (the contract).
                unsafe {
                    let to = Slot {
                        p,
                        o: &mut acc,
                        a: &mut arg,
                        pos,
                        tally: &mut tally,
                    };
                    self.rows.combine::<Op>(g, r, c, to)
                };
            },
        )?;
        if tally.count > 0 {
            let (o, a) = g.out_row(s);
            // SAFETY: `K` elements from column `c` of segment `s`'s output (and argmax)
            // row, this thread's (the contract).
            let o = unsafe { std::slice::from_raw_parts_mut(o.add(c), K) };
            for (o, v) in o.iter_mut().zip(acc) {
                *o = v;
            }
            if Op::ARG {
                // SAFETY: as above.
                unsafe { widen(a.add(c), &arg) };
            }
        }
        Ok(tally)
    }

    /// The columns from `c` of segment `s`'s row (fewer than a block), accumulated in
    /// place (the output row stays in the L1 cache) with argmax row `arg`; the segment's
    /// tally. Asks for those columns of the rows ahead.
    ///
    /// # Safety
    /// As [`Sorted::block`], `c` at most the row's length.
    #[inline(always)]
    unsafe fn tail<A: PoolElement, Op: RowOp<A>>(
        &self,
        g: &Geometry<A>,
        p: &Pooler<'_, A>,
        s: usize,
        c: usize,
        arg: &mut [u32],
    ) -> Result<Tally<A>, BadIndex>
    where
        R: RowSource<A>,
    {
        let mut tally = Tally::new();
        let bytes = ((g.lane.len - c) * size_of::<A>()).min(REDUCE_PREFETCH_MAX_BYTES);
        self.each_row(
            g,
            s,
            c,
            bytes,
            #[inline(always)]
            |r, pos| {
                // SAFETY: segment `s`'s output row, a run of the row's length, this
                // thread's (the contract); `r < rows` and the columns from `c` are its.
                unsafe {
                    let o = std::slice::from_raw_parts_mut(g.out_row(s).0, g.lane.len);
                    let to = Slot {
                        p,
                        o: &mut o[c..],
                        a: &mut *arg,
                        pos,
                        tally: &mut tally,
                    };
                    self.rows.combine::<Op>(g, r, c, to);
                }
            },
        )?;
        if Op::ARG && tally.count > 0 {
            // SAFETY: the columns from `c` of segment `s`'s argmax row, a run of the
            // row's length, this thread's (the contract).
            unsafe { widen(g.out_row(s).1.add(c), arg) };
        }
        Ok(tally)
    }
}

/// One id per position (`by_ids`): the segments `span`, every position walked. No argmax
/// (the segments' rows interleave; an argmax by ids runs on [`Pooler`]'s lanes).
pub(super) struct ById<'a, S, J> {
    pub rows: &'a S,
    pub ids: &'a [J],
    /// The span's positions, if sorted by span (else every position is read).
    pub order: Option<&'a [u32]>,
    pub span: Range<usize>,
}

impl<A: PoolElement, S: Source, J: GatherIndex> Walker<A> for ById<'_, S, J> {
    #[inline(always)]
    unsafe fn walk<Op: RowOp<A>>(&self, g: &Geometry<A>, p: &Pooler<'_, A>) -> Result<(), BadIndex> {
        walk_span(
            g,
            self.rows,
            self.ids,
            self.order,
            self.span.clone(),
            |r, s, q, tally| {
                // SAFETY: `r < rows`, `s` in this walk's span (the contract).
                let (x, o) = unsafe { rows_of(g, r, s) };
                let to = Slot {
                    p,
                    o,
                    a: &mut [],
                    pos: q,
                    tally,
                };
                let w = to.weight::<Op>();
                to.pool::<Op>(x, &w);
            },
            |s, tally| {
                // SAFETY: segment `s`'s rows, in this walk's span.
                unsafe { end_row(g, p, s, tally) };
            },
        )
    }
}
