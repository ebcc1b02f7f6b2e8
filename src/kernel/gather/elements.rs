//! The one-axis element loop (GatherElements and take_along_axis lanes, 1-D takes):
//! `out[i] = inp[i * step + resolve(idx[i]) * stride]`, with CPU-specific variants.
//!
//! The loop has no branch (a bad index reads position 0 and is reported at the end) and
//! takes `out` and `idx` as slices, so the compiler knows they alias nothing and vectorizes
//! it, with gather instructions where the CPU has them: on x86-64 it is also compiled for
//! AVX2 and AVX-512. Which variant runs is decided once per call ([`Isa::detect`]).

use std::mem::MaybeUninit;

use crate::index::{GatherIndex, Resolve};
pub(crate) use crate::kernel::isa::Isa;
use crate::kernel::prefetch::{next_row_share, prefetch_block};
use crate::kernel::store::store;
use crate::plan::policy::{ELEMENT_CHUNK_BYTES, ROW_CHUNK};

/// One gathered axis over a run of contiguous output elements.
#[derive(Clone, Copy)]
pub(super) struct Axis1<A> {
    pub inp: *const A,
    pub step: isize,
    pub len: usize,
    pub stride: isize,
    /// Whether the index stream goes on past the run's end (the next lane's indices
    /// follow), so that prefetching past it pays.
    pub past_end: bool,
    /// The offset from `inp` of the row the next lane reads (0: none known), prefetched
    /// while this lane runs when it reads one contiguous row.
    pub next: isize,
}

impl<A: Clone> Axis1<A> {
    /// Fills `out` from `idx` with the variant `isa`; `false` if an index was out of range
    /// (every element of `out` is written all the same).
    ///
    /// # Safety
    /// `isa` runs on this CPU (it came from [`Isa::detect`]); `out` is initialized unless
    /// `INIT`; every `inp + i * step + j * stride` with `i < out.len()`, `j < len` is an
    /// element of the input, which `out` does not overlap; `len > 0`;
    /// `idx.len() == out.len()`.
    #[inline(always)]
    pub unsafe fn fill_with<I: GatherIndex, R: Resolve, const INIT: bool>(
        self,
        isa: Isa,
        out: &mut [MaybeUninit<A>],
        idx: &[I],
    ) -> bool {
        // SAFETY: (every arm) the CPU has the features of the variant (this function's
        // contract); the rest is forwarded.
        unsafe {
            if !R::SPECIALIZED {
                return self.fill::<I, R, INIT>(out, idx);
            }
            match isa {
                Isa::Base => self.fill::<I, R, INIT>(out, idx),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => self.fill_avx2::<I, R, INIT>(out, idx),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => self.fill_avx512::<I, R, INIT>(out, idx),
            }
        }
    }

    /// [`Axis1::fill`] compiled for AVX-512.
    ///
    /// # Safety
    /// The contract of [`Axis1::fill_with`], on a CPU with AVX-512 F, VL, DQ and BW.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
    unsafe fn fill_avx512<I: GatherIndex, R: Resolve, const INIT: bool>(
        self,
        out: &mut [MaybeUninit<A>],
        idx: &[I],
    ) -> bool {
        // SAFETY: forwarded.
        unsafe { self.fill::<I, R, INIT>(out, idx) }
    }

