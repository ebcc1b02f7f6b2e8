//! IEEE half-precision conversions (a leaf every layer may use), as FBGEMM's rowwise
//! layouts store their scale and bias:
//! round to nearest, ties to even (the `half` crate is optional: these are all the
//! quantizers and the half rows' walk need).

#[cfg(feature = "half")]
use crate::kernel::isa::Isa;

/// The half-precision bits nearest `x` (ties to even); overflow gives an infinity, NaN
/// stays NaN.
pub(crate) fn to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        // An infinity, or a NaN kept quiet.
        return sign | 0x7c00 | if man != 0 { 0x200 | (man >> 13) as u16 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // A half subnormal (or zero): the implicit bit made explicit, shifted down.
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let (r, rem, half) = (m >> shift, m & ((1 << shift) - 1), 1 << (shift - 1));
        let r = r + u32::from(rem > half || (rem == half && r & 1 == 1));
        return sign | r as u16;
    }
    let r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    // (A carry out of the mantissa steps the exponent: to the infinity, past the largest.)
    let r = r + u32::from(rem > 0x1000 || (rem == 0x1000 && r & 1 == 1));
    sign | r as u16
}

/// The value of the half-precision bits `h`, exactly; a NaN quiet, its payload kept (as
/// F16C's `vcvtph2ps` and the `half` crate widen it).
pub(crate) fn from_f16(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match exp {
        0x1f if man != 0 => f32::from_bits(sign | 0x7fc0_0000 | (man << 13)),
        0x1f => f32::from_bits(sign | 0x7f80_0000),
        // A subnormal: `man` units of 2^-24 (exact in f32).
        0 => {
            let v = man as f32 * (1.0 / 16_777_216.0);
            if sign != 0 { -v } else { v }
        }
        _ => f32::from_bits(sign | ((exp + 112) << 23) | (man << 13)),
    }
}

/// [`from_f16`] without a branch, so that a row's loop of it vectorizes: the bits moved
/// into `f32`'s places by one arithmetic shift (the sign stays at the top, the three bits
/// under it masked off) and scaled by `2^112` (exact, subnormals included), an all-ones
/// exponent made all ones (an infinity, or a NaN made quiet). (Quantized rows' scale and
/// bias too: a row's two of them took twenty instructions and branches.)
#[inline(always)]
pub(crate) fn widen_f16(h: u16) -> f32 {
    let moved = ((u32::from(h) << 16) as i32 >> 3) as u32 & 0x8fff_e000;
    if moved & 0x0f80_0000 == 0x0f80_0000 {
        let quiet = u32::from(moved & 0x007f_e000 != 0) << 22;
        f32::from_bits(moved | 0x7f80_0000 | quiet)
    } else {
        f32::from_bits(moved) * f32::from_bits(0x7780_0000)
    }
}

/// `x[i] = widen_f16(h[i])` for every `i` of `x` (`h` at least as long): eight at a time
/// with F16C's `vcvtph2ps` on the AVX2 and AVX-512 tiers (one instruction where the
/// portable widening takes eight; the same bits, NaNs quiet). `isa` runs on this CPU, as
/// [`on_tier`](crate::kernel::isa::on_tier)'s.
#[cfg(feature = "half")]
#[inline(always)]
pub(crate) fn widen_f16_row(isa: Isa, h: &[u16], x: &mut [f32]) {
    let h = &h[..x.len()];
    #[cfg(target_arch = "x86_64")]
    if isa > Isa::Base {
        // SAFETY: `isa` runs on this CPU (every `Isa` comes from `Isa::detect` or
        // `Isa::all_available`, which ask it), and both wider tiers have F16C and AVX.
        return unsafe { widen_f16c(h, x) };
    }
    let _ = isa;
    x.iter_mut().zip(h).for_each(|(x, &h)| *x = widen_f16(h));
}

