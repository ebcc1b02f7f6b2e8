//! Axis arguments: ndarray's [`Axis`] or a signed integer, negative counting from the end.

use ndarray::{Axis, Dimension, IxDyn};

use crate::rank::GatherRank;

mod private {
    pub trait Sealed {}
    impl Sealed for ndarray::Axis {}
    impl Sealed for isize {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for usize {}
    impl Sealed for u32 {}
    impl Sealed for Option<isize> {}
}

/// What every `axis` parameter accepts: ndarray's [`Axis(n)`](Axis), an unsigned integer
/// (`usize` or `u32`: an axis the program computed, `a.ndim() - 1`), or a signed integer
/// (`isize`, `i64` as an ONNX attribute arrives, or `i32` so that a bare literal such as
/// `-1` works) counting from the end when negative, as NumPy's and ONNX's axes do. Sealed.
///
/// An axis beyond the input's rank is an
/// [`AxisOutOfBounds`](crate::GatherError::AxisOutOfBounds) error naming it, whichever way
/// it was written.
///
/// # Examples
/// ```
/// use ndarray::{Axis, array};
/// use ndarray_gather::prelude::*;
///
/// let a = array![[1, 2, 3], [4, 5, 6]];
/// let ids = array![2_i64, 0];
/// let by_axis = a.gather(&ids, Axis(1))?;
/// assert_eq!(by_axis, a.gather(&ids, 1)?);
/// assert_eq!(by_axis, a.gather(&ids, -1)?);
/// assert_eq!(by_axis, a.gather(&ids, 1_isize)?);
/// let last: usize = a.ndim() - 1;
/// assert_eq!(by_axis, a.gather(&ids, last)?);
/// let onnx_axis: i64 = -1;
/// assert_eq!(by_axis, a.gather(&ids, onnx_axis)?);
/// assert!(a.gather(&ids, Axis(2)).is_err());
/// assert!(a.gather(&ids, 2_usize).is_err());
/// # Ok::<(), GatherError>(())
/// ```
pub trait AxisArg: Copy + private::Sealed {
    /// The axis as a signed number (`Axis(n)` beyond `isize::MAX` as `isize::MAX`, out of
    /// range either way).
    #[doc(hidden)]
    fn signed(self) -> isize;
}

impl AxisArg for Axis {
    #[inline]
    fn signed(self) -> isize {
        isize::try_from(self.0).unwrap_or(isize::MAX)
    }
}

impl AxisArg for isize {
    #[inline]
    fn signed(self) -> isize {
        self
    }
}

impl AxisArg for i32 {
    #[inline]
    fn signed(self) -> isize {
        self as isize
    }
}

/// An ONNX `axis` attribute, as it arrives.
impl AxisArg for i64 {
    #[inline]
    fn signed(self) -> isize {
        // (Beyond `isize` only on 32-bit targets, and out of range either way.)
        isize::try_from(self).unwrap_or(if self < 0 { isize::MIN } else { isize::MAX })
    }
}

/// An axis a Rust program computed (`.ndim() - 1`, a loop variable, `Axis(n).index()`).
impl AxisArg for usize {
    #[inline]
    fn signed(self) -> isize {
        isize::try_from(self).unwrap_or(isize::MAX)
    }
}

impl AxisArg for u32 {
    #[inline]
    fn signed(self) -> isize {
        isize::try_from(self).unwrap_or(isize::MAX)
    }
}

/// What `take`'s `axis` accepts: `None` (gather from the input flattened, as NumPy's
/// `axis=None`), `Some(axis)` with a signed axis, or an axis written bare as for any
/// other method (`Axis(n)`, `-1`), meaning `Some`. Sealed.
///
/// `Option<Axis>` and `Option<i32>` are not accepted: with more than one `Option` type,
/// a plain `None` could not tell which it is. Write `Axis(n)` or `-1` bare instead of
/// `Some(Axis(n))`; `Some(-1)` works as it is.
///
/// # Examples
/// ```
/// use ndarray::{Axis, array};
/// use ndarray_gather::prelude::*;
///
/// let a = array![[1, 2], [3, 4]];
/// let ids = array![1_i64];
/// assert_eq!(a.take(&ids, None, IndexMode::Raise)?, array![2].into_dyn());
/// assert_eq!(a.take(&ids, Some(-1), IndexMode::Raise)?, array![[2], [4]].into_dyn());
/// assert_eq!(a.take(&ids, Axis(1), IndexMode::Raise)?, array![[2], [4]]);
/// assert_eq!(a.take(&ids, 0, IndexMode::Raise)?, array![[3, 4]]);
/// # Ok::<(), GatherError>(())
/// ```
pub trait TakeAxis: Copy + private::Sealed {
    /// The output's dimension type for an input of dimension type `D` and indices of `E`:
    /// [`gather`](crate::GatherExt::gather)'s for an axis, `IxDyn` for an `Option` (whose
    /// `None` gives the indices' rank, `Some` the gather's: the types cannot know which).
    type Out<D: Dimension, E: GatherRank<D>>: Dimension;

    /// The axis as a signed number, `None` for the flattened input.
    #[doc(hidden)]
    fn take_axis(self) -> Option<isize>;
}

impl TakeAxis for Option<isize> {
    type Out<D: Dimension, E: GatherRank<D>> = IxDyn;

    #[inline]
    fn take_axis(self) -> Option<isize> {
        self
    }
}

impl<T: AxisArg> TakeAxis for T {
    type Out<D: Dimension, E: GatherRank<D>> = E::Out;

    #[inline]
    fn take_axis(self) -> Option<isize> {
        Some(self.signed())
    }
}

/// `axis` counted from the end when negative, checked against `ndim`. (Inlined, with the
/// error made apart: an out-of-line call returning a `GatherError` moves it.)
#[inline]
pub(crate) fn normalize_axis(
    op: &'static str,
    axis: isize,
    ndim: usize,
) -> Result<usize, crate::GatherError> {
    let n = ndim as isize;
    let a = if axis < 0 { axis + n } else { axis };
    if (0..n).contains(&a) {
        Ok(a as usize)
    } else {
        Err(axis_out_of_bounds(op, axis, ndim))
    }
}

#[cold]
#[inline(never)]
fn axis_out_of_bounds(op: &'static str, axis: isize, ndim: usize) -> crate::GatherError {
    crate::GatherError::AxisOutOfBounds {
        op,
        axis,
        ndim,
        valid: crate::error::axis_range(ndim),
    }
}
