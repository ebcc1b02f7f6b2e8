//! The dimension type of a gather's output, where the types know its rank: [`GatherRank`].

use ndarray::{Dimension, Ix0, Ix1, Ix2, Ix3, Ix4, Ix5, Ix6, IxDyn};

/// The output dimension type of [`gather`](crate::GatherExt::gather) (and of
/// [`take`](crate::GatherExt::take) with an axis) for indices of this dimension type and
/// an input of dimension type `D`: the output has rank `q + r - 1`, so 1-D indices keep
/// `D` (an `Array2` gathers into an `Array2`), a scalar index removes a dimension
/// (`D::Smaller`), 2-D indices add one (`D::Larger`), and so on (`IxDyn` beyond ndarray's largest fixed rank, 6, and
/// wherever input or indices are `IxDyn`). Implemented for every ndarray dimension type, so a generic function needs it
/// only as a bound (`E: GatherRank<D>`).
///
/// ```
/// use ndarray::{Array2, Array3, array, arr0};
/// use ndarray_gather::prelude::*;
///
/// let table = array![[0, 1], [10, 11], [20, 21]];
/// let rows: Array2<i32> = table.gather(&array![2_i64, 0], 0)?;
/// let bags: Array3<i32> = table.gather(&array![[2_i64, 0], [1, 1]], 0)?;
/// let row = table.gather(&arr0(1_i64), 0)?; // an Array1
/// assert_eq!((rows.shape(), bags.shape(), row), (&[2, 2][..], &[2, 2, 2][..], array![10, 11]));
/// # Ok::<(), GatherError>(())
/// ```
pub trait GatherRank<D: Dimension>: Dimension {
    /// The output's dimension type.
    type Out: Dimension;
}

impl<D: Dimension> GatherRank<D> for Ix0 {
    type Out = D::Smaller;
}

impl<D: Dimension> GatherRank<D> for Ix1 {
    type Out = D;
}

impl<D: Dimension> GatherRank<D> for Ix2 {
    type Out = D::Larger;
}

impl<D: Dimension> GatherRank<D> for Ix3 {
    type Out = <D::Larger as Dimension>::Larger;
}

impl<D: Dimension> GatherRank<D> for Ix4 {
    type Out = <<D::Larger as Dimension>::Larger as Dimension>::Larger;
}

impl<D: Dimension> GatherRank<D> for Ix5 {
    type Out = <<<D::Larger as Dimension>::Larger as Dimension>::Larger as Dimension>::Larger;
}

impl<D: Dimension> GatherRank<D> for Ix6 {
    type Out =
        <<<<D::Larger as Dimension>::Larger as Dimension>::Larger as Dimension>::Larger as Dimension>::Larger;
}

impl<D: Dimension> GatherRank<D> for IxDyn {
    type Out = IxDyn;
}
