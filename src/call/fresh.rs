//! Fresh outputs: uninitialized C-order storage, faulted in as huge pages when large,
//! that the kernel fills.

use ndarray::{Array, ArrayD, Dimension, IxDyn, ShapeBuilder};

use crate::error::{GatherError, internal};
use crate::layout::{checked_len, default_strides};
#[cfg(all(target_os = "linux", not(miri)))]
use crate::plan::policy::{HUGE_PAGE_BYTES, HUGE_PAGE_MIN_BYTES};
use crate::plan::{AxisTerm, Loop};
use crate::small::Small;

/// The loops for a gather of `A`s into fresh C-contiguous storage, from its row-major
/// `loops`: in [`strips`](crate::plan::strips) when `A` has no drop glue (the kernel may
/// then fill fresh storage in any order: only elements with drop glue are counted as
/// written, in row-major order, to be dropped again after a failure).
pub(crate) fn fresh_loops<A>(loops: Small<Loop>, axes: &[AxisTerm]) -> Small<Loop> {
    if std::mem::needs_drop::<A>() {
        loops
    } else {
        crate::plan::strips(loops, axes)
    }
}

/// A new array of `shape` (of `len` elements), filled by `fill` through a pointer to
/// uninitialized C-contiguous storage for `len` elements.
///
/// # Safety
/// When `fill` returns `Ok`, it has initialized all `len` elements; when it returns `Err`,
/// it has left none initialized (or dropped them again).
#[inline(always)]
pub(crate) unsafe fn fresh<A>(
    op: &'static str,
    len: usize,
    shape: &[usize],
    fill: impl FnOnce(*mut A) -> Result<(), GatherError>,
) -> Result<ArrayD<A>, GatherError> {
    if checked_len(shape, size_of::<A>()) != Some(len) {
        return Err(internal(op, "the output's length is not its shape's"));
    }
    // C-order strides, given rather than derived by ndarray, made before the gather so
    // that ndarray moves them long after they were written: moved at once, the 16-byte
    // loads of the move wait for the 8-byte stores that wrote them (PERFORMANCE.md#tiny-calls-store-forwarding).
    let dims = IxDyn(shape).strides(default_strides(shape));
    let mut buf: Vec<A> = Vec::with_capacity(len);
    fault_in_huge_pages(&mut buf);
    fill(buf.as_mut_ptr())?;
    // SAFETY: `fill` returned Ok, so it initialized all `len` elements.
    unsafe { buf.set_len(len) };
    // SAFETY: `buf` holds exactly the `len` elements of `shape` (of at most isize::MAX
    // bytes), laid out in C order from the first by these strides (ndarray's own
    // `from_shape_vec` without the general checks).
    Ok(unsafe { ArrayD::from_shape_vec_unchecked(dims, buf) })
}

/// Asks Linux to back a large fresh output with transparent huge pages, as NumPy does for
/// arrays of 4 MiB and more (a 32 MiB output then costs 16 page faults instead of 8192,
/// which otherwise take longer than the gather itself), and to fault them in now, from
/// this one thread (`MADV_POPULATE_WRITE`, Linux 5.14).
///
/// The kernel zeroes every fresh page as it maps it. Faulted by the gather's threads, two
/// threads writing near each other fault the same huge page, and both zero it before one
/// of them maps it; populated by one call, each page is zeroed once (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
#[cfg(all(target_os = "linux", not(miri)))]
pub(crate) fn fault_in_huge_pages<A>(buf: &mut Vec<A>) {
    let bytes = buf.capacity() * size_of::<A>();
    if bytes < HUGE_PAGE_MIN_BYTES {
        return;
    }
    let base = buf.as_mut_ptr().cast::<u8>();
    let skip = (base as usize).next_multiple_of(HUGE_PAGE_BYTES) - base as usize;
    let len = (bytes.saturating_sub(skip)) & !(HUGE_PAGE_BYTES - 1);
    if len > 0 {
        // SAFETY: `base + skip .. + len` lies inside the buffer's allocation and starts on a
        // page boundary (a multiple of 2 MiB). MADV_HUGEPAGE only changes how the kernel
        // backs those pages; MADV_POPULATE_WRITE faults them in as a write to each would,
        // and the buffer is ours and uninitialized, so neither changes anything the program
        // can observe but time. Failure (an older kernel, no memory to spare) is harmless
        // and ignored: the pages then fault as they are written.
        unsafe {
            let start = base.add(skip).cast();
            libc::madvise(start, len, libc::MADV_HUGEPAGE);
            libc::madvise(start, len, libc::MADV_POPULATE_WRITE);
        }
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
pub(crate) fn fault_in_huge_pages<A>(_: &mut Vec<A>) {}

/// A dynamic-rank result as the dimension type its method's types give it (of the same
/// rank, by the plan).
#[inline(always)]
pub(crate) fn into_dim<A, D: Dimension>(op: &'static str, a: ArrayD<A>) -> Result<Array<A, D>, GatherError> {
    a.into_dimensionality::<D>()
        .map_err(|_| internal(op, "the output's rank is not the one its types give"))
}

/// An array of zeros of shape `dim`, its storage advised into huge pages and faulted in
/// as [`fault_in_huge_pages`] does when large: a gather-reduce's fresh output (and
/// argmax), which its threads then write row by row. (`vec!` of a primitive zero takes
/// fresh zeroed pages from the allocator without writing them, so the advice still comes
/// before the first touch, and faulting in keeps them zero.)
pub(crate) fn zeros<A: Clone + num_traits::Zero, D: Dimension>(
    op: &'static str,
    dim: D,
) -> Result<Array<A, D>, GatherError> {
    let n = dim.size();
    let mut v: Vec<A> = vec![A::zero(); n];
    fault_in_huge_pages(&mut v);
    Array::from_shape_vec(dim, v).map_err(|_| internal(op, "a fresh output of another size"))
}
