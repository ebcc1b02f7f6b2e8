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
mod reduce;
mod standard;
#[cfg(test)]
mod tests;
mod tiny;

pub use self::reduce::GatherReducePlan;

use std::marker::PhantomData;

use ndarray::{Array, ArrayD, ArrayRef, Dimension, IxDyn};

use self::positions::{Positions, broadcast_positions, resolved};
use self::standard::{Lowered, fold_runs, standard};
use self::tiny::Tiny;
use crate::axis::{AxisArg, TakeAxis};
use crate::call::{fresh, into_dim};
use crate::error::GatherError;
use crate::index::{GatherIndex, IndexMode};
use crate::indices::IndexArray;
use crate::kernel::Store;
use crate::layout::{checked_len, same};
use crate::lower::{self, Lowering};
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
/// # The output's type
/// The type parameter is the outputs' dimension type. Plans of the methods that keep the
/// rank ([`multiaxis`](GatherPlan::multiaxis), [`gather_elements`](GatherPlan::gather_elements),
/// [`take_along_axis`](GatherPlan::take_along_axis)) have their indices' (a `GatherPlan<Ix2>`
/// from 2-D indices applies to an `Array2` and returns one); the others, whose output rank
/// depends on the input shape (a slice) or on `batch_dims`, are `GatherPlan` =
/// `GatherPlan<IxDyn>` and return `ArrayD` (`.into_dimensionality()?` types it).
/// [`into_dyn`](GatherPlan::into_dyn) makes any plan a `GatherPlan`.
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
/// let plan = GatherPlan::gather(&[4, 2], &ids, 0)?; // indices checked here, once
/// assert_eq!(plan.output_shape(), &[3, 2]);
/// let table = array![[0.0, 0.1], [1.0, 1.1], [2.0, 2.1], [3.0, 3.1]];
/// assert_eq!(plan.apply(&table)?, table.gather(&ids, 0)?.into_dyn()); // (a typed Array2)
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

