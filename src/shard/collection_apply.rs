//! A sharded collection's forward: owners pool every source's bags into rows that travel
//! back as they were pooled; each caller writes whole bags into their columns, combines
//! row-wise partials in rank order and ends them (decisions 62 and 39).

use mpi::traits::{Communicator, CommunicatorCollectives};
use ndarray::{Array2, ArrayRef, Ix2, s};

use super::Traffic;
use super::collection::{ShardedCollection, check_blocks, check_out, send_parts};
use super::collection_owner::Forward;
use super::collection_plan::{FeatureSide, ShardedCollectionPlan};
use super::exchange::{agree, exchange};
use super::merge::{end_row, fold_row, wins};
use super::placement::Kind;
use crate::bags::{AsTable, Table};
use crate::error::{GatherError, internal};
use crate::kernel::reduce::Pooler;
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
    pub(super) fn check_fit<C: Communicator, B: AsTable>(
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
