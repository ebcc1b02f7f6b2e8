//! Quantized rows as a row source of the sorted walk (decision 47): each position's row
//! read once, as bytes, its values made `f32` in registers, no dequantized copy. `Sum`
//! (and `Mean` / `SqrtN`, which divide it) adds in FBGEMM's order, per position
//! `out = fma(w * scale, q, out + w * bias)` from zero; the other poolings see each value
//! as `fma(scale, q, bias)`. Rows of 2-byte floats ([`Halves`]) are widened to `f32` in
//! registers and pooled as the `f32` rows they equal.

use super::Geometry;
use super::ops::RowOp;
use super::runs::{RowSource, Slot};
use crate::half_bits::widen_f16;
#[cfg(feature = "half")]
use crate::half_bits::{widen_bf16, widen_f16_row};
#[cfg(feature = "half")]
use crate::kernel::isa::Isa;
use crate::kernel::prefetch::prefetch_block;
use crate::plan::policy::REDUCE_BLOCK;

/// Rows of bytes in a rowwise layout: row `r` starts at `base + r * stride` and holds
/// `values` values of `BITS` bits, packed low bits first, then its scale and bias (`f32`
/// for 8 bits, half floats otherwise). (`BITS` is a constant, so that each layout's loops
/// are compiled apart and vectorize.)
///
/// The contract (its builder's, `quant::QTable`): every row below the walk's `rows` is
/// `row_bytes` readable bytes from its start.
pub(crate) struct Quantized<const BITS: usize> {
    pub base: *const u8,
    pub stride: isize,
    pub values: usize,
}

// SAFETY: the walk's threads only read the rows (shared bytes, `&[u8]`).
unsafe impl<const BITS: usize> Sync for Quantized<BITS> {}

impl<const BITS: usize> Quantized<BITS> {
    /// The bytes of a row.
    #[inline(always)]
    pub fn row_bytes(&self) -> usize {
        self.values * BITS / 8 + if BITS == 8 { 8 } else { 4 }
    }

    /// Row `r`'s bytes.
    ///
    /// # Safety
    /// `r` is a row of the contract.
    #[inline(always)]
    unsafe fn row(&self, r: usize) -> &[u8] {
        // SAFETY: the contract: `row_bytes` readable bytes from the row's start.
        unsafe { std::slice::from_raw_parts(self.base.offset(r as isize * self.stride), self.row_bytes()) }
    }
}

/// One row's bytes in the layout of `values` values of `BITS` bits (decision 45): the one
/// reader of the layout, for the walk's rows and for dequantized rows.
pub(crate) struct QRow<'r, const BITS: usize> {
    pub bytes: &'r [u8],
    pub values: usize,
}

impl<const BITS: usize> QRow<'_, BITS> {
    /// The row's scale and bias, after its values.
    #[inline(always)]
    fn scale_bias(&self) -> (f32, f32) {
        let (row, at) = (self.bytes, self.values * BITS / 8);
        if BITS == 8 {
            let word = |i: usize| f32::from_le_bytes([row[i], row[i + 1], row[i + 2], row[i + 3]]);
            (word(at), word(at + 4))
        } else {
            let half = |i: usize| widen_f16(u16::from_le_bytes([row[i], row[i + 1]]));
            (half(at), half(at + 2))
        }
    }

    /// The quantized values of columns `c..c + x.len()` (at most a register block's), in
    /// order, into `x`. Where `c` and the length are whole bytes' (a block of 16 columns
    /// and more), each byte's fields are spread into the bytes of one little-endian word
    /// (its columns' order) by shifts and masks, and the words' bytes widened: loops
    /// that vectorize, no shuffle (a field at a time per byte compiled to scalar code,
    /// Int4 rows slower than `f32` ones). Otherwise one value at a time (the small blocks
    /// of Miri's and fuzzing's sizes).
    #[inline(always)]
    fn widen(&self, c: usize, x: &mut [f32]) {
        let row = self.bytes;
        let n = x.len();
        let per = 8 / BITS;
        if BITS == 8 {
            for (x, &q) in x.iter_mut().zip(&row[c..c + n]) {
                *x = f32::from(q);
            }
        } else if c.is_multiple_of(per) && n.is_multiple_of(per) {
            let mut q = [0u8; REDUCE_BLOCK];
            let bytes = &row[c / per..(c + n) / per];
            if BITS == 4 {
                for (q, &b) in q.chunks_exact_mut(2).zip(bytes) {
                    let word = u16::from(b & 0x0f) | u16::from(b >> 4) << 8;
                    q.copy_from_slice(&word.to_le_bytes());
                }
            } else {
                for (q, &b) in q.chunks_exact_mut(4).zip(bytes) {
                    let b = u32::from(b);
                    let word = (b & 3) | (b >> 2 & 3) << 8 | (b >> 4 & 3) << 16 | (b >> 6) << 24;
                    q.copy_from_slice(&word.to_le_bytes());
                }
            }
            for (x, &q) in x.iter_mut().zip(&q) {
                *x = f32::from(q);
            }
        } else {
            let mask = ((1u16 << BITS) - 1) as u8;
            for (x, j) in x.iter_mut().zip(c..c + n) {
                *x = f32::from((row[j / per] >> (j % per * BITS)) & mask);
            }
        }
    }

    /// The row's values, `fma(scale, q, bias)` each, into `out` (`values` long).
    #[inline(always)]
    pub fn decode(&self, out: &mut [f32]) {
        let (scale, bias) = self.scale_bias();
        for (at, out) in (0..).step_by(REDUCE_BLOCK).zip(out.chunks_mut(REDUCE_BLOCK)) {
            self.widen(at, out);
            for o in out {
                *o = scale.mul_add(*o, bias);
            }
        }
    }
}

