//! The owner's side of a sharded collection's plan: the links whose blocks a rank holds
//! made the features of a single-process [`Collection`] over its blocks, every source's
//! bags back to back in rank order ([`Served`]), and the replicated tables' own batch
//! ([`Local`]).

use mpi::traits::Communicator;
use ndarray::ArrayViewMut2;

use super::ShardedCollection;
use super::collection_plan::{FeatureSide, has_coefs, row};
use super::placement::Kind;
use crate::bags::{AsTable, Collection, CollectionPlan, Jagged, Table};
use crate::call::reduce::Rows;
use crate::error::{GatherError, internal};
use crate::index::GatherIndex;
use crate::pool::{Pool, Pooling};

/// The owner's side: the links whose blocks it holds (`links`, layout numbers) as the
/// features of a single-process collection over its blocks (`tables`: indices into its
/// blocks), every source's bags back to back (`starts`).
#[derive(Debug, Clone)]
pub(super) struct Served {
    pub links: Vec<usize>,
    pub tables: Vec<usize>,
    pub model: Collection,
    pub forward: Forward,
    /// Where a row-wise `Mean` / `SqrtN` pools its partials with plain sums, its backward
    /// scales each position by the caller's coefficient (a weight): a second plan.
    pub backward: Option<CollectionPlan>,
    pub starts: Vec<usize>,
    /// Per served link, where each source's positions start.
    pub pos_starts: Vec<Vec<usize>>,
}

/// How an owner pools: a plan (sorted once: a plan's, or where an argmax is needed), or
/// a call's batch, pooled by the single-process call without a sort.
#[derive(Debug, Clone)]
pub(super) enum Forward {
    Plan(CollectionPlan),
    Call {
        values: Vec<u64>,
        lengths: Vec<u32>,
        weights: Option<Vec<f32>>,
    },
}

impl Served {
    /// The owner's pooled rows, every source's bags back to back, into `into` (a buffer
    /// kept from the last call: no fresh pages).
    pub fn pool_into(
        &self,
        op: &'static str,
        tables: &[Table<'_>],
        into: &mut Vec<f32>,
    ) -> Result<(), GatherError> {
        let (total, width) = (self.starts[self.starts.len() - 1], self.model.width());
        into.resize(total * width, 0.0);
        let mut out = ArrayViewMut2::from_shape((total, width), &mut into[..])
            .map_err(|_| internal(op, "pooled rows of another size"))?;
        match &self.forward {
            Forward::Plan(p) => p.apply_into(tables, &mut out),
            Forward::Call {
                values,
                lengths,
                weights,
            } => {
                let batch = sub_batch(values, lengths, total, weights.as_deref())?;
                self.model.gather_reduce_into(tables, &batch, &mut out)
            }
        }
    }

    /// The plan a backward runs (a plan's only).
    pub fn backward_plan(&self, op: &'static str) -> Result<&CollectionPlan, GatherError> {
        match (&self.backward, &self.forward) {
            (Some(p), _) | (None, Forward::Plan(p)) => Ok(p),
            _ => Err(internal(op, "a call's routing has no backward")),
        }
    }
}

/// The replicated tables: this rank's batch pooled on its own copies.
#[derive(Debug, Clone)]
pub(super) struct Local {
    /// The collection's features that read them, and their blocks (indices into this
    /// rank's blocks).
    pub features: Vec<usize>,
    pub tables: Vec<usize>,
    pub plan: CollectionPlan,
}

/// An owner's batch: every link's bags of every source, with `weights` (none where no
/// link is weighted).
fn sub_batch<'j>(
    values: &'j [u64],
    lengths: &'j [u32],
    total: usize,
    weights: Option<&'j [f32]>,
) -> Result<Jagged<'j, u64, u32>, GatherError> {
    let batch = Jagged::lengths(values, lengths, total)?;
    Ok(match weights {
        Some(w) => batch.weighted(w),
        None => batch,
    })
}

