//! The lowerings: every library's gather as layouts of the input and indices (unit axes
//! inserted into their shapes and strides, slices, zero-stride broadcasts) plus one
//! [`Call`] of the core.
//!
//! Each function checks the library's own shape rules first, so its errors speak of the
//! caller's shapes, then builds the layouts ([`Dims`]). None copies data, except `take`
//! with no axis on an input whose layout cannot be flattened as a view. The input may be
//! borrowed shared (a gather) or mutably (the matching scatter's destination): a [`Raw`].

use ndarray::{ArrayRef, Dimension, IxDyn, RawData, ViewRepr};

use crate::axis::{AxisArg, TakeAxis, normalize_axis};
use crate::call::{Call, Dims, Raw};
use crate::error::GatherError;
use crate::index::{GatherIndex, IndexMode};
use crate::layout::c_strides;
use crate::layout::checked_len;
use crate::small::Small;

/// Which method a call lowers, with its arguments: the one dispatch shared by the gather
/// methods, the scatters and the prepared gathers ([`GatherPlan`](crate::GatherPlan)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lowering {
    Multiaxis(Small<usize>),
    Batched {
        axis: isize,
        batch_dims: usize,
    },
    Elements(isize),
    Nd(usize),
    /// `take` with no axis: the input passed to [`Lowering::call`] is the caller's
    /// flattened ([`flat_view`]).
    Flat,
    AlongAxis(isize),
}

/// The one method table: each public method's lowering, shared by its gather, its
/// scatter and its plan.
impl Lowering {
    /// `gather_multiaxis`, `scatter_multiaxis`, `GatherPlan::multiaxis`.
    #[inline(always)]
    pub fn multiaxis(axes: &[usize]) -> Self {
        Lowering::Multiaxis(Small::from(axes))
    }

    /// `gather` (ONNX Gather), `scatter`, `GatherPlan::gather`.
    #[inline(always)]
    pub fn gather(axis: impl AxisArg) -> Self {
        Self::batched(axis, 0)
    }

    /// `gather_batched` (tf.gather with `batch_dims`), `GatherPlan::gather_batched`.
    #[inline(always)]
    pub fn batched(axis: impl AxisArg, batch_dims: usize) -> Self {
        Lowering::Batched {
            axis: axis.signed(),
            batch_dims,
        }
    }

    /// `gather_elements` (ONNX GatherElements), `scatter_elements`,
    /// `GatherPlan::gather_elements`.
    #[inline(always)]
    pub fn elements(axis: impl AxisArg) -> Self {
        Lowering::Elements(axis.signed())
    }

    /// `gather_nd` (ONNX GatherND), `scatter_nd`, `GatherPlan::gather_nd`.
    #[inline(always)]
    pub fn nd(batch_dims: usize) -> Self {
        Lowering::Nd(batch_dims)
    }

    /// `take` (numpy.take): with an axis as `gather`, without one on the flattened input.
    #[inline(always)]
    pub fn take(axis: impl TakeAxis) -> Self {
        match axis.take_axis() {
            Some(axis) => Self::gather(axis),
            None => Lowering::Flat,
        }
    }

    /// `take_along_axis` (numpy), `put_along_axis`, `GatherPlan::take_along_axis`.
    #[inline(always)]
    pub fn along_axis(axis: impl AxisArg) -> Self {
        Lowering::AlongAxis(axis.signed())
    }

    /// The core call for `input` and `indices`; `caller_input` is the input's shape as
    /// the caller passed it, if not `input`'s (a flattened view for [`Lowering::Flat`]);
    /// `zero` stands in for the indices of a `gather_nd` with no coordinates.
    pub fn call<'a, S: RawData, I: GatherIndex>(
        &self,
        op: &'static str,
        caller_input: Option<&[usize]>,
        views: (Raw<'a, S>, Raw<'a, ViewRepr<&'a I>>),
        zero: &'a [I; 1],
        mode: IndexMode,
    ) -> Result<Call<'a, S, I>, GatherError> {
        match *self {
            Lowering::Multiaxis(ref axes) => Ok(Call::multiaxis(op, views.0, views.1, axes)),
            Lowering::Batched { axis, batch_dims } => {
                batched(op, caller_input, views, axis, batch_dims, mode)
            }
            Lowering::Elements(axis) => elements(op, views, axis),
            Lowering::Nd(batch_dims) => nd(op, views, batch_dims, zero),
            Lowering::Flat => batched(op, caller_input, views, 0, 0, mode),
            Lowering::AlongAxis(axis) => along_axis(op, views, axis),
        }
    }
}