impl<const BITS: usize> RowSource<f32> for Quantized<BITS> {
    const INPUT: bool = false;

    #[inline(always)]
    fn prefetch(&self, _: &Geometry<f32>, r: usize, c: usize, bytes: usize) {
        // The columns' bytes (a quarter or an eighth of `f32`'s, and the scale and bias
        // at the row's end, which the first block reads): the whole row for short ones.
        let from = c * BITS / 8;
        let len = (bytes * BITS / 32).max(1).min(self.row_bytes() - from);
        let at = self
            .base
            .wrapping_offset(r as isize * self.stride)
            .wrapping_add(from);
        prefetch_block(at, if c == 0 { self.row_bytes() } else { len });
    }

    #[inline(always)]
    unsafe fn combine<Op: RowOp<f32>>(&self, _: &Geometry<f32>, r: usize, c: usize, to: Slot<'_, '_, f32>) {
        // SAFETY: `r` below the walk's rows (the caller's contract), rows of the contract.
        let bytes = unsafe { self.row(r) };
        let row = QRow::<BITS> {
            bytes,
            values: self.values,
        };
        let (scale, bias) = row.scale_bias();
        let w = to.weight::<Op>();
        if Op::SUM {
            // FBGEMM's order, each position `fma(w * scale, q, out + w * bias)`, from zero
            // (a caller's output row holds anything before a segment's first position).
            if to.tally.count == 0 {
                to.o.fill(0.0);
            }
            let (ws, wb) = (w * scale, w * bias);
            // (Unpacked into a block first, so that the sum's loop is one of slices; a
            // walk's block is one chunk of a length the compiler knows.)
            let mut x = [0.0f32; REDUCE_BLOCK];
            let (mut at, n) = (0, to.o.len());
            while at < n {
                let o = &mut to.o[at..(at + REDUCE_BLOCK).min(n)];
                row.widen(c + at, &mut x[..o.len()]);
                for (o, &q) in o.iter_mut().zip(&x) {
                    *o = ws.mul_add(q, *o + wb);
                }
                at += REDUCE_BLOCK;
            }
            to.tally.push(Op::WEIGHTED, &w);
        } else {
            // Each value `fma(scale, q, bias)`, then the pooling's own step.
            pool_widened::<Op>(to, w, |at, x| {
                row.widen(c + at, x);
                for x in x {
                    *x = scale.mul_add(*x, bias);
                }
            });
        }
    }
}

/// Pools the values of a row that is not `f32`, made `f32` in blocks of at most a register
/// block's columns by `widen(at, x)` (the call's columns `at..at + x.len()`), with `Op`'s
/// own step: the `f32` rows' poolings, in registers, for every other source.
#[inline(always)]
fn pool_widened<Op: RowOp<f32>>(to: Slot<'_, '_, f32>, w: f32, mut widen: impl FnMut(usize, &mut [f32])) {
    let mut x = [0.0f32; REDUCE_BLOCK];
    let (n, first) = (to.o.len(), to.tally.count == 0);
    let mut at = 0;
    while at < n {
        let len = (n - at).min(REDUCE_BLOCK);
        widen(at, &mut x[..len]);
        let arg = if Op::ARG {
            &mut to.a[at..at + len]
        } else {
            &mut [][..]
        };
        // Positions fit `u32` where there is an argmax (the walk's contract).
        let (o, x, pos) = (&mut to.o[at..at + len], &x[..len], to.pos as u32);
        if first {
            Op::first(o, x, &w, arg, pos);
        } else {
            Op::next(o, x, &w, arg, pos);
        }
        at += len;
    }
    to.tally.push(Op::WEIGHTED, &w);
}

#[cfg(feature = "half")]
/// Rows of 2-byte floats (`BF`: bfloat16, else IEEE half): row `r`'s values are
/// contiguous from `base + r * stride` (elements).
///
/// The contract (its builder's, `quant::QTable`): every row below the walk's `rows` is
/// the walk's row length (the geometry's lane) of readable `u16`s from its start.
pub(crate) struct Halves<const BF: bool> {
    pub base: *const u16,
    pub stride: isize,
    /// The walk's tier (F16C widens the rows on the AVX2 and AVX-512 ones).
    pub isa: Isa,
}

// SAFETY: the walk's threads only read the rows (shared `&[u16]`).
#[cfg(feature = "half")]
unsafe impl<const BF: bool> Sync for Halves<BF> {}

#[cfg(feature = "half")]
impl<const BF: bool> RowSource<f32> for Halves<BF> {
    const INPUT: bool = false;

    #[inline(always)]
    fn prefetch(&self, _: &Geometry<f32>, r: usize, c: usize, bytes: usize) {
        let at = self
            .base
            .wrapping_offset(r as isize * self.stride)
            .wrapping_add(c);
        prefetch_block(at, (bytes / 2).max(1));
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn combine<Op: RowOp<f32>>(&self, _: &Geometry<f32>, r: usize, c: usize, to: Slot<'_, '_, f32>) {
        // SAFETY: `r` below the walk's rows (the caller's contract) and `c + o.len()` at
        // most the row's length: columns of the row of the contract.
        let row = unsafe {
            std::slice::from_raw_parts(self.base.offset(r as isize * self.stride).add(c), to.o.len())
        };
        let w = to.weight::<Op>();
        // Each block of values widened in registers, then the pooling's own `f32` step.
        pool_widened::<Op>(to, w, |at, x| {
            if BF {
                x.iter_mut()
                    .zip(&row[at..])
                    .for_each(|(x, &h)| *x = widen_bf16(h));
            } else {
                widen_f16_row(self.isa, &row[at..], x);
            }
        });
    }
}
