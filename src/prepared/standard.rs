//! A plan's gather through the core for standard-layout inputs: the loops planned once
//! over a C-order stand-in, with runs of consecutive positions folded into blocks.

use ndarray::{ArrayD, ArrayRef, Dimension};

use super::positions::{Position, Positions, broadcast_positions};
use crate::call::{Call, Fit, Raw, fresh_loops};
use crate::error::{GatherError, internal};
use crate::index::{GatherIndex, IndexMode, Planned};
use crate::kernel::walk::each_lane;
use crate::kernel::{BadIndex, Operand, Store, Task};
use crate::lower::{self, Lowering};
use crate::plan::policy::MIN_RUN;
use crate::plan::{AxisTerm, Loop, Strategy};
use crate::reduce::Reducer;
use crate::small::Small;

/// A plan's gather through the core, with the resolved positions as indices.
#[derive(Debug, Clone)]
pub(crate) struct Lowered {
    pub(crate) lowering: Lowering,
    /// The caller's indices shape, to which the stored positions broadcast.
    pub(crate) indices_shape: Vec<usize>,
    pub(crate) positions: Positions,
    /// The gather lowered for inputs in standard layout (any input of that shape whose
    /// memory is C-contiguous) into C-order outputs: loops ready for the kernel.
    pub(crate) standard: Standard,
}

/// The lowered loops and axis terms of a plan's gather for a standard-layout input.
#[derive(Debug, Clone)]
pub(crate) struct Standard {
    pub(crate) loops: Small<Loop>,
    pub(crate) axes: Small<AxisTerm>,
}

impl Lowered {
    /// Runs the gather for a standard-layout `input` of the plan's shape into `out`.
    ///
    /// # Safety
    /// `out` is C-contiguous storage of the output shape, valid for `store` as
    /// [`Task::new`] requires, aliasing neither `input` nor the plan.
    pub(crate) unsafe fn run_standard<A: Clone + Send + Sync, D: Dimension>(
        &self,
        op: &'static str,
        input: &ArrayRef<A, D>,
        out: *mut A,
        store: Store,
    ) -> Result<(), GatherError> {
        let Standard { loops, axes } = &self.standard;
        let loops = &fresh_loops::<A>(loops.clone(), axes);
        let input = Operand::of(input);
        // SAFETY: the loops and terms were planned over a C-order stand-in of the input's
        // shape, whose offsets are those of any standard-layout input of that shape (unit
        // dimensions contribute no offset); the positions are the very array the loops
        // index; `out` by this function's contract.
        let ran =
            unsafe { with_positions!(&self.positions, p => run_task(loops, axes, input, p, out, store)) };
        ran.map_err(|BadIndex| internal(op, "a resolved position was out of range"))
    }

    /// Lowers the plan's gather of `input` with the resolved `positions` (the plan's own)
    /// as indices and runs `run` on the call.
    pub(crate) fn call<A: Clone, D: Dimension, P: Position, T>(
        &self,
        op: &'static str,
        input: &ArrayRef<A, D>,
        positions: &ArrayD<P>,
        run: impl for<'x> FnOnce(&Call<'x, ndarray::ViewRepr<&'x A>, P>) -> Result<T, GatherError>,
    ) -> Result<T, GatherError> {
        let positions = broadcast_positions(op, &self.indices_shape, positions)?;
        lower::with_call(op, &self.lowering, (input, &positions), IndexMode::Raise, run)
    }
}

impl Lowered {
    /// The plan's scatter into `dst` (of the plan's input shape): the method's scatter
    /// lowered with the resolved `positions` as indices, checked when the plan was made (no
    /// pass reads them again). `take` without an axis scatters into `dst` flattened: in
    /// place where its layout flattens as a view, else through a row-major copy written
    /// back.
    pub(crate) fn scatter<A: Clone + Send + Sync, D: Dimension, E: Dimension, P: Position, R: Reducer<A>>(
        &self,
        op: &'static str,
        dst: &mut ArrayRef<A, D>,
        positions: &ArrayD<P>,
        updates: &ArrayRef<A, E>,
        reducer: R,
    ) -> Result<(), GatherError> {
        let positions = broadcast_positions(op, &self.indices_shape, positions)?;
        let zero = [P::ZERO];
        if self.lowering != Lowering::Flat {
            let views = (Raw::of_mut(dst), Raw::of(&*positions));
            return match self.lowering.call(op, None, views, &zero, IndexMode::Raise) {
                Ok(ref mut call) => call.scatter_with(updates, Fit::Exact, reducer, true),
                Err(e) => Err(e),
            };
        }
        let shape = dst.shape().to_vec();
        let scatter_flat = |flat: &mut ndarray::ArrayViewMutD<'_, A>| {
            let views = (Raw::of_mut(flat), Raw::of(&*positions));
            match self
                .lowering
                .call(op, Some(&shape), views, &zero, IndexMode::Raise)
            {
                Ok(ref mut call) => call.scatter_with(updates, Fit::Exact, reducer, true),
                Err(e) => Err(e),
            }
        };
        if let Some(s) = dst.as_slice_mut() {
            return scatter_flat(&mut ndarray::ArrayViewMut1::from(s).into_dyn());
        }
        let mut copy: ndarray::Array1<A> = dst.iter().cloned().collect();
        scatter_flat(&mut copy.view_mut().into_dyn())?;
        // Written back in row-major order.
        for (d, v) in dst.iter_mut().zip(copy) {
            *d = v;
        }
        Ok(())
    }
}

