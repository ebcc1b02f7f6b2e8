//! The scatter run: `updates` fitted to the matching gather's output, then the scatter
//! kernel (tiny or full).

use ndarray::{ArrayRef, Axis, Dimension, IxDyn, ViewRepr};

use super::{Call, Raw};
use crate::error::GatherError;
use crate::index::GatherIndex;
use crate::kernel::{BadIndex, Operand, ScatterTask, scatter_tiny};
use crate::plan::ScatterStrategy;
use crate::reduce::Reducer;

/// How a scatter's `updates` must fit the matching gather's output shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Exactly that shape.
    Exact,
    /// The same rank and at least that size on every dimension: the leading block is used
    /// (torch's `scatter_`).
    Leading,
    /// Broadcast to that shape (numpy's `put_along_axis`).
    Broadcast,
}

impl<'a, A: Clone + Send + Sync, I: GatherIndex> Call<'a, ViewRepr<&'a mut A>, I> {
    /// Scatters `updates` into the input through `reducer`: every error (shapes, axes,
    /// indices) is found before the first write.
    pub fn scatter<E: Dimension, R: Reducer<A>>(
        &mut self,
        updates: &ArrayRef<A, E>,
        fit: Fit,
        reducer: R,
    ) -> Result<(), GatherError> {
        self.scatter_with(updates, fit, reducer, false)
    }

    /// [`Call::scatter`] with `checked` indices (a plan's resolved positions): no pass
    /// reads them to check them first.
    pub fn scatter_with<E: Dimension, R: Reducer<A>>(
        &mut self,
        updates: &ArrayRef<A, E>,
        fit: Fit,
        reducer: R,
        checked: bool,
    ) -> Result<(), GatherError> {
        let mut plan = self.empty_plan();
        self.plan(&mut plan, size_of::<A>())?;
        // Updates of the very shape fit every way, read in place; others through a
        // view that fits them.
        let (view, fitted);
        let updates = if self.is_final_shape(&plan.out_shape, updates.shape()) {
            Raw::of(updates)
        } else {
            let expected = self.final_shape(&plan.out_shape);
            view = updates.view().into_dyn();
            let fits = match fit {
                // A scalar (0-d) update broadcasts in every scatter (`np.add.at(a, idx, 1.0)`).
                _ if view.ndim() == 0 => view.broadcast(IxDyn(&expected)),
                Fit::Exact => None,
                Fit::Leading => (view.ndim() == expected.len()
                    && view.shape().iter().zip(&*expected).all(|(u, e)| u >= e))
                .then(|| {
                    let mut v = view.view();
                    for (d, &n) in expected.iter().enumerate() {
                        v.slice_axis_inplace(Axis(d), ndarray::Slice::from(..n));
                    }
                    v
                }),
                Fit::Broadcast => view.broadcast(IxDyn(&expected)),
            };
            fitted = fits.ok_or_else(|| GatherError::UpdatesShape {
                op: self.op,
                expected: expected.to_vec(),
                found: view.shape().to_vec(),
            })?;
            Raw::of(&*fitted)
        };
        if plan.out_len == 0 {
            return Ok(());
        }
        let dst = self.input.as_mut_ptr().cast_const();
        let dst = Operand::new(self.inp(), dst);
        let indices = Operand::new(self.idx(), self.indices.as_ptr());
        // SAFETY: (both arms) the plan was made from these layouts of these arrays;
        // `updates` has the caller's output shape (fitted above), so with the removed unit
        // axes put back the plan's; the destination is an exclusive borrow, so nothing
        // else reads or writes it, and `dst` comes from `as_mut_ptr`.
        let done = unsafe {
            if plan.tiny_scatter() {
                plan.set_out_strides(self.output_strides(updates.strides()));
                scatter_tiny(&plan.dims, &plan.axes, dst, updates.as_ptr(), indices, reducer)
            } else {
                let loops = plan.loops(&self.lower_output(updates.strides()));
                let strategy =
                    ScatterStrategy::of::<A, I>(&loops, &plan.axes, dst.shape, dst.strides, checked);
                ScatterTask::new(&loops, &plan.axes, dst, updates.as_ptr(), indices, strategy)
                    .scatter(reducer)
            }
        };
        done.map_err(|BadIndex| self.index_error(&plan))
    }
}
