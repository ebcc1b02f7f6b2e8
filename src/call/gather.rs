//! The gather runs: into a fresh array, and into the caller's output.

use ndarray::{ArrayD, ArrayRef, Dimension, ViewRepr};

use super::{Call, fresh, fresh_loops};
use crate::error::GatherError;
use crate::index::{Clip, GatherIndex, IndexMode, Raise, Wrap};
use crate::kernel::{BadIndex, Operand, Store, Task};
use crate::plan::{Loop, Plan, Strategy};

impl<'a, A: Clone + Send + Sync, I: GatherIndex> Call<'a, ViewRepr<&'a A>, I> {
    /// Gathers into a new array of the output shape.
    pub fn alloc(&self) -> Result<ArrayD<A>, GatherError> {
        let mut plan = self.empty_plan();
        self.plan(&mut plan, size_of::<A>())?;
        // Indices are checked by the kernel as it reads them (a separate pass would read
        // them twice); if one is bad, the kernel drops what it wrote and we free the rest.
        let merged;
        let loops: &[Loop] = if plan.tiny() {
            plan.set_c_out_strides();
            &plan.dims
        } else {
            merged = fresh_loops::<A>(plan.c_loops(), &plan.axes);
            &merged
        };
        // The removed axes have length 1, so the caller's shape has the same row-major
        // layout as the lowered one.
        let shape = self.final_shape(&plan.out_shape);
        // SAFETY: `fresh` passes C-contiguous uninitialized storage of `out_len` elements,
        // walked with C strides; the kernel initializes every element when it returns Ok.
        unsafe {
            fresh(self.op, plan.out_len, &shape, |out| {
                self.execute(&plan, loops, out, Store::Init)
            })
        }
    }

    /// Gathers into `out`, which must have the output shape. Every error but a bad index
    /// is found before the first write; after a bad index, `out` holds valid elements
    /// (old ones or input elements) in unspecified places.
    ///
    /// (`out` is read in place, not made a dynamic-rank view, which ndarray writes in
    /// 8-byte stores that the next move reads back in 16-byte loads: PERFORMANCE.md#tiny-calls-store-forwarding.)
    pub fn gather_into<D: Dimension>(&self, out: &mut ArrayRef<A, D>) -> Result<(), GatherError> {
        let mut plan = self.empty_plan();
        self.plan(&mut plan, size_of::<A>())?;
        if !self.is_final_shape(&plan.out_shape, out.shape()) {
            return Err(GatherError::OutputShape {
                op: self.op,
                expected: self.final_shape(&plan.out_shape).to_vec(),
                found: out.shape().to_vec(),
            });
        }
        let out_ptr = out.as_mut_ptr();
        if plan.tiny() {
            plan.set_out_strides(self.output_strides(out.strides()));
            // SAFETY: `out` has the plan's output shape (checked above) and is an
            // exclusive borrow, so it aliases nothing.
            return unsafe { self.execute(&plan, &plan.dims, out_ptr, Store::Assign) };
        }
        let loops = plan.loops_any_order(&self.lower_output(out.strides()));
        // SAFETY: as above.
        unsafe { self.execute(&plan, &loops, out_ptr, Store::Assign) }
    }

    /// Runs the gather of `plan` (made from this call's layouts) over `loops` into `out`;
    /// an out-of-range index becomes its error.
    ///
    /// # Safety
    /// `out` is valid for the contract of [`Task::new`] with these loops and `store`.
    unsafe fn execute(
        &self,
        plan: &Plan,
        loops: &[Loop],
        out: *mut A,
        store: Store,
    ) -> Result<(), GatherError> {
        let input = Operand::new(self.inp(), self.input.as_ptr());
        let indices = Operand::new(self.idx(), self.indices.as_ptr());
        let strategy = Strategy::of::<A, I>(loops, &plan.axes);
        // SAFETY: the plan was made from these layouts of these arrays; `out` by this
        // function's contract.
        let task = unsafe { Task::new(loops, &plan.axes, strategy, input, indices, out, store) };
        let ran = match self.mode {
            IndexMode::Raise => task.run::<Raise>(),
            IndexMode::Wrap => task.run::<Wrap>(),
            IndexMode::Clip => task.run::<Clip>(),
        };
        ran.map_err(|BadIndex| self.index_error(plan))
    }
}