/// The pool a link's owner pools with: a whole bag's as the feature's (no skip: skipped
/// ids do not travel); a row-wise partial's with plain sums (the caller divides) and no
/// fill, `Prod`, `Max` and `Min` as they are.
fn owner_pool(side: &FeatureSide) -> Pool<'static, f32> {
    let pooling = match (side.kind, side.pooling) {
        (Kind::Rows, Pooling::Sum | Pooling::Mean | Pooling::SqrtN) => Pooling::Sum,
        (_, p) => p,
    };
    Pool {
        pooling,
        weights: None,
        skip: None,
        fill: if side.kind == Kind::Rows { None } else { side.fill },
    }
}

impl Served {
    /// The owner's side from what every source `q` sent (`from(q)`: its words and
    /// floats).
    pub(super) fn of<'a, C, B: AsTable>(
        sc: &ShardedCollection<'_, C, B>,
        op: &'static str,
        features: &[FeatureSide],
        training: bool,
        from: impl Fn(usize) -> (&'a [u64], &'a [f32]),
    ) -> Result<Served, GatherError>
    where
        C: Communicator,
    {
        let (layout, ranks, me) = (&sc.layout, sc.comm.size() as usize, sc.comm.rank() as usize);
        let links: Vec<usize> = layout.links_at(me).collect();
        // The blocks the links read (this rank's, but the replicated ones), as tables.
        let tables: Vec<usize> = (0..layout.local.len())
            .filter(|&k| layout.kinds[layout.blocks[layout.local[k]].shard.table] != Kind::Replicated)
            .collect();
        let table_of = |block: usize| tables.iter().position(|&k| layout.local[k] == block);
        let n = links.len();
        let bad = || internal(op, "a routing message of another length");
        // First where each source's part of each link is in its message (its bags'
        // lengths, ids, weights and coefficients), then each copied once into place: link
        // by link, the sources back to back in rank order.
        let mut spans = Vec::with_capacity(ranks);
        let (mut starts, mut per_link) = (vec![0usize], vec![0usize; n]);
        for q in 0..ranks {
            let (words, _) = from(q);
            let bq = *words.first().ok_or_else(bad)? as usize;
            starts.push(starts[q] + bq);
            let (mut at, mut fat, mut parts) = (1, 0, Vec::with_capacity(n));
            for (i, &l) in links.iter().enumerate() {
                let side = &features[layout.links[l].feature];
                let k: usize = words
                    .get(at..at + bq)
                    .ok_or_else(bad)?
                    .iter()
                    .map(|&x| x as usize)
                    .sum();
                let (w, c) = (side.weighted, training && has_coefs(side));
                parts.push((at, k, w.then_some(fat), c.then_some(fat + if w { k } else { 0 })));
                per_link[i] += k;
                (at, fat) = (at + bq + k, fat + k * (usize::from(w) + usize::from(c)));
            }
            spans.push(parts);
        }
        let total = starts[ranks];
        let (positions, link_at) = (
            per_link.iter().sum::<usize>(),
            super::exchange::offsets(&per_link),
        );
        let weighted = links.iter().any(|&l| features[layout.links[l].feature].weighted);
        let scaled = training
            && links
                .iter()
                .any(|&l| has_coefs(&features[layout.links[l].feature]));
        let mut values = vec![0u64; positions];
        let mut lengths = vec![0u32; n * total];
        let mut w = vec![1.0f32; if weighted { positions } else { 0 }];
        let mut coefs = vec![1.0f32; if scaled { positions } else { 0 }];
        let mut pos_starts = vec![Vec::with_capacity(ranks); n];
        let mut filled = vec![0usize; n];
        for (q, parts) in spans.iter().enumerate() {
            let (words, floats) = from(q);
            let bq = starts[q + 1] - starts[q];
            for (i, &(at, k, wat, cat)) in parts.iter().enumerate() {
                let to = link_at[i] + filled[i];
                pos_starts[i].push(filled[i]);
                filled[i] += k;
                let lens = &mut lengths[i * total + starts[q]..][..bq];
                lens.iter_mut()
                    .zip(&words[at..at + bq])
                    .for_each(|(l, &x)| *l = x as u32);
                values[to..to + k].copy_from_slice(words.get(at + bq..at + bq + k).ok_or_else(bad)?);
                if let Some(f) = wat {
                    w[to..to + k].copy_from_slice(floats.get(f..f + k).ok_or_else(bad)?);
                }
                if let Some(f) = cat {
                    coefs[to..to + k].copy_from_slice(floats.get(f..f + k).ok_or_else(bad)?);
                }
            }
        }
        let mut model = Collection::new();
        for &k in &tables {
            let s = &layout.blocks[layout.local[k]].shard;
            model = model.table(s.rows.len(), s.cols.len());
        }
        let mut backward_model = model.clone();
        for &l in &links {
            let link = layout.links[l];
            let side = &features[link.feature];
            let t = table_of(link.block).ok_or_else(|| internal(op, "a link to a block not held"))?;
            let pool = owner_pool(side);
            model = match side.weighted {
                true => model.weighted_feature(t, pool),
                false => model.feature(t, pool),
            };
            backward_model = match (training && has_coefs(side), side.weighted) {
                (true, _) => backward_model.weighted_feature(t, Pooling::Sum),
                (false, true) => backward_model.weighted_feature(t, owner_pool(side)),
                (false, false) => backward_model.feature(t, owner_pool(side)),
            };
        }
        let extremum = links.iter().any(|&l| {
            let side = &features[layout.links[l].feature];
            side.kind == Kind::Rows && matches!(side.pooling, Pooling::Max | Pooling::Min)
        });
        let backward = match scaled {
            true => {
                // The coefficients where a link has them, else the weights.
                for (i, &l) in links.iter().enumerate() {
                    if !has_coefs(&features[layout.links[l].feature]) && weighted {
                        let r = link_at[i]..link_at[i] + per_link[i];
                        coefs[r.clone()].copy_from_slice(&w[r]);
                    }
                }
                Some(backward_model.plan(&sub_batch(&values, &lengths, total, Some(&coefs[..]))?)?)
            }
            false => None,
        };
        let forward = match training || extremum {
            true => Forward::Plan(model.plan(&sub_batch(
                &values,
                &lengths,
                total,
                weighted.then_some(&w[..]),
            )?)?),
            false => Forward::Call {
                values,
                lengths,
                weights: weighted.then_some(w),
            },
        };
        Ok(Served {
            links,
            tables,
            model,
            forward,
            backward,
            starts,
            pos_starts,
        })
    }
}

