//! A [`ShardedPlan`]'s backward (decisions 34 and 43): each caller scales its positions
//! (their segments' divisors are its own), sends each owner one gradient row per segment
//! it served and the positions' coefficients, and each owner adds them into its rows
//! through its own plan's backward: in (source rank, position) order, with no atomics.

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use ndarray::{Array, Array1, ArrayRef, ArrayView, Dimension, RemoveAxis};

use super::combine::{OwnerPlans, Routed, owner_pool};
use super::exchange::{CallShape, agree_pooled, exchange};
use super::merge::tallies;
use super::{ShardedPlan, ShardedTable, Traffic};
use crate::call::reduce::check_pool;
use crate::error::{GatherError, internal};
use crate::kernel::reduce::{Pooler, Scale, Tally};
use crate::optim::{Optimizer, Step, check_state};
use crate::pool::{IntoPool, Pool, PoolElement, Pooling};
use crate::prepared::GatherReducePlan;
use crate::table::PoolTable;

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
        const OP: &str = "ShardedPlan::backward_into";
        let pool = pool.into_pool();
        let local = self.check_backward(OP, grad, grad_out, &pool);
        let (comm, chunk, dim) = (grad.comm, grad.chunk, grad.local.raw_dim());
        self.run_backward(OP, grad_out, pool, (comm, chunk, dim), local, |plan, g, pool| {
            plan.backward_into(g, pool, &mut grad.local)
        })
    }

    /// The gradient of [`backward_into`](Self::backward_into) on this rank's touched rows
    /// only (the rows of its shard that some rank's position reads): their local indices
    /// (ascending; the global row is the shard's first row plus it) and their gradient
    /// rows, each summed in (source rank, position) order from its first contribution, as
    /// [`GatherReducePlan::backward_rows`](crate::GatherReducePlan::backward_rows) sums
    /// them. `table` is the sharded table the plan was made for (its rows and
    /// communicator). An optimizer of the user's own updates only these rows. Collective.
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
    /// let table = ShardedTable::new(&world, Array2::<f32>::ones((mine, 2)), rows)?;
    /// let plan = table.plan(&[0_i64, 2, 2], Segments::starts(&[0, 1]))?;
    /// let h = plan.apply(&table, Pooling::Sum)?;
    /// let (local_rows, grads) = plan.backward_rows(&h, Pooling::Sum, &table)?;
    /// assert_eq!(local_rows.len(), grads.nrows()); // this rank's touched rows
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`backward_into`](Self::backward_into)'s, with `table` in place of `grad`.
    #[allow(clippy::type_complexity)]
    pub fn backward_rows<'w, C, A, D, T>(
        &self,
        grad_out: &ArrayRef<A, D>,
        pool: impl IntoPool<'w, A>,
        table: &ShardedTable<'_, C, A, D, T>,
    ) -> Result<(Array1<usize>, Array<A, D>), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default + 'w,
        D: Dimension,
        T: PoolTable<A, D>,
    {
        const OP: &str = "ShardedPlan::backward_rows";
        let pool = pool.into_pool();
        let local = self.check_backward(OP, table, grad_out, &pool);
        let mut dim = grad_out.raw_dim();
        dim.slice_mut()[0] = table.rows.range(table.comm.rank() as usize).len();
        self.rows_of(OP, grad_out, pool, (table.comm, table.chunk, dim), local)
    }

    /// A training step on a sharded table (decision 52): [`backward_rows`](Self::backward_rows),
    /// then each owner updates its touched rows once with `opt` (whose state holds this
    /// rank's local rows), as [`GatherReducePlan::step`](crate::GatherReducePlan::step)
    /// does. On one rank, the single-process step's bits. Collective.
    ///
    /// ```no_run
    /// use mpi::traits::*;
    /// use ndarray::Array2;
    /// use ndarray_gather::optim::RowwiseAdagrad;
    /// use ndarray_gather::prelude::*;
    /// use ndarray_gather::shard::{Rows, ShardedTable};
    ///
    /// let universe = mpi::initialize().unwrap();
    /// let world = universe.world();
    /// let rows = Rows::even(3, world.size() as usize);
    /// let mine = rows.range(world.rank() as usize).len();
    /// let mut table = ShardedTable::new(&world, Array2::<f32>::ones((mine, 2)), rows)?;
    /// let mut opt = RowwiseAdagrad::new(mine, 0.1); // this rank's rows
    /// let plan = table.plan(&[0_i64, 2, 2], Segments::starts(&[0, 1]))?;
    /// let h = plan.apply(&table, Pooling::Sum)?;
    /// plan.step(&h, Pooling::Sum, &mut table, &mut opt)?;
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`backward_rows`](Self::backward_rows)'s, and
    /// [`Optimizer`](GatherError::Optimizer) for a state of another shape than this rank's
    /// rows need: their count, and the width the optimizer needs for the table's rows
    /// (decision 66; every rank errs: [`Peer`](GatherError::Peer) elsewhere). No row changes
    /// on `Err`.
    pub fn step<'w, C, D>(
        &self,
        grad_out: &ArrayRef<f32, D>,
        pool: impl IntoPool<'w, f32>,
        table: &mut ShardedTable<'_, C, f32, D>,
        opt: &mut (impl Optimizer + ?Sized),
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        D: Dimension + RemoveAxis,
    {
        const OP: &str = "ShardedPlan::step";
        let pool = pool.into_pool();
        let mine = table.local.shape()[0];
        let local = self
            .check_backward(OP, table, grad_out, &pool)
            .and_then(|()| check_state(OP, None, &*opt, mine, grads_len(&table.shape)));
        let mut dim = grad_out.raw_dim();
        dim.slice_mut()[0] = mine;
        let (rows, grads) = self.rows_of(OP, grad_out, pool, (table.comm, table.chunk, dim), local)?;
        let grads = grads.into_shape_with_order((rows.len(), grads_len(&table.shape)));
        let grads = grads.map_err(|_| internal(OP, "gradient rows of another size"))?;
        let rows = rows.to_vec();
        Step::begin(OP, opt, &mut table.local, 0)?.rows(&rows, grads.view())
    }

    /// The local checks of a sharded backward: `table`'s rows, `grad_out`'s shape, `pool`.
    fn check_backward<C: Communicator, A: PoolElement, D: Dimension, T>(
        &self,
        op: &'static str,
        table: &ShardedTable<'_, C, A, D, T>,
        grad_out: &ArrayRef<A, D>,
        pool: &Pool<'_, A>,
    ) -> Result<(), GatherError> {
        self.check_table(op, table)?;
        let expected: Vec<usize> = std::iter::once(self.count)
            .chain(table.shape[1..].iter().copied())
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
        self.check_skip(op, pool)?;
        check_pool(op, pool, self.positions, false, None)
    }

    /// The touched local rows and their gradient rows (`backward_rows`'), `dim` the local
    /// rows' shape; `local` this rank's checks.
    #[allow(clippy::type_complexity)]
    fn rows_of<C, A, D>(
        &self,
        op: &'static str,
        grad_out: &ArrayRef<A, D>,
        pool: Pool<'_, A>,
        link: (&C, usize, D),
        local: Result<(), GatherError>,
    ) -> Result<(Array1<usize>, Array<A, D>), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
    {
        // The owner's plans (one rank's: its plan alone), their touched rows' union.
        let plans: Vec<&GatherReducePlan> = match self.owner_plans() {
            Some(p) => vec![&p.served[0], p.own, &p.served[1]],
            None => vec![&self.owner],
        };
        let touched = local.and_then(|()| plans.iter().map(|p| p.touched(op)).collect::<Result<Vec<_>, _>>());
        let (touched, local) = match touched {
            Ok(t) => (t, Ok(())),
            Err(e) => (Vec::new(), Err(e)),
        };
        let mut union: Vec<usize> = touched.iter().flatten().copied().collect();
        union.sort_unstable();
        union.dedup();
        let maps: Vec<Vec<usize>> = touched
            .iter()
            .map(|t| t.iter().map(|r| union.partition_point(|&u| u < *r)).collect())
            .collect();
        let mut dim = link.2.clone();
        dim.slice_mut()[0] = union.len();
        // (From -0.0: `-0.0 + x` is `x`, so each sum starts from its first contribution.)
        let mut grads = Array::from_elem(dim, A::from_f64(-0.0).unwrap_or_else(A::zero));
        let mut next = 0;
        self.run_backward(op, grad_out, pool, link, local, |plan, g, pool| {
            let map = maps
                .get(next)
                .ok_or_else(|| internal(op, "a plan without its rows"))?;
            next += 1;
            plan.backward_mapped(op, g, pool, map, &mut grads)
        })?;
        Ok((Array1::from(union), grads))
    }

    /// A sharded backward after this rank's checks (`local`): the agreement on errors,
    /// then each owner's plans' backwards in (source rank, position) order, each
    /// `add(plan, gradient rows, pool)` (one rank: its plan on `grad_out`). `link`: the
    /// communicator, the exchange's chunk and the local rows' shape.
    fn run_backward<C, A, D>(
        &self,
        op: &'static str,
        grad_out: &ArrayRef<A, D>,
        pool: Pool<'_, A>,
        link: (&C, usize, D),
        local: Result<(), GatherError>,
        add: impl FnMut(&GatherReducePlan, &ArrayRef<A, D>, Pool<'_, A>) -> Result<(), GatherError>,
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
    {
        let mut add = add;
        let w = link.2.slice()[1..].iter().product();
        let mut traffic = Traffic::default();
        let done = agree_pooled(link.0, op, CallShape::of(&pool, false, w), local).and_then(|()| {
            match &self.routed {
                Some(routed) => {
                    let plans = self
                        .owner_plans()
                        .ok_or_else(|| internal(op, "a routed plan without its owner's plans"))?;
                    routed.backward(link, op, grad_out, pool, plans, &mut traffic, &mut add)
                }
                // One rank: the single-process plan on its rows (the whole table).
                None => add(&self.owner, grad_out, pool),
            }
        });
        *self.traffic.lock().unwrap_or_else(|e| e.into_inner()) = traffic;
        done
    }
}

/// The elements of a row of a table of `shape`.
fn grads_len(shape: &[usize]) -> usize {
    shape[1..].iter().product()
}

impl Routed {
    /// The backward of `pool` from `grad_out` into `grad`'s rows, through the owners'
    /// `plans`: the rows the ranks before each owner asked of it, then its own, then the
    /// rest's. Collective (after the agreement on errors).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn backward<C, A, D>(
        &self,
        (comm, chunk, dim): (&C, usize, D),
        op: &'static str,
        grad_out: &ArrayRef<A, D>,
        pool: Pool<'_, A>,
        plans: OwnerPlans<'_>,
        traffic: &mut Traffic,
        add: &mut impl FnMut(&GatherReducePlan, &ArrayRef<A, D>, Pool<'_, A>) -> Result<(), GatherError>,
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        A: PoolElement + Equivalence + Copy + Default,
        D: Dimension,
    {
        let route = &self.route;
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
            .map(|c| exchange(comm, c, &route.counts, true, chunk, traffic, Vec::new()));
        // One gradient row per (segment, other owner), the owners in rank order.
        let (me, w) = (self.me, dim.slice()[1..].iter().product::<usize>());
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
        let got = exchange(comm, &rows, &sizes, false, chunk, traffic, Vec::new());
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
            let mut dim = dim.clone();
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
        add(&plans.served[0], &before, weighted(c0))?;
        add(plans.own, grad_out, weighted(own))?;
        add(&plans.served[1], &after, weighted(c1))
    }
}
