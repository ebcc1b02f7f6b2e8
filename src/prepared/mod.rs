//! Prepared gathers: indices checked and resolved once for an input shape, then applied to
//! any number of inputs of that shape.
//!
//! A plan is built by lowering the gather over a stand-in input of the plan's shape (a view
//! of zero-sized elements, so it costs nothing), which yields exactly the method's checks
//! and errors. The indices are then resolved: for a tiny output, into the input offset of
//! each output element; else into positions, stored in the narrowest type that holds them,
//! with the dimensions along which they repeat kept once. `apply` lowers the real input
//! the same way, with the positions as indices.
//!
//! Its rooms: this file (the public [`GatherPlan`]), `tiny` (plans that keep an input
//! offset per output element), `positions` (resolved positions, stored narrow and
//! compact) and `standard` (the lowered loops for standard-layout inputs, with runs of
//! consecutive positions folded into blocks).

#[macro_use]
mod positions;
mod attention;
mod backward;
mod build;
mod reduce;
mod standard;
#[cfg(test)]
mod tests;
mod tiny;

pub use self::reduce::GatherReducePlan;
#[cfg(feature = "mpi")]
pub(crate) use self::reduce::check_skip;

use std::marker::PhantomData;

use ndarray::{Array, ArrayD, ArrayRef, Dimension, IxDyn};

use self::positions::Positions;
use self::standard::Lowered;
use self::tiny::Tiny;
use crate::call::{fresh, into_dim};
use crate::error::GatherError;
use crate::kernel::Store;
use crate::layout::{checked_len, same};
use crate::small::Small;

/// A gather whose indices were checked and resolved once, for inputs of one shape: the
/// constant-index gather of an ONNX graph, a fixed sampling grid over every frame, the
/// same token ids over every layer's table, a small lookup in a hot loop.
///
/// Each constructor mirrors one method of [`GatherExt`](crate::GatherExt), with the
/// input's *shape* in place of the input, and returns exactly the error that method would
/// return for an input of that shape (out-of-range indices included), its message named
/// after the constructor (`GatherPlan::gather: ...` where `gather` says `gather: ...`). Then
/// [`apply`](GatherPlan::apply) and [`apply_into`](GatherPlan::apply_into) gather from any
/// input of that shape (any element type, any memory layout) without reading, checking or
/// converting an index again. It is the Simd library's `SynetGatherElements`
/// (`Init` / `SetIndex` once, `Forward` many times), for every gather.
///
/// # What a plan holds
/// The shapes, and one resolved position per index value: negative indices (and `take`'s
/// `wrap` / `clip` modes) already applied, as `u16`, `u32` or `usize`, the narrowest that
/// holds every gathered axis's length, so at most the indices' own bytes for 32- and
/// 64-bit indices. Where the positions repeat along a dimension (a broadcast that was
/// materialized, the same indices for every batch), that dimension is stored once and
/// read with a zero stride. Where a single gathered axis's positions run up by one in
/// aligned groups of 8 or more (a range, shuffled patches), inputs in standard layout
/// are copied a run at a time, as blocks. A plan of at most 64 output elements (with
/// indices in standard layout) keeps instead the input offset of each output element
/// (`u32`, at most 256 bytes), so that a small lookup is one plain loop, and building it
/// costs about one gather call. A plan has no lifetime: it is `Clone + Debug + Send +
/// Sync`, and one plan can serve many threads.
///
/// # The input shape and the output's type
/// The input shape is anything [`ShapeArg`](crate::ShapeArg) takes: `x.shape()`, `x.dim()`,
/// `x.raw_dim()`, `[4, 2]`, `(4, 2)`. The type parameter is the outputs' dimension type,
/// as the method's: plans of the methods that keep the rank
/// ([`multiaxis`](GatherPlan::multiaxis), [`gather_elements`](GatherPlan::gather_elements),
/// [`take_along_axis`](GatherPlan::take_along_axis)) have their indices' (a
/// `GatherPlan<Ix2>` from 2-D indices applies to an `Array2` and returns one);
/// [`gather`](GatherPlan::gather) and [`take`](GatherPlan::take) with an axis follow the
/// shape's type and the indices' rank as the methods follow the input's (1-D indices over
/// `table.dim()` give an `Array2`; over `table.shape()`, a slice, an `ArrayD`);
/// [`gather_nd`](GatherPlan::gather_nd) and [`gather_batched`](GatherPlan::gather_batched),
/// whose rank depends on `batch_dims`, are `GatherPlan` = `GatherPlan<IxDyn>` and return
/// `ArrayD` (`.into_dimensionality()?` types it). [`into_dyn`](GatherPlan::into_dyn) makes
/// any plan a `GatherPlan`.
///
/// A plan is also how to gather into an existing output with any of the wrappers:
/// [`apply_into`](GatherPlan::apply_into).
///
/// # Examples
/// ```
/// use ndarray::{Array2, array};
/// use ndarray_gather::prelude::*;
///
/// let ids = array![2_i64, -1, 0];
/// let plan = GatherPlan::gather([4, 2], &ids, 0)?; // indices checked here, once
/// assert_eq!(plan.output_shape(), &[3, 2]);
/// let table = array![[0.0, 0.1], [1.0, 1.1], [2.0, 2.1], [3.0, 3.1]];
/// let rows: Array2<f64> = plan.apply(&table)?; // typed, as the method's result
/// assert_eq!(rows, table.gather(&ids, 0)?);
/// // Any input of the same shape, any element type, into a reused output.
/// let mut out = Array2::zeros((3, 2));
/// plan.apply_into(&array![[0, 1], [10, 11], [20, 21], [30, 31]], &mut out)?;
/// assert_eq!(out, array![[20, 21], [30, 31], [0, 1]]);
/// // An input of another shape is refused.
/// assert!(matches!(plan.apply(&Array2::<f64>::zeros((5, 2))), Err(GatherError::InputShape { .. })));
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone)]
pub struct GatherPlan<O: Dimension = IxDyn> {
    input_shape: Small<usize>,
    output_shape: Small<usize>,
    how: How,
    /// The outputs' dimension type.
    out: PhantomData<fn() -> O>,
}

