//! A sharded collection's plan run: the forward (owners pool, rows and partials travel
//! back, callers combine them), the gradient rows to their owners, and the owners'
//! backward and fused step (decision 65).

use mpi::traits::{Communicator, CommunicatorCollectives};
use ndarray::{Array1, Array2, ArrayRef, ArrayViewMut2, Ix2, s};

use super::Traffic;
use super::collection::{ShardedCollection, check_blocks, check_out};
use super::collection_plan::{FeatureSide, ShardedCollectionPlan};
use super::exchange::{agree, all_to_all};
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
        // The owner's side: every source's bags pooled at once, then each source's rows
        // (a row-wise link's bags with positions here only) and argmaxes.
        let pooled = served.forward.apply(&tables);
        let mut args: Vec<Option<Array2<usize>>> = vec![None; served.links.len()];
        let extremum = |side: &FeatureSide| {
            side.kind == Kind::Rows && matches!(side.pooling, Pooling::Max | Pooling::Min)
        };
        let mut failed = pooled.as_ref().err().cloned();
        for (i, &l) in served.links.iter().enumerate() {
            if extremum(&self.features[layout.links[l].feature]) {
                let (plan, pool) = served.forward.feature_plan(i);
                let t = served.model.feature_parts(i).0;
                let got = match &tables[t] {
                    Table::F32(x) => plan.apply_arg(x, pool),
                    Table::Quantized(q) => plan.apply_arg(q, pool),
                };
                match got {
                    Ok((_, a)) => args[i] = Some(a),
                    Err(e) => failed = Some(e),
                }
            }
        }
        let pooled = pooled.unwrap_or_else(|_| Array2::zeros((served.starts[ranks], served.model.width())));
        let (mut rows, mut positions) = (vec![Vec::new(); ranks], vec![Vec::new(); ranks]);
        for q in 0..ranks {
            for (i, &l) in served.links.iter().enumerate() {
                let d = layout.block(l).shard.cols.len();
                let rows_of_link = self.kind_of(l) == Kind::Rows;
                for bag in served.starts[q]..served.starts[q + 1] {
                    if rows_of_link && served.lens[i][bag] == 0 {
                        continue;
                    }
                    let row = pooled.slice(s![bag, served.at[i]..served.at[i] + d]);
                    rows[q].extend(row.iter().copied());
                    if let Some(a) = &args[i] {
                        let base = served.pos_starts[i][q];
                        positions[q].extend(a.row(bag).iter().map(|&p| p.saturating_sub(base) as u64));
                    }
                }
            }
        }
        let counts: Vec<usize> = rows.iter().map(Vec::len).collect();
        let got = all_to_all(
            sc.comm,
            &rows.concat(),
            &counts,
            sc.chunk,
            &mut traffic,
            Vec::new(),
        );
        let any_arg = (0..layout.links.len()).any(|l| extremum(&self.features[layout.links[l].feature]));
        let got_arg = any_arg.then(|| {
            let counts: Vec<usize> = positions.iter().map(Vec::len).collect();
            all_to_all(
                sc.comm,
                &positions.concat(),
                &counts,
                sc.chunk,
                &mut traffic,
                Vec::new(),
            )
        });
        sc.traffic.set(traffic);
        if let Some(e) = failed {
            return Err(e);
        }
        // The caller's side: whole bags into their columns, row-wise partials combined in
        // rank order (the owners' order), then ended; the replicated features from this
        // rank's copies.
        let mut fresh = Array2::<f32>::zeros((self.batch, self.width));
        let mut started = vec![false; self.batch * self.features.len()];
        let mut at_pos = vec![0usize; if any_arg { self.batch * self.width } else { 0 }];
        for o in 0..ranks {
            let (mut k, mut ka) = (0, 0);
            let from = got.from(o);
            let from_arg = got_arg.as_ref().map(|g| g.from(o));
            for l in layout.links_at(o) {
                let f = layout.links[l].feature;
                let side = &self.features[f];
                let cols = layout.block(l).shard.cols.clone();
                let (d, sent) = (cols.len(), &self.sent[l]);
                for bag in 0..self.batch {
                    let n = sent.lens[bag] as usize;
                    if side.kind == Kind::Rows && n == 0 {
                        continue;
                    }
                    let src = from
                        .get(k..k + d)
                        .ok_or_else(|| internal(op, "pooled rows of another length"))?;
                    k += d;
                    let a = side.at + cols.start;
                    let mut dst = fresh.slice_mut(s![bag, a..a + d]);
                    let dst = dst
                        .as_slice_mut()
                        .ok_or_else(|| internal(op, "a fresh row not contiguous"))?;
                    let first = !std::mem::replace(&mut started[bag * self.features.len() + f], true);
                    match (side.kind, side.pooling) {
                        (Kind::Rows, Pooling::Max | Pooling::Min) => {
                            let rel = from_arg
                                .and_then(|g| g.get(ka..ka + d))
                                .ok_or_else(|| internal(op, "argmaxes of another length"))?;
                            ka += d;
                            let pos = &mut at_pos[bag * self.width + a..][..d];
                            let max = side.pooling == Pooling::Max;
                            for ((dv, pv), (x, &r)) in
                                dst.iter_mut().zip(pos.iter_mut()).zip(src.iter().zip(rel))
                            {
                                let q = sent.positions[r as usize] as usize;
                                if first || wins(max, (&*dv, *pv), (x, q)) {
                                    (*dv, *pv) = (*x, q);
                                }
                            }
                        }
                        (Kind::Rows, p) => fold_row(dst, src, first, p == Pooling::Prod),
                        _ => dst.copy_from_slice(src),
                    }
                }
            }
        }
        for side in self.features.iter().filter(|s| s.kind == Kind::Rows) {
            let pooler = end_pooler(side);
            for (bag, tally) in side.tallies.iter().enumerate() {
                let mut dst = fresh.slice_mut(s![bag, side.at..side.at + side.d]);
                let dst = dst
                    .as_slice_mut()
                    .ok_or_else(|| internal(op, "a fresh row not contiguous"))?;
                end_row(&pooler, tally, dst, None, 0);
            }
        }
        if let Some(local) = &self.local {
            let tables: Vec<Table<'_>> = local.tables.iter().map(|&k| sc.blocks[k].as_table()).collect();
            let rep = local.plan.apply(&tables)?;
            let mut at = 0;
            for &f in &local.features {
                let side = &self.features[f];
                fresh
                    .slice_mut(s![.., side.at..side.at + side.d])
                    .assign(&rep.slice(s![.., at..at + side.d]));
                at += side.d;
            }
        }
        out.assign(&fresh);
        Ok(())
    }

    /// Link `l`'s table's kind.
    fn kind_of(&self, l: usize) -> Kind {
        self.features[self.layout.links[l].feature].kind
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

    /// The gradient rows to the owners: each source's rows of each link's columns (a
    /// row-wise link's bags with positions there only), into the owner's `[B_total, Σ
    /// D_link]` gradient, every source's bags back to back.
    fn grads_to_owners<C: Communicator + CommunicatorCollectives, B>(
        &self,
        op: &'static str,
        sc: &ShardedCollection<'_, C, B>,
        grad_out: &ArrayRef<f32, Ix2>,
        traffic: &mut Traffic,
    ) -> Result<Array2<f32>, GatherError> {
        let (ranks, layout, served) = (self.ranks, &self.layout, &self.served);
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); ranks];
        for (l, link) in layout.links.iter().enumerate() {
            let (side, block) = (&self.features[link.feature], layout.block(l));
            let a = side.at + block.shard.cols.start;
            for bag in 0..self.batch {
                if side.kind == Kind::Rows && self.sent[l].lens[bag] == 0 {
                    continue;
                }
                out[block.owner].extend(grad_out.slice(s![bag, a..a + block.shard.cols.len()]).iter());
            }
        }
        let counts: Vec<usize> = out.iter().map(Vec::len).collect();
        let got = all_to_all(sc.comm, &out.concat(), &counts, sc.chunk, traffic, Vec::new());
        let mut grad = Array2::zeros((served.starts[ranks], served.model.width()));
        for q in 0..ranks {
            let (from, mut k) = (got.from(q), 0);
            for (i, &l) in served.links.iter().enumerate() {
                let d = layout.block(l).shard.cols.len();
                for bag in served.starts[q]..served.starts[q + 1] {
                    if self.kind_of(l) == Kind::Rows && served.lens[i][bag] == 0 {
                        continue;
                    }
                    let src = from
                        .get(k..k + d)
                        .ok_or_else(|| internal(op, "gradient rows of another length"))?;
                    grad.slice_mut(s![bag, served.at[i]..served.at[i] + d])
                        .iter_mut()
                        .zip(src)
                        .for_each(|(g, &x)| *g = x);
                    k += d;
                }
            }
        }
        Ok(grad)
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
        let mine = local.plan.backward_rows(&g)?;
        // Every rank's rows to every rank: per table its row count, rows and gradients.
        let (mut words, mut floats) = (Vec::new(), Vec::new());
        for (rows, grads) in &mine {
            words.push(rows.len() as u64);
            words.extend(rows.iter().map(|&r| r as u64));
            floats.extend(grads.iter());
        }
        let ranks = self.ranks;
        let got = all_to_all(
            sc.comm,
            &words.repeat(ranks),
            &vec![words.len(); ranks],
            sc.chunk,
            traffic,
            Vec::new(),
        );
        let got_f = all_to_all(
            sc.comm,
            &floats.repeat(ranks),
            &vec![floats.len(); ranks],
            sc.chunk,
            traffic,
            Vec::new(),
        );
        let mut per_rank: Vec<Vec<(&[u64], &[f32])>> = Vec::with_capacity(ranks);
        for q in 0..ranks {
            let (wq, fq) = (got.from(q), got_f.from(q));
            let (mut a, mut fa, mut tables) = (0, 0, Vec::new());
            for (_, grads) in &mine {
                let d = grads.ncols();
                let n = *wq
                    .get(a)
                    .ok_or_else(|| internal(op, "replicated rows of another length"))?
                    as usize;
                let rows = wq
                    .get(a + 1..a + 1 + n)
                    .ok_or_else(|| internal(op, "replicated rows of another length"))?;
                let grads = fq
                    .get(fa..fa + n * d)
                    .ok_or_else(|| internal(op, "replicated rows of another length"))?;
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
        let mut traffic = Traffic::default();
        let grad = self.grads_to_owners(OP, sc, grad_out, &mut traffic);
        let rep = self.replicated_rows(OP, sc, grad_out, &mut traffic);
        sc.traffic.set(traffic);
        let served = &self.served;
        let plan = served.backward.as_ref().unwrap_or(&served.forward);
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
        let mut traffic = Traffic::default();
        let grad = self.grads_to_owners(OP, sc, grad_out, &mut traffic);
        let rep = self.replicated_rows(OP, sc, grad_out, &mut traffic);
        sc.traffic.set(traffic);
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
        let plan = served.backward.as_ref().unwrap_or(&served.forward);
        plan.step(&grad, &mut served_tables, &mut served_opts)?;
        for ((table, opt), (rows, grads)) in rep_tables.iter_mut().zip(rep_opts.iter_mut()).zip(&rep) {
            let mut view: ArrayViewMut2<'_, f32> = table.table_mut();
            Step::begin(OP, opt, &mut view, 0)?.rows(rows, grads.view())?;
        }
        Ok(())
    }
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
