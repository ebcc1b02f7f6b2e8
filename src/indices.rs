//! Index arrays as the methods take them: [`IndexArray`], for every form ndarray's
//! `AsArray` takes (references to arrays and views, slices, `Vec`s, fixed-size arrays)
//! and ndarray's own `&ArrayRef`.

use ndarray::{ArrayBase, ArrayRef, ArrayView, ArrayView1, ArrayView2, Data, Dimension, Ix1, Ix2};

use crate::error::GatherError;
use crate::index::GatherIndex;

mod private {
    pub trait Sealed {}
}

/// Indices of element type `I` and dimension type `E`, in any form a Rust program holds
/// them: `&Array`, `&ArrayView`, `&ArcArray`, `&ArrayRef`, an `ArrayView` by value,
/// `&[i64]`, `&Vec<i64>`, `&[i64; N]` (1-D), `&[[i64; N]; M]` and `&[[i64; N]]` (2-D):
/// what ndarray's `AsArray` takes, and `&ArrayRef`. Every method and plan constructor
/// takes its indices (and a scatter its indices, not its updates) as
/// `impl IndexArray<I, E>`. The trait is sealed; nothing is copied (a slice becomes a
/// view of itself).
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let table = array![[0, 1], [10, 11], [20, 21]];
/// let ids: Vec<i64> = vec![2, 0];
/// assert_eq!(table.gather(&ids, 0)?, array![[20, 21], [0, 1]]);
/// assert_eq!(table.gather(&ids[..1], 0)?, array![[20, 21]]);
/// assert_eq!(table.gather(&[1, 1], 0)?, array![[10, 11], [10, 11]]);
/// assert_eq!(table.gather_elements(&[[2, 0]], 0)?, array![[20, 1]]);
/// # Ok::<(), GatherError>(())
/// ```
pub trait IndexArray<I, E: Dimension>: private::Sealed {
    /// Calls `f` with the indices as ndarray's reference type (method `op`'s, for the one
    /// error: a 2-D slice of empty rows longer than ndarray's `isize::MAX` elements).
    #[doc(hidden)]
    fn with_ref<R>(
        self,
        op: &'static str,
        f: impl FnOnce(&ArrayRef<I, E>) -> Result<R, GatherError>,
    ) -> Result<R, GatherError>;
}

impl<I: GatherIndex, E: Dimension> private::Sealed for &ArrayRef<I, E> {}
impl<I: GatherIndex, E: Dimension> IndexArray<I, E> for &ArrayRef<I, E> {
    #[inline(always)]
    fn with_ref<R>(
        self,
        _: &'static str,
        f: impl FnOnce(&ArrayRef<I, E>) -> Result<R, GatherError>,
    ) -> Result<R, GatherError> {
        f(self)
    }
}

impl<I: GatherIndex, S: Data<Elem = I>, E: Dimension> private::Sealed for &ArrayBase<S, E> {}
impl<I: GatherIndex, S: Data<Elem = I>, E: Dimension> IndexArray<I, E> for &ArrayBase<S, E> {
    #[inline(always)]
    fn with_ref<R>(
        self,
        _: &'static str,
        f: impl FnOnce(&ArrayRef<I, E>) -> Result<R, GatherError>,
    ) -> Result<R, GatherError> {
        f(self)
    }
}

impl<I: GatherIndex, E: Dimension> private::Sealed for ArrayView<'_, I, E> {}
impl<I: GatherIndex, E: Dimension> IndexArray<I, E> for ArrayView<'_, I, E> {
    #[inline(always)]
    fn with_ref<R>(
        self,
        _: &'static str,
        f: impl FnOnce(&ArrayRef<I, E>) -> Result<R, GatherError>,
    ) -> Result<R, GatherError> {
        f(&self)
    }
}

/// The 1-D forms: a slice and what derefs to one, viewed in place.
macro_rules! one_dimensional {
    ($($(#[$n:ident])? $T:ty),*) => {$(
        impl<I: GatherIndex $(, const $n: usize)?> private::Sealed for &$T {}
        impl<I: GatherIndex $(, const $n: usize)?> IndexArray<I, Ix1> for &$T {
            #[inline(always)]
            fn with_ref<R>(self, _: &'static str, f: impl FnOnce(&ArrayRef<I, Ix1>) -> Result<R, GatherError>) -> Result<R, GatherError> {
                f(&ArrayView1::from(&self[..]))
            }
        }
    )*};
}
one_dimensional!(
    [I],
    Vec<I>,
    #[N]
    [I; N]
);

impl<I: GatherIndex, const N: usize> private::Sealed for &[[I; N]] {}
impl<I: GatherIndex, const N: usize> IndexArray<I, Ix2> for &[[I; N]] {
    #[inline(always)]
    fn with_ref<R>(
        self,
        op: &'static str,
        f: impl FnOnce(&ArrayRef<I, Ix2>) -> Result<R, GatherError>,
    ) -> Result<R, GatherError> {
        rows(self, op, f)
    }
}

impl<I: GatherIndex, const N: usize, const M: usize> private::Sealed for &[[I; N]; M] {}
impl<I: GatherIndex, const N: usize, const M: usize> IndexArray<I, Ix2> for &[[I; N]; M] {
    #[inline(always)]
    fn with_ref<R>(
        self,
        op: &'static str,
        f: impl FnOnce(&ArrayRef<I, Ix2>) -> Result<R, GatherError>,
    ) -> Result<R, GatherError> {
        rows(&self[..], op, f)
    }
}

/// A slice of rows as a 2-D view. (ndarray panics on more than `isize::MAX` rows, which
/// only a slice of empty rows can have.)
#[inline(always)]
fn rows<I, R, const N: usize>(
    rows: &[[I; N]],
    op: &'static str,
    f: impl FnOnce(&ArrayRef<I, Ix2>) -> Result<R, GatherError>,
) -> Result<R, GatherError> {
    if rows.len() > isize::MAX as usize {
        return Err(GatherError::SizeOverflow {
            op,
            shape: vec![rows.len(), N],
        });
    }
    f(&ArrayView2::from(rows))
}
