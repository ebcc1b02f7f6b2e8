//! The one error type of the crate.

use thiserror::Error;

/// Everything that can be wrong with a gather call.
///
/// Every variant carries the offending values, and every message starts with the name of
/// the method that was called (`op`), so an error read in a log says what to fix.
/// No public method of this crate panics on a bad shape, axis or index value: it returns
/// one of these instead.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let a = array![[1.0, 2.0], [3.0, 4.0]];
/// let err = a.gather(&array![0_i64, 5], 0).unwrap_err();
/// assert!(matches!(err, GatherError::IndexOutOfBounds { index: 5, axis_len: 2, .. }));
/// assert_eq!(
///     err.to_string(),
///     "gather: index 5 at position [1] of the indices is out of bounds for axis 0 of length 2 \
///      (valid: -2..=1)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum GatherError {
    /// An axis argument does not name a dimension of the input.
    #[error("{op}: axis {axis} is out of bounds for an input of rank {ndim} (valid: {valid})")]
    AxisOutOfBounds {
        /// The method that was called.
        op: &'static str,
        /// The axis as the caller gave it.
        axis: isize,
        /// The rank of the input.
        ndim: usize,
        /// The accepted range, spelled out.
        valid: String,
    },

    /// The same axis appears twice in `axes`.
    #[error("{op}: axis {axis} appears more than once in axes {axes:?}")]
    DuplicateAxis {
        /// The method that was called.
        op: &'static str,
        /// The repeated axis.
        axis: usize,
        /// All axes as given.
        axes: Vec<usize>,
    },

    /// Input and indices must have the same rank (or a rank the method requires).
    #[error(
        "{op}: input of shape {input_shape:?} (rank {}) and indices of shape {indices_shape:?} \
         (rank {}) must {requirement}",
        input_shape.len(),
        indices_shape.len()
    )]
    RankMismatch {
        /// The method that was called.
        op: &'static str,
        /// The input's shape.
        input_shape: Vec<usize>,
        /// The indices' shape.
        indices_shape: Vec<usize>,
        /// What the method requires of the ranks.
        requirement: &'static str,
    },

    /// The last indices dimension is not a multiple of the coordinate size.
    #[error(
        "{op}: the last dimension of indices of shape {indices_shape:?} is {last}, which is not \
         a multiple of the coordinate size {coordinate_size} (the number of axes)"
    )]
    CoordinateFold {
        /// The method that was called.
        op: &'static str,
        /// The indices' shape.
        indices_shape: Vec<usize>,
        /// The size of the last indices dimension.
        last: usize,
        /// `max(axes.len(), 1)`.
        coordinate_size: usize,
    },

    /// Two dimensions that must broadcast (or be equal) do not.
    #[error(
        "{op}: dimension {dim} of input shape {input_shape:?} and indices shape \
         {indices_shape:?} is incompatible: {detail}"
    )]
    ShapeMismatch {
        /// The method that was called.
        op: &'static str,
        /// The dimension at fault, counted in the input's dimensions.
        dim: usize,
        /// The input's shape.
        input_shape: Vec<usize>,
        /// The indices' shape (for `gather_multiaxis`, the logical shape with the coordinate
        /// size folded out of the last dimension).
        indices_shape: Vec<usize>,
        /// What was expected of the two sizes.
        detail: String,
    },

    /// An index is out of range for its axis (after counting negatives from the end once).
    #[error(
        "{op}: index {index} at position {position:?} of the indices is out of bounds for axis \
         {axis} of length {axis_len} (valid: {})",
        valid_range(*axis_len)
    )]
    IndexOutOfBounds {
        /// The method that was called.
        op: &'static str,
        /// The index value, widened so that every index type fits.
        index: i128,
        /// Where the index sits in the indices array the caller passed.
        position: Vec<usize>,
        /// The input axis it indexes.
        axis: usize,
        /// The length of that axis.
        axis_len: usize,
    },

    /// An indexed axis has length 0 but the output is not empty: no index can be valid.
    #[error(
        "{op}: axis {axis} of input shape {input_shape:?} has length 0, so no index into it is \
         valid, but the output of shape {output_shape:?} is not empty"
    )]
    EmptyAxis {
        /// The method that was called.
        op: &'static str,
        /// The empty axis.
        axis: usize,
        /// The input's shape.
        input_shape: Vec<usize>,
        /// The output shape that would need elements.
        output_shape: Vec<usize>,
    },

    /// The `out` array of a `_into` call does not have the output's shape.
    #[error("{op}: out has shape {found:?}, but the output shape is {expected:?}")]
    OutputShape {
        /// The method that was called.
        op: &'static str,
        /// The output shape the call produces.
        expected: Vec<usize>,
        /// The shape of `out`.
        found: Vec<usize>,
    },

    /// The input of a plan's `apply` does not have the shape the plan was made for. A
    /// [`GatherReducePlan`](crate::GatherReducePlan) binds only the dimensions up to its
    /// axis: its `expected` carries the input's own row shape after them.
    #[error("{op}: the input has shape {found:?}, but the plan was made for input shape {expected:?}")]
    InputShape {
        /// The method that was called.
        op: &'static str,
        /// The plan's input shape.
        expected: Vec<usize>,
        /// The input's shape.
        found: Vec<usize>,
    },

    /// The output would have more elements (or bytes) than memory can address.
    #[error("{op}: the output shape {shape:?} has more elements than fit in memory")]
    SizeOverflow {
        /// The method that was called.
        op: &'static str,
        /// The shape whose size overflows.
        shape: Vec<usize>,
    },

    /// `batch_dims` (or the coordinate size it leaves) does not fit the ranks.
    #[error(
        "{op}: batch_dims = {batch_dims} does not fit input of shape {input_shape:?} and indices \
         of shape {indices_shape:?}: {detail}"
    )]
    BatchDims {
        /// The method that was called.
        op: &'static str,
        /// The `batch_dims` argument.
        batch_dims: usize,
        /// The input's shape.
        input_shape: Vec<usize>,
        /// The indices' shape.
        indices_shape: Vec<usize>,
        /// What was expected.
        detail: String,
    },

    /// The `updates` of a scatter do not fit the shape the matching gather would return.
    #[error(
        "{op}: updates of shape {found:?} do not fit the shape {expected:?} that the matching \
         gather returns (the positions the indices select)"
    )]
    UpdatesShape {
        /// The method that was called.
        op: &'static str,
        /// The matching gather's output shape.
        expected: Vec<usize>,
        /// The shape of `updates`.
        found: Vec<usize>,
    },

    /// A gather-reduce backward's `grad_out` is not shaped as its forward's output: the
    /// segments along the axis (and the dimensions before it), then the rows.
    ///
    /// ```
    /// use ndarray::Array2;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([4, 3], &[3, 0, 1], Segments::starts(&[0, 2]), 0)?;
    /// let err = plan.backward_rows(&Array2::<f32>::ones((3, 3)), Pooling::Sum).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "GatherReducePlan::backward_rows: grad_out has shape [3, 3], but the forward's output \
    ///      has 2 segments along axis 0: shape [2, 3] (the segments', then the rows')"
    /// );
    /// # Ok::<(), GatherError>(())
    /// ```
    #[error(
        "{op}: grad_out has shape {found:?}, but the forward's output has {segments} segments \
         along axis {axis}: shape {expected:?} (the segments', then the rows')"
    )]
    GradShape {
        /// The method that was called.
        op: &'static str,
        /// The forward's output shape (with `grad_out`'s rows where they are free).
        expected: Vec<usize>,
        /// The shape of `grad_out`.
        found: Vec<usize>,
        /// The plan's number of segments.
        segments: usize,
        /// The plan's axis.
        axis: usize,
    },

    /// A quantized layout does not fit a row: its bytes (or, quantizing, its values) do
    /// not hold what the layout needs.
    #[error("{op}: rows of {width} {unit} do not fit the {layout} layout: {detail}")]
    RowWidth {
        /// The method that was called.
        op: &'static str,
        /// The layout (`Int8`, `Int4`, `Int2`).
        layout: &'static str,
        /// The row's bytes (or values, for `quantize`).
        width: usize,
        /// `"bytes"` or `"values"`.
        unit: &'static str,
        /// What the layout needs.
        detail: String,
    },

    /// A value that a quantized row cannot hold (NaN or infinite), the first in row-major
    /// order.
    #[error("{op}: the value at row {row}, column {column} is {value}, which a quantized row cannot hold")]
    NotFinite {
        /// The method that was called.
        op: &'static str,
        /// Its row.
        row: usize,
        /// Its column.
        column: usize,
        /// The value.
        value: f32,
    },

    /// The segments of a gather-reduce do not fit its positions: the first bad entry of
    /// the segments array, its value, and what was expected of it.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let x = array![1.0, 2.0, 3.0];
    /// let err = x.segment_reduce(Segments::lengths(&[2, 2]), 0, Pooling::Sum).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "segment_reduce: lengths entry 1 (value 2) is invalid: the lengths sum to 4 by \
    ///      this entry, but there are 3 positions"
    /// );
    /// ```
    #[error("{op}: {kind} entry {entry} (value {value}) is invalid: {detail}")]
    Segments {
        /// The method that was called.
        op: &'static str,
        /// Which segments: `"indptr"`, `"starts"`, `"lengths"`, `"uniform"` or `"ids"`.
        kind: &'static str,
        /// The entry at fault (0 for `uniform`'s length).
        entry: usize,
        /// Its value, widened so that every index type fits.
        value: i128,
        /// What was expected of it.
        detail: String,
    },

    /// A gather-reduce's weights are not one per position.
    #[error("{op}: {len} weights for {positions} positions (one weight per position)")]
    Weights {
        /// The method that was called.
        op: &'static str,
        /// The number of weights.
        len: usize,
        /// The number of positions.
        positions: usize,
    },

    /// A pooling cannot be used as asked: weights with `Max`, `Min` or `Prod`, an argmax of
    /// a pooling other than `Max` and `Min`, or a plan's skipped index that the pool
    /// contradicts.
    #[error("{op}: pooling {pooling} {detail}")]
    Pooling {
        /// The method that was called.
        op: &'static str,
        /// The pooling asked for.
        pooling: crate::Pooling,
        /// What is wrong with it.
        detail: String,
    },

    /// A pooling's name did not parse ([`Pooling`](crate::Pooling)'s `FromStr`):
    /// converted by `?`.
    #[error("{source}")]
    ParsePooling {
        /// The parse error, which names the string.
        #[from]
        source: crate::pool::ParsePoolingError,
    },

    /// An ndarray call failed in a function that returns `GatherError`, such as
    /// `into_dimensionality` on a gather's output: converted by `?`.
    ///
    /// ```
    /// use ndarray::{Array2, Ix2, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// fn rows(table: &Array2<f32>, ids: &[i64]) -> Result<Array2<f32>, GatherError> {
    ///     let ids = ndarray::ArrayView1::from(ids);
    ///     Ok(table.gather(&ids, 0)?.into_dimensionality::<Ix2>()?)
    /// }
    /// assert_eq!(rows(&array![[1.0, 2.0], [3.0, 4.0]], &[1])?, array![[3.0, 4.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[error("ndarray: {source}")]
    Ndarray {
        /// ndarray's error.
        #[from]
        source: ndarray::ShapeError,
    },

    /// A reduction's name did not parse ([`Reduction`](crate::Reduction)'s `FromStr`):
    /// converted by `?`.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// fn onnx_scatter(x: &mut ndarray::Array1<f32>, reduction: &str) -> Result<(), GatherError> {
    ///     let r: Reduction = reduction.parse()?;
    ///     x.scatter_elements(&array![0_i64, 0], &array![1.0, 2.0], 0, r)
    /// }
    /// let mut x = array![0.0_f32, 0.0];
    /// onnx_scatter(&mut x, "add")?;
    /// assert_eq!(x, array![3.0, 0.0]);
    /// assert!(matches!(onnx_scatter(&mut x, "average"), Err(GatherError::ParseReduction { .. })));
    /// # Ok::<(), GatherError>(())
    /// ```
    #[error("{source}")]
    ParseReduction {
        /// The parse error, which names the string.
        #[from]
        source: crate::reduce::ParseReductionError,
    },

    /// Another rank of a sharded call's communicator had a bad input (feature `mpi`):
    /// every rank returns `Err` before anything moves, the bad rank its own error and
    /// the others this one, naming the lowest bad rank. The next collective call works.
    #[error("{op}: rank {rank} had a bad input (its own error names it); nothing was exchanged or written")]
    Peer {
        /// The method that was called.
        op: &'static str,
        /// The lowest rank whose input was bad.
        rank: usize,
    },

    /// A collection's call does not fit the collection (`bags::Collection`, decision 50):
    /// the tables' count or shapes, a feature's table, the batch's features or weights.
    #[error("{op}: {detail}")]
    Collection {
        /// The method that was called.
        op: &'static str,
        /// What does not fit, with the values.
        detail: String,
    },

    /// An optimizer's state does not fit the table a training step updates
    /// ([`optim`](crate::optim), decisions 54 and 66): its rows or its width, with the
    /// shapes; or a collection's list of optimizers of another length.
    #[error("{op}: the optimizer's state {detail}")]
    Optimizer {
        /// The method that was called.
        op: &'static str,
        /// What does not fit, with the values.
        detail: String,
    },

    /// Per-head weights (`[P, H]`, decision 55) that do not fit: `H` is not the length of
    /// the input's first dimension after the gathered axis, or the call takes one weight
    /// per position only.
    ///
    /// ```
    /// use ndarray::{Array2, Array3};
    /// use ndarray_gather::prelude::*;
    ///
    /// let x = Array3::<f32>::zeros((3, 4, 8));
    /// let w = Array2::<f32>::ones((2, 3)); // 3 heads, but x has 4
    /// let e = x.gather_reduce(&[0, 2], Segments::uniform(2), 0, Pooling::Sum.weighted(&w)).unwrap_err();
    /// assert_eq!(
    ///     e.to_string(),
    ///     "gather_reduce: weights of shape [2, 3] weigh 3 heads, but the input's dimension 1 (after the axis) is 4 long"
    /// );
    /// ```
    #[error("{op}: weights of shape {found:?} {detail}")]
    HeadWeights {
        /// The method that was called.
        op: &'static str,
        /// The weights' shape.
        found: Vec<usize>,
        /// What does not fit, with the values.
        detail: String,
    },

    /// Attention scores, coefficients or their gradients (decisions 55-56) of a shape the
    /// call cannot take: `[P]` or `[P, H]`, one row per position.
    ///
    /// ```
    /// use ndarray::Array1;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([3, 2], &[0, 2, 1], Segments::ids(&[1, 1, 0], 2), 0)?;
    /// let e = plan.softmax(&Array1::<f32>::zeros(4)).unwrap_err();
    /// assert_eq!(e.to_string(), "GatherReducePlan::softmax: scores of shape [4], expected [3] or [3, H]");
    /// # Ok::<(), GatherError>(())
    /// ```
    #[error("{op}: {what} of shape {found:?}, expected {expected}")]
    Scores {
        /// The method that was called.
        op: &'static str,
        /// Which argument: `"scores"`, `"alpha"`, `"g_alpha"`.
        what: &'static str,
        /// Its shape.
        found: Vec<usize>,
        /// The shape expected.
        expected: String,
    },

    /// One feature of a collection's call failed as its single call would
    /// (`bags::Collection`, decision 50): the feature, its table and that call's error.
    ///
    /// ```
    /// use ndarray::Array2;
    /// use ndarray_gather::bags::{Collection, Jagged};
    /// use ndarray_gather::prelude::*;
    ///
    /// let t = Array2::<f32>::zeros((4, 2));
    /// let model = Collection::new().table(4, 2).feature(0, Pooling::Sum);
    /// let batch = Jagged::lengths(&[1_i64, 7], &[2_i64], 1)?;
    /// let e = model.gather_reduce(&[t.view()], &batch).unwrap_err();
    /// assert!(e.to_string().starts_with("Collection::gather_reduce: feature 0 (table 0): gather_reduce: index 7"));
    /// # Ok::<(), GatherError>(())
    /// ```
    #[error("{op}: feature {feature} (table {table}): {source}")]
    Feature {
        /// The method that was called.
        op: &'static str,
        /// The feature.
        feature: usize,
        /// Its table.
        table: usize,
        /// Its single call's error.
        source: Box<GatherError>,
    },

    /// A sharded table's row bounds are not `R + 1` bounds from 0, never decreasing, or
    /// disagree between ranks or with the table (feature `mpi`): the bound at fault.
    ///
    /// ```
    /// # #[cfg(feature = "mpi")] {
    /// use ndarray_gather::GatherError;
    ///
    /// let e = ndarray_gather::shard::Rows::from_bounds(&[0, 4, 2]).unwrap_err();
    /// assert_eq!(e.to_string(), "Rows::from_bounds: bound 2 (value 2) is invalid: bounds must not decrease");
    /// assert!(matches!(e, GatherError::Bounds { entry: 2, .. }));
    /// # }
    /// ```
    #[error("{op}: bound {entry} (value {value}) is invalid: {detail}")]
    Bounds {
        /// The method that was called.
        op: &'static str,
        /// The bound at fault.
        entry: usize,
        /// Its value.
        value: usize,
        /// What was expected of it.
        detail: String,
    },

    /// An argmax passed to a backward is not one its plan could have returned: its shape
    /// differs from the gradient's, or a value names no position of the plan.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([3], &[2, 0], Segments::uniform(1), 0)?;
    /// let mut grad = array![0.0, 0.0, 0.0];
    /// let e = plan.backward_arg_into(&array![1.0, 1.0], &array![0, 5], &mut grad).unwrap_err();
    /// assert_eq!(
    ///     e.to_string(),
    ///     "GatherReducePlan::backward_arg_into: the argmax names position 5 at [1], but the plan \
    ///      has 2 positions (2 marks an empty segment)"
    /// );
    /// # Ok::<(), GatherError>(())
    /// ```
    #[error("{op}: the argmax {detail}")]
    Arg {
        /// The method that was called.
        op: &'static str,
        /// What is wrong with it, with the values.
        detail: String,
    },

    /// A kind of table that a call does not take as asked: per-head weights (`[P, H]`) on
    /// a [`QTable`](crate::quant::QTable), whose rows are whole (decision 55 weighs an
    /// array's heads). Checked before anything is allocated or written.
    ///
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::prelude::*;
    /// use ndarray_gather::quant::{QTable, Rowwise};
    ///
    /// let q = Rowwise::Int8.quantize(&Array2::<f32>::zeros((3, 2)))?;
    /// let w = array![[1.0f32, 2.0], [3.0, 4.0]];
    /// let e = QTable::new(&q, Rowwise::Int8)?
    ///     .gather_reduce(&[0, 2], Segments::uniform(2), Pooling::Sum.weighted(&w))
    ///     .unwrap_err();
    /// assert_eq!(
    ///     e.to_string(),
    ///     "QTable::gather_reduce: a quantized table takes one weight per position ([P]), not weights of shape [2, 2] (per-head weights need an f32 array)"
    /// );
    /// # Ok::<(), GatherError>(())
    /// ```
    #[error("{op}: a {kind} table {detail}")]
    TableKind {
        /// The method that was called.
        op: &'static str,
        /// The table's kind (`"quantized"`).
        kind: &'static str,
        /// What it does not take, with the values.
        detail: String,
    },

    /// The ranks of a sharded call (feature `mpi`) made different calls: another pooling,
    /// row width, argmax or weights than rank 0's (every rank must make the same call,
    /// each with its own indices). Every rank errs before anything moves.
    #[error("{op}: {detail}")]
    RanksDisagree {
        /// The method that was called.
        op: &'static str,
        /// This rank's call and rank 0's.
        detail: String,
    },

    /// An interpolating gather's argument of the wrong shape (`sample`, decision 70): which
    /// one, its shape, and what it must be.
    ///
    /// ```
    /// use ndarray::Array4;
    /// use ndarray_gather::sample::{GridSample, Interp, SampleExt};
    ///
    /// let x = Array4::<f32>::zeros((2, 3, 4, 4));
    /// let e = x.grid_sample(&Array4::zeros((1, 5, 5, 2)), GridSample::new(Interp::Linear)).unwrap_err();
    /// assert_eq!(
    ///     e.to_string(),
    ///     "grid_sample: grid of shape [1, 5, 5, 2], expected [2, Ho, Wo, 2] (x has shape [2, 3, 4, 4])"
    /// );
    /// ```
    #[error("{op}: {what} of shape {found:?}, expected {expected}")]
    SampleShape {
        /// The method that was called.
        op: &'static str,
        /// Which argument: `"x"`, `"grid"`, `"out"`, `"g_y"`, `"g_x"`, `"boxes"`.
        what: &'static str,
        /// Its shape.
        found: Vec<usize>,
        /// The shape expected.
        expected: String,
    },

    /// A bug in this crate: an internal invariant did not hold. It is never expected (in
    /// debug builds it panics instead, so that tests catch it); please report it with its
    /// message.
    #[error("{op}: internal error, a bug in ndarray-gather (please report it): {detail}")]
    Internal {
        /// The method that was called.
        op: &'static str,
        /// What did not hold.
        detail: &'static str,
    },
}

/// The error for an impossible state: a bug. Debug builds panic here, so that every test
/// that reaches it fails; release builds return [`GatherError::Internal`] rather than
/// panic in a user's program.
#[cold]
pub(crate) fn internal(op: &'static str, detail: &'static str) -> GatherError {
    debug_assert!(false, "{op}: internal error: {detail}");
    GatherError::Internal { op, detail }
}

fn valid_range(len: usize) -> String {
    if len == 0 {
        "none, the axis is empty".to_string()
    } else {
        format!("-{len}..={}", len - 1)
    }
}

/// The accepted range of an axis argument for an input of rank `ndim`, for messages.
pub(crate) fn axis_range(ndim: usize) -> String {
    if ndim == 0 {
        "none, the input has no axes".to_string()
    } else {
        format!("-{ndim}..={}", ndim - 1)
    }
}
