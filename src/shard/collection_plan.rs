//! A sharded collection's plan ([`ShardedCollectionPlan`]): the caller's side (each link's
//! bags and, for row-wise features, what ends them) and the owner's side (a
//! single-process [`CollectionPlan`] over every rank's ids of the blocks it holds, the
//! sources' batches back to back in rank order), routed in one exchange.

use mpi::traits::{Communicator, CommunicatorCollectives};
use ndarray::ArrayView1;

use super::ShardedCollection;
use super::Traffic;
use super::collection::send_kept;
use super::collection_owner::{Local, Served};
use super::exchange::agree;
use super::placement::{Kind, Layout};
use crate::bags::{AsTable, Collection, Jagged};
use crate::call::reduce::Rows;
use crate::error::GatherError;
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

/// Position `p`'s resolved row, `None` where skipped.
pub(super) fn row(rows: &Rows, p: usize) -> Option<usize> {
    match rows {
        Rows::Narrow(v) => (v[p] != u32::MAX).then(|| v[p] as usize),
        Rows::Wide(v) => (v[p] != usize::MAX).then_some(v[p]),
    }
}