/// Lowers a gather of `input` (the caller's array) and runs `run` on the call: the one
/// path of every allocating method and of the prepared gathers. (Inlined: see
/// [`Call::lowered`].)
#[inline(always)]
pub(crate) fn with_call<A: Clone, D: Dimension, I: GatherIndex, E: Dimension, T>(
    op: &'static str,
    lowering: &Lowering,
    (input, indices): (&ArrayRef<A, D>, &ArrayRef<I, E>),
    mode: IndexMode,
    run: impl for<'x> FnOnce(&Call<'x, ViewRepr<&'x A>, I>) -> Result<T, GatherError>,
) -> Result<T, GatherError> {
    let flat;
    let (caller, input) = if *lowering == Lowering::Flat {
        flat = flat_view(input);
        (Some(input.shape()), Raw::of(&*flat))
    } else {
        (None, Raw::of(input))
    };
    run_lowered(op, (lowering, caller), (input, indices), mode, run)
}

/// [`with_call`] over a stand-in for an input of `shape`: elements of `()` in C order
/// (a plan's input, whose elements are never read), made without ndarray. A shape no
/// ndarray array can have (its non-zero lengths' product past `isize::MAX`) is
/// [`GatherError::SizeOverflow`].
#[inline(always)]
pub(crate) fn with_stand_in<I: GatherIndex, E: Dimension, T>(
    op: &'static str,
    lowering: &Lowering,
    (shape, indices): (&[usize], &ArrayRef<I, E>),
    mode: IndexMode,
    run: impl for<'x> FnOnce(&Call<'x, ViewRepr<&'x ()>, I>) -> Result<T, GatherError>,
) -> Result<T, GatherError> {
    // ndarray's bound on a shape, which keeps the C-order strides and every offset
    // along the axes in `isize`.
    let nonzero: Small<usize> = shape.iter().copied().filter(|&n| n != 0).collect();
    if checked_len(&nonzero, 1).is_none() {
        return Err(GatherError::SizeOverflow {
            op,
            shape: shape.to_vec(),
        });
    }
    let flat = [shape.iter().product::<usize>()];
    let (caller, shape) = if *lowering == Lowering::Flat {
        (Some(shape), &flat[..])
    } else {
        (None, shape)
    };
    let strides = c_strides(shape);
    // SAFETY: the shape's non-zero lengths multiply within `isize` (checked above), and
    // an element of `()` takes no memory, so every element of any shape lies at the
    // dangling (non-null, aligned) pointer, and offsetting it by any count moves it by
    // zero bytes.
    let input = unsafe { Raw::at_dangling(shape, &strides) };
    run_lowered(op, (lowering, caller), (input, indices), mode, run)
}

/// Lowers the gather of `input` and `indices` (`caller` is the input's shape as the
/// caller passed it, if not the input's) and runs `run` on the call.
#[inline(always)]
fn run_lowered<'a, A, I: GatherIndex, E: Dimension, T>(
    op: &'static str,
    (lowering, caller): (&Lowering, Option<&[usize]>),
    (input, indices): (Raw<'a, ViewRepr<&'a A>>, &'a ArrayRef<I, E>),
    mode: IndexMode,
    run: impl for<'x> FnOnce(&Call<'x, ViewRepr<&'x A>, I>) -> Result<T, GatherError>,
) -> Result<T, GatherError> {
    // Stands in for the indices of a `gather_nd` without coordinates.
    let zero = [I::ZERO];
    // (By reference: moving a call costs W7 a copy of its few hundred bytes.)
    match lowering.call(op, caller, (input.shorten(), Raw::of(indices)), &zero, mode) {
        Ok(ref call) => run(call),
        Err(e) => Err(e),
    }
}

/// The layout of `v` with `n` unit axes inserted before each of its dimensions `at`, for
/// every `(at, n)` of `units` (ascending).
#[inline(always)]
fn with_units<S: RawData>(v: &Raw<'_, S>, units: &[(usize, usize)]) -> Dims {
    Dims::with_units(v.shape(), v.strides(), units)
}

/// The input's axis `axis` (negative from the end) of a method whose input and indices
/// have the same rank (GatherElements, take_along_axis).
#[inline]
fn same_rank_axis(
    op: &'static str,
    input: &[usize],
    indices: &[usize],
    axis: isize,
) -> Result<usize, GatherError> {
    if input.len() != indices.len() {
        return Err(GatherError::RankMismatch {
            op,
            input_shape: input.to_vec(),
            indices_shape: indices.to_vec(),
            requirement: "have the same rank",
        });
    }
    normalize_axis(op, axis, input.len())
}

