//! A sharded collection's backward: the gradient rows to their owners, the owners'
//! backward and fused step, the replicated tables' rows summed in rank order (decision 65).

use mpi::traits::{Communicator, CommunicatorCollectives};
use ndarray::{Array1, Array2, ArrayRef, ArrayViewMut2, Ix2, s};

use super::Traffic;
use super::collection::{ShardedCollection, to_every_rank};
use super::collection_plan::ShardedCollectionPlan;
use super::exchange::{agree, exchange};
use super::placement::Kind;
use crate::bags::{AsTable, TableMut};
use crate::error::{GatherError, internal};
use crate::optim::{Optimizer, Step, check_state};
use crate::pool::Pooling;

impl ShardedCollectionPlan {
    /// The local checks of a backward: `grad_out`'s shape, and every feature's pooling.
    fn check_backward<C: Communicator, B: AsTable>(
        &self,
        op: &'static str,
        sc: &ShardedCollection<'_, C, B>,
        grad_out: &ArrayRef<f32, Ix2>,
    ) -> Result<(), GatherError> {
        self.check_fit(op, sc)?;
        if grad_out.shape() != [self.batch, self.width] {
            return Err(GatherError::GradShape {
                op,
                expected: vec![self.batch, self.width],
                found: grad_out.shape().to_vec(),
                segments: self.batch,
                axis: 0,
            });
        }
        for (f, side) in self.features.iter().enumerate() {
            if !matches!(side.pooling, Pooling::Sum | Pooling::Mean | Pooling::SqrtN) {
                return Err(GatherError::Feature {
                    op,
                    feature: f,
                    table: sc.model.feature_parts(f).0,
                    source: Box::new(GatherError::Pooling {
                        op: "GatherReducePlan",
                        pooling: side.pooling,
                        detail: "has no backward in a collection (sum, mean and sqrtn have)".into(),
                    }),
                });
            }
        }
        if !self.training {
            return Err(GatherError::Collection {
                op,
                detail: "the plan was made by gather_reduce, not plan: it has no backward".into(),
            });
        }
        Ok(())
    }

    /// A backward's exchanges (the traffic set): each source's gradient rows of each
    /// link's columns to the link's owner, into its `[B_total, Σ D_link]` gradient (every
    /// source's bags back to back), and the replicated tables' rows
    /// ([`replicated_rows`](Self::replicated_rows)).
    #[allow(clippy::type_complexity)]
    fn gradients<C: Communicator + CommunicatorCollectives, B>(
        &self,
        op: &'static str,
        sc: &ShardedCollection<'_, C, B>,
        grad_out: &ArrayRef<f32, Ix2>,
    ) -> (
        Result<Array2<f32>, GatherError>,
        Result<Vec<(Vec<usize>, Array2<f32>)>, GatherError>,
    ) {
        let (ranks, layout, served) = (self.ranks, &self.layout, &self.served);
        // To each owner, each bag's row of every link's columns there.
        let mut out: Vec<f32> = Vec::with_capacity(self.batch * self.width);
        let mut counts = Vec::with_capacity(ranks);
        for o in 0..ranks {
            let before = out.len();
            let spans: Vec<(usize, usize)> = layout
                .links_at(o)
                .map(|l| {
                    let cols = &layout.block(l).shard.cols;
                    (self.features[layout.links[l].feature].at + cols.start, cols.len())
                })
                .collect();
            for row in grad_out.rows() {
                for &(a, d) in &spans {
                    out.extend(row.slice(s![a..a + d]).iter());
                }
            }
            counts.push(out.len() - before);
        }
        let mut traffic = Traffic::default();
        let got = exchange(sc.comm, &out, &counts, false, sc.chunk, &mut traffic, Vec::new());
        let grad = Array2::from_shape_vec((served.starts[ranks], served.model.width()), got.values)
            .map_err(|_| internal(op, "gradient rows of another length"));
        let rep = self.replicated_rows(op, sc, grad_out, &mut traffic);
        sc.traffic.set(traffic);
        (grad, rep)
    }