impl Local {
    /// The replicated tables' plan of this rank's own batch (`None`: there are none).
    pub(super) fn of<C: Communicator, B, I: GatherIndex, J: GatherIndex>(
        sc: &ShardedCollection<'_, C, B>,
        _op: &'static str,
        batch: &Jagged<'_, I, J>,
        rows: &[Rows],
        features: &[FeatureSide],
    ) -> Result<Option<Local>, GatherError> {
        let (layout, model) = (&sc.layout, &sc.model);
        let tables: Vec<usize> = (0..layout.local.len())
            .filter(|&k| layout.kinds[layout.blocks[layout.local[k]].shard.table] == Kind::Replicated)
            .collect();
        if tables.is_empty() {
            return Ok(None);
        }
        let table_of = |t: usize| {
            tables
                .iter()
                .position(|&k| layout.blocks[layout.local[k]].shard.table == t)
        };
        let b = batch.batch;
        let mut sub = Collection::new();
        for &k in &tables {
            let s = &layout.blocks[layout.local[k]].shard;
            sub = sub.table(s.rows.len(), s.cols.len());
        }
        let (mut values, mut lengths, mut weights, mut reading) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (f, side) in features.iter().enumerate() {
            let (t, mut pool, weighted) = model.feature_parts(f);
            let Some(rt) = table_of(t).filter(|_| side.kind == Kind::Replicated) else {
                continue;
            };
            pool.skip = None;
            sub = if weighted {
                sub.weighted_feature(rt, pool)
            } else {
                sub.feature(rt, pool)
            };
            reading.push(f);
            let start = batch.offsets[f * b];
            for bag in 0..b {
                let before = values.len();
                for p in batch.offsets[f * b + bag]..batch.offsets[f * b + bag + 1] {
                    if let Some(r) = row(&rows[f], p - start) {
                        values.push(r as u64);
                        weights.push(batch.weights.filter(|_| weighted).map_or(1.0, |w| w[p]));
                    }
                }
                lengths.push((values.len() - before) as u32);
            }
        }
        let plan = sub.plan(&Jagged::lengths(&values, &lengths, b)?.weighted(&weights))?;
        Ok(Some(Local {
            features: reading,
            tables,
            plan,
        }))
    }
}