    /// [`Axis1::fill`] compiled for AVX2 (x86-64-v3).
    ///
    /// # Safety
    /// The contract of [`Axis1::fill_with`], on a CPU with AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn fill_avx2<I: GatherIndex, R: Resolve, const INIT: bool>(
        self,
        out: &mut [MaybeUninit<A>],
        idx: &[I],
    ) -> bool {
        // SAFETY: forwarded.
        unsafe { self.fill::<I, R, INIT>(out, idx) }
    }

    /// The loop itself, inlined into each instruction-set variant.
    ///
    /// # Safety
    /// The contract of [`Axis1::fill_with`] (for any `isa`).
    #[inline(always)]
    unsafe fn fill<I: GatherIndex, R: Resolve, const INIT: bool>(
        self,
        out: &mut [MaybeUninit<A>],
        idx: &[I],
    ) -> bool {
        let Axis1 {
            inp,
            step,
            len,
            stride,
            past_end,
            next,
        } = self;
        let mut good = true;
        // In chunks, each asking for the indices two chunks ahead: the hardware's own
        // prefetch left index streams waiting on memory. The prefetches sit outside the
        // loop, which stays vectorized. Past the run's end only if the stream goes on
        // there: a slab's lanes prefetch for themselves (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
        let row = step == 0 && stride == 1;
        let chunk = if row {
            ROW_CHUNK
        } else {
            ELEMENT_CHUNK_BYTES / size_of::<I>().max(1)
        };
        let total = idx.len();
        // Every element from one contiguous row (GatherElements along the last axis, W3
        // and P3): the lane's random reads wait on the row's lines, each a miss of its
        // own, unless the row came in before. So each chunk asks for its share of the
        // next lane's row, in order (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
        let share = if row {
            next_row_share::<A>(len, total, next)
        } else {
            0
        };
        let next = inp.wrapping_offset(next).cast::<u8>();
        for (c, (out, idx)) in out.chunks_mut(chunk).zip(idx.chunks(chunk)).enumerate() {
            // (Not both: the index prefetch then costs time, PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages.)
            if share == 0 && (past_end || (c + 2) * chunk < total) {
                prefetch_block(idx.as_ptr().wrapping_add(2 * chunk), ELEMENT_CHUNK_BYTES);
            }
            if share > 0 {
                prefetch_block(next.wrapping_add(c * share), share);
            }
            let base = (c * chunk) as isize * step;
            if row {
                // The row indexed directly, without the offset arithmetic (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
                for (o, &v) in out.iter_mut().zip(idx) {
                    let (j, ok) = R::resolve_or_zero(v, len);
                    good &= ok;
                    // SAFETY: `j < len` (0 for a bad index, and `len > 0`), so with
                    // `step == 0` and `stride == 1` this is an element of the input by
                    // the contract of `fill_with`; `o` is initialized unless `INIT`.
                    unsafe { store::<A, INIT>(o.as_mut_ptr(), &*inp.add(j)) };
                }
                continue;
            }
            for (i, (o, &v)) in out.iter_mut().zip(idx).enumerate() {
                let (j, ok) = R::resolve_or_zero(v, len);
                good &= ok;
                // SAFETY: `j < len` (0 for a bad index, and `len > 0`), so this is an
                // element of the input by the contract of `fill_with`; `o` is initialized
                // unless `INIT`.
                unsafe {
                    store::<A, INIT>(
                        o.as_mut_ptr(),
                        &*inp.offset(base + i as isize * step + j as isize * stride),
                    )
                };
            }
        }
        good
    }
}

/// Rows of element lanes that each read one contiguous input row (GatherElements along
/// the last axis: top-k, beam search, attention re-indexing): `count` lanes of `n`
/// elements, lane `i` reading the row at `inp + i * steps.0` with its indices at
/// `idx + i * steps.1` and its output at `out + i * steps.2` (contiguous lanes). One call
/// for a row of lanes, so that a short lane costs its elements and not a call, a chunking
/// and a prefetch plan of its own.
#[derive(Clone, Copy)]
pub(super) struct Rows1<A, I> {
    pub inp: *const A,
    pub idx: *const I,
    pub out: *mut A,
    pub n: usize,
    pub count: usize,
    pub steps: (isize, isize, isize),
    /// The gathered axis's length (the row's).
    pub len: usize,
}

impl<A: Clone, I: GatherIndex> Rows1<A, I> {
    /// Fills the lanes with the variant `isa`; `false` if an index was out of range
    /// (every element is written all the same).
    ///
    /// # Safety
    /// `isa` runs on this CPU; for every `i < count`, `j < len` and `k < n`, `inp + i *
    /// steps.0 + j` is an element of the input, `idx + i * steps.1 + k` one of the
    /// indices, and `out + i * steps.2 + k` one of the output (initialized unless `INIT`),
    /// distinct for distinct `(i, k)` and aliasing neither; `len > 0`.
    #[inline(always)]
    pub unsafe fn fill_with<R: Resolve, const INIT: bool>(self, isa: Isa) -> bool {
        // SAFETY: (every arm) the CPU has the variant's features; the rest is forwarded.
        unsafe {
            if !R::SPECIALIZED {
                return self.fill::<R, INIT>();
            }
            match isa {
                Isa::Base => self.fill::<R, INIT>(),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => self.fill_avx2::<R, INIT>(),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => self.fill_avx512::<R, INIT>(),
            }
        }
    }

    /// [`Rows1::fill`] compiled for AVX-512.
    ///
    /// # Safety
    /// The contract of [`Rows1::fill_with`], on a CPU with AVX-512 F, VL, DQ and BW.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
    unsafe fn fill_avx512<R: Resolve, const INIT: bool>(self) -> bool {
        // SAFETY: forwarded.
        unsafe { self.fill::<R, INIT>() }
    }

