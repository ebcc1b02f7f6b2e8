//! A plan's input shape as Rust code holds it: [`ShapeArg`].

use ndarray::{Dimension, IntoDimension, Ix, IxDyn};

mod private {
    pub trait Sealed<M> {}
}

/// Which way a form becomes a shape: the parameter that keeps [`ShapeArg`]'s forms apart
/// (ndarray may one day convert a reference itself). Callers never name it.
#[doc(hidden)]
pub mod way {
    /// Through `ndarray::IntoDimension`.
    pub enum Dimension {}
    /// A reference to a `Vec<usize>` or to an array of `usize`.
    pub enum Reference {}
}

/// What a plan constructor's `shape` accepts: all that `ndarray::IntoDimension` takes
/// (`x.shape()`, `x.dim()`, `x.raw_dim()`, `[5, 3]`, `(5, 3)`, `&[usize]`, `Vec<usize>`),
/// and the references Rust code holds a shape through: `&Vec<usize>` and `&[usize; N]`
/// (decision 58). Fixed-size forms keep their rank in the type (`[5, 3]` and `&[5, 3]` are
/// `Ix2`, as `(5, 3)`); slices and `Vec`s are `IxDyn`; a generic `D: Dimension` is itself.
/// Sealed; its parameter `M` tells the forms apart, and is inferred.
///
/// ```
/// use ndarray_gather::prelude::*;
///
/// let shape: Vec<usize> = vec![5, 3];
/// let a = GatherReducePlan::new(&shape, &[4, 0], Segments::uniform(1), 0)?;
/// let b = GatherReducePlan::new(&[5, 3], &[4, 0], Segments::uniform(1), 0)?;
/// let c = GatherReducePlan::new((5, 3), &[4, 0], Segments::uniform(1), 0)?;
/// assert!(a == b && b == c);
/// # Ok::<(), GatherError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a shape a plan can be made for",
    label = "not a shape",
    note = "a plan's shape is `x.shape()`, `x.dim()`, `x.raw_dim()`, an array or a tuple of `usize` (`[5, 3]`, `(5, 3)`), a slice, a `Vec<usize>` or a reference to one"
)]
pub trait ShapeArg<M>: private::Sealed<M> {
    /// The dimension type the shape has (a typed plan's output follows it).
    type Dim: Dimension;
    /// The shape as that type.
    #[doc(hidden)]
    fn into_dim(self) -> Self::Dim;
}

impl<T: IntoDimension> private::Sealed<way::Dimension> for T {}
impl<T: IntoDimension> ShapeArg<way::Dimension> for T {
    type Dim = T::Dim;
    #[inline]
    fn into_dim(self) -> T::Dim {
        self.into_dimension()
    }
}

impl private::Sealed<way::Reference> for &Vec<Ix> {}
impl ShapeArg<way::Reference> for &Vec<Ix> {
    type Dim = IxDyn;
    #[inline]
    fn into_dim(self) -> IxDyn {
        self[..].into_dimension()
    }
}

impl<const N: usize> private::Sealed<way::Reference> for &[Ix; N] where [Ix; N]: IntoDimension {}
impl<const N: usize> ShapeArg<way::Reference> for &[Ix; N]
where
    [Ix; N]: IntoDimension,
{
    type Dim = <[Ix; N] as IntoDimension>::Dim;
    #[inline]
    fn into_dim(self) -> Self::Dim {
        (*self).into_dimension()
    }
}
