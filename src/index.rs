//! Index element types and how an index value becomes a position on an axis.

use std::fmt::Debug;

mod private {
    pub trait Sealed {}
}

/// An integer type that can be used as gather indices: `i32`, `i64`, `isize`, `u16`,
/// `u32`, `u64` and `usize`.
///
/// The trait is sealed: its methods are an implementation detail and it cannot be
/// implemented outside this crate, so that index types can be added without breaking
/// anyone. Negative values of the signed types count from the end of the axis; values of
/// the unsigned types are never negative, so a `u64` above `i64::MAX` is simply out of
/// range.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let a = array![10, 20, 30];
/// assert_eq!(a.gather(&array![2_u32, 0], 0)?, array![30, 10]);
/// assert_eq!(a.gather(&array![-1_i64], 0)?, array![30]);
/// # Ok::<(), GatherError>(())
/// ```
///
/// Floating-point indices are rejected at compile time:
///
/// ```compile_fail
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let a = array![10, 20, 30];
/// let _ = a.gather(&array![1.0_f32], 0);
/// ```
pub trait GatherIndex: Copy + Send + Sync + Debug + 'static + private::Sealed {
    /// Zero of this type.
    #[doc(hidden)]
    const ZERO: Self;

    /// Whether the type has negative values (which count from the end).
    #[doc(hidden)]
    const SIGNED: bool;

    /// The value widened to `i128`, which holds every value of every index type exactly.
    #[doc(hidden)]
    fn to_i128(self) -> i128;

    /// The position `self` names on an axis of length `len` in [`IndexMode::Raise`]:
    /// negative values count from the end once; `None` if still outside `0..len`.
    #[doc(hidden)]
    fn resolve_raise(self, len: usize) -> Option<usize>;

    /// The value as `u64`, a negative one wrapped to a huge value (so that `< len` holds
    /// exactly for the values `0..len`): a compare that vectorizes.
    #[doc(hidden)]
    fn wrapped(self) -> u64;
}

macro_rules! signed_index {
    ($($t:ty),*) => {$(
        impl private::Sealed for $t {}
        impl GatherIndex for $t {
            const ZERO: Self = 0;
            const SIGNED: bool = true;
            #[inline(always)]
            fn to_i128(self) -> i128 {
                self as i128
            }
            #[inline(always)]
            fn resolve_raise(self, len: usize) -> Option<usize> {
                // `len <= isize::MAX` (it is an array length), so `len as i64` is exact, and
                // `v + len` for a negative `v >= i64::MIN` cannot overflow.
                let v = self as i64;
                let v = if v < 0 { v + len as i64 } else { v };
                // A still-negative `v` becomes a huge unsigned value and fails the compare.
                if (v as u64) < len as u64 { Some(v as usize) } else { None }
            }
            #[inline(always)]
            fn wrapped(self) -> u64 {
                self as i64 as u64
            }
        }
    )*};
}

macro_rules! unsigned_index {
    ($($t:ty),*) => {$(
        impl private::Sealed for $t {}
        impl GatherIndex for $t {
            const ZERO: Self = 0;
            const SIGNED: bool = false;
            #[inline(always)]
            fn to_i128(self) -> i128 {
                self as i128
            }
            #[inline(always)]
            fn resolve_raise(self, len: usize) -> Option<usize> {
                if (self as u64) < len as u64 { Some(self as usize) } else { None }
            }
            #[inline(always)]
            fn wrapped(self) -> u64 {
                self as u64
            }
        }
    )*};
}

signed_index!(i32, i64, isize);
unsigned_index!(u16, u32, u64, usize);