/// The gather over `loops` and `axes` with `positions` as its indices, as the planner's
/// [`Strategy`] for them says.
///
/// # Safety
/// [`Task::new`]'s contract for these operands.
#[inline(always)]
unsafe fn run_task<A: Clone + Send + Sync, P: GatherIndex>(
    loops: &[Loop],
    axes: &[AxisTerm],
    input: Operand<'_, A>,
    positions: &ArrayD<P>,
    out: *mut A,
    store: Store,
) -> Result<(), BadIndex> {
    let strategy = Strategy::of::<A, P>(loops, axes);
    // SAFETY: forwarded.
    unsafe { Task::new(loops, axes, strategy, input, Operand::of(positions), out, store).run::<Planned>() }
}

/// The loops (for a C-order output) and axis terms of `call` over a C-order stand-in.
pub(crate) fn standard<P: GatherIndex>(
    call: &Call<'_, ndarray::ViewRepr<&()>, P>,
) -> Result<Standard, GatherError> {
    let mut plan = call.empty_plan();
    call.plan(&mut plan, 1)?;
    Ok(Standard {
        loops: plan.c_loops(),
        axes: plan.axes,
    })
}

/// `standard` with runs of consecutive positions along its lane copied as blocks: when a
/// single gathered axis's positions, in every lane, go up by one within each aligned
/// group of `r` (`MIN_RUN <= r`, dividing the lane's length), the lane is split into
/// groups of `r` elements, each read from its first position on along the axis (a take of
/// a range, a shuffle of patches). Reading only a run's first position, the axis term may
/// describe its range of run starts: `len - (r - 1)`, which keeps the kernel's bounds
/// invariant (every offset the loops and terms can form is an input element) exact.
pub(crate) fn fold_runs<P: Position>(standard: Standard, positions: &ArrayD<P>) -> Standard {
    let (Some((&lane, outer)), [a]) = (standard.loops.split_last(), &standard.axes[..]) else {
        return standard;
    };
    let Some(p) = positions.as_slice() else {
        return standard;
    };
    if lane.idx == 0 || lane.len < MIN_RUN {
        return standard;
    }
    // The run length: the gcd of the lane's length and of every position that does not
    // continue its predecessor's run, over every lane (the kernel's own lane walk; a run
    // too short stops it).
    let mut r = lane.len;
    let scan = each_lane(outer, |at| {
        let value = |i: usize| {
            let o = at.idx + a.comp + i as isize * lane.idx;
            usize::try_from(o)
                .ok()
                .and_then(|o| p.get(o))
                .map(|v| v.position())
        };
        let mut prev = value(0);
        for i in 1..lane.len {
            let v = value(i);
            if prev.is_none() || v != prev.map(|p| p + 1) {
                r = gcd(r, i);
                if r < MIN_RUN {
                    return Err(BadIndex);
                }
            }
            prev = v;
        }
        Ok(())
    });
    if scan.is_err() {
        return standard;
    }
    let mut loops: Small<Loop> = outer.iter().copied().collect();
    if r < lane.len {
        loops.push(Loop {
            len: lane.len / r,
            out: lane.out * r as isize,
            inp: lane.inp * r as isize,
            idx: lane.idx * r as isize,
        });
    }
    loops.push(Loop {
        len: r,
        out: lane.out,
        inp: lane.inp + a.stride,
        idx: 0,
    });
    let Some(len) = a.len.checked_sub(r - 1) else {
        return standard; // not possible: a run of `r` positions below `len`
    };
    let axes = [AxisTerm { len, ..*a }];
    Standard {
        loops,
        axes: Small::from(&axes[..]),
    }
}

/// The greatest common divisor.
pub(crate) fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}
