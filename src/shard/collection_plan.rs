//! A sharded collection's plan ([`ShardedCollectionPlan`]): the caller's side (each link's
//! bags and, for row-wise features, what ends them) and the owner's side (a
//! single-process [`CollectionPlan`] over every rank's ids of the blocks it holds, the
//! sources' batches back to back in rank order), routed in one exchange.

use mpi::traits::{Communicator, CommunicatorCollectives};
use ndarray::ArrayView1;

use super::ShardedCollection;
use super::Traffic;
use super::collection_step::send_kept;
use super::exchange::agree;
use super::placement::{Kind, Layout};
use ndarray::ArrayViewMut2;

use crate::bags::{AsTable, Collection, CollectionPlan, Jagged, Table};
use crate::call::reduce::Rows;
use crate::error::{GatherError, internal};
use crate::index::GatherIndex;
use crate::kernel::reduce::{Pooler, Scale, Tally};
use crate::pool::{Pool, Pooling};

/// A [`ShardedCollection`]'s batch routed and checked once ([`ShardedCollection::plan`]):
/// [`apply`](Self::apply) it to the collection as its blocks change,
/// [`step`](Self::step) or [`backward_rows`](Self::backward_rows) it. No lifetime;
/// every method is collective.
///
/// ```no_run
/// use ndarray::Array2;
/// use ndarray_gather::bags::{Collection, Jagged};
/// use ndarray_gather::optim::Sgd;
/// use ndarray_gather::prelude::*;
/// use ndarray_gather::shard::{Placement, ShardedCollection, mpi};
/// use mpi::traits::*;
///
/// let universe = mpi::initialize().unwrap();
/// let world = universe.world();
/// let model = Collection::new().table(100, 4).feature(0, Pooling::Mean);
/// let placements = vec![Placement::Table(0)];
/// let shards = Placement::shards(&placements, &model, world.rank() as usize);
/// let blocks: Vec<Array2<f32>> = shards.iter().map(|s| Array2::ones((s.rows.len(), s.cols.len()))).collect();
/// let mut sc = ShardedCollection::new(&world, &model, &placements, blocks)?;
/// let plan = sc.plan(&Jagged::lengths(&[3_i64, 7, 7], &[2_i64, 1], 2)?)?;
/// let mut out = Array2::zeros((plan.batch(), 4));
/// plan.apply_into(&sc, &mut out)?;
/// let grad = out.mapv(|v| v - 0.5);
/// let rows = plan.backward_rows(&grad, &sc)?; // per block this rank holds
/// assert_eq!(rows.len(), sc.local_blocks().len());
/// let mut opts = vec![Sgd::new(0.1); shards.len()]; // one per block
/// plan.step(&grad, &mut sc, &mut opts)?;
/// println!("{:?}", sc.traffic());
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ShardedCollectionPlan {
    pub(super) layout: Layout,
    pub(super) ranks: usize,
    pub(super) batch: usize,
    pub(super) width: usize,
    /// Made by `plan` (with the backward's coefficients), not by `gather_reduce`.
    pub(super) training: bool,
    pub(super) features: Vec<FeatureSide>,
    /// Per link (every link: each owner hears from every rank), this rank's side of it.
    pub(super) sent: Vec<Sent>,
    pub(super) served: Served,
    pub(super) local: Option<Local>,
}

/// A feature as its caller ends it.
#[derive(Debug, Clone)]
pub(super) struct FeatureSide {
    pub at: usize,
    pub d: usize,
    pub kind: Kind,
    pub pooling: Pooling,
    pub weighted: bool,
    pub fill: Option<f32>,
    /// A row-wise feature's bags' tallies (kept positions, weights' sums in position
    /// order): what ends each bag after its partials are combined.
    pub tallies: Vec<Tally<f32>>,
}

/// A link as its caller routed it: each of its bags' positions on the link's block, and,
/// for a row-wise `Max` / `Min`, those positions (the feature's), which break ties.
#[derive(Debug, Clone, Default)]
pub(super) struct Sent {
    pub lens: Vec<u32>,
    pub positions: Vec<u32>,
}

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

