//! One row quantized (decision 46), as FBGEMM's reference quantizers do it, bit for bit:
//! its smallest and largest values, its scale and bias, each value rounded to the nearest
//! integer, ties to even.

use ndarray::{ArrayRef, Ix2};

use super::Rowwise;
use crate::half_bits::{from_f16, to_f16};
use crate::kernel::BadIndex;

/// Rows `rows` of `table` quantized into `to` (their bytes, back to back); `Err` at the
/// first row with a value that is not finite.
#[inline(always)]
pub(super) fn quantize_rows<const AVX2: bool>(
    layout: Rowwise,
    table: &ArrayRef<f32, Ix2>,
    rows: std::ops::Range<usize>,
    to: &mut [u8],
) -> Result<(), BadIndex> {
    let bytes = layout.row_bytes(table.ncols());
    let (mut buf, mut values) = (Vec::new(), vec![0; table.ncols()]);
    for (r, q) in rows.zip(to.chunks_exact_mut(bytes)) {
        let row = table.row(r);
        let x = match row.as_slice() {
            Some(x) => x,
            None => {
                buf.clear();
                buf.extend(row.iter().copied());
                &buf[..]
            }
        };
        #[cfg(target_arch = "x86_64")]
        let found = if AVX2 {
            // SAFETY: `AVX2` is instantiated only by `quantize_rows_avx2`, on a CPU with it.
            unsafe { min_max_avx2(x) }
        } else {
            min_max(x)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let found = min_max(x);
        let (min, max) = found.ok_or(BadIndex)?;
        match layout {
            Rowwise::Int8 => quantize_int8(x, q, min, max),
            _ => quantize_nbit(layout.bits(), x, q, min, max, &mut values),
        }
    }
    Ok(())
}

/// [`quantize_rows`] compiled for AVX2 (eight lanes where the baseline has four).
///
/// # Safety
/// The CPU has AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quantize_rows_avx2(
    layout: Rowwise,
    table: &ArrayRef<f32, Ix2>,
    rows: std::ops::Range<usize>,
    to: &mut [u8],
) -> Result<(), BadIndex> {
    quantize_rows::<true>(layout, table, rows, to)
}

/// [`min_max`] eight lanes at a time in AVX registers (`vminps` / `vmaxps`: for finite
/// values they differ from the ordered compare only between `0.0` and `-0.0`, which the
/// ordered pass after them settles, as in [`min_max`]).
///
/// # Safety
/// The CPU has AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn min_max_avx2(x: &[f32]) -> Option<(f32, f32)> {
    use std::arch::x86_64::*;
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    if x.len() < 8 {
        return min_max(x);
    }
    let (mut lo, mut hi) = (_mm256_set1_ps(x[0]), _mm256_set1_ps(x[0]));
    let (sign, inf) = (_mm256_set1_ps(-0.0), _mm256_set1_ps(f32::INFINITY));
    let mut finite = _mm256_set1_ps(f32::from_bits(u32::MAX));
    for c in chunks {
        // SAFETY: a chunk of 8 `f32`s, read unaligned.
        let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
        lo = _mm256_min_ps(lo, v);
        hi = _mm256_max_ps(hi, v);
        // |v| < inf: false for infinities and NaN.
        finite = _mm256_and_ps(
            finite,
            _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_andnot_ps(sign, v), inf),
        );
    }
    if _mm256_movemask_ps(finite) != 0xff || !rest.iter().all(|v| v.is_finite()) {
        return None;
    }
    let (mut l, mut h) = ([0.0f32; 8], [0.0f32; 8]);
    // SAFETY: eight `f32`s each, stored unaligned.
    unsafe {
        _mm256_storeu_ps(l.as_mut_ptr(), lo);
        _mm256_storeu_ps(h.as_mut_ptr(), hi);
    }
    Some(settle(x, l, h, rest))
}

/// 2^23: a value in `0..2^23` added to it leaves its nearest integer (ties to even, as
/// `lrintf` in the default rounding mode) in the low bits of the sum, with no rounding
/// instruction (which the baseline x86-64 lacks: a call per value).
const MAGIC: f32 = 8_388_608.0;

/// The nearest integer to `x` (in `0..2^23`), ties to even, modulo 256.
#[inline(always)]
fn round_byte(x: f32) -> u8 {
    (x + MAGIC).to_bits() as u8
}

