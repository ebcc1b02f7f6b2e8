//! [`ShardedPlan`]: a sharded gather-reduce routed and checked once (a graph's every layer
//! and epoch), then applied to any table of the same rows many times, moving only
//! partials.

use std::sync::Mutex;

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use ndarray::{Array, ArrayRef, Dimension};

use super::combine::{OwnerPlans, Routed};
use super::exchange::{CallShape, agree, agree_pooled};
use super::{ShardedTable, Traffic, lend};
use crate::call::into_dim;
use crate::call::reduce::check_pool;
use crate::error::GatherError;
use crate::index::GatherIndex;
use crate::indices::IndexArray;
use crate::pool::{IntoPool, Pool, PoolElement};
use crate::prepared::GatherReducePlan;
use crate::segments::{Checked, Segments};
use crate::table::PoolTable;

/// A sharded gather-reduce whose ids were checked and routed once: each rank keeps which
/// of its positions each owner serves, and each owner keeps, as local
/// [`GatherReducePlan`]s, the rows every rank asked of it (its own positions', pooled
/// straight into its output, and the other ranks'), sorted by segment. Applying it
/// moves no id: the weights (if any) go to the owners, and one partial row per segment and
/// owner comes back. Made by [`ShardedTable::plan`]; no lifetime, `Send + Sync`.
///
/// ```no_run
/// use mpi::traits::*;
/// use ndarray::Array2;
/// use ndarray_gather::prelude::*;
/// use ndarray_gather::shard::{Rows, ShardedTable};
///
/// let universe = mpi::initialize().unwrap();
/// let world = universe.world();
/// let rows = Rows::even(3, world.size() as usize);
/// let mine = rows.range(world.rank() as usize);
/// let table = ShardedTable::new(&world, Array2::<f32>::ones((mine.len(), 2)), rows)?;
/// // A graph: this rank's edges by destination, routed once.
/// let (src, dst) = ([0_i64, 1, 2, 0], [1_i64, 1, 0, 2]);
/// let plan = table.plan(&src, Segments::ids(&dst, 3))?;
/// let mut h = Array2::zeros((3, 2));
/// for _layer in 0..3 {
///     plan.apply_into(&table, Pooling::Mean, &mut h)?;
/// }
/// # Ok::<(), GatherError>(())
/// ```
pub struct ShardedPlan {
    /// The routing, or `None` on one rank (the owner's plan is then the caller's).
    pub(super) routed: Option<Routed>,
    /// The number of segments and of this rank's positions.
    pub(super) count: usize,
    pub(super) positions: usize,
    /// One rank: the single-process plan on its rows (the whole table). Several: the
    /// rows this rank's own positions read, pooled straight into its output.
    pub(super) owner: GatherReducePlan,
    /// Several ranks: the rows the ranks before this one asked of it, and those after it
    /// (each sorted by segment once).
    pub(super) served: Option<[GatherReducePlan; 2]>,
    /// The bounds of the table it was made for (any row shape applies: decision 57).
    pub(super) bounds: Vec<usize>,
    pub(super) skip: Option<i128>,
    pub(super) traffic: Mutex<Traffic>,
}

