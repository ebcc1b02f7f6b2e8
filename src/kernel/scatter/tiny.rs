//! A scatter of few positions: two plain passes (check, then combine), without the
//! spans, parts and visitors a large scatter sets up.

use crate::index::{GatherIndex, Raise};
use crate::kernel::walk::{At, each_lane};
use crate::kernel::{BadIndex, Operand, debug_check_reach, locate};
use crate::plan::split_innermost;
use crate::plan::{AxisTerm, Loop};
use crate::reduce::Reducer;

/// A scatter of few positions (at most [`SCATTER_TINY`](crate::plan::policy::SCATTER_TINY) where the caller chooses it; any
/// number is correct, only slower than [`ScatterTask`](super::ScatterTask) for many): one pass checks every
/// index, a second one combines the updates in row-major order, without the spans, parts
/// and visitors a large scatter sets up, which a tiny one does not repay (PERFORMANCE.md#tiny-calls-store-forwarding).
///
/// # Safety
/// [`ScatterTask::new`](super::ScatterTask::new)'s contract.
pub(crate) unsafe fn scatter_tiny<A: Clone, I: GatherIndex, R: Reducer<A>>(
    loops: &[Loop],
    axes: &[AxisTerm],
    dst: Operand<'_, A>,
    updates: *const A,
    indices: Operand<'_, I>,
    reducer: R,
) -> Result<(), BadIndex> {
    debug_check_reach(loops, axes, dst.extent(), indices.extent());
    let ops = (dst.ptr.cast_mut(), updates, indices.ptr);
    // One axis term by value, the common case (`scatter`, `scatter_elements`).
    // SAFETY: (both arms) forwarded, with the call's own axis terms.
    unsafe {
        match axes {
            [a] => tiny(loops, &[*a], ops, reducer),
            _ => tiny(loops, axes, ops, reducer),
        }
    }
}

/// [`scatter_tiny`]'s passes (inlined into each of its arms, so that one axis term given
/// by value is a constant loop).
///
/// # Safety
/// [`ScatterTask::new`](super::ScatterTask::new)'s contract for `loops`, `axes` and the operands `(dst, updates,
/// indices)`.
#[inline(always)]
pub(crate) unsafe fn tiny<A: Clone, I: GatherIndex, R: Reducer<A>>(
    loops: &[Loop],
    axes: &[AxisTerm],
    (dst, updates, indices): (*mut A, *const A, *const I),
    reducer: R,
) -> Result<(), BadIndex> {
    let (lane, outer) = split_innermost(loops);
    // The destination offset of position `i` of the lane at `at`, and whether its index
    // was good (a bad one resolves to 0).
    let locate_at = |at: At, i: isize| {
        let p = at.step(&lane, i);
        // SAFETY: position `i` of the lane exists; its coordinate is an element of the
        // indices (`ScatterTask::new`'s contract).
        let (g, ok) = unsafe { locate::<I, Raise>(indices, axes, p.idx) };
        (p.inp + g, p.out, ok)
    };
    let mut good = true;
    each_lane(outer, |at| {
        for i in 0..lane.len as isize {
            good &= locate_at(at, i).2;
        }
        Ok(())
    })?;
    if !good {
        return Err(BadIndex);
    }
    each_lane(outer, |at| {
        for i in 0..lane.len as isize {
            let (d, u, _) = locate_at(at, i);
            // SAFETY: `d` is a destination element (every index was good), `u` an update;
            // the destination is ours alone and the updates do not alias it.
            unsafe { reducer.reduce(&mut *dst.offset(d), &*updates.offset(u)) };
        }
        Ok(())
    })
}
