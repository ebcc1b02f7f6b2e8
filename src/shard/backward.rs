//! A [`ShardedPlan`]'s backward (decisions 34 and 43): each caller scales its positions
//! (their segments' divisors are its own), sends each owner one gradient row per segment
//! it served and the positions' coefficients, and each owner adds them into its rows
//! through its own plan's backward: in (source rank, position) order, with no atomics.

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use ndarray::{ArrayRef, ArrayView, Dimension};

use super::combine::{OwnerPlans, Routed, owner_pool};
use super::exchange::{CallShape, agree_pooled, all_to_all, all_to_others};
use super::merge::tallies;
use super::{ShardedPlan, ShardedTable, Traffic};
use crate::call::reduce::check_pool;
use crate::error::{GatherError, internal};
use crate::kernel::reduce::{Pooler, Scale, Tally};
use crate::pool::{IntoPool, Pool, PoolElement, Pooling};

impl ShardedPlan {
    /// Adds the gradient of the plan's gather-reduce with `pool` into `grad`, a sharded
    /// table of the plan's rows (a gradient table: each rank its own rows), given this
    /// rank's `grad_out` (of its output's shape, `[segments] ++ row shape`): as
    /// [`GatherReducePlan::backward_into`](crate::GatherReducePlan::backward_into)
    /// (decision 34's `c_p`), each gradient row receiving its contributions in (source
    /// rank, position) order. The gradient rows
    /// travel to their owners, one per (segment, owner), never a row per position. On one
    /// rank, the single-process plan's bits. Collective.
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
    /// let mine = rows.range(world.rank() as usize).len();
    /// let table = ShardedTable::new(&world, Array2::<f32>::ones((mine, 2)), rows.clone())?;
    /// let mut grad = ShardedTable::new(&world, Array2::<f32>::zeros((mine, 2)), rows)?;
    /// let plan = table.plan(&[0_i64, 2, 2], Segments::starts(&[0, 1]))?;
    /// let h = plan.apply(&table, Pooling::Mean)?;
    /// plan.backward_into(&h, Pooling::Mean, &mut grad)?; // each rank's rows of the gradient
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// On every rank if any rank's call is bad: a [`Bounds`](GatherError::Bounds) or
    /// [`InputShape`](GatherError::InputShape) error for a `grad` of other rows,
    /// [`GradShape`](GatherError::GradShape) for a `grad_out` that is not the segments by
    /// `grad`'s rows,
    /// [`Pooling`](GatherError::Pooling) / [`Weights`](GatherError::Weights) as
    /// `GatherReducePlan::backward_into`'s; [`Peer`](GatherError::Peer) elsewhere. Nothing
    /// is written on `Err`.
    pub fn backward_into<'w, C, A, D>(
        &self,
        grad_out: &ArrayRef<A, D>,
        pool: impl IntoPool<'w, A>,
        grad: &mut ShardedTable<'_, C, A, D>,
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default + 'w,
        D: Dimension,
    {
        let op = "ShardedPlan::backward_into";
        let pool = pool.into_pool();
        let local = (|| {
            self.check_table(op, grad)?;
            let expected: Vec<usize> = std::iter::once(self.count)
                .chain(grad.shape[1..].iter().copied())
                .collect();
            if grad_out.shape() != &expected[..] {
                return Err(GatherError::GradShape {
                    op,
                    expected,
                    found: grad_out.shape().to_vec(),
                    segments: self.count,
                    axis: 0,
                });
            }
            if matches!(pool.pooling, Pooling::Prod | Pooling::Max | Pooling::Min) {
                return Err(GatherError::Pooling {
                    op,
                    pooling: pool.pooling,
                    detail: "has no backward here (Max and Min route through their argmax)".into(),
                });
            }
            self.check_skip(op, &pool)?;
            check_pool(op, &pool, self.positions, false)
        })();
        let mut traffic = Traffic::default();
        let done =
            agree_pooled(grad.comm, op, CallShape::of(&pool, false, grad.row_len()), local).and_then(|()| {
                match &self.routed {
                    Some(routed) => {
                        let plans = self
                            .owner_plans()
                            .ok_or_else(|| internal(op, "a routed plan without its owner's plans"))?;
                        routed.backward(grad, op, grad_out, pool, plans, &mut traffic)
                    }
                    // One rank: the single-process plan on its rows (the whole table).
                    None => self.owner.backward_into(grad_out, pool, &mut grad.local),
                }
            });
        *self.traffic.lock().unwrap_or_else(|e| e.into_inner()) = traffic;
        done
    }
}

