//! The bounds invariant every `unsafe` block of the kernel relies on (checked in debug
//! builds), and the one-comparison index lookup that keeps within it.

use crate::index::{GatherIndex, Resolve};
use crate::layout::span;
use crate::plan::{AxisTerm, Loop};

/// The lowest and highest offsets the strides `stride` picks from `loops` can form.
pub(crate) fn loop_reach(loops: &[Loop], stride: fn(&Loop) -> isize) -> (isize, isize) {
    let (mut lo, mut hi) = (0isize, 0isize);
    for l in loops {
        let r = (l.len as isize - 1) * stride(l);
        if r < 0 { lo += r } else { hi += r }
    }
    (lo, hi)
}

/// Debug builds: asserts that every offset `loops` and `axes` can form lies within
/// `input` (and, for the indices' offsets, within `indices`), each given as shape and
/// strides. This is the bounds invariant every kernel's `unsafe` relies on.
pub(crate) fn debug_check_reach(
    loops: &[Loop],
    axes: &[AxisTerm],
    input: (&[usize], &[isize]),
    indices: (&[usize], &[isize]),
) {
    if !cfg!(debug_assertions) || loops.iter().any(|l| l.len == 0) {
        return;
    }
    let within = |(lo, hi): (isize, isize), view: Option<(isize, isize)>| {
        view.is_some_and(|(vlo, vhi)| vlo <= lo && hi <= vhi)
    };
    // Each axis term adds its own resolved offset to the input's...
    let (mut lo, mut hi) = loop_reach(loops, |l| l.inp);
    for t in axes {
        let r = (t.len as isize - 1) * t.stride;
        (lo, hi) = (lo + r.min(0), hi + r.max(0));
    }
    debug_assert!(
        within((lo, hi), span(input.0, input.1)),
        "input offsets {lo}..={hi} outside the input"
    );
    // ... and reads one component of the coordinate at its own offset.
    if !axes.is_empty() {
        let (mut lo, mut hi) = loop_reach(loops, |l| l.idx);
        lo += axes.iter().map(|t| t.comp.min(0)).min().unwrap_or(0);
        hi += axes.iter().map(|t| t.comp.max(0)).max().unwrap_or(0);
        debug_assert!(
            within((lo, hi), span(indices.0, indices.1)),
            "indices offsets {lo}..={hi} outside the indices"
        );
    }
}

/// The offset selected through `axes` by the coordinate at indices offset `at` of `idx`
/// (a bad index counts as 0) and whether every index was good, without a branch.
///
/// # Safety
/// `idx + at + comp` is an element of the indices for every axis term.
#[inline(always)]
pub(crate) unsafe fn locate<I: GatherIndex, R: Resolve>(
    idx: *const I,
    axes: &[AxisTerm],
    at: isize,
) -> (isize, bool) {
    let (mut off, mut good) = (0isize, true);
    for a in axes {
        // SAFETY: by the contract above.
        let (i, ok) = R::resolve_or_zero(unsafe { *idx.offset(at + a.comp) }, a.len);
        off += i as isize * a.stride;
        good &= ok;
    }
    (off, good)
}
