//! [`GatherReducePlan`]: a gather-reduce's indices checked and resolved, and its segments
//! sorted into CSR, once, for many inputs (a graph's every layer and epoch).

use ndarray::{Array, ArrayRef, Dimension};

use super::backward::Turned;
use crate::axis::{AxisArg, normalize_axis};
use crate::call::reduce::{Done, Frame, Out, check_kind, check_pool, resolve_rows, walk_sorted, with_rows};
use crate::error::{GatherError, internal};
use crate::index::GatherIndex;
use crate::indices::IndexArray;
use crate::kernel::reduce::{Csr, Entries, Geometry, Pooler};
use crate::plan::reduce::ReduceWalk;
use crate::pool::{IntoPool, Pool, PoolElement};
use crate::segments::{Checked, Segments};
use crate::shape::ShapeArg;
use crate::table::PoolTable;

/// A prepared gather-reduce: the indices checked and resolved, and the positions sorted
/// by segment (counting sort: `ids` become CSR) once, when the plan is made; then applied
/// to any input of the plan's shape with any pooling, weights and fill. PyG caches its
/// sorted adjacency for the same reason, and `torch.sparse.mm` takes a CSR matrix.
///
/// Applying a plan gives the same bits as the method call it was made from. A plan binds
/// the dimensions of its input up to and along the gathered axis, not the row shape after
/// it: one plan of a graph serves every layer width (`x` of `[n, 32]`, then `[n, 64]`),
/// and each output and gradient takes its input's row shape.
/// `Clone + Debug + Send + Sync`, with no lifetime: it owns its arrays (8 bytes per
/// position, a `u32` row and position, and a `usize` per segment; once a backward asks,
/// 8 bytes more per kept position and per touched row: the positions by row). Inputs
/// whose axis or positions exceed `u32` cannot be planned
/// ([`SizeOverflow`](GatherError::SizeOverflow)). Its backward is
/// [`backward_into`](Self::backward_into), [`backward_rows`](Self::backward_rows) and
/// [`backward_arg_into`](Self::backward_arg_into).
///
/// ```
/// use ndarray::{Array2, array};
/// use ndarray_gather::prelude::*;
///
/// // A graph of 3 nodes: edges src -> dst.
/// let (src, dst) = ([0, 1, 2, 0], [1, 1, 0, 2]);
/// let plan = GatherReducePlan::new([3, 2], &src, Segments::ids(&dst, 3), 0)?;
/// let x = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
/// let mut h = Array2::zeros((3, 2));
/// plan.apply_into(&x, Pooling::Sum, &mut h)?;
/// assert_eq!(h, x.gather_reduce(&src, Segments::ids(&dst, 3), 0, Pooling::Sum)?);
/// assert_eq!(plan.apply(&x, Pooling::Max)?, array![[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]]);
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatherReducePlan {
    pub(super) shape: Vec<usize>,
    pub(super) axis: usize,
    pub(super) positions: usize,
    skip: Option<i128>,
    /// The positions by segment, their rows resolved.
    pub(super) csr: Csr,
    /// The positions by row, for the backward (sorted when first asked for).
    pub(super) turned: Turned,
}