impl<'c, C, A, D, T> ShardedTable<'c, C, A, D, T>
where
    C: Communicator + CommunicatorCollectives,
    A: PoolElement + Equivalence + Copy + Default,
    D: Dimension,
    T: PoolTable<A, D>,
{
    /// Routes and checks `indices` (global rows, as for
    /// [`gather_reduce`](Self::gather_reduce)) into `segments` once, for every later
    /// apply with any table of these rows. Collective.
    ///
    /// # Errors
    /// On every rank, if any rank's indices or segments are bad: the bad rank's own error,
    /// [`Peer`](GatherError::Peer) elsewhere; [`SizeOverflow`](GatherError::SizeOverflow)
    /// (on its rank, `Peer` elsewhere) where the rows asked of an owner exceed `u32`.
    pub fn plan<I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
    ) -> Result<ShardedPlan, GatherError> {
        self.make_plan("ShardedTable::plan", indices, None, segments)
    }

    /// [`plan`](Self::plan) for pools that skip index value `skip` (`.skip(skip)`): the
    /// plan checks the ids once, so it must know the exempt value. It applies it
    /// (decision 69): a pool without `.skip` is the pool with the plan's; a pool that
    /// skips another value is an error.
    ///
    /// # Errors
    /// As [`plan`](Self::plan).
    pub fn plan_skipping<I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        skip: impl GatherIndex,
        segments: Segments<'_, J>,
    ) -> Result<ShardedPlan, GatherError> {
        self.make_plan(
            "ShardedTable::plan_skipping",
            indices,
            Some(skip.to_i128()),
            segments,
        )
    }

    fn make_plan<I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        op: &'static str,
        indices: impl IndexArray<I, E>,
        skip: Option<i128>,
        segments: Segments<'_, J>,
    ) -> Result<ShardedPlan, GatherError> {
        let mut traffic = Traffic::default();
        let plan = lend(self.comm, op, None, indices, |ix| {
            if self.rows.ranks() == 1 {
                // One rank holds the whole table: the plan is the single-process plan.
                let local = Checked::new(op, &segments, ix.len()).and_then(|segs| {
                    Ok((
                        segs.count(),
                        GatherReducePlan::build(op, self.local.dim(), ix, skip, segments, 0)?,
                    ))
                });
                let (count, owner) = agree(self.comm, op, local)?;
                return Ok(ShardedPlan {
                    routed: None,
                    count,
                    positions: ix.len(),
                    owner,
                    served: None,
                    bounds: self.rows.bounds().to_vec(),
                    skip,
                    traffic: Mutex::new(Traffic::default()),
                });
            }
            let local =
                Checked::new(op, &segments, ix.len()).and_then(|segs| Ok((segs, self.route(op, ix, skip)?)));
            let (segs, route) = agree(self.comm, op, local)?;
            // (The plan keeps its buffers: none go back to the table.)
            let routed = Routed::new(self, &segs, route, true, &mut traffic);
            // The rows asked by the ranks before this one, by itself (its own segments),
            // and by the ranks after it: the backward adds them in that order.
            let (me, dim) = (routed.me, self.local.dim());
            let (pb, nb) = (routed.batch_start[me], routed.seg_starts[me]);
            let n = routed.indptr.len() - 1;
            let own_segs: Vec<usize> = routed.route.of(me).iter().map(|&p| routed.segment[p]).collect();
            let after_segs: Vec<u64> = routed.owner_segs[pb..].iter().map(|&s| s - nb as u64).collect();
            let plans = (|| {
                let own = GatherReducePlan::new(
                    dim.clone(),
                    routed.route.ids_of(me),
                    Segments::ids(&own_segs, routed.count),
                    0,
                )?;
                let before = GatherReducePlan::new(
                    dim.clone(),
                    &routed.ids[..pb],
                    Segments::ids(&routed.owner_segs[..pb], nb),
                    0,
                )?;
                let after =
                    GatherReducePlan::new(dim, &routed.ids[pb..], Segments::ids(&after_segs, n - nb), 0)?;
                Ok((own, [before, after]))
            })();
            let (owner, served) = agree(self.comm, op, plans)?;
            Ok(ShardedPlan {
                count: routed.count,
                positions: routed.route.total,
                routed: Some(routed),
                owner,
                served: Some(served),
                bounds: self.rows.bounds().to_vec(),
                skip,
                traffic: Mutex::new(Traffic::default()),
            })
        });
        self.traffic.set(traffic);
        plan
    }
}

impl ShardedPlan {
    /// The number of segments (the output's length along axis 0).
    pub fn segments(&self) -> usize {
        self.count
    }

    /// The number of this rank's positions (its weights need one each).
    pub fn positions(&self) -> usize {
        self.positions
    }

