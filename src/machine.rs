//! The machine's facts, below the planner and the kernel that both read them: how many
//! threads a call may use, the cache line, and whether this CPU streams stores. (Which instruction set a
//! hot loop is compiled for is the kernel's own choice: `kernel/isa.rs`.)

/// A cache line, in bytes: what one prefetch asks for, what a streaming store writes whole,
/// and the alignment of a line buffer (`kernel/stream.rs` spells it in its `repr`).
pub(crate) const CACHE_LINE: usize = 64;

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

/// Whether this CPU streams: x86-64 with AVX (16-byte SSE2 streaming stores do not pay:
/// PERFORMANCE.md#block-gathers-w1-w2-w5-w6-w8). Never under Miri, which cannot run the
/// assembly.
pub(crate) fn available() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        std::arch::is_x86_feature_detected!("avx")
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    false
}

/// Whether elements of `A` can be streamed: whole lines hold whole elements, and clones
/// need no drop (a line's clones are made in a local buffer first).
pub(crate) fn streams<A>() -> bool {
    let size = size_of::<A>();
    !std::mem::needs_drop::<A>() && size > 0 && CACHE_LINE.is_multiple_of(size)
}