    /// [`Rows1::fill`] compiled for AVX2 (x86-64-v3).
    ///
    /// # Safety
    /// The contract of [`Rows1::fill_with`], on a CPU with AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn fill_avx2<R: Resolve, const INIT: bool>(self) -> bool {
        // SAFETY: forwarded.
        unsafe { self.fill::<R, INIT>() }
    }

    /// The loops themselves, inlined into each variant.
    ///
    /// # Safety
    /// The contract of [`Rows1::fill_with`].
    #[inline(always)]
    unsafe fn fill<R: Resolve, const INIT: bool>(self) -> bool {
        let Rows1 {
            inp,
            idx,
            out,
            n,
            count,
            steps,
            len,
        } = self;
        let mut good = true;
        for i in 0..count as isize {
            // SAFETY: lane `i`'s indices and output are `n` contiguous elements, distinct
            // from each other (the contract).
            let (row, ix, o) = unsafe {
                (
                    inp.offset(i * steps.0),
                    std::slice::from_raw_parts(idx.offset(i * steps.1), n),
                    std::slice::from_raw_parts_mut(out.offset(i * steps.2).cast::<MaybeUninit<A>>(), n),
                )
            };
            if R::SPECIALIZED {
                // Indices read once, as they are, clamped into the row: one load and one
                // store per element. A lane with an index outside `0..len` (a negative, or
                // a bad one) is done again below with the mode's arithmetic (no drop glue
                // here, so storing twice leaks nothing).
                let mut plain = true;
                for (o, &v) in o.iter_mut().zip(ix) {
                    let w = v.wrapped();
                    if w >= len as u64 {
                        plain = false;
                        break;
                    }
                    // SAFETY: `w < len`: an element of lane `i`'s row; `o` is initialized
                    // unless `INIT`.
                    unsafe { store::<A, INIT>(o.as_mut_ptr(), &*row.add(w as usize)) };
                }
                if plain {
                    continue;
                }
            }
            for (o, &v) in o.iter_mut().zip(ix) {
                let (j, ok) = R::resolve_or_zero(v, len);
                good &= ok;
                // SAFETY: `j < len` (0 for a bad index, and `len > 0`): an element of
                // lane `i`'s row; `o` is initialized unless `INIT`.
                unsafe { store::<A, INIT>(o.as_mut_ptr(), &*row.add(j)) };
            }
        }
        good
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Raise, Wrap};

    /// Every variant the host runs gives the base variant's result, for good and bad
    /// indices and both store modes.
    #[test]
    fn every_variant_matches_the_base_loop() {
        let input: Vec<f32> = (0..7 * 5).map(|v| v as f32).collect();
        let n = if cfg!(miri) { 19 } else { 700 }; // natively several chunks
        let idx: Vec<i64> = (0..n).map(|i| (i * 5 % 11) - 3).collect();
        // Strided (offsets `j * 5`) or one contiguous row (`j`, the row loop).
        let run_in = |stride: isize, isa: Isa, idx: &[i64], wrap: bool| {
            let mut out = vec![MaybeUninit::new(-1.0f32); idx.len()];
            let a = Axis1 {
                inp: input.as_ptr(),
                step: 0,
                len: 7,
                stride,
                past_end: true,
                // The row's lane asks for the next row (prefetches only).
                next: if stride == 1 { 7 } else { 0 },
            };
            // SAFETY: offsets are `j * stride` with `j < 7` and `stride` 1 or 5, inside
            // the 35-element input.
            let ok = unsafe {
                if wrap {
                    a.fill_with::<i64, Wrap, false>(isa, &mut out, idx)
                } else {
                    a.fill_with::<i64, Raise, true>(isa, &mut out, idx)
                }
            };
            // SAFETY: every element is written by `fill_with`.
            (
                ok,
                out.iter()
                    .map(|v| unsafe { v.assume_init() })
                    .collect::<Vec<f32>>(),
            )
        };
        let good: Vec<i64> = idx.iter().map(|v| v.rem_euclid(7)).collect();
        let run = |isa, idx: &[i64], wrap| run_in(5, isa, idx, wrap);
        for isa in Isa::all_available() {
            let (ok, row) = run_in(1, isa, &idx, true);
            assert!(ok);
            assert_eq!(row, good.iter().map(|&j| j as f32).collect::<Vec<_>>(), "{isa:?}");
            let (ok, row) = run_in(1, isa, &idx, false);
            assert!(!ok, "{isa:?} missed a bad index in a row");
            // Negative indices count from the end; 7 is out of range and reads position 0.
            let want = idx
                .iter()
                .map(|&j| if j < 7 { j.rem_euclid(7) as f32 } else { 0.0 });
            assert_eq!(row, want.collect::<Vec<_>>(), "{isa:?}");
            for wrap in [false, true] {
                assert_eq!(run(isa, &idx, wrap), run(Isa::Base, &idx, wrap), "{isa:?}");
                assert_eq!(run(isa, &good, wrap), run(Isa::Base, &good, wrap), "{isa:?}");
            }
            let (ok, out) = run(isa, &good, false);
            assert!(ok);
            assert_eq!(out, good.iter().map(|&j| (j * 5) as f32).collect::<Vec<_>>());
            assert!(!run(isa, &idx, false).0, "{isa:?} missed a bad index");
        }
    }
}