    /// The bytes this rank sent to and received from the other ranks in the plan's last
    /// apply.
    pub fn traffic(&self) -> Traffic {
        *self.traffic.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The gather-reduce of `table` (of the plan's rows, any row shape: one plan of a graph
    /// serves every layer width; its values may have changed) with `pool`: as [`ShardedTable::gather_reduce`] with the plan's indices and
    /// segments, the same bits. Collective.
    ///
    /// # Errors
    /// On every rank if any rank's call is bad: a [`Bounds`](GatherError::Bounds) error for
    /// a table of other rows, a [`Pooling`](GatherError::Pooling) error where ranks pass
    /// tables of different row widths,
    /// [`Weights`](GatherError::Weights) / [`Pooling`](GatherError::Pooling) as the call's
    /// (and for a `.skip` other than the plan's), [`Peer`](GatherError::Peer) elsewhere.
    pub fn apply<'w, C, A, D, T>(
        &self,
        table: &ShardedTable<'_, C, A, D, T>,
        pool: impl IntoPool<'w, A>,
    ) -> Result<Array<A, D>, GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default + 'w,
        D: Dimension,
        T: PoolTable<A, D>,
    {
        let op = "ShardedPlan::apply";
        let (out, _) = self.run(op, table, pool.into_pool(), false, &[], None)?;
        into_dim(
            op,
            out.ok_or_else(|| crate::error::internal(op, "an output was asked for"))?,
        )
    }

    /// [`apply`](Self::apply) into `out`, of shape `[segments] ++ row shape` (any layout).
    /// On `Err`, `out` is unchanged on every rank.
    ///
    /// # Errors
    /// As [`apply`](Self::apply), and [`OutputShape`](GatherError::OutputShape).
    pub fn apply_into<'w, C, A, D, T>(
        &self,
        table: &ShardedTable<'_, C, A, D, T>,
        pool: impl IntoPool<'w, A>,
        out: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default + 'w,
        D: Dimension,
        T: PoolTable<A, D>,
    {
        let op = "ShardedPlan::apply_into";
        let found = [out.shape().to_vec()];
        if let (Some(got), _) = self.run(op, table, pool.into_pool(), false, &found, Some(out))? {
            out.assign(&into_dim::<A, D>(op, got)?);
        }
        Ok(())
    }

    /// [`apply`](Self::apply) with `Max` / `Min` and each value's position (as
    /// [`ShardedTable::gather_reduce_arg`]).
    ///
    /// # Errors
    /// As [`apply`](Self::apply), and a [`Pooling`](GatherError::Pooling) error for another
    /// pooling.
    #[allow(clippy::type_complexity)]
    pub fn apply_arg<'w, C, A, D, T>(
        &self,
        table: &ShardedTable<'_, C, A, D, T>,
        pool: impl IntoPool<'w, A>,
    ) -> Result<(Array<A, D>, Array<usize, D>), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default + 'w,
        D: Dimension,
        T: PoolTable<A, D>,
    {
        let op = "ShardedPlan::apply_arg";
        let (out, arg) = self.run(op, table, pool.into_pool(), true, &[], None)?;
        match (out, arg) {
            (Some(out), Some(arg)) => Ok((into_dim(op, out)?, into_dim(op, arg)?)),
            _ => Err(crate::error::internal(op, "an argmax was asked for")),
        }
    }

