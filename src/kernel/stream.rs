//! Streaming stores: block copies into an output too large for the caches write whole
//! 64-byte lines with non-temporal stores, which skip reading each line before it is
//! overwritten (PERFORMANCE.md#block-gathers-w1-w2-w5-w6-w8).

use crate::machine::CACHE_LINE;

/// Whether a run of `n` elements at `dst` pays for streaming (the planner's rule,
/// [`stream_pays`](crate::plan::stream_pays)).
#[cfg(all(target_arch = "x86_64", not(miri)))]
pub(super) fn pays<A>(dst: *const A, n: usize) -> bool {
    let bytes = n * size_of::<A>();
    crate::plan::stream_pays(dst as usize, bytes)
}

/// Clones the `n` elements at `src` to `dst`, writing the 64-byte lines of `dst` that
/// they cover whole with streaming stores and the partial lines at either end with
/// plain writes. Writes over `dst` without dropping.
///
/// # Safety
/// [`available`] and [`streams::<A>`](streams) returned true; `src` is valid for reads and
/// `dst` for writes of `n` elements (aligned, not overlapping). The streamed lines are
/// weakly ordered: a [`Fence`] must drop before another thread reads them.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx")]
pub(super) unsafe fn clone_run<A: Clone>(dst: *mut A, src: *const A, n: usize) {
    // (`repr(align)` takes a literal: the cache line.)
    #[repr(C, align(64))]
    struct Line([std::mem::MaybeUninit<u8>; CACHE_LINE]);
    const { assert!(align_of::<Line>() == CACHE_LINE) };
    let size = size_of::<A>();
    let per_line = CACHE_LINE / size;
    // The elements before the first line boundary: all of them if no element starts
    // there (an element aligned to less than its size).
    let misaligned = dst as usize % CACHE_LINE;
    let head = if misaligned.is_multiple_of(size) {
        ((CACHE_LINE - misaligned) % CACHE_LINE / size).min(n)
    } else {
        n
    };
    // SAFETY: (the whole body) every write is to one of the `n` elements at `dst`, every
    // read of one at `src`, by the contract above; the assembly copies the 64 bytes of
    // `line` (a local) to a line-aligned run of `per_line` elements at `dst`.
    unsafe {
        for i in 0..head {
            dst.add(i).write((*src.add(i)).clone());
        }
        let mut i = head;
        let mut line = Line([std::mem::MaybeUninit::uninit(); CACHE_LINE]);
        while i + per_line <= n {
            let l = line.0.as_mut_ptr().cast::<A>();
            for j in 0..per_line {
                l.add(j).write((*src.add(i + j)).clone());
            }
            // Bytes, not values: an element's padding may be uninitialized.
            std::arch::asm!(
                "vmovdqa {a}, ymmword ptr [{s}]",
                "vmovdqa {b}, ymmword ptr [{s} + 32]",
                "vmovntdq ymmword ptr [{d}], {a}",
                "vmovntdq ymmword ptr [{d} + 32], {b}",
                s = in(reg) l,
                d = in(reg) dst.add(i),
                a = out(ymm_reg) _,
                b = out(ymm_reg) _,
                options(nostack, preserves_flags),
            );
            i += per_line;
        }
        for i in i..n {
            dst.add(i).write((*src.add(i)).clone());
        }
    }
}

/// Orders the streaming stores made so far before any later store (a release to
/// another thread included) when dropped, on return or unwind.
pub(super) struct Fence;

impl Drop for Fence {
    fn drop(&mut self) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        // SAFETY: a store fence has no operands.
        unsafe {
            std::arch::x86_64::_mm_sfence()
        };
    }
}

#[cfg(all(test, target_arch = "x86_64", not(miri)))]
mod tests {
    use super::*;
    use crate::machine::{available, streams};

    /// `clone_run` from every start offset within a line and for lengths around whole
    /// lines leaves exactly the cloned elements and nothing else changed.
    fn check<A: Clone + PartialEq + std::fmt::Debug>(make: impl Fn(usize) -> A, fill: A) {
        if !available() || !streams::<A>() {
            return;
        }
        let src: Vec<A> = (0..300).map(&make).collect();
        let per_line = CACHE_LINE / size_of::<A>();
        for start in 0..per_line + 1 {
            for n in [0, 1, per_line - 1, per_line, per_line + 1, 3 * per_line + 2, 250] {
                let mut dst = vec![fill.clone(); 300 + per_line];
                // SAFETY: AVX and the element type were checked; `start + n` and `n`
                // elements fit `dst` and `src`, which do not overlap.
                unsafe { clone_run(dst.as_mut_ptr().add(start), src.as_ptr().add(7), n) };
                drop(Fence);
                for (k, d) in dst.iter().enumerate() {
                    let want = if (start..start + n).contains(&k) {
                        make(k - start + 7)
                    } else {
                        fill.clone()
                    };
                    assert_eq!(*d, want, "start {start}, {n} elements, at {k}");
                }
            }
        }
    }

    #[test]
    fn clone_run_copies_exactly_its_elements() {
        check(|i| i as u8, 0xEE);
        check(|i| i as f32, -1.0);
        check(|i| i as f64 * 0.5, -1.0);
        // Padding: the line's bytes are copied, not read as values.
        check(|i| (i as u8, i as u16 * 3), (1, 1));
        check(|i| [i as u32; 4], [0; 4]);
    }

    /// An element aligned to less than its size may start off every line boundary; then
    /// the whole run is cloned plainly.
    #[test]
    fn elements_off_the_line_grid_are_cloned_plainly() {
        if !available() {
            return;
        }
        let src: Vec<[u8; 4]> = (0..100u8).map(|i| [i, i, i, 7]).collect();
        for shift in 0..4 {
            let mut bytes = vec![0u8; 4 * 100 + 64];
            let dst = bytes.as_mut_ptr().wrapping_add(shift).cast::<[u8; 4]>();
            // SAFETY: AVX was checked, `[u8; 4]` streams (alignment 1); the 100 elements
            // at `dst` lie within `bytes`.
            unsafe { clone_run(dst, src.as_ptr(), 100) };
            drop(Fence);
            let want: Vec<u8> = src.iter().flatten().copied().collect();
            assert_eq!(&bytes[shift..shift + 400], &want[..], "shifted by {shift}");
            assert!(
                bytes[..shift]
                    .iter()
                    .chain(&bytes[shift + 400..])
                    .all(|&b| b == 0)
            );
        }
    }

    #[test]
    fn only_lines_of_whole_elements_without_drop_glue_stream() {
        assert!(streams::<f32>() && streams::<u8>() && streams::<[f64; 8]>());
        assert!(!streams::<[u8; 3]>() && !streams::<String>() && !streams::<()>());
    }
}