impl ShardedCollectionPlan {
    /// The batch size of this rank.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Routes `batch` (`training`: with the coefficients a row-wise `Mean` / `SqrtN`'s
    /// backward needs). Collective.
    pub(super) fn build<C, B, I, J>(
        sc: &ShardedCollection<'_, C, B>,
        op: &'static str,
        batch: &Jagged<'_, I, J>,
        training: bool,
    ) -> Result<Self, GatherError>
    where
        C: Communicator + CommunicatorCollectives,
        B: AsTable,
        I: GatherIndex,
        J: GatherIndex,
    {
        let (comm, layout, model) = (sc.comm, &sc.layout, &sc.model);
        let ranks = comm.size() as usize;
        let rows = agree(comm, op, model.check_batch(op, batch))?;
        let b = batch.batch;
        let mut traffic = Traffic::default();
        let features = feature_sides(model, layout, batch, &rows);
        // Each rank's message: its batch size, then per link at that rank its bags'
        // lengths and ids; the weights (and a row-wise mean's coefficients) beside.
        // (In the last call's buffers.)
        let (mut words, mut floats) = std::mem::take(&mut sc.spare.borrow_mut().parts);
        words.resize_with(ranks, Vec::new);
        floats.resize_with(ranks, Vec::new);
        words.iter_mut().for_each(|w| {
            w.clear();
            w.push(b as u64)
        });
        floats.iter_mut().for_each(Vec::clear);
        let mut sent = Vec::with_capacity(layout.links.len());
        let mut coefs: Vec<Option<Vec<f32>>> = vec![None; model.features()];
        for (l, link) in layout.links.iter().enumerate() {
            let (f, block) = (link.feature, layout.block(l));
            let side = &features[f];
            let o = block.owner;
            let range = batch.offsets[f * b]..batch.offsets[(f + 1) * b];
            let weights = batch.weights.filter(|_| side.weighted).map(|w| &w[range.clone()]);
            let coef = (training && has_coefs(side))
                .then(|| coefs[f].get_or_insert_with(|| coefficients(side, &rows[f], weights, b, batch, f)));
            let mut s = Sent {
                lens: vec![0; b],
                positions: Vec::new(),
            };
            let extremum = side.kind == Kind::Rows && matches!(side.pooling, Pooling::Max | Pooling::Min);
            let start = words[o].len();
            words[o].resize(start + b, 0);
            let (lo, rows_of) = (block.shard.rows.start, &block.shard.rows);
            for bag in 0..b {
                let (p0, p1) = (
                    batch.offsets[f * b + bag] - range.start,
                    batch.offsets[f * b + bag + 1] - range.start,
                );
                for p in p0..p1 {
                    let Some(r) = row(&rows[f], p).filter(|r| rows_of.contains(r)) else {
                        continue;
                    };
                    s.lens[bag] += 1;
                    words[o].push((r - lo) as u64);
                    if let Some(w) = weights {
                        floats[o].push(w[p]);
                    }
                    if extremum {
                        s.positions.push(p as u32);
                    }
                }
            }
            // (The coefficients follow the link's weights, in the same order.)
            if let Some(c) = coef {
                for bag in 0..b {
                    let (p0, p1) = (
                        batch.offsets[f * b + bag] - range.start,
                        batch.offsets[f * b + bag + 1] - range.start,
                    );
                    floats[o].extend(
                        (p0..p1)
                            .filter(|&p| row(&rows[f], p).is_some_and(|r| rows_of.contains(&r)))
                            .map(|p| c[p]),
                    );
                }
            }
            words[o][start..start + b]
                .iter_mut()
                .zip(&s.lens)
                .for_each(|(w, &n)| *w = u64::from(n));
            sent.push(s);
        }
        let mut kept = sc.spare.borrow_mut();
        let got = send_kept(sc, &words, &mut kept.words, &mut traffic);
        let got_f = send_kept(sc, &floats, &mut kept.floats, &mut traffic);
        let served = Served::of(sc, op, &features, training, |q| (got.from(q), got_f.from(q)));
        (kept.words.1, kept.floats.1) = (got.values, got_f.values);
        kept.parts = (words, floats);
        drop(kept);
        let local = Local::of(sc, op, batch, &rows, &features);
        sc.traffic.set(traffic);
        // (An owner's failure, which the checks rule out, is every rank's.)
        let (served, local) = agree(comm, op, served.and_then(|s| Ok((s, local?))))?;
        Ok(ShardedCollectionPlan {
            layout: layout.clone(),
            ranks,

            batch: b,
            width: model.width(),
            training,
            features,
            sent,
            served,
            local,
        })
    }
}