/// The [`GatherError::BatchDims`] of `op` for operands of these shapes, saying `detail`.
#[cold]
fn batch_dims_error(
    op: &'static str,
    batch_dims: usize,
    (input, indices): (&[usize], &[usize]),
    detail: String,
) -> GatherError {
    GatherError::BatchDims {
        op,
        batch_dims,
        input_shape: input.to_vec(),
        indices_shape: indices.to_vec(),
        detail,
    }
}

/// ONNX Gather / numpy.take(axis) / tf.gather with `batch_dims`.
///
/// input `[in[..=a], 1 x m, in[a+1..]]`, indices `[idx[..b], 1 x (a+1-b), idx[b..], 1 x (r-a-1)]`
/// with `m = q - b`, axes `[a]`; the lowered output `[in[..a], 1, idx[b..], in[a+1..]]`
/// loses its axis `a`. `caller_input` is the shape errors name, if not `input`'s (the
/// caller's, where `input` is a flattened view of it).
pub(crate) fn batched<'a, S: RawData, I: GatherIndex>(
    op: &'static str,
    caller_input: Option<&[usize]>,
    (input, indices): (Raw<'a, S>, Raw<'a, ViewRepr<&'a I>>),
    axis: isize,
    batch_dims: usize,
    mode: IndexMode,
) -> Result<Call<'a, S, I>, GatherError> {
    let (r, q) = (input.ndim(), indices.ndim());
    let a = normalize_axis(op, axis, r)?;
    let batch_error = |detail| batch_dims_error(op, batch_dims, (input.shape(), indices.shape()), detail);
    if batch_dims > q {
        return Err(batch_error(format!("it exceeds the indices rank {q}")));
    }
    if batch_dims > a {
        return Err(batch_error(format!(
            "it exceeds the axis {a} (axis >= batch_dims is required)"
        )));
    }
    if let Some(d) = (0..batch_dims).find(|&d| input.shape()[d] != indices.shape()[d]) {
        return Err(batch_error(format!(
            "batch dimension {d} has size {} in the input and {} in the indices (they must be equal)",
            input.shape()[d],
            indices.shape()[d]
        )));
    }
    let m = q - batch_dims;
    let inp = with_units(&input, &[(a + 1, m)]);
    let idx = with_units(&indices, &[(batch_dims, a + 1 - batch_dims), (q, r - a - 1)]);
    let caller = caller_input.map(Small::from);
    let lowered = (Some(inp), Some(idx));
    Ok(Call::lowered(
        op,
        caller,
        (input, indices),
        lowered,
        &[a],
        mode,
        &[a],
    ))
}

/// ONNX GatherElements / torch.gather: the input is sliced to the indices' extent off the
/// axis (the leading block), then it is `gather_multiaxis` with `axes = [a]`.
pub(crate) fn elements<'a, S: RawData, I: GatherIndex>(
    op: &'static str,
    (input, indices): (Raw<'a, S>, Raw<'a, ViewRepr<&'a I>>),
    axis: isize,
) -> Result<Call<'a, S, I>, GatherError> {
    let a = same_rank_axis(op, input.shape(), indices.shape(), axis)?;
    let off_axis = || (0..input.ndim()).filter(move |&d| d != a);
    if let Some(d) = off_axis().find(|&d| indices.shape()[d] > input.shape()[d]) {
        let (n, m) = (input.shape()[d], indices.shape()[d]);
        return Err(GatherError::ShapeMismatch {
            op,
            dim: d,
            input_shape: input.shape().to_vec(),
            indices_shape: indices.shape().to_vec(),
            detail: format!(
                "the indices size {m} exceeds the input size {n} (off the axis it may be at most the input's)"
            ),
        });
    }
    // The leading block: the lengths off the axis cut to the indices' (the input's
    // shape stays the caller's, which errors name).
    let sliced = off_axis()
        .any(|d| indices.shape()[d] < input.shape()[d])
        .then(|| {
            let shape = (0..input.ndim())
                .map(|d| {
                    if d == a {
                        input.shape()[d]
                    } else {
                        indices.shape()[d]
                    }
                })
                .collect();
            Dims {
                shape,
                strides: Small::from(input.strides()),
            }
        });
    Ok(Call::lowered(
        op,
        None,
        (input, indices),
        (sliced, None),
        &[a],
        IndexMode::Raise,
        &[],
    ))
}