impl GatherReducePlan {
    /// A plan for [`gather_reduce`](crate::GatherReduceExt::gather_reduce) of inputs of
    /// shape `shape` with these indices, segments and axis. The dimensions of `shape` up to
    /// and along the axis bind the plan; the row shape after it only says what a typical
    /// input is: inputs of any row shape apply.
    ///
    /// ```
    /// use ndarray::Array2;
    /// use ndarray_gather::prelude::*;
    ///
    /// // One graph, two layer widths.
    /// let plan = GatherReducePlan::new([3, 32], &[0, 2, 1], Segments::ids(&[1, 1, 0], 2), 0)?;
    /// assert_eq!(plan.apply(&Array2::<f32>::ones((3, 32)), Pooling::Sum)?.dim(), (2, 32));
    /// assert_eq!(plan.apply(&Array2::<f32>::ones((3, 64)), Pooling::Sum)?.dim(), (2, 64));
    ///
    /// // A bad index is the plan's error, named after it.
    /// let err = GatherReducePlan::new([2, 2], &[0, 2], Segments::uniform(2), 0).unwrap_err();
    /// assert!(err.to_string().starts_with("GatherReducePlan::new: index 2"));
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As `gather_reduce`'s (but the pool's): the axis, the segments, the indices; and
    /// [`SizeOverflow`](GatherError::SizeOverflow) if the plan cannot be allocated.
    pub fn new<M, I: GatherIndex, E: Dimension, J: GatherIndex>(
        shape: impl ShapeArg<M>,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        axis: impl AxisArg,
    ) -> Result<Self, GatherError> {
        Self::build(
            "GatherReducePlan::new",
            shape,
            indices,
            None,
            segments,
            axis.signed(),
        )
    }

    /// [`new`](Self::new) for a pool that skips index value `skip` (`.skip(skip)`): such
    /// positions are left out of the plan, and every other index must be in range. The
    /// plan applies its skip (decision 69): a pool without `.skip` is the pool with the
    /// plan's, in every call of the plan; a pool that skips another value is an error.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new_skipping([3, 1], &[2, 0, 1, 0], 0, Segments::uniform(2), 0)?;
    /// let table = array![[10.0], [20.0], [30.0]];
    /// assert_eq!(plan.apply(&table, Pooling::Mean)?, array![[30.0], [20.0]]);
    /// assert_eq!(plan.apply(&table, Pooling::Mean.skip(0))?, array![[30.0], [20.0]]);
    /// assert!(plan.apply(&table, Pooling::Mean.skip(1)).is_err());
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn new_skipping<M, I: GatherIndex, E: Dimension, J: GatherIndex>(
        shape: impl ShapeArg<M>,
        indices: impl IndexArray<I, E>,
        skip: impl GatherIndex,
        segments: Segments<'_, J>,
        axis: impl AxisArg,
    ) -> Result<Self, GatherError> {
        Self::build(
            "GatherReducePlan::new_skipping",
            shape,
            indices,
            Some(skip.to_i128()),
            segments,
            axis.signed(),
        )
    }

    /// A plan for `shape` with `skip` as the exempt index value, if any; errors named
    /// after `op`.
    pub(crate) fn build<M, I: GatherIndex, E: Dimension, J: GatherIndex>(
        op: &'static str,
        shape: impl ShapeArg<M>,
        indices: impl IndexArray<I, E>,
        skip: Option<i128>,
        segments: Segments<'_, J>,
        axis: isize,
    ) -> Result<Self, GatherError> {
        let shape = shape.into_dim();
        let shape = shape.slice();
        let axis = normalize_axis(op, axis, shape.len())?;
        indices.with_ref(op, |ix| {
            let positions = ix.len();
            let segs = Checked::new(op, &segments, positions)?;
            let rows = resolve_rows(op, ix, axis, shape[axis], skip)?;
            // The plan holds `u32` rows and positions, 8 bytes per position.
            let csr = with_rows!(rows, r => match &segs {
                Checked::Sorted(bounds, n) => Csr::by_ranges(r, shape[axis], positions, *n, |s| bounds.get(s)),
                Checked::Ids(ids, n) => Csr::by_ids(r, shape[axis], *ids, *n),
            })
            .ok_or_else(|| GatherError::SizeOverflow {
                op,
                shape: ix.shape().to_vec(),
            })?;
            Ok(GatherReducePlan {
                shape: shape.to_vec(),
                axis,
                positions,
                skip,
                csr,
                turned: Turned::default(),
            })
        })
    }

    /// A plan of `shape` along `axis` from segments already sorted (`csr`'s rows below
    /// `shape[axis]`, checked by its maker), for the crate's own gathers that pool
    /// (`sample`).
    pub(crate) fn of_csr(shape: Vec<usize>, axis: usize, csr: Csr) -> Self {
        GatherReducePlan {
            positions: csr.len(),
            shape,
            axis,
            skip: None,
            csr,
            turned: Turned::default(),
        }
    }

    /// The plan's segments, for a walk of its own (`sample`'s planes).
    pub(crate) fn csr(&self) -> &Csr {
        &self.csr
    }

    /// The input shape the plan was made for (its dimensions up to the axis bind; the
    /// rows after it are free), and, below, its segment and position counts:
    ///
    /// ```
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([5, 3], &[4, 0, 4], Segments::ids(&[1, 1, 0], 2), 0)?;
    /// assert_eq!((plan.shape(), plan.segments(), plan.positions()), (&[5, 3][..], 2, 3));
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of segments (the output's length along the axis).
    pub fn segments(&self) -> usize {
        self.csr.count()
    }

    /// The number of positions (the indices' length; weights need one each).
    pub fn positions(&self) -> usize {
        self.positions
    }

    /// The gather-reduce of `x` (the plan's dimensions up to its axis, any row shape after
    /// it) with `pool`, in a fresh array.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([3], &[2, 2, 0], Segments::starts(&[0, 2]), 0)?;
    /// assert_eq!(plan.apply(&array![1.0, 2.0, 4.0], Pooling::Sum)?, array![8.0, 1.0]);
    /// let w = [0.5, 0.5, 3.0];
    /// assert_eq!(plan.apply(&array![1.0, 2.0, 4.0], Pooling::Sum.weighted(&w))?, array![4.0, 3.0]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`InputShape`](GatherError::InputShape) if `x` differs from the plan's shape up to
    /// its axis;
    /// [`Weights`](GatherError::Weights) and [`Pooling`](GatherError::Pooling) as the
    /// methods', and a `Pooling` error if the pool's `.skip` differs from the plan's.
    pub fn apply<'w, A: PoolElement + 'w, D: Dimension, X: PoolTable<A, D> + ?Sized>(
        &self,
        x: &X,
        pool: impl IntoPool<'w, A>,
    ) -> Result<Array<A, D>, GatherError> {
        self.run("GatherReducePlan::apply", x, pool.into_pool(), Out::Fresh)?
            .fresh("GatherReducePlan::apply")
    }

    /// [`apply`](Self::apply) into `out`, which must have the output's shape (any
    /// layout): the plan's way to run with no allocation but per-call tallies. On `Err`,
    /// `out` is unchanged.
    ///
    /// ```
    /// use ndarray::{Array1, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([3], &[2, 2, 0], Segments::starts(&[0, 2]), 0)?;
    /// let mut out = Array1::zeros(2);
    /// plan.apply_into(&array![1.0, 2.0, 4.0], Pooling::Max, &mut out)?;
    /// assert_eq!(out, array![4.0, 1.0]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As `apply`, and [`OutputShape`](GatherError::OutputShape).
    pub fn apply_into<'w, A: PoolElement + 'w, D: Dimension, X: PoolTable<A, D> + ?Sized>(
        &self,
        x: &X,
        pool: impl IntoPool<'w, A>,
        out: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError> {
        self.run(
            "GatherReducePlan::apply_into",
            x,
            pool.into_pool(),
            Out::Into(out),
        )
        .map(|_| ())
    }

    /// [`apply`](Self::apply) with `Max` or `Min` and, for each output element, the
    /// position its value came from (as
    /// [`gather_reduce_arg`](crate::GatherReduceExt::gather_reduce_arg): ties keep the
    /// first position; empty segments the number of positions).
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([3], &[2, 0, 2], Segments::ids(&[0, 0, 1], 3), 0)?;
    /// let (m, arg) = plan.apply_arg(&array![1.0, 5.0, 4.0], Pooling::Max)?;
    /// assert_eq!((m, arg), (array![4.0, 4.0, 0.0], array![0, 2, 3]));
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As `apply`, and a [`Pooling`](GatherError::Pooling) error for a pooling other than
    /// `Max` and `Min`.
    #[allow(clippy::type_complexity)]
    pub fn apply_arg<'w, A: PoolElement + 'w, D: Dimension, X: PoolTable<A, D> + ?Sized>(
        &self,
        x: &X,
        pool: impl IntoPool<'w, A>,
    ) -> Result<(Array<A, D>, Array<usize, D>), GatherError> {
        let op = "GatherReducePlan::apply_arg";
        self.run(op, x, pool.into_pool(), Out::Arg)?.with_arg(op)
    }

    /// [`apply_arg`](Self::apply_arg) into `out` and `arg`, which must both have the
    /// output's shape (any layouts). On `Err`, both are unchanged.
    ///
    /// ```
    /// use ndarray::{Array1, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([3], &[2, 0, 2], Segments::ids(&[0, 0, 1], 2), 0)?;
    /// let (mut m, mut arg) = (Array1::zeros(2), Array1::zeros(2));
    /// plan.apply_arg_into(&array![1.0, 5.0, 4.0], Pooling::Min, &mut m, &mut arg)?;
    /// assert_eq!((m, arg), (array![1.0, 4.0], array![1, 2]));
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As `apply_arg`, and [`OutputShape`](GatherError::OutputShape) for an `out` or
    /// `arg` of another shape.
    pub fn apply_arg_into<'w, A: PoolElement + 'w, D: Dimension, X: PoolTable<A, D> + ?Sized>(
        &self,
        x: &X,
        pool: impl IntoPool<'w, A>,
        out: &mut ArrayRef<A, D>,
        arg: &mut ArrayRef<usize, D>,
    ) -> Result<(), GatherError> {
        self.run(
            "GatherReducePlan::apply_arg_into",
            x,
            pool.into_pool(),
            Out::ArgInto(out, arg),
        )
        .map(|_| ())
    }

    /// An input's (or a dense gradient's) `found` shape checked against the plan: the
    /// dimensions up to the axis are the plan's; after it, `rows` if given (a gradient's
    /// rows follow `grad_out`'s), else any (decision 57: one plan serves every width).
    pub(super) fn check_input(
        &self,
        op: &'static str,
        found: &[usize],
        rows: Option<&[usize]>,
    ) -> Result<(), GatherError> {
        let bound = &self.shape[..=self.axis];
        let after = rows.unwrap_or_else(|| found.get(self.axis + 1..).unwrap_or(&[]));
        if found.get(..=self.axis) != Some(bound) || found.get(self.axis + 1..) != Some(after) {
            return Err(GatherError::InputShape {
                op,
                expected: bound.iter().chain(after).copied().collect(),
                found: found.to_vec(),
            });
        }
        Ok(())
    }

    /// The pool's `.skip`, if any, checked against the plan's.
    pub(super) fn check_skip<A>(&self, op: &'static str, pool: &Pool<'_, A>) -> Result<(), GatherError> {
        check_skip(op, pool, self.skip, "GatherReducePlan::new_skipping")
    }

    fn run<A: PoolElement, D: Dimension, X: PoolTable<A, D> + ?Sized>(
        &self,
        op: &'static str,
        x: &X,
        pool: Pool<'_, A>,
        out: Out<'_, A, D>,
    ) -> Result<Done<A, D>, GatherError> {
        let dim = x.dim();
        self.check_input(op, dim.slice(), None)?;
        self.check_skip(op, &pool)?;
        check_kind::<A, D, X>(op, &pool)?;
        check_pool(
            op,
            &pool,
            self.positions,
            matches!(out, Out::Arg | Out::ArgInto(..)),
            Some((dim.slice(), self.axis)),
        )?;
        let frame = Frame::new(op, x, self.axis, self.segments(), pool, self.positions);
        // The plan's entries are sorted segments.
        let walk = ReduceWalk::of(false, self.segments(), self.csr.len(), frame.row_bytes(), 0);
        let ReduceWalk::Sorted { jobs } = walk else {
            return Err(internal(op, "a plan's segments walked by ids"));
        };
        frame.finish(
            out,
            None::<fn()>,
            |gs: &[Geometry<A>], ps: &[Pooler<'_, A>], _| walk_sorted(x, gs, &self.csr, ps, jobs),
        )
    }
}

/// A skip value in words: the index, or "no index".
/// A pool's `.skip`, if any, checked against the skip value a plan was made with
/// (`made_by`: the constructor that takes one).
pub(crate) fn check_skip<A>(
    op: &'static str,
    pool: &Pool<'_, A>,
    skip: Option<i128>,
    made_by: &str,
) -> Result<(), GatherError> {
    if pool.skip.is_some() && pool.skip != skip {
        return Err(GatherError::Pooling {
            op,
            pooling: pool.pooling,
            detail: format!(
                "skips index {}, but the plan was made to skip {} ({made_by})",
                skipped(pool.skip),
                skipped(skip)
            ),
        });
    }
    Ok(())
}

fn skipped(skip: Option<i128>) -> String {
    skip.map_or_else(|| "no index".to_string(), |v| v.to_string())
}
