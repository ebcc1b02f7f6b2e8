//! Tiny plans: the input offset of each output element, kept as `u32`s, so that a small
//! lookup is one plain loop.

use ndarray::{ArrayD, ArrayRef, ArrayViewD, Dimension, IxDyn, ShapeBuilder};

use crate::call::Call;
use crate::error::{GatherError, internal};
use crate::index::GatherIndex;
use crate::kernel::BadIndex;
use crate::kernel::walk::each_lane;
use crate::layout::{default_strides, standard_len, unravel};
use crate::plan::{self, split_innermost};
use crate::plan::{AxisTerm, Loop, Plan};

/// A tiny plan's gather.
#[derive(Debug, Clone)]
pub(crate) struct Tiny {
    /// The input offset of each output element (row-major), in a standard-layout input.
    pub(crate) offsets: Box<[u32]>,
    /// The output shape and its C-order strides, as ndarray's allocating constructors take
    /// them, made once (PERFORMANCE.md#tiny-calls-store-forwarding).
    pub(crate) dim: IxDyn,
    pub(crate) strides: IxDyn,
}

impl Tiny {
    /// The tiny gather of `call` (over a C-order stand-in input), planned in `plan`, with
    /// the caller's output `shape`: for an output of at most [`PLAN_TINY`](crate::plan::policy::PLAN_TINY) elements, indices in
    /// standard layout (so that the plan's index offsets are row-major positions) and
    /// input offsets below 2<sup>32</sup>. Checks the indices as the method does.
    #[inline(always)]
    pub(crate) fn of<I: GatherIndex>(
        call: &Call<'_, ndarray::ViewRepr<&()>, I>,
        plan: &mut Plan,
        shape: &[usize],
    ) -> Result<Option<Tiny>, GatherError> {
        if !plan::keeps_offsets(plan.out_len) || !call.indices_in_standard_layout() {
            return Ok(None);
        }
        // An empty output never reads its indices, so never fails on them.
        let positions = if plan.out_len > 0 {
            call.resolve_all(plan, |i| i)?
        } else {
            Vec::new()
        };
        plan.set_c_out_strides();
        let Some(offsets) = input_offsets(&plan.dims, &plan.axes, &positions)
            .filter(|o| o.len() == shape.iter().product::<usize>())
        else {
            return Ok(None);
        };
        Ok(Some(Tiny {
            offsets,
            dim: IxDyn(shape),
            strides: default_strides(shape),
        }))
    }

    /// [`GatherPlan::apply`](crate::GatherPlan::apply) (`op`) for an input of the plan's shape.
    #[inline(always)]
    pub(crate) fn apply<A: Clone, D: Dimension>(
        &self,
        op: &'static str,
        input: &ArrayRef<A, D>,
    ) -> Result<ArrayD<A>, GatherError> {
        let values: Vec<A> = match standard_slice(input) {
            Some(src) => self.offsets.iter().map(|&o| src[o as usize].clone()).collect(),
            None => {
                let input = input.view().into_dyn();
                let found = self.offsets.iter().map(|&o| row_major(&input, o).cloned());
                found.collect::<Option<_>>().ok_or_else(|| outside(op))?
            }
        };
        let shape = self.dim.clone().strides(self.strides.clone());
        // SAFETY: there is one offset per element of `dim` (checked in `Tiny::of`), so
        // `values` is a C-order array of that shape, with ndarray's own strides for it.
        Ok(unsafe { ArrayD::from_shape_vec_unchecked(shape, values) })
    }

    /// [`GatherPlan::apply_into`](crate::GatherPlan::apply_into) (`op`) for an input and an output of the plan's shapes.
    #[inline(always)]
    pub(crate) fn apply_into<A: Clone, D: Dimension, D2: Dimension>(
        &self,
        op: &'static str,
        input: &ArrayRef<A, D>,
        out: &mut ArrayRef<A, D2>,
    ) -> Result<(), GatherError> {
        if let Some(src) = standard_slice(input) {
            if let Some(dst) = standard_slice_mut(out) {
                for (d, &o) in dst.iter_mut().zip(&self.offsets) {
                    d.clone_from(&src[o as usize]);
                }
            } else {
                for (d, &o) in out.iter_mut().zip(&self.offsets) {
                    d.clone_from(&src[o as usize]);
                }
            }
            return Ok(());
        }
        let input = input.view().into_dyn();
        for (d, &o) in out.iter_mut().zip(&self.offsets) {
            d.clone_from(row_major(&input, o).ok_or_else(|| outside(op))?);
        }
        Ok(())
    }
}

