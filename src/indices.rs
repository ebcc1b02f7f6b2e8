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
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an index array this call can read",
    label = "indices are lent, not given",
    note = "pass the indices by reference: `&ids` for a `Vec`, an array or a slice (`&ids[..]`), or a view (`ids.view()`); an index type is one of i8-i64, u8-u64, isize, usize"
)]
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

/// Implements [`IndexArray`] for each form: its generics, type, dimension, and how it lends
/// itself (`$s`) as an `&ArrayRef` to `$f` (`$op` names the method, for the one error).
macro_rules! index_array {
    ($([$($g:tt)*] $T:ty => $E:ty, |$s:ident, $op:ident, $f:ident| $lend:expr;)*) => {$(
        impl<$($g)*> private::Sealed for $T {}
        impl<$($g)*> IndexArray<I, $E> for $T {
            #[inline(always)]
            fn with_ref<R>(
                self,
                $op: &'static str,
                $f: impl FnOnce(&ArrayRef<I, $E>) -> Result<R, GatherError>,
            ) -> Result<R, GatherError> {
                let $s = self;
                $lend
            }
        }
    )*};
}

index_array! {
    [I: GatherIndex, E: Dimension] &ArrayRef<I, E> => E, |a, _op, f| f(a);
    [I: GatherIndex, S: Data<Elem = I>, E: Dimension] &ArrayBase<S, E> => E, |a, _op, f| f(a);
    [I: GatherIndex, E: Dimension] ArrayView<'_, I, E> => E, |a, _op, f| f(&a);
    // The 1-D forms: a slice and what derefs to one, viewed in place.
    [I: GatherIndex] &[I] => Ix1, |a, _op, f| f(&ArrayView1::from(a));
    [I: GatherIndex] &Vec<I> => Ix1, |a, _op, f| f(&ArrayView1::from(&a[..]));
    [I: GatherIndex, const N: usize] &[I; N] => Ix1, |a, _op, f| f(&ArrayView1::from(&a[..]));
    // The 2-D forms: rows of a fixed length.
    [I: GatherIndex, const N: usize] &[[I; N]] => Ix2, |a, op, f| rows(a, op, f);
    [I: GatherIndex, const N: usize, const M: usize] &[[I; N]; M] => Ix2, |a, op, f| rows(&a[..], op, f);
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

mod sealed_segments {
    pub trait Sealed {}
}

/// A 1-D index array that a [`Segments`](crate::Segments) borrows (its offsets, starts,
/// lengths or ids), in every form indices take ([`IndexArray`]'s 1-D forms): `&Array1`,
/// `&ArrayView1`, an `ArrayView1` by value, `&ArcArray1`, `&ArrayRef1`, `&[i64]`,
/// `&Vec<i64>`, `&[i64; N]`. A `Segments` holds a view, so it is `Copy`: one value serves
/// many calls. (A `Vec` by value would be dropped while the view still needs it: lend it,
/// `&v`.) The trait is sealed; nothing is copied.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let x = array![1, 2, 3, 4];
/// let starts: Vec<i64> = vec![0, 1];
/// let segs = Segments::starts(&starts); // `Copy`: used twice below
/// assert_eq!(x.segment_reduce(segs, 0, Pooling::Sum)?, array![1, 9]);
/// assert_eq!(x.segment_reduce(segs, 0, Pooling::Max)?, array![1, 4]);
/// assert_eq!(x.segment_reduce(Segments::lengths(&[3_u32, 1]), 0, Pooling::Sum)?, array![6, 4]);
/// # Ok::<(), GatherError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be lent to `Segments` as a 1-D index array",
    label = "lend it (`&v` for a `Vec`), or pass a view",
    note = "`Segments` borrows its offsets, starts, lengths or ids: `&Array1`, `&ArrayView1`, `ArrayView1`, `&[i64]`, `&Vec<i64>`, `&[i64; N]`"
)]
pub trait SegmentArray<'a, J>: sealed_segments::Sealed {
    /// The array as a 1-D view.
    #[doc(hidden)]
    fn view1(self) -> ArrayView1<'a, J>;
}

/// Implements [`SegmentArray`] for each 1-D form: its generics, type, and its view.
macro_rules! segment_array {
    ($([$($g:tt)*] $T:ty, |$s:ident| $view:expr;)*) => {$(
        impl<$($g)*> sealed_segments::Sealed for $T {}
        impl<$($g)*> SegmentArray<'a, J> for $T {
            #[inline(always)]
            fn view1(self) -> ArrayView1<'a, J> {
                let $s = self;
                $view
            }
        }
    )*};
}

segment_array! {
    ['a, J: GatherIndex] &'a ArrayRef<J, Ix1>, |a| a.view();
    ['a, J: GatherIndex, S: Data<Elem = J>] &'a ArrayBase<S, Ix1>, |a| a.view();
    ['a, J: GatherIndex] ArrayView1<'a, J>, |a| a;
    ['a, J: GatherIndex] &'a [J], |a| ArrayView1::from(a);
    ['a, J: GatherIndex] &'a Vec<J>, |a| ArrayView1::from(&a[..]);
    ['a, J: GatherIndex, const N: usize] &'a [J; N], |a| ArrayView1::from(&a[..]);
}

mod sealed_counts {
    pub trait Sealed {}
}

/// A count or length as Rust code holds one: any primitive integer (`usize`, `u32`,
/// `i64`, ...), for [`Segments::ids`](crate::Segments::ids)' segment count and
/// [`Segments::uniform`](crate::Segments::uniform)'s length. A negative one is the
/// segments' error when a call checks them. Sealed.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let x = array![1, 2, 3, 4];
/// let n: i64 = 2; // a count as an ONNX attribute holds it
/// assert_eq!(x.segment_reduce(Segments::ids(&[1, 0, 1, 1], n), 0, Pooling::Sum)?, array![2, 8]);
/// assert!(x.segment_reduce(Segments::ids(&[0, 0, 0, 0], -1), 0, Pooling::Sum).is_err());
/// # Ok::<(), GatherError>(())
/// ```
pub trait Count: sealed_counts::Sealed + Copy {
    /// The value, exactly.
    #[doc(hidden)]
    fn value(self) -> i128;
}

macro_rules! count {
    ($($t:ty),*) => {$(
        impl sealed_counts::Sealed for $t {}
        impl Count for $t {
            #[inline(always)]
            fn value(self) -> i128 {
                self as i128
            }
        }
    )*};
}

count!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);
