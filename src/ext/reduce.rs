//! [`GatherReduceExt`]: the gather fused with its reduction (bags, segments, graphs).

use ndarray::{Array, ArrayBase, ArrayRef, Data, Dimension};

use super::private;
use crate::axis::AxisArg;
use crate::call::reduce::{self, Out};
use crate::error::GatherError;
use crate::index::GatherIndex;
use crate::indices::IndexArray;
use crate::pool::{IntoPool, PoolElement};
use crate::segments::Segments;

/// The gather fused with its reduction: embedding bags, segment reductions and graph
/// aggregation, reading each gathered row once and writing each output row once, with no
/// gathered intermediate.
///
/// Position `p` (the indices in row-major order, any rank) reads the input's slice at
/// `indices[p]` along `axis`, as [`gather`](crate::GatherExt::gather) with one index
/// does (negative indices count from the end; out of range is an error). [`Segments`]
/// group the positions, and each segment's slices pool ([`Pooling`](crate::Pooling)) into
/// one output slice: the output has the input's shape with `axis` replaced by the segment
/// count. Each output element combines its segment's positions one at a time in increasing
/// position order, so the result is the same bits on any number of threads (each segment
/// is built by one thread: no atomics).
///
/// | library | here |
/// |---|---|
/// | torch `F.embedding_bag(idx, table, offsets, mode=m, per_sample_weights=w, padding_idx=k)`, `nn.EmbeddingBag` | `table.gather_reduce(&idx, Segments::starts(&offsets), 0, m.weighted(&w).skip(k))`: torch's `offsets` are `starts`; a negative id counts from the end (torch raises); FBGEMM's pruned `-1` is `.skip(-1)` |
/// | torch `embedding_bag(.., include_last_offset=True)`, torch_scatter `segment_csr(x[idx], indptr)`, SciPy CSR | `Segments::indptr(&indptr)` |
/// | torch `segment_reduce(data, r, lengths=l)`, TF `segment_*` (sorted ids) | `data.segment_reduce(Segments::lengths(&l), 0, r)` |
/// | torch `zeros.index_reduce_(0, dst, x[src], r, include_self=False)`, `index_add_`, `scatter_reduce(.., include_self=False)` | `x.gather_reduce(&src, Segments::ids(&dst, n), 0, r)` |
/// | torch_scatter `scatter(x[src], dst, dim_size=n, reduce=r)`, PyG aggregation, DGL `update_all(copy_u, r)` | the same |
/// | torch_scatter `scatter_max(x[src], dst)` | `x.gather_reduce_arg(&src, Segments::ids(&dst, n), 0, Pooling::Max)` |
/// | TF `unsorted_segment_*(data, ids, n)`, JAX `ops.segment_*` | `data.segment_reduce(Segments::ids(&ids, n), 0, r)` |
/// | TF `nn.embedding_lookup_sparse(table, ids, weights, combiner=c)` | `table.gather_reduce(&ids, segments, 0, c.weighted(&w))` |
///
/// Empty segments get the pool's fill (zero by default: torch's `embedding_bag`,
/// torch_scatter, TF's `unsorted_segment_sum`). The backward pass of a `Sum` with respect
/// to the table is a gather-reduce with the roles swapped: `grad_out` gathered by each
/// position's segment ([`Segments::to_ids`]) and summed by `Segments::ids(&indices, rows)`.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let table = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
/// let idx = [2, 0, 1, 2];
/// // Two bags, {2, 0} and {1, 2}: torch F.embedding_bag(idx, table, offsets=[0, 2]).
/// let bags = Segments::starts(&[0, 2]);
/// let out = table.gather_reduce(&idx, bags.clone(), 0, Pooling::Sum)?;
/// assert_eq!(out, array![[6.0, 8.0], [8.0, 10.0]]);
///
/// // Backward: d(out)/d(table) routes each bag's gradient back to its rows.
/// let grad_out = array![[1.0, 1.0], [0.5, 0.5]];
/// let grad = grad_out.gather_reduce(&bags.to_ids(4)?, Segments::ids(&idx, 3), 0, Pooling::Sum)?;
/// assert_eq!(grad, array![[1.0, 1.0], [0.5, 0.5], [1.5, 1.5]]);
/// # Ok::<(), GatherError>(())
/// ```
pub trait GatherReduceExt<A, D>: private::Sealed<A, D>
where
    A: PoolElement,
    D: Dimension,
{
    /// Gathers the slices at `indices` along `axis` and pools each segment's into one
    /// (see the [trait documentation](GatherReduceExt)).
    ///
    /// # Errors
    /// [`AxisOutOfBounds`](GatherError::AxisOutOfBounds) for a bad `axis`;
    /// [`Segments`](GatherError::Segments) for segments that do not fit the positions;
    /// [`Weights`](GatherError::Weights) for weights not one per position;
    /// [`Pooling`](GatherError::Pooling) for weights with `Max`, `Min` or `Prod`;
    /// [`IndexOutOfBounds`](GatherError::IndexOutOfBounds) for the first index (row-major,
    /// skipped ones aside) outside `-len..len`; [`SizeOverflow`](GatherError::SizeOverflow)
    /// if the output cannot be allocated. Checked in that order, before anything is written.
    ///
    /// # Examples
    /// Mean aggregation over a graph's edges (PyG `scatter(x[src], dst, reduce="mean")`):
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let x = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
    /// let (src, dst) = ([0, 1, 2, 0], [1, 1, 0, 0]);
    /// let h = x.gather_reduce(&src, Segments::ids(&dst, 3), 0, Pooling::Mean)?;
    /// assert_eq!(h, array![[1.0, 0.5], [0.5, 0.5], [0.0, 0.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(
        alias = "embedding_bag",
        alias = "index_reduce_",
        alias = "scatter_reduce",
        alias = "segment_csr"
    )]
    fn gather_reduce<'w, I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        axis: impl AxisArg,
        pool: impl IntoPool<'w, A>,
    ) -> Result<Array<A, D>, GatherError>
    where
        A: 'w,
    {
        let op = "gather_reduce";
        let x = self.array_ref();
        indices.with_ref(op, |ix| {
            reduce::gather_reduce(op, x, ix, &segments, axis.signed(), pool.into_pool(), Out::Fresh)?
                .fresh(op)
        })
    }

    /// [`gather_reduce`](Self::gather_reduce) into `out`, which must have the output's
    /// shape (any memory layout); every element of `out` is written, and nothing is
    /// allocated but small per-call tallies.
    ///
    /// # Errors
    /// As `gather_reduce`, and [`OutputShape`](GatherError::OutputShape) if `out` has
    /// another shape. On `Err`, `out` is unchanged.
    ///
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let table = array![[1.0_f32, 2.0], [3.0, 4.0]];
    /// let mut out = Array2::zeros((2, 2));
    /// table.gather_reduce_into(&[1, 1, 0], Segments::indptr(&[0, 2, 3]), 0, Pooling::Max, &mut out)?;
    /// assert_eq!(out, array![[3.0, 4.0], [1.0, 2.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    fn gather_reduce_into<'w, I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        axis: impl AxisArg,
        pool: impl IntoPool<'w, A>,
        out: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError>
    where
        A: 'w,
    {
        let op = "gather_reduce_into";
        let x = self.array_ref();
        indices.with_ref(op, |ix| {
            reduce::gather_reduce(
                op,
                x,
                ix,
                &segments,
                axis.signed(),
                pool.into_pool(),
                Out::Into(out),
            )
            .map(|_| ())
        })
    }

    /// [`gather_reduce`](Self::gather_reduce) with `Max` or `Min`, and for each output
    /// element the position (into the indices, row-major) its value came from: the first
    /// of ties; an empty segment's is the number of positions (torch_scatter's
    /// `scatter_max` sentinel).
    ///
    /// # Errors
    /// As `gather_reduce`, and [`Pooling`](GatherError::Pooling) for a pooling other than
    /// `Max` and `Min`.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let x = array![[1.0, 9.0], [4.0, 2.0], [4.0, 0.0]];
    /// // torch_scatter.scatter_max(x[src], dst, dim_size=3)
    /// let (m, arg) = x.gather_reduce_arg(&[0, 1, 2], Segments::ids(&[0, 0, 0], 3), 0, Pooling::Max)?;
    /// assert_eq!(m, array![[4.0, 9.0], [0.0, 0.0], [0.0, 0.0]]);
    /// assert_eq!(arg, array![[1, 0], [3, 3], [3, 3]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "scatter_max", alias = "scatter_min")]
    #[allow(clippy::type_complexity)]
    fn gather_reduce_arg<'w, I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        axis: impl AxisArg,
        pool: impl IntoPool<'w, A>,
    ) -> Result<(Array<A, D>, Array<usize, D>), GatherError>
    where
        A: 'w,
    {
        let op = "gather_reduce_arg";
        let x = self.array_ref();
        indices.with_ref(op, |ix| {
            reduce::gather_reduce(op, x, ix, &segments, axis.signed(), pool.into_pool(), Out::Arg)?
                .with_arg(op)
        })
    }

    /// [`gather_reduce_arg`](Self::gather_reduce_arg) into `out` and `arg`, which must both
    /// have the output's shape (any layouts): with
    /// [`gather_reduce_into`](Self::gather_reduce_into), the call with no allocation.
    ///
    /// # Errors
    /// As `gather_reduce_arg`, and [`OutputShape`](GatherError::OutputShape) for an `out`
    /// or `arg` of another shape. On `Err`, both are unchanged.
    ///
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let x = array![[1.0, 9.0], [4.0, 2.0], [4.0, 0.0]];
    /// let (mut m, mut arg) = (Array2::zeros((2, 2)), Array2::zeros((2, 2)));
    /// x.gather_reduce_arg_into(&[0, 1, 2], Segments::ids(&[0, 0, 1], 2), 0, Pooling::Min, &mut m, &mut arg)?;
    /// assert_eq!((m, arg), (array![[1.0, 2.0], [4.0, 0.0]], array![[0, 1], [2, 2]]));
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "scatter_max", alias = "scatter_min")]
    fn gather_reduce_arg_into<'w, I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        axis: impl AxisArg,
        pool: impl IntoPool<'w, A>,
        out: &mut ArrayRef<A, D>,
        arg: &mut ArrayRef<usize, D>,
    ) -> Result<(), GatherError>
    where
        A: 'w,
    {
        let op = "gather_reduce_arg_into";
        let x = self.array_ref();
        indices.with_ref(op, |ix| {
            let out = Out::ArgInto(out, arg);
            reduce::gather_reduce(op, x, ix, &segments, axis.signed(), pool.into_pool(), out).map(|_| ())
        })
    }

    /// Pools the input's own slices along `axis` by segments: position `p` is slice `p`
    /// (`torch.segment_reduce`, TF's `segment_*` and `unsorted_segment_*`, JAX's
    /// `ops.segment_*`). A pool's `.skip` is an error here (there are no indices).
    ///
    /// # Errors
    /// As [`gather_reduce`](Self::gather_reduce) without the index errors, and
    /// [`Pooling`](GatherError::Pooling) for a `.skip`.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let data = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
    /// // torch.segment_reduce(data, "max", lengths=[2, 0, 1], unsafe=True, initial=-inf)
    /// let m = data.segment_reduce(Segments::lengths(&[2, 0, 1]), 0, Pooling::Max.fill(f64::NEG_INFINITY))?;
    /// assert_eq!(m, array![[3.0, 4.0], [f64::NEG_INFINITY; 2], [5.0, 6.0]]);
    /// // tf.math.unsorted_segment_sum(data, [1, 0, 1], 2)
    /// assert_eq!(data.segment_reduce(Segments::ids(&[1, 0, 1], 2), 0, Pooling::Sum)?, array![[3.0, 4.0], [6.0, 8.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "unsorted_segment_sum", alias = "segment_sum")]
    fn segment_reduce<'w, J: GatherIndex>(
        &self,
        segments: Segments<'_, J>,
        axis: impl AxisArg,
        pool: impl IntoPool<'w, A>,
    ) -> Result<Array<A, D>, GatherError>
    where
        A: 'w,
    {
        let op = "segment_reduce";
        reduce::segment_reduce(
            op,
            self.array_ref(),
            &segments,
            axis.signed(),
            pool.into_pool(),
            Out::Fresh,
        )?
        .fresh(op)
    }

    /// [`segment_reduce`](Self::segment_reduce) into `out`, which must have the output's
    /// shape; on `Err`, `out` is unchanged.
    ///
    /// # Errors
    /// As `segment_reduce`, and [`OutputShape`](GatherError::OutputShape).
    ///
    /// ```
    /// use ndarray::{Array1, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let mut out = Array1::zeros(2);
    /// array![1, 2, 3].segment_reduce_into(Segments::indptr(&[0, 1, 3]), 0, Pooling::Prod, &mut out)?;
    /// assert_eq!(out, array![1, 6]);
    /// # Ok::<(), GatherError>(())
    /// ```
    fn segment_reduce_into<'w, J: GatherIndex>(
        &self,
        segments: Segments<'_, J>,
        axis: impl AxisArg,
        pool: impl IntoPool<'w, A>,
        out: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError>
    where
        A: 'w,
    {
        let op = "segment_reduce_into";
        reduce::segment_reduce(
            op,
            self.array_ref(),
            &segments,
            axis.signed(),
            pool.into_pool(),
            Out::Into(out),
        )
        .map(|_| ())
    }

    /// [`segment_reduce`](Self::segment_reduce) with `Max` or `Min`, and for each output
    /// element the position (the slice along `axis`) its value came from: the first of
    /// ties; an empty segment's is the number of positions (`torch_scatter.scatter_max`'s
    /// argmax of `src` itself, TF's `unsorted_segment_max` with its positions).
    ///
    /// # Errors
    /// As `segment_reduce`, and [`Pooling`](GatherError::Pooling) for a pooling other than
    /// `Max` and `Min`.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let x = array![[1.0, 9.0], [4.0, 2.0], [4.0, 0.0]];
    /// // torch_scatter.scatter_max(x, [0, 0, 0], dim=0, dim_size=2)
    /// let (m, arg) = x.segment_reduce_arg(Segments::ids(&[0, 0, 0], 2), 0, Pooling::Max)?;
    /// assert_eq!((m, arg), (array![[4.0, 9.0], [0.0, 0.0]], array![[1, 0], [3, 3]]));
    /// # Ok::<(), GatherError>(())
    /// ```
    #[doc(alias = "scatter_max", alias = "unsorted_segment_max")]
    #[allow(clippy::type_complexity)]
    fn segment_reduce_arg<'w, J: GatherIndex>(
        &self,
        segments: Segments<'_, J>,
        axis: impl AxisArg,
        pool: impl IntoPool<'w, A>,
    ) -> Result<(Array<A, D>, Array<usize, D>), GatherError>
    where
        A: 'w,
    {
        let op = "segment_reduce_arg";
        let x = self.array_ref();
        reduce::segment_reduce(op, x, &segments, axis.signed(), pool.into_pool(), Out::Arg)?.with_arg(op)
    }

    /// [`segment_reduce_arg`](Self::segment_reduce_arg) into `out` and `arg`, which must
    /// both have the output's shape (any layouts); on `Err`, both are unchanged.
    ///
    /// # Errors
    /// As `segment_reduce_arg`, and [`OutputShape`](GatherError::OutputShape).
    ///
    /// ```
    /// use ndarray::{Array1, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let (mut m, mut arg) = (Array1::zeros(2), Array1::zeros(2));
    /// array![3, 1, 2].segment_reduce_arg_into(Segments::indptr(&[0, 2, 3]), 0, Pooling::Min, &mut m, &mut arg)?;
    /// assert_eq!((m, arg), (array![1, 2], array![1, 2]));
    /// # Ok::<(), GatherError>(())
    /// ```
    fn segment_reduce_arg_into<'w, J: GatherIndex>(
        &self,
        segments: Segments<'_, J>,
        axis: impl AxisArg,
        pool: impl IntoPool<'w, A>,
        out: &mut ArrayRef<A, D>,
        arg: &mut ArrayRef<usize, D>,
    ) -> Result<(), GatherError>
    where
        A: 'w,
    {
        let op = "segment_reduce_arg_into";
        let out = Out::ArgInto(out, arg);
        reduce::segment_reduce(
            op,
            self.array_ref(),
            &segments,
            axis.signed(),
            pool.into_pool(),
            out,
        )
        .map(|_| ())
    }

    /// The softmax of `self`'s scores over `segments` of its positions (its first axis),
    /// per head: [`GatherReducePlan::softmax`](crate::GatherReducePlan::softmax) without a
    /// plan (decision 55), for scores of shape `[P]` or `[P, H]`. PyG's
    /// `utils.softmax(scores, index)`, DGL's `edge_softmax`, torch's
    /// `segment_reduce`-built softmax; the same bits as the plan's on the same segments.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// // Scores of 3 edges, 2 heads; edges 0 and 2 enter node 1, edge 1 node 0.
    /// let scores = array![[0.0_f32, 1.0], [5.0, 5.0], [0.0, f32::NEG_INFINITY]];
    /// let alpha = scores.segment_softmax(Segments::ids(&[1, 0, 1], 2))?;
    /// assert_eq!(alpha, array![[0.5, 1.0], [1.0, 1.0], [0.5, 0.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`Segments`](GatherError::Segments) as `segment_reduce`'s;
    /// [`Scores`](GatherError::Scores) for scores not of rank 1 or 2.
    #[doc(alias = "edge_softmax", alias = "scatter_softmax")]
    fn segment_softmax<J: GatherIndex>(&self, segments: Segments<'_, J>) -> Result<Array<A, D>, GatherError>
    where
        A: num_traits::Float,
    {
        crate::call::attention::segment_softmax("segment_softmax", self.array_ref(), &segments)
    }
}

impl<A: PoolElement, D: Dimension> GatherReduceExt<A, D> for ArrayRef<A, D> {}
impl<A: PoolElement, S: Data<Elem = A>, D: Dimension> GatherReduceExt<A, D> for ArrayBase<S, D> {}