    /// The replicated tables' gradient rows, every rank's summed in rank order (the same
    /// on every rank), per replicated block: `(rows ascending, gradient rows)`.
    #[allow(clippy::type_complexity)]
    fn replicated_rows<C: Communicator + CommunicatorCollectives, B>(
        &self,
        op: &'static str,
        sc: &ShardedCollection<'_, C, B>,
        grad_out: &ArrayRef<f32, Ix2>,
        traffic: &mut Traffic,
    ) -> Result<Vec<(Vec<usize>, Array2<f32>)>, GatherError> {
        let Some(local) = &self.local else {
            return Ok(Vec::new());
        };
        let w: usize = local.features.iter().map(|&f| self.features[f].d).sum();
        let mut g = Array2::zeros((self.batch, w));
        let mut at = 0;
        for &f in &local.features {
            let side = &self.features[f];
            g.slice_mut(s![.., at..at + side.d])
                .assign(&grad_out.slice(s![.., side.at..side.at + side.d]));
            at += side.d;
        }
        // (A failure, which the checks rule out, still takes part in the exchange, with
        // nothing: every rank then errs.)
        let mine = local.plan.backward_rows(&g);
        let widths: Vec<usize> = (local.tables.iter())
            .map(|&k| sc.layout.blocks[sc.layout.local[k]].shard.cols.len())
            .collect();
        // Every rank's rows to every rank: per table its row count, rows and gradients.
        let (mut words, mut floats) = (Vec::new(), Vec::new());
        for (rows, grads) in mine.iter().flatten() {
            words.push(rows.len() as u64);
            words.extend(rows.iter().map(|&r| r as u64));
            floats.extend(grads.iter());
        }
        let ranks = self.ranks;
        let (got, got_f) = (
            to_every_rank(sc, &words, traffic),
            to_every_rank(sc, &floats, traffic),
        );
        let mine = mine?;
        let bad = || internal(op, "replicated rows of another length");
        let mut per_rank: Vec<Vec<(&[u64], &[f32])>> = Vec::with_capacity(ranks);
        for q in 0..ranks {
            let (wq, fq) = (got.from(q), got_f.from(q));
            let (mut a, mut fa, mut tables) = (0, 0, Vec::new());
            for &d in &widths {
                let n = *wq.get(a).ok_or_else(bad)? as usize;
                let rows = wq.get(a + 1..a + 1 + n).ok_or_else(bad)?;
                let grads = fq.get(fa..fa + n * d).ok_or_else(bad)?;
                tables.push((rows, grads));
                (a, fa) = (a + 1 + n, fa + n * d);
            }
            per_rank.push(tables);
        }
        Ok((0..mine.len())
            .map(|k| {
                let d = mine[k].1.ncols();
                let mut rows: Vec<usize> = per_rank
                    .iter()
                    .flat_map(|t| t[k].0.iter().map(|&r| r as usize))
                    .collect();
                rows.sort_unstable();
                rows.dedup();
                // (From -0.0: `-0.0 + x` is `x`, so a row's first gradient stays as it is.)
                let mut sum = Array2::from_elem((rows.len(), d), -0.0f32);
                for t in &per_rank {
                    let (rs, gs) = t[k];
                    for (j, &r) in rs.iter().enumerate() {
                        let i = rows.partition_point(|&x| x < r as usize);
                        sum.row_mut(i)
                            .iter_mut()
                            .zip(&gs[j * d..(j + 1) * d])
                            .for_each(|(s, &x)| *s += x);
                    }
                }
                (rows, sum)
            })
            .collect())
    }

