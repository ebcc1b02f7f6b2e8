//! Prefetch hints, shared by the gather and the scatter kernels: a line, a block, and the
//! share of the next lane's row that each chunk of a row lane asks for.

use crate::plan::policy::{CACHE_LINE, INDEX_AHEAD_BYTES, INDEX_AHEAD_MAX_LANES, NEXT_ROW_BYTES, ROW_CHUNK};

/// Asks the CPU to start loading the cache line at `p` (a hint: it never faults and
/// changes no memory, so `p` may be any address). A no-op off x86-64.
#[inline(always)]
pub(super) fn prefetch_line<A>(p: *const A) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only; the address is computed without dereferencing.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch_line`] for every cache line of the `bytes` bytes at `p`.
#[inline(always)]
pub(super) fn prefetch_block<A>(p: *const A, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = p.cast::<i8>();
        // The lines of the first and the last byte, and any between.
        // SAFETY: (all three) prefetches only; the addresses are computed without
        // dereferencing.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        // SAFETY: as above.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(bytes.saturating_sub(1))) };
        let mut at = CACHE_LINE;
        while at + 1 < bytes {
            // SAFETY: as above.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(at)) };
            at += CACHE_LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

/// The bytes of the next lane's row that each chunk of [`ROW_CHUNK`] positions of a row
/// lane asks for: a lane of `positions` positions that reads (or, scattering, writes) a
/// contiguous row of `row_len` elements of `A`, the next lane's row `next` elements on.
/// 0 (nothing to ask for) where no next row is known, the row is too long to stay in
/// the cache until its turn, or the lane touches too few of its lines to need it.
pub(super) fn next_row_share<A>(row_len: usize, positions: usize, next: isize) -> usize {
    let row_bytes = row_len * size_of::<A>();
    if next != 0 && row_bytes <= NEXT_ROW_BYTES && 2 * positions >= row_len {
        row_bytes.div_ceil(positions.div_ceil(ROW_CHUNK).max(1))
    } else {
        0
    }
}

/// How many lanes `row_idx` elements of `I` apart reach about 2 KiB ahead in the indices
/// (at least one): the distance at which a scatter asks for them; the hardware's own
/// prefetch leaves index streams waiting on memory (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
pub(crate) fn lines_ahead<I>(row_idx: isize) -> isize {
    let step = (row_idx.unsigned_abs() * size_of::<I>()).max(1);
    (INDEX_AHEAD_BYTES / step).clamp(1, INDEX_AHEAD_MAX_LANES) as isize
}
