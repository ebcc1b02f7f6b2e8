//! The extension trait: every gather as a method of every ndarray array and view.

use ndarray::{Array, ArrayBase, ArrayD, ArrayRef, Data, Dimension};

use super::private;
use crate::axis::{AxisArg, TakeAxis};
use crate::call::{Call, Raw, into_dim};
use crate::error::GatherError;
use crate::index::{GatherIndex, IndexMode};
use crate::indices::IndexArray;
use crate::lower::{self, Lowering};
use crate::rank::GatherRank;

/// Gather methods for every ndarray array and view (`Array`, `ArrayView`, `ArcArray`,
/// `CowArray`, `ArrayRef`, ...), whatever its memory layout.
///
/// Indices are any integer array of a [`GatherIndex`] type, in any layout, including
/// zero-stride broadcast views. Every method returns a [`GatherError`] instead of
/// panicking on a bad shape, axis or index. The trait is sealed.
///
/// Every method is one call of [`gather_multiaxis`](GatherExt::gather_multiaxis) on views
/// of its arguments; each method's documentation gives the lowering. The table in the
/// [crate documentation](crate#every-library-s-gather) maps each library's call to its
/// method here.
pub trait GatherExt<A, D>: private::Sealed<A, D>
where
    A: Clone + Send + Sync,
    D: Dimension,
{
    /// The multiaxis gather: same rank for input, indices and output; each output element
    /// reads the input at a coordinate whose `axes` components come from `indices`.
    ///
    /// With `k = max(axes.len(), 1)`, the last indices dimension holds `k` index values
    /// per coordinate, so it must be a multiple of `k`; the *logical* indices shape is the
    /// indices shape with that dimension divided by `k`. The output shape is, per
    /// dimension `d`:
    ///
    /// - if `d` is in `axes`: the logical indices size;
    /// - otherwise: the input and logical indices sizes broadcast (equal, or one is 1).
    ///
    /// and `output[o] = input[i]` where `i[d] = o[d]` off the axes (0 where the input has
    /// size 1) and `i[axes[j]] = indices[c, ..., c_last * k + j]` with `c` the output
    /// coordinate masked to the indices (0 where the indices have size 1). Axes may be in
    /// any order and non-contiguous: `axes = [2, 1]` reads `(x, y)` pairs into an
    /// `[N, H, W, C]` input. Empty `axes` is a plain broadcast of the input (indices
    /// values are not read). A rank-0 input returns itself.
    ///
    /// Negative indices count from the end once. Broadcasting uses zero strides, never a
    /// copy. This is the operator of the "Gather Multiaxis" proposal; with one axis it is
    /// ONNX GatherElements with broadcasting (numpy.take_along_axis).
    ///
    /// # Errors
    /// [`RankMismatch`](GatherError::RankMismatch) if the ranks differ;
    /// [`AxisOutOfBounds`](GatherError::AxisOutOfBounds) and
    /// [`DuplicateAxis`](GatherError::DuplicateAxis) for bad `axes`;
    /// [`CoordinateFold`](GatherError::CoordinateFold) if the last indices dimension is not
    /// a multiple of `k`; [`ShapeMismatch`](GatherError::ShapeMismatch) if sizes do not
    /// broadcast; [`EmptyAxis`](GatherError::EmptyAxis) if a gathered axis is empty and
    /// the output is not; [`IndexOutOfBounds`](GatherError::IndexOutOfBounds) for the first
    /// (row-major) index outside `-len..len`; [`SizeOverflow`](GatherError::SizeOverflow)
    /// if the output cannot be allocated. Indices are only read, and so only checked,
    /// when the output is not empty.
    ///
    /// # Examples
    /// Sampling `(x, y)` points from each image of an `[N, H, W, C]` batch:
    /// ```
    /// use ndarray::{Array, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// // 1 image, H = 2, W = 3, C = 2; element value = 100*y + 10*x + c.
    /// let img = Array::from_shape_fn((1, 2, 3, 2), |(_, y, x, c)| 100 * y + 10 * x + c);
    /// // Two points per image, (x, y) folded into the last dimension: logical [1, 2, 1, 1].
    /// let points = array![[[[2_i64, 1]], [[0, 0]]]];
    /// let out = img.gather_multiaxis(&points, &[2, 1])?;
    /// assert_eq!(out, array![[[[120, 121]], [[0, 1]]]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "gatherMultiaxis")]
    fn gather_multiaxis<I: GatherIndex, E: Dimension>(
        &self,
        indices: impl IndexArray<I, E>,
        axes: &[usize],
    ) -> Result<Array<A, D>, GatherError> {
        alloc_keeping_rank(
            self.array_ref(),
            indices,
            "gather_multiaxis",
            &Lowering::multiaxis(axes),
        )
    }

    /// [`gather_multiaxis`](GatherExt::gather_multiaxis) into `out`, which must have exactly
    /// the output shape (any memory order). No output is allocated; the call itself
    /// allocates nothing for inputs of rank up to 6 (above that, a few small vectors for
    /// the shapes, strides and loops it plans).
    ///
    /// # Errors
    /// Those of [`gather_multiaxis`](GatherExt::gather_multiaxis), and
    /// [`OutputShape`](GatherError::OutputShape) if `out` has another shape. Every error
    /// but [`IndexOutOfBounds`](GatherError::IndexOutOfBounds) is found before the first
    /// write, and `out` is untouched. Indices are checked as they are read (a separate
    /// pass would read them twice: PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages), so after an
    /// index error the contents of `out` are unspecified: every element is still a valid
    /// value (its old one or some element of the input), but which were written is not
    /// said. (NumPy's `take(out=...)` pays for a buffer to avoid this.)
    ///
    /// # Examples
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let a = array![[0, 1, 2], [10, 11, 12]];
    /// let mut out = Array2::zeros((2, 2));
    /// a.gather_multiaxis_into(&array![[2_i32, 0], [1, 1]], &[1], &mut out)?;
    /// assert_eq!(out, array![[2, 0], [11, 11]]);
    /// // A wrong shape is refused before anything is written.
    /// let mut wrong = Array2::zeros((2, 3));
    /// assert!(a.gather_multiaxis_into(&array![[2_i32, 0], [1, 1]], &[1], &mut wrong).is_err());
    /// assert_eq!(wrong, Array2::zeros((2, 3)));
    /// # Ok::<(), GatherError>(())
    /// ```
    fn gather_multiaxis_into<I: GatherIndex, E: Dimension>(
        &self,
        indices: impl IndexArray<I, E>,
        axes: &[usize],
        out: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError> {
        indices.with_ref("gather_multiaxis_into", |indices| {
            let call = Call::multiaxis(
                "gather_multiaxis_into",
                Raw::of(self.array_ref()),
                Raw::of(indices),
                axes,
            );
            call.gather_into(out)
        })
    }

    /// ONNX Gather (opsets 1, 11, 13) = numpy.take with an axis = tf.gather (batch_dims 0)
    /// = torch.index_select (1-D indices): whole slices of the input along `axis`, one per
    /// index; indices of any rank `q`, a scalar included.
    ///
    /// Output shape: `input.shape[..axis] ++ indices.shape ++ input.shape[axis + 1..]`
    /// (rank `q + r - 1`). `axis` may be negative (`-1` is the last); so may the indices.
    ///
    /// Lowering: input `[in[..=axis], 1 x q, in[axis + 1..]]`, indices
    /// `[1 x (axis + 1), idx.shape, 1 x (r - axis - 1)]`, `axes = [axis]`; the unit axis
    /// `axis` of the result is dropped. This is
    /// [`gather_batched`](GatherExt::gather_batched) with `batch_dims = 0`.
    ///
    /// Into an existing output (any memory order, no allocation), or with the same
    /// indices many times: [`GatherPlan::gather`](crate::GatherPlan::gather)`(input.shape(), &indices, axis)`, then
    /// [`apply_into`](crate::GatherPlan::apply_into).
    ///
    /// # Errors
    /// [`AxisOutOfBounds`](GatherError::AxisOutOfBounds) (a rank-0 input has no axis),
    /// [`EmptyAxis`](GatherError::EmptyAxis),
    /// [`IndexOutOfBounds`](GatherError::IndexOutOfBounds),
    /// [`SizeOverflow`](GatherError::SizeOverflow).
    ///
    /// # Examples
    /// ```
    /// use ndarray::{arr0, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let a = array![[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]];
    /// assert_eq!(a.gather(&array![3_i64, 1], 0)?, array![[30, 31, 32], [10, 11, 12]]);
    /// assert_eq!(a.gather(&array![[0_i64, -1]], -1)?.shape(), &[4, 1, 2]);
    /// assert_eq!(a.gather(&arr0(2_i64), 1)?, array![2, 12, 22, 32]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "Gather", alias = "index_select", alias = "tf.gather")]
    fn gather<I: GatherIndex, E: GatherRank<D>>(
        &self,
        indices: impl IndexArray<I, E>,
        axis: impl AxisArg,
    ) -> Result<Array<A, E::Out>, GatherError> {
        let out = alloc(
            self.array_ref(),
            indices,
            "gather",
            &Lowering::gather(axis),
            IndexMode::Raise,
        )?;
        into_dim("gather", out)
    }

    /// ONNX GatherElements = torch.gather = CoreML gather_along_axis: one element per
    /// index, `output[i][j][k] = input[index][j][k]` for `axis = 0` and so on.
    ///
    /// Input and indices have the same rank; output shape = indices shape. Off the axis
    /// the indices may be smaller than the input: the leading block of the input is read,
    /// as ONNX Runtime and PyTorch do (never larger). For broadcasting use
    /// [`take_along_axis`](GatherExt::take_along_axis).
    ///
    /// Lowering: the input sliced to `..indices.shape[d]` on every `d != axis`, then
    /// `gather_multiaxis(indices, [axis])`.
    ///
    /// Into an existing output (any memory order, no allocation), or with the same
    /// indices many times: [`GatherPlan::gather_elements`](crate::GatherPlan::gather_elements)`(input.shape(), &indices, axis)`, then
    /// [`apply_into`](crate::GatherPlan::apply_into).
    ///
    /// # Errors
    /// [`RankMismatch`](GatherError::RankMismatch),
    /// [`AxisOutOfBounds`](GatherError::AxisOutOfBounds),
    /// [`ShapeMismatch`](GatherError::ShapeMismatch) if the indices are larger than the
    /// input off the axis, [`EmptyAxis`](GatherError::EmptyAxis),
    /// [`IndexOutOfBounds`](GatherError::IndexOutOfBounds).
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let a = array![[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]];
    /// let i = array![[3_i64, 1, 1], [2, 0, 3]];
    /// assert_eq!(a.gather_elements(&i, 0)?, array![[30, 11, 12], [20, 1, 32]]);
    /// assert_eq!(a.gather_elements(&array![[2_i64], [1], [0], [2]], 1)?, array![[2], [11], [20], [32]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "GatherElements", alias = "gather_along_axis", alias = "torch.gather")]
    fn gather_elements<I: GatherIndex, E: Dimension>(
        &self,
        indices: impl IndexArray<I, E>,
        axis: impl AxisArg,
    ) -> Result<Array<A, D>, GatherError> {
        alloc_keeping_rank(
            self.array_ref(),
            indices,
            "gather_elements",
            &Lowering::elements(axis),
        )
    }

    /// ONNX GatherND = tf.gather_nd = CoreML gather_nd: the last indices dimension holds
    /// `k` coordinates into the input dimensions after the first `batch_dims`; each
    /// coordinate tuple selects an element (`k = r - batch_dims`) or a whole slice.
    ///
    /// Output shape: `batch ++ indices.shape[batch_dims..q - 1] ++ input.shape[batch_dims + k..]`
    /// where `batch` is the first `batch_dims` sizes of input and indices broadcast
    /// together (equal, or 1 on either side: ONNX requires equal sizes, this accepts more).
    /// `k` may be 0 (whole slices, no value read) up to `r - batch_dims`.
    ///
    /// Lowering, with `m = q - 1 - batch_dims`, `t = r - batch_dims - k`, `w = max(k, m)`:
    /// input `[in[..batch_dims + k], 1 x (w - k), in[batch_dims + k..], 1]`, indices
    /// `[idx[..q - 1], 1 x (w - m + t), k]`, `axes = batch_dims..batch_dims + k`: the
    /// coordinates are the folded last dimension; the unit axes are dropped after.
    ///
    /// Into an existing output (any memory order, no allocation), or with the same
    /// indices many times: [`GatherPlan::gather_nd`](crate::GatherPlan::gather_nd)`(input.shape(), &indices, batch_dims)`, then
    /// [`apply_into`](crate::GatherPlan::apply_into).
    ///
    /// # Errors
    /// [`RankMismatch`](GatherError::RankMismatch) for rank-0 indices,
    /// [`BatchDims`](GatherError::BatchDims) if `batch_dims` or `k` do not fit or batch
    /// sizes differ, [`EmptyAxis`](GatherError::EmptyAxis),
    /// [`IndexOutOfBounds`](GatherError::IndexOutOfBounds).
    ///
    /// # Examples
    /// ```
    /// use ndarray::{Array, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let a = Array::from_shape_vec((2, 2, 2), (0..8).collect()).unwrap();
    /// assert_eq!(a.gather_nd(&array![[0_i64, 1], [1, 0]], 0)?, array![[2, 3], [4, 5]].into_dyn());
    /// assert_eq!(a.gather_nd(&array![[1_i64], [0]], 1)?, array![[2, 3], [4, 5]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "GatherND", alias = "tf.gather_nd", alias = "gatherND")]
    fn gather_nd<I: GatherIndex, E: Dimension>(
        &self,
        indices: impl IndexArray<I, E>,
        batch_dims: usize,
    ) -> Result<ArrayD<A>, GatherError> {
        alloc(
            self.array_ref(),
            indices,
            "gather_nd",
            &Lowering::nd(batch_dims),
            IndexMode::Raise,
        )
    }

    /// tf.gather with `batch_dims` = CoreML gather with `batch_dims`: for each of the
    /// first `batch_dims` positions, [`gather`](GatherExt::gather) with that position's
    /// indices. TOSA `gather` (values `[N, K, C]`, indices `[N, W]`) is
    /// `gather_batched(indices, 1, 1)`.
    ///
    /// Output shape: `input.shape[..axis] ++ indices.shape[batch_dims..] ++ input.shape[axis + 1..]`.
    /// Requires `batch_dims <= axis`, `batch_dims <= q` and equal batch sizes
    /// (TensorFlow's rules).
    ///
    /// Lowering: input `[in[..=axis], 1 x (q - batch_dims), in[axis + 1..]]`, indices
    /// `[idx[..batch_dims], 1 x (axis + 1 - batch_dims), idx[batch_dims..], 1 x (r - axis - 1)]`,
    /// `axes = [axis]`; the unit axis `axis` of the result is dropped.
    ///
    /// Into an existing output (any memory order, no allocation), or with the same
    /// indices many times: [`GatherPlan::gather_batched`](crate::GatherPlan::gather_batched)`(input.shape(), &indices, axis, batch_dims)`, then
    /// [`apply_into`](crate::GatherPlan::apply_into).
    ///
    /// # Errors
    /// [`AxisOutOfBounds`](GatherError::AxisOutOfBounds),
    /// [`BatchDims`](GatherError::BatchDims), [`EmptyAxis`](GatherError::EmptyAxis),
    /// [`IndexOutOfBounds`](GatherError::IndexOutOfBounds).
    ///
    /// # Examples
    /// TOSA gather: per batch, rows of a `[N, K, C]` table.
    /// ```
    /// use ndarray::{Array, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let values = Array::from_shape_fn((2, 3, 2), |(n, k, c)| 100 * n + 10 * k + c);
    /// let out = values.gather_batched(&array![[2_i32, 0], [1, 1]], 1, 1)?;
    /// assert_eq!(out, array![[[20, 21], [0, 1]], [[110, 111], [110, 111]]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "batch_gather", alias = "tosa.gather", alias = "batch_dims")]
    fn gather_batched<I: GatherIndex, E: Dimension>(
        &self,
        indices: impl IndexArray<I, E>,
        axis: impl AxisArg,
        batch_dims: usize,
    ) -> Result<ArrayD<A>, GatherError> {
        let lowering = Lowering::batched(axis, batch_dims);
        alloc(
            self.array_ref(),
            indices,
            "gather_batched",
            &lowering,
            IndexMode::Raise,
        )
    }

    /// numpy.take: with `Some(axis)`, [`gather`](GatherExt::gather) with an
    /// [`IndexMode`]; with `None`, elements of the input read in logical row-major order
    /// whatever its memory layout (= torch.take), output shape = indices shape.
    ///
    /// Lowering: `Some(axis)` as `gather`; `None` as `gather(indices, 0)` on the input
    /// flattened, which is a view for standard-layout inputs and 1-D views; other layouts
    /// are copied once into row-major order first.
    ///
    /// Into an existing output (any memory order, no allocation), or with the same
    /// indices many times: [`GatherPlan::take`](crate::GatherPlan::take)`(input.shape(), &indices, axis, mode)`, then
    /// [`apply_into`](crate::GatherPlan::apply_into).
    ///
    /// # Errors
    /// [`AxisOutOfBounds`](GatherError::AxisOutOfBounds),
    /// [`EmptyAxis`](GatherError::EmptyAxis) (in every mode: an empty axis has no element
    /// to wrap or clip to), [`IndexOutOfBounds`](GatherError::IndexOutOfBounds) in
    /// [`IndexMode::Raise`] only.
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let a = array![[1, 2], [3, 4]];
    /// assert_eq!(a.t().take(&array![0_i64, 1, 2], None, IndexMode::Raise)?, array![1, 3, 2].into_dyn());
    /// assert_eq!(a.take(&array![5_i64], Some(0), IndexMode::Clip)?, array![[3, 4]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "torch.take", alias = "np.take")]
    fn take<I: GatherIndex, E: GatherRank<D>, X: TakeAxis>(
        &self,
        indices: impl IndexArray<I, E>,
        axis: X,
        mode: IndexMode,
    ) -> Result<Array<A, X::Out<D, E>>, GatherError> {
        let out = alloc(self.array_ref(), indices, "take", &Lowering::take(axis), mode)?;
        into_dim("take", out)
    }

    /// numpy.take_along_axis = torch.take_along_dim: same rank, one element per index
    /// along `axis`, the other dimensions broadcast both ways (equal, or 1 on either side).
    ///
    /// Output shape: the broadcast of input and indices shapes, with `indices.shape[axis]`
    /// on the axis. Lowering: exactly `gather_multiaxis(indices, [axis])`.
    ///
    /// Into an existing output (any memory order, no allocation), or with the same
    /// indices many times: [`GatherPlan::take_along_axis`](crate::GatherPlan::take_along_axis)`(input.shape(), &indices, axis)`, then
    /// [`apply_into`](crate::GatherPlan::apply_into).
    ///
    /// # Errors
    /// [`RankMismatch`](GatherError::RankMismatch),
    /// [`AxisOutOfBounds`](GatherError::AxisOutOfBounds),
    /// [`ShapeMismatch`](GatherError::ShapeMismatch), [`EmptyAxis`](GatherError::EmptyAxis),
    /// [`IndexOutOfBounds`](GatherError::IndexOutOfBounds).
    ///
    /// # Examples
    /// The largest element of each row, by argmax indices:
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let a = array![[10, 30, 20], [60, 40, 50]];
    /// assert_eq!(a.take_along_axis(&array![[1_usize], [0]], 1)?, array![[30], [60]]);
    /// // Indices broadcast along rows: the same columns from every row.
    /// assert_eq!(a.take_along_axis(&array![[2_usize, 0]], 1)?, array![[20, 10], [50, 60]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "take_along_dim", alias = "np.take_along_axis")]
    fn take_along_axis<I: GatherIndex, E: Dimension>(
        &self,
        indices: impl IndexArray<I, E>,
        axis: impl AxisArg,
    ) -> Result<Array<A, D>, GatherError> {
        alloc_keeping_rank(
            self.array_ref(),
            indices,
            "take_along_axis",
            &Lowering::along_axis(axis),
        )
    }
}

super::for_every_array!(GatherExt, Data);

/// An allocating gather: `lowering` of `input` and `indices`. (Inlined, as
/// [`lower::with_call`] and [`Call::lowered`](crate::call::Call::lowered) are, so that the views and
/// the call are built where they are used: see `Call::lowered`.)
#[inline(always)]
fn alloc<A: Clone + Send + Sync, D: Dimension, I: GatherIndex, E: Dimension>(
    input: &ArrayRef<A, D>,
    indices: impl IndexArray<I, E>,
    op: &'static str,
    lowering: &Lowering,
    mode: IndexMode,
) -> Result<ArrayD<A>, GatherError> {
    indices.with_ref(op, |indices| {
        lower::with_call(op, lowering, (input, indices), mode, |call| call.alloc())
    })
}

/// [`alloc`] for the methods whose output has the input's rank, as the input's dimension
/// type.
#[inline(always)]
fn alloc_keeping_rank<A: Clone + Send + Sync, D: Dimension, I: GatherIndex, E: Dimension>(
    input: &ArrayRef<A, D>,
    indices: impl IndexArray<I, E>,
    op: &'static str,
    lowering: &Lowering,
) -> Result<Array<A, D>, GatherError> {
    into_dim(op, alloc(input, indices, op, lowering, IndexMode::Raise)?)
}