impl Tiny {
    /// [`GatherPlan::scatter`](crate::GatherPlan::scatter) (`op`) into `dst` of the plan's
    /// input shape: each update, in row-major order, combined into the element its offset
    /// names. `updates` has the plan's output shape, or is 0-d (one value for all).
    pub(crate) fn scatter<A: Clone, D: Dimension, E: Dimension, R: crate::reduce::Reducer<A>>(
        &self,
        op: &'static str,
        dst: &mut ArrayRef<A, D>,
        updates: &ArrayRef<A, E>,
        reducer: R,
    ) -> Result<(), GatherError> {
        let one = updates.ndim() == 0;
        if !one && updates.shape() != self.dim.slice() {
            return Err(GatherError::UpdatesShape {
                op,
                expected: self.dim.slice().to_vec(),
                found: updates.shape().to_vec(),
            });
        }
        // Every offset is an element (the plan made them so); checked before the first
        // write, so that an error leaves `dst` unchanged.
        if self.offsets.iter().any(|&o| o as usize >= dst.len()) {
            return Err(outside(op));
        }
        // Every update, or the one repeated.
        let mut each = updates.iter().cycle();
        if let Some(d) = standard_slice_mut(dst) {
            for &o in self.offsets.iter() {
                let (Some(slot), Some(u)) = (d.get_mut(o as usize), each.next()) else {
                    return Err(outside(op));
                };
                reducer.reduce(slot, u);
            }
            return Ok(());
        }
        let shape = dst.shape().to_vec();
        let mut d = dst.view_mut().into_dyn();
        for &o in self.offsets.iter() {
            let (Some(slot), Some(u)) = (d.get_mut(&*unravel(o as usize, &shape)), each.next()) else {
                return Err(outside(op));
            };
            reducer.reduce(slot, u);
        }
        Ok(())
    }
}

/// The element at row-major position `o` of `input`, in any layout.
pub(crate) fn row_major<'a, A>(input: &'a ArrayViewD<'_, A>, o: u32) -> Option<&'a A> {
    input.get(&*unravel(o as usize, input.shape()))
}

/// The error for a tiny plan's offset outside an input of its shape: a broken plan, which
/// [`Tiny::of`] never makes (every offset is an element of a C-order input of that shape).
pub(crate) fn outside(op: &'static str) -> GatherError {
    internal(op, "a tiny plan's offset is outside the input")
}

/// `a`'s elements in standard layout as a slice: ndarray's `as_slice` without its
/// dynamic-rank overhead (PERFORMANCE.md#tiny-calls-store-forwarding).
pub(crate) fn standard_slice<A, D: Dimension>(a: &ArrayRef<A, D>) -> Option<&[A]> {
    let len = standard_len(a.shape(), a.strides())?;
    // SAFETY: in standard layout, `a`'s `len` elements are contiguous from its first one,
    // borrowed shared for the slice's lifetime.
    Some(unsafe { std::slice::from_raw_parts(a.as_ptr(), len) })
}

/// [`standard_slice`] for exclusive access.
pub(crate) fn standard_slice_mut<A, D: Dimension>(a: &mut ArrayRef<A, D>) -> Option<&mut [A]> {
    let len = standard_len(a.shape(), a.strides())?;
    // SAFETY: as for `standard_slice`; the borrow of `a` is exclusive, and distinct
    // positions of a standard layout are distinct elements.
    Some(unsafe { std::slice::from_raw_parts_mut(a.as_mut_ptr(), len) })
}

/// The input offset of each output element of a tiny gather (at most [`PLAN_TINY`](crate::plan::policy::PLAN_TINY) of them,
/// offsets below 2<sup>32</sup>), for an input in standard layout: the kernel's element
/// loop over `loops` (row-major over the output, with C-order output strides) and the
/// axis terms, run once on offsets instead of elements, reading the resolved `positions`
/// at the loops' index offsets. `None` where an offset does not fit (or, which a plan
/// never makes, a position is missing or the output strides are not C-order).
pub(crate) fn input_offsets(loops: &[Loop], axes: &[AxisTerm], positions: &[usize]) -> Option<Box<[u32]>> {
    let (lane, outer) = split_innermost(loops);
    let len = plan::positions(outer, &lane);
    if !plan::keeps_offsets(len) {
        return None;
    }
    if len == 0 {
        return Some(Box::default()); // (`each_lane` visits one lane even of empty loops)
    }
    // With C-order output strides, row-major positions come in output order.
    let mut offsets = Vec::with_capacity(len);
    let found = each_lane(outer, |at| {
        for i in 0..lane.len as isize {
            let at = at.step(&lane, i);
            let mut inp = at.inp;
            for a in axes {
                let o = usize::try_from(at.idx + a.comp).map_err(|_| BadIndex)?;
                inp += *positions.get(o).ok_or(BadIndex)? as isize * a.stride;
            }
            if at.out != offsets.len() as isize {
                return Err(BadIndex);
            }
            offsets.push(u32::try_from(inp).map_err(|_| BadIndex)?);
        }
        Ok(())
    });
    found.ok().map(|()| offsets.into_boxed_slice())
}