impl Routed {
    /// The backward of `pool` from `grad_out` into `grad`'s rows, through the owners'
    /// `plans`: the rows the ranks before each owner asked of it, then its own, then the
    /// rest's. Collective (after the agreement on errors).
    pub(super) fn backward<C, A, D>(
        &self,
        grad: &mut ShardedTable<'_, C, A, D>,
        op: &'static str,
        grad_out: &ArrayRef<A, D>,
        pool: Pool<'_, A>,
        plans: OwnerPlans<'_>,
        traffic: &mut Traffic,
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
    {
        let (comm, chunk, route) = (grad.comm, grad.chunk, &self.route);
        let positions = route.total;
        let pooler = Pooler::of(pool, positions);
        // Each segment's divisor from the caller's kept positions, in position order (the
        // forward's), then each routed position's coefficient.
        let mut tallies = tallies(route, &self.segment, &self.kept, &pooler);
        let scale = Scale::of_tallies(&pooler, self.count, |s, t| {
            *t = std::mem::replace(&mut tallies[s], Tally::new())
        });
        let plain = pooler.pooling == Pooling::Sum && pooler.weights.is_none();
        let coefs: Option<Vec<A>> = match (&scale, plain) {
            (_, true) => None,
            (Some(scale), false) => Some(
                route
                    .positions
                    .iter()
                    .map(|&p| scale.get(self.segment[p], p).unwrap_or_else(A::one))
                    .collect(),
            ),
            // (No memory for the divisors: zeros travel, so that no rank waits alone.)
            (None, false) => Some(vec![A::zero(); route.positions.len()]),
        };
        let coefs_in = coefs
            .as_ref()
            .map(|c| all_to_others(comm, c, &route.counts, chunk, traffic, Vec::new()));
        // One gradient row per (segment, other owner), the owners in rank order.
        let (me, w) = (self.me, grad.row_len());
        let g = grad_out.as_standard_layout();
        let flat = g.as_slice().unwrap_or(&[]);
        let mut rows = Vec::with_capacity(self.global.len() * w);
        let mut sizes = Vec::with_capacity(self.per_owner.len());
        let mut at = 0;
        for (o, &n) in self.per_owner.iter().enumerate() {
            if o != me {
                for &s in &self.global[at..at + n] {
                    rows.extend_from_slice(flat.get(s * w..(s + 1) * w).unwrap_or(&[]));
                }
            }
            sizes.push(if o == me { 0 } else { n * w });
            at += n;
        }
        rows.resize(sizes.iter().sum(), A::zero());
        let got = all_to_all(comm, &rows, &sizes, chunk, traffic, Vec::new());
        if scale.is_none() && !plain {
            return Err(GatherError::SizeOverflow {
                op,
                shape: vec![self.count],
            });
        }
        // The owner's side: its plans' backwards, the coefficients as weights, in rank
        // order of the sources (this rank's own positions read its own `grad_out`).
        let (pb, nb) = (self.batch_start[me], self.seg_starts[me]);
        let rows_of = |n: usize| {
            let mut dim = grad.local.raw_dim();
            dim.slice_mut()[0] = n;
            dim
        };
        let n = self.seg_counts.iter().sum::<usize>();
        let (before, after) = got.values.split_at(nb * w);
        let bad = |_| internal(op, "gradient rows of another size");
        let before = ArrayView::from_shape(rows_of(nb), before).map_err(bad)?;
        let after = ArrayView::from_shape(rows_of(n - nb), after).map_err(bad)?;
        let weighted = |c| owner_pool(Pooling::Sum, c);
        let (c0, c1) = coefs_in.as_ref().map(|c| c.values.split_at(pb)).unzip();
        let own = coefs.as_ref().map(|c| &c[route.start(me)..][..route.counts[me]]);
        plans.served[0].backward_into(&before, weighted(c0), &mut grad.local)?;
        plans
            .own
            .backward_into(grad_out, weighted(own), &mut grad.local)?;
        plans.served[1].backward_into(&after, weighted(c1), &mut grad.local)
    }
}