    /// The gradient on the rows this rank holds, per block ([`Placement::shards`](super::Placement::shards)
    /// order): `(global rows ascending, their gradient rows of the block's columns)`.
    /// A served block's rows sum every rank's contributions in (feature, position) order,
    /// the sources' batches back to back in rank order (a table-wise or column-wise
    /// table's as the single-process plan of that batch); a replicated table's sum every
    /// rank's rows in rank order (decision 65). Collective.
    ///
    /// # Errors
    /// On every rank, if any rank's call is bad: [`GradShape`](GatherError::GradShape)
    /// for a `grad_out` of another shape than `[B_rank, Σ D_f]`,
    /// [`Feature`](GatherError::Feature) for a feature pooled with `Max`, `Min` or
    /// `Prod`; [`Peer`](GatherError::Peer) elsewhere.
    #[allow(clippy::type_complexity)]
    pub fn backward_rows<C, B>(
        &self,
        grad_out: &ArrayRef<f32, Ix2>,
        sc: &ShardedCollection<'_, C, B>,
    ) -> Result<Vec<(Array1<usize>, Array2<f32>)>, GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        B: AsTable,
    {
        const OP: &str = "ShardedCollectionPlan::backward_rows";
        agree(sc.comm, OP, self.check_backward(OP, sc, grad_out))?;
        let (grad, rep) = self.gradients(OP, sc, grad_out);
        let served = &self.served;
        let plan = served.backward_plan(OP)?;
        let mut rows = plan.backward_rows(&grad?)?.into_iter();
        let mut rep = rep?.into_iter();
        let mut out = Vec::with_capacity(sc.blocks.len());
        for &b in &sc.layout.local {
            let shard = &sc.layout.blocks[b].shard;
            let kind = sc.layout.kinds[shard.table];
            let (r, g) = match kind {
                Kind::Replicated => rep.next().map(|(r, g)| (Array1::from(r), g)),
                _ => rows.next().map(|(r, g)| (r.mapv(|r| r + shard.rows.start), g)),
            }
            .ok_or_else(|| internal(OP, "a block without gradient rows"))?;
            out.push((r, g));
        }
        Ok(out)
    }

    /// A training step (decision 65): the gradient rows to their owners, and each
    /// touched row of this rank's blocks updated once by its block's optimizer (`opts`:
    /// one per block, in [`Placement::shards`](super::Placement::shards) order, each
    /// holding its block's state), its gradient as [`backward_rows`](Self::backward_rows)
    /// gives it. A table read by several features is stepped once per batch; a
    /// replicated table's copies get the same update on every rank. Collective.
    ///
    /// # Errors
    /// As [`backward_rows`](Self::backward_rows)'s; [`Collection`](GatherError::Collection)
    /// for a list of optimizers of another length, [`Optimizer`](GatherError::Optimizer)
    /// for a state of another shape than its block needs (decision 66). On `Err`, no row
    /// changed on any rank.
    pub fn step<C, B, O>(
        &self,
        grad_out: &ArrayRef<f32, Ix2>,
        sc: &mut ShardedCollection<'_, C, B>,
        opts: &mut [O],
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        B: AsTable + TableMut,
        O: Optimizer,
    {
        const OP: &str = "ShardedCollectionPlan::step";
        let local = self.check_backward(OP, sc, grad_out).and_then(|()| {
            if opts.len() != sc.blocks.len() {
                return Err(GatherError::Collection {
                    op: OP,
                    detail: format!("has {} optimizers for {} blocks", opts.len(), sc.blocks.len()),
                });
            }
            for (opt, &b) in opts.iter().zip(&sc.layout.local) {
                let s = &sc.layout.blocks[b].shard;
                check_state(OP, Some(s.table), opt, s.rows.len(), s.cols.len())?;
            }
            Ok(())
        });
        agree(sc.comm, OP, local)?;
        let (grad, rep) = self.gradients(OP, sc, grad_out);
        let (grad, rep) = (grad?, rep?);
        let layout = &sc.layout;
        let replicated: Vec<bool> = (layout.local.iter())
            .map(|&b| layout.kinds[layout.blocks[b].shard.table] == Kind::Replicated)
            .collect();
        let (mut served_tables, mut served_opts, mut rep_tables, mut rep_opts) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for ((block, opt), &r) in sc.blocks.iter_mut().zip(opts.iter_mut()).zip(&replicated) {
            match r {
                true => {
                    rep_tables.push(block);
                    rep_opts.push(opt);
                }
                false => {
                    served_tables.push(block);
                    served_opts.push(opt);
                }
            }
        }
        let served = &self.served;
        if rep.len() != rep_tables.len() {
            return Err(internal(OP, "replicated gradients for another number of blocks"));
        }
        let plan = served.backward_plan(OP)?;
        plan.step(&grad, &mut served_tables, &mut served_opts)?;
        for ((table, opt), (rows, grads)) in rep_tables.iter_mut().zip(rep_opts.iter_mut()).zip(&rep) {
            let mut view: ArrayViewMut2<'_, f32> = table.table_mut();
            Step::begin(OP, opt, &mut view, 0)?.rows(rows, grads.view())?;
        }
        Ok(())
    }
}
