//! A sharded collection's plan run: the forward (owners pool, rows and partials travel
//! back, callers combine them), the gradient rows to their owners, and the owners'
//! backward and fused step (decision 65).

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use ndarray::{Array1, Array2, ArrayRef, ArrayViewMut2, Ix2, s};

use super::Traffic;
use super::collection::{ShardedCollection, check_blocks, check_out};
use super::collection_plan::{FeatureSide, Forward, ShardedCollectionPlan};
use super::exchange::{Received, agree, exchange};
use super::merge::{end_row, fold_row, wins};
use super::placement::Kind;
use crate::bags::{AsTable, Table, TableMut};
use crate::error::{GatherError, internal};
use crate::kernel::reduce::Pooler;
use crate::optim::{Optimizer, Step, check_state};
use crate::pool::{Pool, Pooling};

impl ShardedCollectionPlan {
    /// The collection's call with the plan's batch on `sc`'s blocks, in a fresh
    /// `[B_rank, Σ D_f]` array: bit for bit [`ShardedCollection::gather_reduce`].
    /// Collective.
    ///
    /// # Errors
    /// On every rank, if any rank's call is bad: [`Collection`](GatherError::Collection)
    /// for a collection other than the plan's or blocks of other shapes;
    /// [`Peer`](GatherError::Peer) elsewhere.
    pub fn apply<C, B>(&self, sc: &ShardedCollection<'_, C, B>) -> Result<Array2<f32>, GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        B: AsTable,
    {
        let mut out = Array2::zeros((self.batch, self.width));
        self.apply_checked(sc, "ShardedCollectionPlan::apply", &mut out)?;
        Ok(out)
    }

    /// [`apply`](Self::apply) into `out` (`[B_rank, Σ D_f]`, any layout); on `Err`
    /// unchanged. Collective.
    ///
    /// # Errors
    /// As `apply`, and [`OutputShape`](GatherError::OutputShape).
    pub fn apply_into<C, B>(
        &self,
        sc: &ShardedCollection<'_, C, B>,
        out: &mut ArrayRef<f32, Ix2>,
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        B: AsTable,
    {
        self.apply_checked(sc, "ShardedCollectionPlan::apply_into", out)
    }

    /// The plan's fit to `sc` (its collection, placements and blocks' shapes).
    fn check_fit<C: Communicator, B: AsTable>(
        &self,
        op: &'static str,
        sc: &ShardedCollection<'_, C, B>,
    ) -> Result<(), GatherError> {
        if sc.layout.signature != self.layout.signature {
            return Err(GatherError::Collection {
                op,
                detail: "the plan was made for another collection or placements".into(),
            });
        }
        check_blocks(op, &sc.layout, &sc.blocks)
    }

    pub(super) fn apply_checked<C, B>(
        &self,
        sc: &ShardedCollection<'_, C, B>,
        op: &'static str,
        out: &mut ArrayRef<f32, Ix2>,
    ) -> Result<(), GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        B: AsTable,
    {
        let local = self
            .check_fit(op, sc)
            .and_then(|()| check_out(op, out, self.batch, self.width));
        agree(sc.comm, op, local)?;
        let mut traffic = Traffic::default();
        let (ranks, layout, served) = (self.ranks, &self.layout, &self.served);
        let tables: Vec<Table<'_>> = served.tables.iter().map(|&k| sc.blocks[k].as_table()).collect();
        // The owner's side: every source's bags pooled at once into rows that are, source
        // by source, the message back (each bag's row holds every link's columns), and a
        // row-wise max / min's argmax per link, relative to each source's positions.
        let width = served.model.width();
        let mut spare = sc.spare.borrow_mut();
        let mut pooled = std::mem::take(&mut spare.pooled);
        let mut failed = served.pool_into(op, &tables, &mut pooled).err();
        let mut positions: Vec<Vec<u64>> = vec![Vec::new(); ranks];
        for (i, &l) in served.links.iter().enumerate() {
            if !self.extremum(l) {
                continue;
            }
            let Forward::Plan(forward) = &served.forward else {
                failed = Some(internal(op, "an argmax without a plan"));
                continue;
            };
            let (plan, pool) = forward.feature_plan(i);
            let t = served.model.feature_parts(i).0;
            let got = match &tables[t] {
                Table::F32(x) => plan.apply_arg(x, pool),
                Table::Quantized(q) => plan.apply_arg(q, pool),
            };
            match got {
                Ok((_, a)) => {
                    for (q, p) in positions.iter_mut().enumerate() {
                        let base = served.pos_starts[i][q];
                        let rows = a.slice(s![served.starts[q]..served.starts[q + 1], ..]);
                        p.extend(rows.iter().map(|&x| x.saturating_sub(base) as u64));
                    }
                }
                Err(e) => failed = Some(e),
            }
        }
        // (A failure, which the checks rule out, still sends its rows: no rank waits.)
        pooled.resize(served.starts[ranks] * width, 0.0);
        let counts: Vec<usize> = (0..ranks)
            .map(|q| (served.starts[q + 1] - served.starts[q]) * width)
            .collect();
        let into = std::mem::take(&mut spare.rows_in);
        // (This rank's own rows stay where they were pooled.)
        let got = exchange(sc.comm, &pooled, &counts, true, sc.chunk, &mut traffic, into);
        let me = sc.comm.rank() as usize;
        let any_arg = (0..layout.links.len()).any(|l| self.extremum(l));
        let got_arg = any_arg.then(|| send_parts(sc, &positions, &mut traffic));
        sc.traffic.set(traffic);
        if let Some(e) = failed {
            return Err(e);
        }
        // The caller's side, into `out` where its rows are runs (every element is
        // written), else into a fresh array: whole bags into their columns, row-wise
        // partials combined in rank order (the owners' order) and then ended, the
        // replicated features from this rank's copies.
        let mut fresh = None;
        let dst: &mut [f32] = match out.as_slice_mut() {
            Some(o) => o,
            None => fresh.insert(vec![0.0f32; self.batch * self.width]),
        };
        let (nf, w) = (self.features.len(), self.width);
        let mut started = vec![false; self.batch * nf];
        let mut at_pos = vec![0usize; if any_arg { self.batch * w } else { 0 }];
        for o in 0..ranks {
            let links: Vec<usize> = layout.links_at(o).collect();
            let wo: usize = links.iter().map(|&l| layout.block(l).shard.cols.len()).sum();
            let from = match o == me {
                true => &pooled[served.starts[me] * width..served.starts[me + 1] * width],
                false => got.from(o),
            };
            if from.len() != self.batch * wo {
                return Err(internal(op, "pooled rows of another length"));
            }
            let (mut c, mut arg_at) = (0, 0);
            for &l in &links {
                let f = layout.links[l].feature;
                let side = &self.features[f];
                let cols = layout.block(l).shard.cols.clone();
                let (d, a, lens) = (cols.len(), side.at + cols.start, &self.sent[l].lens);
                let rel = match self.extremum(l) {
                    true => {
                        let g = got_arg.as_ref().map(|g| g.from(o)).unwrap_or_default();
                        let r = g.get(arg_at..arg_at + self.batch * d);
                        arg_at += self.batch * d;
                        Some(r.ok_or_else(|| internal(op, "argmaxes of another length"))?)
                    }
                    false => None,
                };
                for bag in 0..self.batch {
                    let src = &from[bag * wo + c..bag * wo + c + d];
                    let row = &mut dst[bag * w + a..bag * w + a + d];
                    if side.kind != Kind::Rows {
                        row.copy_from_slice(src);
                        continue;
                    }
                    if lens[bag] == 0 {
                        continue;
                    }
                    let first = !std::mem::replace(&mut started[bag * nf + f], true);
                    match rel {
                        Some(rel) => {
                            let (rel, pos) = (&rel[bag * d..(bag + 1) * d], &mut at_pos[bag * w + a..][..d]);
                            let max = side.pooling == Pooling::Max;
                            for ((dv, pv), (x, &r)) in
                                row.iter_mut().zip(pos.iter_mut()).zip(src.iter().zip(rel))
                            {
                                let q = self.sent[l].positions[r as usize] as usize;
                                if first || wins(max, (&*dv, *pv), (x, q)) {
                                    (*dv, *pv) = (*x, q);
                                }
                            }
                        }
                        None => fold_row(row, src, first, side.pooling == Pooling::Prod),
                    }
                }
                c += d;
            }
        }
        for side in self.features.iter().filter(|s| s.kind == Kind::Rows) {
            let pooler = end_pooler(side);
            for (bag, tally) in side.tallies.iter().enumerate() {
                end_row(&pooler, tally, &mut dst[bag * w + side.at..][..side.d], None, 0);
            }
        }
        if let Some(local) = &self.local {
            let tables: Vec<Table<'_>> = local.tables.iter().map(|&k| sc.blocks[k].as_table()).collect();
            let rep = local.plan.apply(&tables)?;
            let mut at = 0;
            for &f in &local.features {
                let side = &self.features[f];
                for (bag, r) in rep.rows().into_iter().enumerate() {
                    let src = r.slice_move(s![at..at + side.d]);
                    dst[bag * w + side.at..][..side.d]
                        .iter_mut()
                        .zip(src)
                        .for_each(|(d, &x)| *d = x);
                }
                at += side.d;
            }
        }
        if let Some(fresh) = fresh {
            let fresh =
                Array2::from_shape_vec((self.batch, w), fresh).map_err(|_| internal(op, "a fresh output"))?;
            out.assign(&fresh);
        }
        Ok(())
    }

    /// Whether link `l` is a row-wise `Max` / `Min`'s (its argmax travels).
    fn extremum(&self, l: usize) -> bool {
        let side = &self.features[self.layout.links[l].feature];
        side.kind == Kind::Rows && matches!(side.pooling, Pooling::Max | Pooling::Min)
    }

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

/// `values` sent to every rank; every rank's received, in rank order.
fn to_every_rank<C: CommunicatorCollectives, B, T: Equivalence + Copy + Default>(
    sc: &ShardedCollection<'_, C, B>,
    values: &[T],
    traffic: &mut Traffic,
) -> Received<T> {
    send_parts(sc, &vec![values.to_vec(); sc.comm.size() as usize], traffic)
}

/// `parts[r]` sent to each rank `r`; what every rank sent this one received, in rank order.
pub(super) fn send_parts<C: CommunicatorCollectives, B, T: Equivalence + Copy + Default>(
    sc: &ShardedCollection<'_, C, B>,
    parts: &[Vec<T>],
    traffic: &mut Traffic,
) -> Received<T> {
    send_kept(sc, parts, &mut (Vec::new(), Vec::new()), traffic)
}

/// [`send_parts`] through kept buffers (`kept`: the message sent, and the storage the
/// next one is received into, which the caller gives back).
pub(super) fn send_kept<C: CommunicatorCollectives, B, T: Equivalence + Copy + Default>(
    sc: &ShardedCollection<'_, C, B>,
    parts: &[Vec<T>],
    kept: &mut (Vec<T>, Vec<T>),
    traffic: &mut Traffic,
) -> Received<T> {
    let counts: Vec<usize> = parts.iter().map(Vec::len).collect();
    kept.0.clear();
    parts.iter().for_each(|p| kept.0.extend_from_slice(p));
    let into = std::mem::take(&mut kept.1);
    exchange(sc.comm, &kept.0, &counts, false, sc.chunk, traffic, into)
}

/// The pooler that ends a row-wise feature's combined bags (its pooling, weighted or not,
/// its fill): only what [`Pooler::end`] reads.
fn end_pooler(side: &FeatureSide) -> Pooler<'static, f32> {
    static NO_WEIGHTS: [f32; 0] = [];
    let weights = side
        .weighted
        .then(|| ndarray::ArrayView1::from(&NO_WEIGHTS[..]).insert_axis(ndarray::Axis(1)));
    Pooler::of(
        Pool {
            pooling: side.pooling,
            weights,
            skip: None,
            fill: side.fill,
        },
        0,
    )
}