impl GatherPlan {
    /// The plan of [`gather_multiaxis`](crate::GatherExt::gather_multiaxis) for inputs of
    /// shape `input_shape`.
    ///
    /// # Errors
    /// Exactly those of `input.gather_multiaxis(indices, axes)` for an input of that
    /// shape, and [`SizeOverflow`](GatherError::SizeOverflow) for a shape no input can
    /// have.
    ///
    /// # Examples
    /// A fixed `(x, y)` grid over many `[N, H, W, C]` batches:
    /// ```
    /// use ndarray::{Array, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let points = array![[[[2_i64, 1]], [[0, 0]]]]; // [1, 2, 1, 2]: two (x, y) pairs
    /// let plan = GatherPlan::multiaxis(&[1, 2, 3, 2], &points, &[2, 1])?;
    /// let img = Array::from_shape_fn((1, 2, 3, 2), |(_, y, x, c)| 100 * y + 10 * x + c);
    /// assert_eq!(plan.apply(&img)?, array![[[[120, 121]], [[0, 1]]]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn multiaxis<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: impl IndexArray<I, E>,
        axes: &[usize],
    ) -> Result<GatherPlan<E>, GatherError> {
        let lowering = Lowering::multiaxis(axes);
        Self::new(
            "GatherPlan::multiaxis",
            lowering,
            input_shape,
            indices,
            IndexMode::Raise,
        )
    }

    /// The plan of [`gather`](crate::GatherExt::gather) (ONNX Gather, numpy.take with an
    /// axis) for inputs of shape `input_shape`.
    ///
    /// # Errors
    /// Exactly those of `input.gather(indices, axis)` for an input of that shape.
    ///
    /// # Examples
    /// The same token ids over every layer's table:
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather(&[1000, 4], &array![[7_i64, 7], [999, 0]], 0)?;
    /// for layer in 0..3 {
    ///     let table = Array2::from_shape_fn((1000, 4), |(i, j)| (layer * 10_000 + i * 4 + j) as f32);
    ///     let rows = plan.apply(&table)?; // [2, 2, 4]
    ///     assert_eq!(rows[[1, 0, 3]], table[[999, 3]]);
    /// }
    /// let e = GatherPlan::gather(&[1000, 4], &array![1000_i64], 0).unwrap_err();
    /// assert!(e.to_string().starts_with("GatherPlan::gather: index 1000 at position [0]"));
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: impl IndexArray<I, E>,
        axis: impl AxisArg,
    ) -> Result<GatherPlan, GatherError> {
        let lowering = Lowering::gather(axis);
        Self::new(
            "GatherPlan::gather",
            lowering,
            input_shape,
            indices,
            IndexMode::Raise,
        )
    }

    /// The plan of [`gather_elements`](crate::GatherExt::gather_elements) (ONNX
    /// GatherElements, torch.gather) for inputs of shape `input_shape`: ONNX Runtime's and
    /// Simd's constant-index GatherElements.
    ///
    /// # Errors
    /// Exactly those of `input.gather_elements(indices, axis)` for an input of that shape.
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather_elements(&[2, 3], &array![[2_i32, 0], [-1, 1]], 1)?;
    /// assert_eq!(plan.apply(&array![[1, 2, 3], [4, 5, 6]])?, array![[3, 1], [6, 5]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather_elements<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: impl IndexArray<I, E>,
        axis: impl AxisArg,
    ) -> Result<GatherPlan<E>, GatherError> {
        let lowering = Lowering::elements(axis);
        Self::new(
            "GatherPlan::gather_elements",
            lowering,
            input_shape,
            indices,
            IndexMode::Raise,
        )
    }

    /// The plan of [`gather_nd`](crate::GatherExt::gather_nd) (ONNX GatherND,
    /// tf.gather_nd) for inputs of shape `input_shape`.
    ///
    /// # Errors
    /// Exactly those of `input.gather_nd(indices, batch_dims)` for an input of that shape.
    ///
    /// # Examples
    /// A fixed sampling pattern over many frames:
    /// ```
    /// use ndarray::{Array, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let pattern = array![[0_i64, 1], [2, 2]]; // two (row, col) points
    /// let plan = GatherPlan::gather_nd(&[3, 3], &pattern, 0)?;
    /// for t in 0..2 {
    ///     let frame = Array::from_shape_fn((3, 3), |(r, c)| 100 * t + 10 * r + c);
    ///     assert_eq!(plan.apply(&frame)?, array![100 * t + 1, 100 * t + 22].into_dyn());
    /// }
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather_nd<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: impl IndexArray<I, E>,
        batch_dims: usize,
    ) -> Result<GatherPlan, GatherError> {
        Self::new(
            "GatherPlan::gather_nd",
            Lowering::nd(batch_dims),
            input_shape,
            indices,
            IndexMode::Raise,
        )
    }

    /// The plan of [`gather_batched`](crate::GatherExt::gather_batched) (tf.gather with
    /// `batch_dims`) for inputs of shape `input_shape`.
    ///
    /// # Errors
    /// Exactly those of `input.gather_batched(indices, axis, batch_dims)` for an input of
    /// that shape.
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather_batched(&[2, 3], &array![[2_i64], [0]], 1, 1)?;
    /// assert_eq!(plan.apply(&array![[1, 2, 3], [4, 5, 6]])?, array![[3], [4]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather_batched<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: impl IndexArray<I, E>,
        axis: impl AxisArg,
        batch_dims: usize,
    ) -> Result<GatherPlan, GatherError> {
        let lowering = Lowering::batched(axis, batch_dims);
        Self::new(
            "GatherPlan::gather_batched",
            lowering,
            input_shape,
            indices,
            IndexMode::Raise,
        )
    }

    /// The plan of [`take`](crate::GatherExt::take) (numpy.take, torch.take) for inputs of
    /// shape `input_shape`; the `mode` is applied once, here.
    ///
    /// # Errors
    /// Exactly those of `input.take(indices, axis, mode)` for an input of that shape.
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::take(&[2, 2], &array![-1_i64, 4], None, IndexMode::Wrap)?;
    /// assert_eq!(plan.apply(&array![[1, 2], [3, 4]])?, array![4, 1].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn take<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: impl IndexArray<I, E>,
        axis: impl TakeAxis,
        mode: IndexMode,
    ) -> Result<GatherPlan, GatherError> {
        let lowering = Lowering::take(axis);
        Self::new("GatherPlan::take", lowering, input_shape, indices, mode)
    }

    /// The plan of [`take_along_axis`](crate::GatherExt::take_along_axis)
    /// (numpy.take_along_axis, torch.take_along_dim) for inputs of shape `input_shape`.
    ///
    /// # Errors
    /// Exactly those of `input.take_along_axis(indices, axis)` for an input of that shape.
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// // The indices broadcast over the rows; the plan stores them once.
    /// let plan = GatherPlan::take_along_axis(&[2, 3], &array![[2_u32, 0]], 1)?;
    /// assert_eq!(plan.apply(&array![[1, 2, 3], [4, 5, 6]])?, array![[3, 1], [6, 4]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn take_along_axis<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: impl IndexArray<I, E>,
        axis: impl AxisArg,
    ) -> Result<GatherPlan<E>, GatherError> {
        let lowering = Lowering::along_axis(axis);
        Self::new(
            "GatherPlan::take_along_axis",
            lowering,
            input_shape,
            indices,
            IndexMode::Raise,
        )
    }

    /// Lowers the gather over a stand-in input of the shape, checks and resolves the
    /// indices: into input offsets for a tiny output, else into positions, with which the
    /// gather is lowered once more for standard-layout inputs.
    fn new<I: GatherIndex, E: Dimension, O: Dimension>(
        op: &'static str,
        lowering: Lowering,
        input_shape: &[usize],
        indices: impl IndexArray<I, E>,
        mode: IndexMode,
    ) -> Result<GatherPlan<O>, GatherError> {
        indices.with_ref(op, |indices| {
            Self::build(op, lowering, input_shape, indices, mode)
        })
    }

    /// [`new`](Self::new) for indices as ndarray's reference type.
    fn build<I: GatherIndex, E: Dimension, O: Dimension>(
        op: &'static str,
        lowering: Lowering,
        input_shape: &[usize],
        indices: &ArrayRef<I, E>,
        mode: IndexMode,
    ) -> Result<GatherPlan<O>, GatherError> {
        // Zero-sized elements stand in for the input: any shape in C order without
        // memory, made without ndarray (whose view took a tenth of W7's plan build).
        let stand_in = (input_shape, indices);
        let (output_shape, found) = lower::with_stand_in(op, &lowering, stand_in, mode, |call| {
            let mut plan = call.empty_plan();
            call.plan(&mut plan, 1)?;
            let output_shape = call.final_shape(&plan.out_shape);
            if let Some(tiny) = Tiny::of(call, &mut plan, &output_shape)? {
                return Ok((output_shape, Found::Tiny(tiny)));
            }
            let longest = plan.axes.iter().map(|t| t.len).max().unwrap_or(0);
            let shape = indices.shape();
            let positions = if longest <= 1 << 16 {
                Positions::U16(resolved(op, call, &plan, shape)?)
            } else if longest <= 1 << 32 {
                Positions::U32(resolved(op, call, &plan, shape)?)
            } else {
                Positions::Wide(resolved(op, call, &plan, shape)?)
            };
            Ok((output_shape, Found::Positions(positions)))
        })?;
        let how = match found {
            Found::Tiny(tiny) => How::Tiny(tiny),
            Found::Positions(positions) => {
                let indices_shape = indices.shape().to_vec();
                // The same gather over the stand-in, with the positions as indices.
                let standard = with_positions!(&positions, p => {
                    let p_full = broadcast_positions(op, &indices_shape, p)?;
                    let standard = lower::with_stand_in(op, &lowering, (input_shape, &p_full), IndexMode::Raise, standard)?;
                    fold_runs(standard, p)
                });
                How::Lowered(Box::new(Lowered {
                    lowering,
                    indices_shape,
                    positions,
                    standard,
                }))
            }
        };
        Ok(GatherPlan {
            input_shape: Small::from(input_shape),
            output_shape,
            how,
            out: PhantomData,
        })
    }
}

impl<O: Dimension> GatherPlan<O> {
    /// The shape of the inputs this plan gathers from.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather(&[5, 2], &array![1_i64], 0)?;
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
    /// let plan = GatherPlan::gather(&[5, 2], &array![[1_i64, 2, 3]], 0)?;
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
    /// let plan = GatherPlan::gather_elements(&[2, 2], &array![[1_i64, 1], [0, 1]], 0)?;
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
    /// let plan = GatherPlan::gather(&[3, 2], &array![[2_i64, 0]], 0)?;
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

    /// The same plan with a dynamic-rank output (`GatherPlan`, so that plans of different
    /// methods fit one collection).
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plans: Vec<GatherPlan> = vec![
    ///     GatherPlan::gather(&[3, 2], &array![2_i64], 0)?,
    ///     GatherPlan::gather_elements(&[3, 2], &array![[2_i64, 0]], 0)?.into_dyn(),
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

/// What a plan's first lowering found.
pub(crate) enum Found {
    Tiny(Tiny),
    Positions(Positions),
}