/// A row of `Int8` (its smallest and largest values `min`, `max`): its values' bytes, then
/// scale and bias (`f32`, little-endian).
#[inline(always)]
fn quantize_int8(x: &[f32], q: &mut [u8], min: f32, max: f32) {
    let d = x.len();
    let range = max - min;
    let inverse = 255.0 / (range + 1e-8);
    // (`(x - min) * inverse` lies in 0..=255 for finite values: rounded as `lrintf`.)
    for (q, &v) in q.iter_mut().zip(x) {
        *q = round_byte((v - min) * inverse);
    }
    q[d..d + 4].copy_from_slice(&(range / 255.0).to_le_bytes());
    q[d + 4..d + 8].copy_from_slice(&min.to_le_bytes());
}

/// A row of `bits`-bit values, packed low bits first, then scale and bias (half floats,
/// little-endian); `values` holds the row's values unpacked on the way (one pass that
/// vectorizes, then the packing).
#[inline(always)]
fn quantize_nbit(bits: usize, x: &[f32], q: &mut [u8], min: f32, max: f32, values: &mut [u8]) {
    let per_byte = 8 / bits;
    let packed = x.len() / per_byte;
    let min_h = to_f16(min);
    let min = from_f16(min_h);
    let range = max - min;
    let top = ((1 << bits) - 1) as f32;
    let scale = if range == 0.0 { 1.0 } else { range / top };
    let mut scale = from_f16(to_f16(scale));
    if scale == 0.0 {
        scale = 1.0;
    }
    let mut inverse = 1.0 / scale;
    if inverse.is_infinite() {
        (scale, inverse) = (1.0, 1.0);
    }
    // Clamped before rounding, which is the same as after for a whole `top`; a NaN (an
    // infinite scale's `0 * inf`) clamps to 0, as C's conversion of it did here.
    for (v, &x) in values.iter_mut().zip(x) {
        *v = round_byte(((x - min) * inverse).clamp(0.0, top).max(0.0));
    }
    if bits == 4 {
        for (b, v) in q[..packed].iter_mut().zip(values.chunks_exact(2)) {
            *b = v[0] | v[1] << 4;
        }
    } else {
        for (b, v) in q[..packed].iter_mut().zip(values.chunks_exact(4)) {
            *b = v[0] | v[1] << 2 | v[2] << 4 | v[3] << 6;
        }
    }
    q[packed..packed + 2].copy_from_slice(&to_f16(scale).to_le_bytes());
    q[packed + 2..packed + 4].copy_from_slice(&min_h.to_le_bytes());
}

/// The first smallest and largest values (`std::min_element` / `max_element`), and
/// whether every value is finite (`None` if one is not); 0 and 0 for no values. Eight
/// lanes side by side in one pass (so that it vectorizes), then the lanes: the same
/// values as one ordered pass, but for which zero is kept where `0.0` and `-0.0` tie, so a
/// zero is found again in order.
#[inline(always)]
fn min_max(x: &[f32]) -> Option<(f32, f32)> {
    let Some(&first) = x.first() else {
        return Some((0.0, 0.0));
    };
    let (mut lo, mut hi, mut ok) = ([first; 8], [first; 8], [true; 8]);
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    // (For finite values `f32::min` / `max` differ from the first-kept compare only
    // between `0.0` and `-0.0`, which `settle` settles.)
    for c in chunks {
        for k in 0..8 {
            lo[k] = lo[k].min(c[k]);
            hi[k] = hi[k].max(c[k]);
            ok[k] &= c[k].is_finite();
        }
    }
    if !(ok.iter().all(|&o| o) && rest.iter().all(|v| v.is_finite())) {
        return None;
    }
    Some(settle(x, lo, hi, rest))
}

/// The smallest and largest of `x` (finite values, at least one) from eight lanes' `lo`
/// and `hi` and the values `rest` past them: by value, then, where that value is a zero,
/// the first zero in order (`0.0` and `-0.0` compare equal, and `std::min_element` keeps
/// the first).
#[inline(always)]
fn settle(x: &[f32], lo: [f32; 8], hi: [f32; 8], rest: &[f32]) -> (f32, f32) {
    let mut min = lo.iter().chain(rest).fold(lo[0], |m, &v| m.min(v));
    let mut max = hi.iter().chain(rest).fold(hi[0], |m, &v| m.max(v));
    let pick = |a: f32, b: f32, take: bool| if take { b } else { a };
    if min == 0.0 {
        min = x.iter().fold(x[0], |m, &v| pick(m, v, v < m));
    }
    if max == 0.0 {
        max = x.iter().fold(x[0], |m, &v| pick(m, v, v > m));
    }
    (min, max)
}