/// What an index outside `0..len` means, as numpy.take's `mode` argument.
///
/// Only [`take`](crate::GatherExt::take) takes a mode; every other method behaves as
/// [`IndexMode::Raise`], which is the default.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let a = array![10, 20, 30];
/// let i = array![-4_i64, -1, 3, 7];
/// assert!(a.take(&i, None, IndexMode::Raise).is_err());
/// assert_eq!(a.take(&i, None, IndexMode::Wrap)?, array![30, 30, 10, 20].into_dyn());
/// assert_eq!(a.take(&i, None, IndexMode::Clip)?, array![10, 10, 30, 30].into_dyn());
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IndexMode {
    /// A negative index counts from the end once (`-1` is the last element, as in ONNX and
    /// numpy); anything still outside `0..len` is a [`GatherError::IndexOutOfBounds`].
    ///
    /// [`GatherError::IndexOutOfBounds`]: crate::GatherError::IndexOutOfBounds
    #[default]
    Raise,
    /// The index is taken modulo the axis length with Python's sign rule, so the result is
    /// always in `0..len`: `-1 -> len - 1`, `len -> 0`, `-len - 1 -> len - 1`.
    Wrap,
    /// The index is clamped to `0..=len - 1`; negative indices become 0 (numpy's `clip`
    /// mode does not count them from the end).
    Clip,
}

/// A compile-time choice of [`IndexMode`], so the kernel's inner loop holds no `match`.
pub(crate) trait Resolve: Copy + Send + Sync {
    /// Whether the kernel compiles its specialized copies for this mode (fixed-size
    /// blocks, one- and two-axis coordinates, per-CPU element loops). Only [`Raise`], the
    /// mode of every method but `take`'s: each specialization is compiled per element
    /// and index type, so `Wrap` / `Clip` (whose `i128` arithmetic does not vectorize
    /// anyway) take the general loops (PERFORMANCE.md#takes-wrap-and-clip-modes).
    const SPECIALIZED: bool = false;

    fn resolve<I: GatherIndex>(v: I, len: usize) -> Option<usize>;

    /// [`Resolve::resolve`] as a pair without a branch: the position (0 for a bad index)
    /// and whether the index was good, so that loops over many indices can vectorize.
    #[inline(always)]
    fn resolve_or_zero<I: GatherIndex>(v: I, len: usize) -> (usize, bool) {
        match Self::resolve(v, len) {
            Some(i) => (i, true),
            None => (0, false),
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Raise;
#[derive(Clone, Copy)]
pub(crate) struct Wrap;
#[derive(Clone, Copy)]
pub(crate) struct Clip;

/// Positions a plan resolved and checked when it was made: read as they are, clamped into
/// the axis all the same (so that even a wrong one reads an element of it), with no
/// verdict to keep.
#[derive(Clone, Copy)]
pub(crate) struct Planned;

impl Resolve for Planned {
    const SPECIALIZED: bool = true;

    #[inline(always)]
    fn resolve<I: GatherIndex>(v: I, len: usize) -> Option<usize> {
        Some(Self::resolve_or_zero(v, len).0)
    }

    #[inline(always)]
    fn resolve_or_zero<I: GatherIndex>(v: I, len: usize) -> (usize, bool) {
        ((v.wrapped().min(len.saturating_sub(1) as u64)) as usize, true)
    }
}

impl Resolve for Raise {
    const SPECIALIZED: bool = true;

    #[inline(always)]
    fn resolve<I: GatherIndex>(v: I, len: usize) -> Option<usize> {
        v.resolve_raise(len)
    }
}

impl Resolve for Wrap {
    #[inline(always)]
    fn resolve<I: GatherIndex>(v: I, len: usize) -> Option<usize> {
        // In range already (the common case): no division.
        match v.resolve_raise(len) {
            Some(i) if v.to_i128() >= 0 => Some(i),
            _ if len == 0 => None,
            _ => Some(v.to_i128().rem_euclid(len as i128) as usize),
        }
    }
}

impl Resolve for Clip {
    #[inline(always)]
    fn resolve<I: GatherIndex>(v: I, len: usize) -> Option<usize> {
        if len == 0 {
            return None;
        }
        Some(v.to_i128().clamp(0, len as i128 - 1) as usize)
    }
}

/// The position index `v` names on an axis of length `len` under `mode`.
pub(crate) fn resolve<I: GatherIndex>(v: I, len: usize, mode: IndexMode) -> Option<usize> {
    match mode {
        IndexMode::Raise => Raise::resolve(v, len),
        IndexMode::Wrap => Wrap::resolve(v, len),
        IndexMode::Clip => Clip::resolve(v, len),
    }
}
