//! Scatter: every gather's adjoint, as methods of every mutable ndarray array and view.

use ndarray::{ArrayBase, ArrayRef, DataMut, Dimension};

use super::private;
use crate::axis::AxisArg;
use crate::call::{Fit, Raw};
use crate::error::GatherError;
use crate::index::{GatherIndex, IndexMode};
use crate::indices::IndexArray;
use crate::lower::Lowering;
use crate::reduce::{Reducer, Replace};

/// Scatter methods for every mutable ndarray array and view: each writes `updates` into
/// `self` in place, at the positions the matching gather with the same indices would
/// read, combining with what is there through a [`Reducer`].
///
/// A scatter is the adjoint of its gather: with [`Add`](crate::reduce::Add) into zeros it
/// is the gather's backward pass (`<gather(x), u> == <x, scatter_add(0, u)>`). Every
/// method lowers exactly as its gather does (the same views of `self` and the indices)
/// and runs one kernel.
///
/// What every method guarantees:
///
/// - **Duplicates combine in row-major order of `updates`**: the result is exactly, bit
///   for bit, that of applying the updates one at a time in that order, on any number of
///   threads ([`Replace`]: the last one wins). Large scatters run in parallel by giving
///   each thread its own part of `self`, never by atomics; the indices are checked in
///   parallel, but a destination under 1 MiB (a histogram's bins) is written by one
///   thread, which is faster than several threads each reading every index.
/// - **All or nothing**: every shape, axis and index is checked before the first write;
///   on `Err`, `self` is unchanged. (If a reducer or `Clone` panics, `self` holds valid
///   values, some updated, and nothing is dropped twice or leaked.)
/// - **Broadcasting as in the matching gather**: where `self` has size 1 and the indices
///   more, several updates combine into one element; where the indices have size 1, each
///   position of `self` gets its own update.
/// - `self`, indices and updates may have any layout, including negative strides and
///   zero-stride (broadcast) updates. A scalar (0-d) update broadcasts in every method, as
///   `np.add.at(a, idx, 1.0)` does:
///
/// ```
/// use ndarray::{arr0, array};
/// use ndarray_gather::{prelude::*, reduce::Add};
///
/// let mut counts = array![0.0_f32, 0.0, 0.0];
/// counts.scatter(&array![2_i64, 0, 2], &arr0(1.0), 0, Add)?; // np.add.at(counts, idx, 1.0)
/// assert_eq!(counts, array![1.0, 0.0, 2.0]);
/// # Ok::<(), GatherError>(())
/// ```
///
/// The trait is sealed.
pub trait ScatterExt<A, D>: private::SealedMut<A, D>
where
    A: Clone + Send + Sync,
    D: Dimension,
{
    /// The adjoint of [`gather_multiaxis`](crate::GatherExt::gather_multiaxis): `updates`
    /// has exactly the shape `self.gather_multiaxis(indices, axes)` would return, and
    /// each `updates[o]` combines into the element that gather reads for `o`.
    ///
    /// # Errors
    /// Those of [`gather_multiaxis`](crate::GatherExt::gather_multiaxis) (named
    /// `scatter_multiaxis`), and [`UpdatesShape`](GatherError::UpdatesShape) if `updates`
    /// has another shape. `self` is unchanged on every error.
    ///
    /// # Examples
    /// Splatting `(x, y)` points into an `[N, H, W, C]` image (the backward pass of
    /// sampling them):
    /// ```
    /// use ndarray::{Array4, array};
    /// use ndarray_gather::{prelude::*, reduce::Add};
    ///
    /// let mut grad = Array4::<f32>::zeros((1, 2, 3, 1));
    /// let points = array![[[[2_i64, 1]], [[0, 0]], [[2, 1]]]]; // (x, y) folded last
    /// let upd = array![[[[1.0_f32]], [[2.0]], [[0.5]]]];
    /// grad.scatter_multiaxis(&points, &[2, 1], &upd, Add)?;
    /// assert_eq!(grad[[0, 1, 2, 0]], 1.5);
    /// assert_eq!(grad[[0, 0, 0, 0]], 2.0);
    /// # Ok::<(), GatherError>(())
    /// ```
    fn scatter_multiaxis<I: GatherIndex, E: Dimension, E2: Dimension, R: Reducer<A>>(
        &mut self,
        indices: impl IndexArray<I, E>,
        axes: &[usize],
        updates: &ArrayRef<A, E2>,
        reducer: R,
    ) -> Result<(), GatherError> {
        let how = ("scatter_multiaxis", Lowering::multiaxis(axes), Fit::Exact);
        scatter_with(self.array_mut(), (indices, updates), how, reducer)
    }

    /// The adjoint of [`gather`](crate::GatherExt::gather) (ONNX Gather, `numpy.take`):
    /// `np.add.at(a, idx, v)` (and `np.minimum.at`, ...) along `axis`, torch `index_add_` /
    /// `index_copy_` / `index_reduce_`, `tf.compat.v1.scatter_*`. `updates` has exactly the
    /// shape `self.gather(indices, axis)` would return: `self.shape[..axis] ++
    /// indices.shape ++ self.shape[axis + 1..]`.
    ///
    /// # Errors
    /// Those of [`gather`](crate::GatherExt::gather), and
    /// [`UpdatesShape`](GatherError::UpdatesShape). `self` is unchanged on every error.
    ///
    /// # Examples
    /// An embedding table's gradient: rows of `row_grads` added at their token ids.
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::{prelude::*, reduce::Add};
    ///
    /// let mut grad = Array2::<f32>::zeros((4, 2));
    /// let ids = array![[3_i64, 1], [3, 0]];
    /// let row_grads = array![[[1.0, 1.0], [2.0, 2.0]], [[0.5, 0.5], [4.0, 4.0]]];
    /// grad.scatter(&ids, &row_grads, 0, Add)?; // np.add.at(grad, ids, row_grads)
    /// assert_eq!(grad, array![[4.0, 4.0], [2.0, 2.0], [0.0, 0.0], [1.5, 1.5]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(
        alias = "add.at",
        alias = "index_add_",
        alias = "index_copy_",
        alias = "index_reduce_"
    )]
    fn scatter<I: GatherIndex, E: Dimension, E2: Dimension, R: Reducer<A>>(
        &mut self,
        indices: impl IndexArray<I, E>,
        updates: &ArrayRef<A, E2>,
        axis: impl AxisArg,
        reducer: R,
    ) -> Result<(), GatherError> {
        let how = ("scatter", Lowering::gather(axis), Fit::Exact);
        scatter_with(self.array_mut(), (indices, updates), how, reducer)
    }

    /// The adjoint of [`gather_elements`](crate::GatherExt::gather_elements): ONNX
    /// ScatterElements (and the old Scatter), torch `scatter_` / `scatter_add_` /
    /// `scatter_reduce_(include_self=True)`: `self[..., indices[p], ...] ⊕= updates[p]`
    /// with the index on `axis`.
    ///
    /// `updates` has the rank of the indices and may be larger than them on any dimension
    /// (its leading block is used, as torch does); off the axis the indices may be smaller
    /// than `self`.
    ///
    /// # Errors
    /// Those of [`gather_elements`](crate::GatherExt::gather_elements), and
    /// [`UpdatesShape`](GatherError::UpdatesShape) if `updates` has another rank or is
    /// smaller than the indices somewhere. `self` is unchanged on every error.
    ///
    /// # Examples
    /// ONNX's ScatterElements example (axis 1):
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let mut data = array![[1.0, 2.0, 3.0, 4.0, 5.0]];
    /// data.scatter_elements(&array![[1_i64, 3]], &array![[1.1, 2.1]], 1, Reduction::Replace)?;
    /// assert_eq!(data, array![[1.0, 1.1, 3.0, 2.1, 5.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(
        alias = "ScatterElements",
        alias = "scatter_",
        alias = "scatter_add_",
        alias = "scatter_reduce_"
    )]
    fn scatter_elements<I: GatherIndex, E: Dimension, E2: Dimension, R: Reducer<A>>(
        &mut self,
        indices: impl IndexArray<I, E>,
        updates: &ArrayRef<A, E2>,
        axis: impl AxisArg,
        reducer: R,
    ) -> Result<(), GatherError> {
        let how = ("scatter_elements", Lowering::elements(axis), Fit::Leading);
        scatter_with(self.array_mut(), (indices, updates), how, reducer)
    }

    /// The adjoint of [`gather_nd`](crate::GatherExt::gather_nd): ONNX ScatterND
    /// (`batch_dims = 0`), `tf.tensor_scatter_nd_update` / `_add` / `_min` / `_max`.
    /// `updates` has exactly the shape `self.gather_nd(indices, batch_dims)` would return.
    ///
    /// # Errors
    /// Those of [`gather_nd`](crate::GatherExt::gather_nd), and
    /// [`UpdatesShape`](GatherError::UpdatesShape). `self` is unchanged on every error.
    ///
    /// # Examples
    /// ONNX's ScatterND example: whole slices of a `[4, 4, 4]` tensor.
    /// ```
    /// use ndarray::{Array3, array};
    /// use ndarray_gather::{prelude::*, reduce::Replace};
    ///
    /// let mut data = Array3::<i32>::zeros((4, 2, 2));
    /// let updates = array![[[5, 5], [6, 6]], [[1, 1], [2, 2]]];
    /// data.scatter_nd(&array![[0_i64], [2]], &updates, 0, Replace)?;
    /// assert_eq!(data.index_axis(ndarray::Axis(0), 2), array![[1, 1], [2, 2]]);
    /// assert_eq!(data.sum(), 5 + 5 + 6 + 6 + 1 + 1 + 2 + 2);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(
        alias = "ScatterND",
        alias = "tensor_scatter_nd_update",
        alias = "tensor_scatter_nd_add"
    )]
    fn scatter_nd<I: GatherIndex, E: Dimension, E2: Dimension, R: Reducer<A>>(
        &mut self,
        indices: impl IndexArray<I, E>,
        updates: &ArrayRef<A, E2>,
        batch_dims: usize,
        reducer: R,
    ) -> Result<(), GatherError> {
        let how = ("scatter_nd", Lowering::nd(batch_dims), Fit::Exact);
        scatter_with(self.array_mut(), (indices, updates), how, reducer)
    }

    /// `numpy.put_along_axis`: the adjoint of
    /// [`take_along_axis`](crate::GatherExt::take_along_axis) with [`Replace`]; `values`
    /// broadcasts to the shape that gather would return (numpy).
    ///
    /// # Errors
    /// Those of [`take_along_axis`](crate::GatherExt::take_along_axis), and
    /// [`UpdatesShape`](GatherError::UpdatesShape) if `values` does not broadcast to that
    /// shape. `self` is unchanged on every error.
    ///
    /// # Examples
    /// Zero the largest element of each row:
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let mut a = array![[10, 30, 20], [60, 40, 50]];
    /// a.put_along_axis(&array![[1_usize], [0]], &ndarray::arr0(0), 1)?;
    /// assert_eq!(a, array![[10, 0, 20], [0, 40, 50]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "np.put_along_axis")]
    fn put_along_axis<I: GatherIndex, E: Dimension, E2: Dimension>(
        &mut self,
        indices: impl IndexArray<I, E>,
        values: &ArrayRef<A, E2>,
        axis: impl AxisArg,
    ) -> Result<(), GatherError> {
        let how = ("put_along_axis", Lowering::along_axis(axis), Fit::Broadcast);
        scatter_with(self.array_mut(), (indices, values), how, Replace)
    }
}

super::for_every_array!(ScatterExt, DataMut);

/// A scatter into `dest`: the lowering of the matching gather, with `updates` fitted to
/// its output as `fit` says. (Inlined into each method, so that its arguments are not
/// reloaded from the stack: see [`Call::lowered`](crate::call::Call::lowered).)
#[inline(always)]
fn scatter_with<A, D, I, E, E2, R>(
    dest: &mut ArrayRef<A, D>,
    (indices, updates): (impl IndexArray<I, E>, &ArrayRef<A, E2>),
    (op, lowering, fit): (&'static str, Lowering, Fit),
    reducer: R,
) -> Result<(), GatherError>
where
    A: Clone + Send + Sync,
    D: Dimension,
    I: GatherIndex,
    E: Dimension,
    E2: Dimension,
    R: Reducer<A>,
{
    indices.with_ref(op, |indices| {
        let zero = [I::ZERO];
        let views = (Raw::of_mut(dest), Raw::of(indices));
        // (By reference: moving a call costs S4 a copy of its few hundred bytes.)
        match lowering.call(op, None, views, &zero, IndexMode::Raise) {
            Ok(ref mut call) => call.scatter(updates, fit, reducer),
            Err(e) => Err(e),
        }
    })
}