/// [`widen_f16_row`] on F16C (inlined into the AVX2 and AVX-512 tiers' walks).
///
/// # Safety
/// The CPU has F16C and AVX; `h` is as long as `x`.
#[cfg(all(feature = "half", target_arch = "x86_64"))]
#[inline]
#[target_feature(enable = "avx,f16c")]
unsafe fn widen_f16c(h: &[u16], x: &mut [f32]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_storeu_ps};
    let (mut hs, mut xs) = (h.chunks_exact(8), x.chunks_exact_mut(8));
    for (h, x) in (&mut hs).zip(&mut xs) {
        // SAFETY: `h` is 8 `u16`s (16 bytes) to read, `x` 8 `f32`s to write, unaligned.
        unsafe {
            _mm256_storeu_ps(
                x.as_mut_ptr(),
                _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr().cast::<__m128i>())),
            )
        };
    }
    let rest = xs.into_remainder();
    rest.iter_mut()
        .zip(hs.remainder())
        .for_each(|(x, &h)| *x = widen_f16(h));
}

/// The value of the bfloat16 bits `h`: `f32`'s upper half.
#[cfg(feature = "half")]
#[inline(always)]
pub(crate) fn widen_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_half_converts_there_and_back() {
        for h in 0..=u16::MAX {
            let f = from_f16(h);
            if f.is_nan() {
                assert!(from_f16(to_f16(f)).is_nan(), "{h:#06x}");
            } else {
                assert_eq!(to_f16(f), h, "{h:#06x} = {f}");
            }
        }
    }

    #[test]
    fn the_branchless_widening_is_the_exact_one() {
        for h in 0..=u16::MAX {
            assert_eq!(widen_f16(h).to_bits(), from_f16(h).to_bits(), "{h:#06x}");
        }
        assert_eq!(
            from_f16(0x7c01).to_bits(),
            0x7fc0_2000,
            "a signalling NaN made quiet"
        );
        assert_eq!(from_f16(0xfc00), f32::NEG_INFINITY);
    }

    #[cfg(feature = "half")]
    #[test]
    fn every_tier_widens_rows_to_the_same_bits() {
        let h: Vec<u16> = (0..=u16::MAX).collect();
        let want: Vec<u32> = h.iter().map(|&h| from_f16(h).to_bits()).collect();
        for isa in Isa::all_available() {
            // Every length's remainder: rows of 1-17 values from every start.
            for len in 1..=17 {
                for (at, h) in h.chunks(len).enumerate() {
                    let mut x = vec![0.0f32; h.len()];
                    widen_f16_row(isa, h, &mut x);
                    for (i, x) in x.iter().enumerate() {
                        assert_eq!(x.to_bits(), want[at * len + i], "{:#06x}, {isa:?}", h[i]);
                    }
                }
            }
        }
    }

    #[test]
    fn floats_round_to_the_nearest_half_ties_to_even() {
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even (1); 1 + 3 * 2^-11: up.
        assert_eq!(to_f16(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(to_f16(1.0 + 3.0 / 2048.0), 0x3c02);
        assert_eq!(to_f16(65504.0), 0x7bff);
        assert_eq!(to_f16(65520.0), 0x7c00); // halfway to 2^16: even, the infinity
        assert_eq!(to_f16(-1e-8), 0x8000);
        assert_eq!(to_f16(5.960_464_5e-8), 0x0001); // 2^-24
        assert_eq!(to_f16(2.980_232_2e-8), 0x0000); // 2^-25: a tie, to even
        assert_eq!(to_f16(f32::NEG_INFINITY), 0xfc00);
        // Between neighbours, the nearer one.
        for h in 0x0001..0x7bfe_u16 {
            let (a, b) = (from_f16(h), from_f16(h + 1));
            let mid = a + (b - a) * 0.25;
            assert_eq!(to_f16(mid), h, "{h:#06x}");
            assert_eq!(to_f16(a + (b - a) * 0.75), h + 1, "{h:#06x}");
        }
    }
}
