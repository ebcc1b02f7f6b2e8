//! [`GatherPlan`]'s constructors, one per method of [`GatherExt`](crate::GatherExt): each
//! lowers the method over a stand-in input of the plan's shape, then checks and resolves
//! the indices once.

use std::marker::PhantomData;

use ndarray::{ArrayRef, Dimension};

use crate::shape::ShapeArg;

use super::positions::{Positions, broadcast_positions, resolved};
use super::standard::{Lowered, fold_runs, standard};
use super::tiny::Tiny;
use super::{GatherPlan, How};
use crate::axis::{AxisArg, TakeAxis};
use crate::error::GatherError;
use crate::index::{GatherIndex, IndexMode};
use crate::indices::IndexArray;
use crate::lower::{self, Lowering};
use crate::rank::GatherRank;
use crate::small::Small;

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
    /// let plan = GatherPlan::multiaxis([1, 2, 3, 2], &points, &[2, 1])?;
    /// let img = Array::from_shape_fn((1, 2, 3, 2), |(_, y, x, c)| 100 * y + 10 * x + c);
    /// assert_eq!(plan.apply(&img)?, array![[[[120, 121]], [[0, 1]]]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn multiaxis<M, I: GatherIndex, E: Dimension>(
        input_shape: impl ShapeArg<M>,
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
    /// let plan = GatherPlan::gather([1000, 4], &array![[7_i64, 7], [999, 0]], 0)?;
    /// for layer in 0..3 {
    ///     let table = Array2::from_shape_fn((1000, 4), |(i, j)| (layer * 10_000 + i * 4 + j) as f32);
    ///     let rows = plan.apply(&table)?; // [2, 2, 4]
    ///     assert_eq!(rows[[1, 0, 3]], table[[999, 3]]);
    /// }
    /// let e = GatherPlan::gather([1000, 4], &array![1000_i64], 0).unwrap_err();
    /// assert!(e.to_string().starts_with("GatherPlan::gather: index 1000 at position [0]"));
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather<M, Sh: ShapeArg<M>, I: GatherIndex, E: GatherRank<Sh::Dim>>(
        input_shape: Sh,
        indices: impl IndexArray<I, E>,
        axis: impl AxisArg,
    ) -> Result<GatherPlan<E::Out>, GatherError> {
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
    /// let plan = GatherPlan::gather_elements([2, 3], &array![[2_i32, 0], [-1, 1]], 1)?;
    /// assert_eq!(plan.apply(&array![[1, 2, 3], [4, 5, 6]])?, array![[3, 1], [6, 5]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather_elements<M, I: GatherIndex, E: Dimension>(
        input_shape: impl ShapeArg<M>,
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
    /// let plan = GatherPlan::gather_nd([3, 3], &pattern, 0)?;
    /// for t in 0..2 {
    ///     let frame = Array::from_shape_fn((3, 3), |(r, c)| 100 * t + 10 * r + c);
    ///     assert_eq!(plan.apply(&frame)?, array![100 * t + 1, 100 * t + 22].into_dyn());
    /// }
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather_nd<M, I: GatherIndex, E: Dimension>(
        input_shape: impl ShapeArg<M>,
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
    /// let plan = GatherPlan::gather_batched([2, 3], &array![[2_i64], [0]], 1, 1)?;
    /// assert_eq!(plan.apply(&array![[1, 2, 3], [4, 5, 6]])?, array![[3], [4]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather_batched<M, I: GatherIndex, E: Dimension>(
        input_shape: impl ShapeArg<M>,
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
    /// let plan = GatherPlan::take([2, 2], &array![-1_i64, 4], None, IndexMode::Wrap)?;
    /// assert_eq!(plan.apply(&array![[1, 2], [3, 4]])?, array![4, 1].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn take<M, Sh: ShapeArg<M>, I: GatherIndex, E: GatherRank<Sh::Dim>, X: TakeAxis>(
        input_shape: Sh,
        indices: impl IndexArray<I, E>,
        axis: X,
        mode: IndexMode,
    ) -> Result<GatherPlan<X::Out<Sh::Dim, E>>, GatherError> {
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
    /// let plan = GatherPlan::take_along_axis([2, 3], &array![[2_u32, 0]], 1)?;
    /// assert_eq!(plan.apply(&array![[1, 2, 3], [4, 5, 6]])?, array![[3, 1], [6, 4]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn take_along_axis<M, I: GatherIndex, E: Dimension>(
        input_shape: impl ShapeArg<M>,
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
    fn new<M, I: GatherIndex, E: Dimension, O: Dimension>(
        op: &'static str,
        lowering: Lowering,
        input_shape: impl ShapeArg<M>,
        indices: impl IndexArray<I, E>,
        mode: IndexMode,
    ) -> Result<GatherPlan<O>, GatherError> {
        let input_shape = input_shape.into_dim();
        indices.with_ref(op, |indices| {
            Self::build(op, lowering, input_shape.slice(), indices, mode)
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
        // memory, made without ndarray, whose view a tiny plan's build would feel
        // (PERFORMANCE.md#tiny-calls-and-tiny-plans-w7-p7).
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

/// What a plan's first lowering found.
pub(crate) enum Found {
    Tiny(Tiny),
    Positions(Positions),
}