/// How a plan gathers.
#[derive(Debug, Clone)]
pub(crate) enum How {
    /// A tiny output (at most [`PLAN_TINY`](crate::plan::policy::PLAN_TINY) elements): a small lookup in a hot loop as a plain
    /// loop over input offsets, for inputs and outputs of any layout.
    Tiny(Tiny),
    /// Any other: the positions, and the gather lowered for standard-layout inputs (boxed:
    /// a plan moves as a few words more than its shapes).
    Lowered(Box<Lowered>),
}

impl<O: Dimension> GatherPlan<O> {
    /// The shape of the inputs this plan gathers from.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather([5, 2], &array![1_i64], 0)?;
    /// assert_eq!(plan.input_shape(), &[5, 2]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn input_shape(&self) -> &[usize] {
        &self.input_shape
    }

    /// The shape of the outputs this plan produces.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather([5, 2], &array![[1_i64, 2, 3]], 0)?;
    /// assert_eq!(plan.output_shape(), &[1, 3, 2]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn output_shape(&self) -> &[usize] {
        &self.output_shape
    }

    /// Gathers from `input` (of the plan's input shape, any layout) into a new array,
    /// equal element for element to the result of the method the plan mirrors.
    ///
    /// # Errors
    /// [`InputShape`](GatherError::InputShape) if `input` does not have the plan's input
    /// shape; [`SizeOverflow`](GatherError::SizeOverflow) if the output, in elements of
    /// type `A`, cannot be allocated. Indices are never read, so never wrong.
    ///
    /// # Examples
    /// ```
    /// use ndarray::{Array2, ShapeBuilder, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather_elements([2, 2], &array![[1_i64, 1], [0, 1]], 0)?;
    /// // A Fortran-order input gives the same result as a C-order one.
    /// let f = Array2::from_shape_vec((2, 2).f(), vec![1, 3, 2, 4]).unwrap();
    /// assert_eq!(plan.apply(&f)?, array![[3, 4], [1, 4]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn apply<A: Clone + Send + Sync, D: Dimension>(
        &self,
        input: &ArrayRef<A, D>,
    ) -> Result<Array<A, O>, GatherError> {
        into_dim(APPLY, self.apply_dyn(input)?)
    }

    /// [`apply`](Self::apply) with a dynamic-rank result.
    #[inline(always)]
    fn apply_dyn<A: Clone + Send + Sync, D: Dimension>(
        &self,
        input: &ArrayRef<A, D>,
    ) -> Result<ArrayD<A>, GatherError> {
        const OP: &str = APPLY;
        self.check_input(OP, input)?;
        let lowered = match &self.how {
            How::Tiny(tiny) => return tiny.apply(OP, input),
            How::Lowered(lowered) => lowered,
        };
        if input.is_standard_layout() {
            let len =
                checked_len(&self.output_shape, size_of::<A>()).ok_or_else(|| GatherError::SizeOverflow {
                    op: OP,
                    shape: self.output_shape.to_vec(),
                })?;
            // SAFETY: `fresh` passes C-contiguous uninitialized storage for the output's
            // `len` elements; the kernel initializes each of them when it returns Ok.
            return unsafe {
                fresh(OP, len, &self.output_shape, |out| {
                    lowered.run_standard(OP, input, out, Store::Init)
                })
            };
        }
        with_positions!(&lowered.positions, p => lowered.call(OP, input, p, |call| call.alloc()))
    }

    /// Gathers from `input` into `out`, which must have exactly the plan's output shape
    /// (any memory order). No allocation for inputs of rank up to 4.
    ///
    /// With a plan, every wrapper method gathers into an existing output: this is the
    /// `_into` of `gather`, `gather_elements`, `gather_nd`, `take`, ...
    ///
    /// # Errors
    /// [`InputShape`](GatherError::InputShape) if `input` does not have the plan's input
    /// shape, [`OutputShape`](GatherError::OutputShape) if `out` does not have its output
    /// shape; either way `out` is untouched.
    ///
    /// # Examples
    /// ```
    /// use ndarray::{Array3, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather([3, 2], &array![[2_i64, 0]], 0)?;
    /// let mut out = Array3::zeros((1, 2, 2));
    /// plan.apply_into(&array![[1, 2], [3, 4], [5, 6]], &mut out)?;
    /// assert_eq!(out, array![[[5, 6], [1, 2]]]);
    /// assert!(plan.apply_into(&array![[1, 2], [3, 4], [5, 6]], &mut Array3::zeros((2, 2, 1))).is_err());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn apply_into<A: Clone + Send + Sync, D: Dimension, D2: Dimension>(
        &self,
        input: &ArrayRef<A, D>,
        out: &mut ArrayRef<A, D2>,
    ) -> Result<(), GatherError> {
        const OP: &str = "GatherPlan::apply_into";
        self.check_input(OP, input)?;
        if !same(out.shape(), &self.output_shape) {
            return Err(GatherError::OutputShape {
                op: OP,
                expected: self.output_shape.to_vec(),
                found: out.shape().to_vec(),
            });
        }
        let lowered = match &self.how {
            How::Tiny(tiny) => return tiny.apply_into(OP, input, out),
            How::Lowered(lowered) => lowered,
        };
        if input.is_standard_layout() && out.is_standard_layout() {
            // SAFETY: `out` has the output shape in C order, as the loops were made for,
            // and is an exclusive borrow, so it aliases nothing.
            return unsafe { lowered.run_standard(OP, input, out.as_mut_ptr(), Store::Assign) };
        }
        with_positions!(&lowered.positions, p => lowered.call(OP, input, p, |call| call.gather_into(out)))
    }

    /// The adjoint of the plan's gather: combines `updates` (of the plan's output shape,
    /// or 0-d) into `dst` (of its input shape, any layout) through `reducer`, each update
    /// into the element the plan's gather reads for that output position, in row-major
    /// order of the updates. Bit for bit the [`ScatterExt`](crate::ScatterExt) call with
    /// the same indices where one exists (`scatter`, `scatter_elements`, `scatter_nd`,
    /// `scatter_multiaxis`, and `put_along_axis` with `reduce::Replace`); the adjoint of
    /// `take` (its modes applied) and `gather_batched` otherwise. The plan checked its
    /// indices once, when it was made: no pass reads them again (the backward pass of a
    /// training step: forward with `apply`, backward with `scatter`).
    ///
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let ids = array![2_i64, 0, 2];
    /// let plan = GatherPlan::gather([3, 2], &ids, 0)?;
    /// let grad_rows = array![[1.0, 1.0], [2.0, 2.0], [0.5, 0.5]];
    /// let mut grad = Array2::<f64>::zeros((3, 2));
    /// plan.scatter(&mut grad, &grad_rows, reduce::Add)?; // index_add_ / np.add.at
    /// assert_eq!(grad, array![[2.0, 2.0], [0.0, 0.0], [1.5, 1.5]]);
    /// let mut same = Array2::<f64>::zeros((3, 2));
    /// same.scatter(&ids, &grad_rows, 0, reduce::Add)?;
    /// assert_eq!(grad, same);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`InputShape`](GatherError::InputShape) if `dst` does not have the plan's input
    /// shape, [`UpdatesShape`](GatherError::UpdatesShape) if `updates` has neither its
    /// output shape nor none; either way `dst` is untouched.
    #[doc(alias = "index_add_", alias = "scatter_add_", alias = "backward")]
    pub fn scatter<A: Clone + Send + Sync, D: Dimension, E: Dimension, R: crate::reduce::Reducer<A>>(
        &self,
        dst: &mut ArrayRef<A, D>,
        updates: &ArrayRef<A, E>,
        reducer: R,
    ) -> Result<(), GatherError> {
        const OP: &str = "GatherPlan::scatter";
        self.check_input(OP, dst)?;
        match &self.how {
            How::Tiny(tiny) => tiny.scatter(OP, dst, updates, reducer),
            How::Lowered(lowered) => {
                with_positions!(&lowered.positions, p => lowered.scatter(OP, dst, p, updates, reducer))
            }
        }
    }

    /// The same plan with a dynamic-rank output (`GatherPlan`, so that plans of different
    /// methods fit one collection).
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plans: Vec<GatherPlan> = vec![
    ///     GatherPlan::gather([3, 2], &array![2_i64], 0)?.into_dyn(),
    ///     GatherPlan::gather_elements([3, 2], &array![[2_i64, 0]], 0)?.into_dyn(),
    /// ];
    /// let x = array![[0, 1], [10, 11], [20, 21]];
    /// assert_eq!(plans[1].apply(&x)?, array![[20, 1]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn into_dyn(self) -> GatherPlan {
        GatherPlan {
            input_shape: self.input_shape,
            output_shape: self.output_shape,
            how: self.how,
            out: PhantomData,
        }
    }

    /// Whether `input` has the plan's shape.
    #[inline(always)]
    fn check_input<A, D: Dimension>(
        &self,
        op: &'static str,
        input: &ArrayRef<A, D>,
    ) -> Result<(), GatherError> {
        if same(input.shape(), &self.input_shape) {
            Ok(())
        } else {
            Err(GatherError::InputShape {
                op,
                expected: self.input_shape.to_vec(),
                found: input.shape().to_vec(),
            })
        }
    }
}

/// `apply`'s name in its errors.
const APPLY: &str = "GatherPlan::apply";