    /// [`apply_arg`](Self::apply_arg) into `out` and `arg`, which must both have the
    /// output's shape (any layouts). Collective; on `Err` (on every rank, as `apply`'s),
    /// both are unchanged.
    ///
    /// ```no_run
    /// use mpi::traits::*;
    /// use ndarray::Array2;
    /// use ndarray_gather::prelude::*;
    /// use ndarray_gather::shard::{Rows, ShardedTable};
    ///
    /// let universe = mpi::initialize().unwrap();
    /// let world = universe.world();
    /// let rows = Rows::even(10, world.size() as usize);
    /// let mine = rows.range(world.rank() as usize).len();
    /// let table = ShardedTable::new(&world, Array2::<f32>::ones((mine, 4)), rows)?;
    /// let plan = table.plan(&[0_i64, 9, 3], Segments::starts(&[0, 2]))?;
    /// let (mut m, mut arg) = (Array2::zeros((2, 4)), Array2::zeros((2, 4)));
    /// plan.apply_arg_into(&table, Pooling::Max, &mut m, &mut arg)?;
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`apply_arg`](Self::apply_arg), and [`OutputShape`](GatherError::OutputShape)
    /// for an `out` or `arg` of another shape.
    pub fn apply_arg_into<'w, C, A, D, T>(
        &self,
        table: &ShardedTable<'_, C, A, D, T>,
        pool: impl IntoPool<'w, A>,
        out: &mut ArrayRef<A, D>,
        arg: &mut ArrayRef<usize, D>,
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default + 'w,
        D: Dimension,
        T: PoolTable<A, D>,
    {
        let op = "ShardedPlan::apply_arg_into";
        let found = [out.shape().to_vec(), arg.shape().to_vec()];
        match self.run(op, table, pool.into_pool(), true, &found, None)? {
            (Some(m), Some(a)) => {
                out.assign(&into_dim::<A, D>(op, m)?);
                arg.assign(&into_dim::<usize, D>(op, a)?);
                Ok(())
            }
            _ => Err(crate::error::internal(op, "an argmax was asked for")),
        }
    }

    /// The checks (this rank's; `found`: the shapes of the caller's outputs), the
    /// agreement, and the routed pooling: the output (and argmax), or `None` where it was
    /// written into `into` (one rank).
    #[allow(clippy::type_complexity)]
    fn run<C, A, D, T>(
        &self,
        op: &'static str,
        table: &ShardedTable<'_, C, A, D, T>,
        pool: Pool<'_, A>,
        arg: bool,
        found: &[Vec<usize>],
        into: Option<&mut ArrayRef<A, D>>,
    ) -> Result<(Option<ndarray::ArrayD<A>>, Option<ndarray::ArrayD<usize>>), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
        T: PoolTable<A, D>,
    {
        let shape: Vec<usize> = std::iter::once(self.segments())
            .chain(table.shape[1..].iter().copied())
            .collect();
        let local = (|| {
            self.check_table(op, table)?;
            self.check_skip(op, &pool)?;
            check_pool(op, &pool, self.positions(), arg, None)?;
            match found.iter().find(|f| f[..] != shape[..]) {
                Some(f) => Err(GatherError::OutputShape {
                    op,
                    expected: shape.clone(),
                    found: f.clone(),
                }),
                None => Ok(()),
            }
        })();
        let mut traffic = Traffic::default();
        let done =
            agree_pooled(table.comm, op, CallShape::of(&pool, arg, table.row_len()), local).and_then(|()| {
                match (&self.routed, into) {
                    // (Into the caller's output where it is in standard layout.)
                    (Some(routed), into) => routed.pool(
                        table,
                        op,
                        pool,
                        arg,
                        shape,
                        self.owner_plans(),
                        into.and_then(|o| o.as_slice_mut()),
                        &mut traffic,
                    ),
                    // One rank: the single-process plan on its rows (the whole table).
                    (None, _) if arg => {
                        let (m, a) = self.owner.apply_arg(&table.local, pool)?;
                        Ok((Some(m.into_dyn()), Some(a.into_dyn())))
                    }
                    (None, Some(into)) => self
                        .owner
                        .apply_into(&table.local, pool, into)
                        .map(|()| (None, None)),
                    (None, None) => Ok((Some(self.owner.apply(&table.local, pool)?.into_dyn()), None)),
                }
            });
        *self.traffic.lock().unwrap_or_else(|e| e.into_inner()) = traffic;
        done
    }

    /// The owner's plans, on several ranks.
    pub(super) fn owner_plans(&self) -> Option<OwnerPlans<'_>> {
        self.served.as_ref().map(|served| OwnerPlans {
            own: &self.owner,
            served,
        })
    }

    /// A table of the plan's bounds, or this rank's error.
    pub(super) fn check_table<C: Communicator, A, D: Dimension, T>(
        &self,
        op: &'static str,
        table: &ShardedTable<'_, C, A, D, T>,
    ) -> Result<(), GatherError> {
        if table.rows.bounds() != &self.bounds[..] {
            return Err(GatherError::Bounds {
                op,
                entry: 0,
                value: table.rows.len(),
                detail: format!(
                    "the table's bounds {:?} are not the plan's {:?}",
                    table.rows.bounds(),
                    self.bounds
                ),
            });
        }
        Ok(())
    }

    /// The pool's `.skip`, if any, checked against the plan's.
    pub(super) fn check_skip<A>(&self, op: &'static str, pool: &Pool<'_, A>) -> Result<(), GatherError> {
        crate::prepared::check_skip(op, pool, self.skip, "ShardedTable::plan_skipping")
    }
}