/// Each feature's caller side: its columns, kind and pooling, and a row-wise feature's
/// tallies.
fn feature_sides<I: GatherIndex, J: GatherIndex>(
    model: &Collection,
    layout: &Layout,
    batch: &Jagged<'_, I, J>,
    rows: &[Rows],
) -> Vec<FeatureSide> {
    let b = batch.batch;
    let mut at = 0;
    (0..model.features())
        .map(|f| {
            let (t, pool, weighted) = model.feature_parts(f);
            let d = model.table_dims()[t].1;
            let kind = layout.kinds[t];
            let mut tallies = Vec::new();
            if kind == Kind::Rows {
                let start = batch.offsets[f * b];
                let w = batch.weights.filter(|_| weighted);
                for bag in 0..b {
                    let mut t = Tally::new();
                    for p in batch.offsets[f * b + bag]..batch.offsets[f * b + bag + 1] {
                        if row(&rows[f], p - start).is_some() {
                            t.push(weighted, &w.map_or(1.0, |w| w[p]));
                        }
                    }
                    tallies.push(t);
                }
            }
            let side = FeatureSide {
                at,
                d,
                kind,
                pooling: pool.pooling,
                weighted,
                fill: pool.fill,
                tallies,
            };
            at += d;
            side
        })
        .collect()
}

/// Whether a feature's backward scales its positions by the caller's coefficients: a
/// row-wise `Mean` / `SqrtN` (its owners see only part of a bag).
pub(super) fn has_coefs(side: &FeatureSide) -> bool {
    side.kind == Kind::Rows && matches!(side.pooling, Pooling::Mean | Pooling::SqrtN)
}

/// Each position's backward coefficient of a row-wise `Mean` / `SqrtN` feature `f`, as
/// the single-process backward computes it (decision 34) from the whole bag's tally.
fn coefficients<I: GatherIndex, J: GatherIndex>(
    side: &FeatureSide,
    rows: &Rows,
    weights: Option<&[f32]>,
    b: usize,
    batch: &Jagged<'_, I, J>,
    f: usize,
) -> Vec<f32> {
    let start = batch.offsets[f * b];
    let positions = batch.offsets[(f + 1) * b] - start;
    let pool = Pool {
        pooling: side.pooling,
        weights: weights.map(|w| ArrayView1::from(w).insert_axis(ndarray::Axis(1))),
        skip: None,
        fill: side.fill,
    };
    let pooler = Pooler::of(pool, positions);
    let scale = Scale::of_tallies(&pooler, b, |bag, t| {
        for p in batch.offsets[f * b + bag] - start..batch.offsets[f * b + bag + 1] - start {
            if row(rows, p).is_some() {
                t.push(weights.is_some(), &weights.map_or(1.0, |w| w[p]));
            }
        }
    });
    let mut c = Vec::with_capacity(positions);
    for bag in 0..b {
        let bag_len = batch.offsets[f * b + bag + 1] - batch.offsets[f * b + bag];
        let p0 = c.len();
        c.extend((p0..p0 + bag_len).map(|p| scale.as_ref().and_then(|s| s.get(bag, p)).unwrap_or(1.0)));
    }
    c
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

/// Position `p`'s resolved row, `None` where skipped.
pub(super) fn row(rows: &Rows, p: usize) -> Option<usize> {
    match rows {
        Rows::Narrow(v) => (v[p] != u32::MAX).then(|| v[p] as usize),
        Rows::Wide(v) => (v[p] != usize::MAX).then_some(v[p]),
    }
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
    fn of<'a, C, B: AsTable>(
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
    fn of<C: Communicator, B, I: GatherIndex, J: GatherIndex>(
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
