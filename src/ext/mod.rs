//! The public extension traits, one file each: [`GatherExt`] (every gather) and
//! [`ScatterExt`] (every scatter). Each method is written once, as a provided method of
//! its trait: the traits are implemented for ndarray's `ArrayRef` and, so that they also
//! work as generic bounds, for every `ArrayBase`, both through the sealed supertraits
//! below, whose one method lends the method bodies an `ArrayRef`.

mod gather;
mod reduce;
mod scatter;

pub use self::gather::GatherExt;
pub use self::reduce::GatherReduceExt;
pub use self::scatter::ScatterExt;

/// Implements extension trait `$Trait` for ndarray's `ArrayRef` and, so that it works as a
/// generic bound too, for every `ArrayBase` whose storage is `$Data`: the trait's provided
/// methods are all there is.
macro_rules! for_every_array {
    ($Trait:ident, $Data:ident) => {
        impl<A: Clone + Send + Sync, D: Dimension> $Trait<A, D> for ArrayRef<A, D> {}
        impl<A: Clone + Send + Sync, S: $Data<Elem = A>, D: Dimension> $Trait<A, D> for ArrayBase<S, D> {}
    };
}
pub(crate) use for_every_array;

/// The seal of the extension traits: only ndarray's arrays implement them, and each lends
/// the provided methods the `ArrayRef` they work on.
pub(crate) mod private {
    use ndarray::{ArrayBase, ArrayRef, Data, DataMut, Dimension};

    /// An array or view of `A`s, read.
    pub trait Sealed<A, D> {
        /// The array, as ndarray's reference type.
        fn array_ref(&self) -> &ArrayRef<A, D>;
    }

    /// An array or view of `A`s, written.
    pub trait SealedMut<A, D> {
        /// The array, as ndarray's reference type.
        fn array_mut(&mut self) -> &mut ArrayRef<A, D>;
    }

    impl<A, D: Dimension> Sealed<A, D> for ArrayRef<A, D> {
        #[inline(always)]
        fn array_ref(&self) -> &ArrayRef<A, D> {
            self
        }
    }

    impl<A, S: Data<Elem = A>, D: Dimension> Sealed<A, D> for ArrayBase<S, D> {
        #[inline(always)]
        fn array_ref(&self) -> &ArrayRef<A, D> {
            self
        }
    }

    impl<A, D: Dimension> SealedMut<A, D> for ArrayRef<A, D> {
        #[inline(always)]
        fn array_mut(&mut self) -> &mut ArrayRef<A, D> {
            self
        }
    }

    impl<A, S: DataMut<Elem = A>, D: Dimension> SealedMut<A, D> for ArrayBase<S, D> {
        #[inline(always)]
        fn array_mut(&mut self) -> &mut ArrayRef<A, D> {
            self
        }
    }
}