/// numpy.take_along_axis: `gather_multiaxis` with `axes = [a]`, non-axis dimensions
/// broadcast both ways.
pub(crate) fn along_axis<'a, S: RawData, I: GatherIndex>(
    op: &'static str,
    (input, indices): (Raw<'a, S>, Raw<'a, ViewRepr<&'a I>>),
    axis: isize,
) -> Result<Call<'a, S, I>, GatherError> {
    let a = same_rank_axis(op, input.shape(), indices.shape(), axis)?;
    Ok(Call::multiaxis(op, input, indices, &[a]))
}

/// ONNX GatherND / tf.gather_nd with `batch_dims = b`, `k = idx.shape[-1]`,
/// `m = q - 1 - b` index dimensions, `t = r - b - k` trailing dimensions, `w = max(k, m)`:
/// input `[in[..b+k], 1 x (w-k), in[b+k..], 1]`, indices `[idx[..q-1], 1 x (R-q), k]` with
/// `R = b + w + t + 1`, axes `b..b+k`; the lowered output `[batch, idx dims, 1 x (w-m),
/// trailing, 1]` loses its unit axes `b+m..b+w` and the last. `zero` stands in for the
/// indices when `k = 0`.
pub(crate) fn nd<'a, S: RawData, I: GatherIndex>(
    op: &'static str,
    (input, indices): (Raw<'a, S>, Raw<'a, ViewRepr<&'a I>>),
    batch_dims: usize,
    zero: &'a [I; 1],
) -> Result<Call<'a, S, I>, GatherError> {
    let (r, q, b) = (input.ndim(), indices.ndim(), batch_dims);
    let batch_error = |detail| batch_dims_error(op, batch_dims, (input.shape(), indices.shape()), detail);
    if q == 0 {
        return Err(GatherError::RankMismatch {
            op,
            input_shape: input.shape().to_vec(),
            indices_shape: Vec::new(),
            requirement: "have indices of rank >= 1 (the last dimension holds the coordinates)",
        });
    }
    if b >= q {
        return Err(batch_error(format!(
            "it must be less than the indices rank {q} (the last indices dimension holds the coordinates)"
        )));
    }
    let k = indices.shape()[q - 1];
    if b + k > r {
        return Err(batch_error(format!(
            "batch_dims + coordinate size {k} (the last indices dimension) exceeds the input rank {r}"
        )));
    }
    if let Some(d) = (0..b).find(|&d| {
        let (n, m) = (input.shape()[d], indices.shape()[d]);
        n != m && n != 1 && m != 1
    }) {
        return Err(batch_error(format!(
            "batch dimension {d} has size {} in the input and {} in the indices (they must be equal, or one of them 1)",
            input.shape()[d],
            indices.shape()[d]
        )));
    }
    let (m, t) = (q - 1 - b, r - b - k);
    let w = k.max(m);
    let big_r = b + w + t + 1;
    let inp = with_units(&input, &[(b + k, w - k), (r, 1)]);
    let (indices, idx) = if k == 0 {
        // No coordinates: the values are never read, only the shape counts, so a
        // zero-stride layout at one element stands in for them.
        let shape: Small<usize> = indices.shape()[..q - 1]
            .iter()
            .copied()
            .chain(std::iter::repeat_n(1, big_r - (q - 1)))
            .collect();
        let strides = shape.iter().map(|_| 0).collect();
        // SAFETY: the indices have no elements (their last length is `k = 0`), and the
        // lowered layout has only zero strides.
        (unsafe { indices.at(zero.as_ptr()) }, Dims { shape, strides })
    } else {
        let idx = with_units(&indices, &[(q - 1, big_r - q)]);
        (indices, idx)
    };
    let axes: Vec<usize> = (b..b + k).collect();
    let remove: Vec<usize> = (b + m..b + w).chain([big_r - 1]).collect();
    Ok(Call::lowered(
        op,
        None,
        (input, indices),
        (Some(inp), Some(idx)),
        &axes,
        IndexMode::Raise,
        &remove,
    ))
}

/// numpy.take with no axis (= torch.take): the input flattened in logical row-major order,
/// then a gather along axis 0. The flattening is a view whenever the layout allows (any
/// standard-layout input, any 1-D view); otherwise the input is copied once in row-major
/// order.
pub(crate) fn flat_view<'a, A: Clone, D: Dimension>(
    input: &'a ArrayRef<A, D>,
) -> ndarray::CowArray<'a, A, IxDyn> {
    let n = input.len();
    match input.to_shape((IxDyn(&[n]), ndarray::Order::RowMajor)) {
        Ok(flat) => flat,
        // A length always fits its own array, so this only guards the impossible.
        Err(_) => ndarray::CowArray::from(input.iter().cloned().collect::<ndarray::Array1<A>>().into_dyn()),
    }
}
