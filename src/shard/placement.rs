//! Where each table of a sharded collection lives ([`Placement`], decision 61), the blocks
//! each rank holds ([`Shard`]), and the layout every rank derives from them alike: every
//! block, and the (feature, block) links whose ids travel to a block's owner.

use std::ops::Range;

use super::Rows;
use crate::bags::Collection;
use crate::error::GatherError;
use crate::pool::Pooling;

/// How one table of a [`Collection`] is sharded over the ranks (decision 61; TorchRec's
/// sharding types).
///
/// ```
/// use ndarray_gather::bags::Collection;
/// use ndarray_gather::prelude::*;
/// use ndarray_gather::shard::{Placement, Rows, Shard};
///
/// let model = Collection::new().table(10, 4).table(6, 8).table(3, 2).table(5, 2)
///     .feature(0, Pooling::Sum).feature(1, Pooling::Sum).feature(2, Pooling::Mean).feature(3, Pooling::Sum);
/// let placements = vec![
///     Placement::Rows(Rows::even(10, 2)),                   // row-wise: rows 0..5 on rank 0, 5..10 on rank 1
///     Placement::Columns(vec![(1, 0..3), (0, 3..8)]),       // column-wise
///     Placement::Table(1),                                  // table-wise: all of it on rank 1
///     Placement::Replicated,                                // data-parallel: on every rank
/// ];
/// let on_0 = Placement::shards(&placements, &model, 0);
/// assert_eq!(on_0, vec![
///     Shard { table: 0, rows: 0..5, cols: 0..4 },
///     Shard { table: 1, rows: 0..6, cols: 3..8 },
///     Shard { table: 3, rows: 0..5, cols: 0..2 },
/// ]);
/// assert_eq!(Placement::shards(&placements, &model, 1).len(), 4);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Table-wise: the whole table on rank `r`.
    Table(usize),
    /// Row-wise: rank `r` holds rows `rows.range(r)` (decisions 37-44).
    Rows(Rows),
    /// Column-wise: `(rank, columns)` ranges that cover `0..D` once, in column order (a
    /// rank may hold several).
    Columns(Vec<(usize, Range<usize>)>),
    /// Data-parallel: every rank holds the whole table.
    Replicated,
}

/// One block of a table that a rank holds: the table, its global rows and its columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The table's number in the collection.
    pub table: usize,
    /// Its rows of the table.
    pub rows: Range<usize>,
    /// Its columns of the table.
    pub cols: Range<usize>,
}

impl Placement {
    /// The blocks rank `rank` holds (decision 61): table order, then row or column order;
    /// a row-wise table's empty ranges are no blocks. A
    /// [`ShardedCollection`](super::ShardedCollection) takes this rank's blocks in this
    /// order. (Placements that do not fit the model give what fits;
    /// `ShardedCollection::new` says what does not.)
    pub fn shards(placements: &[Placement], model: &Collection, rank: usize) -> Vec<Shard> {
        blocks(placements, model.table_dims(), rank + 1)
            .into_iter()
            .filter(|b| b.owner == rank)
            .map(|b| b.shard)
            .collect()
    }
}

/// A block, and the rank that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Block {
    pub shard: Shard,
    pub owner: usize,
}

/// Every rank's blocks (of `ranks` ranks at least), table by table.
fn blocks(placements: &[Placement], dims: &[(usize, usize)], ranks: usize) -> Vec<Block> {
    let mut out = Vec::new();
    for (table, (p, &(n, d))) in placements.iter().zip(dims).enumerate() {
        let block = |owner, rows, cols| Block {
            shard: Shard { table, rows, cols },
            owner,
        };
        match p {
            Placement::Table(r) => out.push(block(*r, 0..n, 0..d)),
            Placement::Rows(rows) => out.extend(
                (0..rows.ranks())
                    .filter(|&r| !rows.range(r).is_empty())
                    .map(|r| block(r, rows.range(r), 0..d)),
            ),
            Placement::Columns(cols) => out.extend(cols.iter().map(|(r, c)| block(*r, 0..n, c.clone()))),
            Placement::Replicated => out.extend((0..ranks).map(|r| block(r, 0..n, 0..d))),
        }
    }
    out
}

/// How a table's features are pooled on its blocks' owners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Table-wise or column-wise: one owner pools each bag whole (of its columns).
    Whole,
    /// Row-wise: each owner pools its positions of a bag; the caller combines (decision 39).
    Rows,
    /// Every rank pools its own batch on its copy.
    Replicated,
}

/// A feature's ids that travel to a block's owner.
#[derive(Debug, Clone, Copy)]
pub(super) struct Link {
    pub feature: usize,
    pub block: usize,
}

/// What every rank derives alike from a collection and its placements: every block, each
/// table's kind, and the links (feature order, then block order; replicated tables have
/// none: each rank pools its own batch on its copy).
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub blocks: Vec<Block>,
    pub kinds: Vec<Kind>,
    pub links: Vec<Link>,
    /// This rank's blocks (indices into `blocks`), in [`Placement::shards`] order.
    pub local: Vec<usize>,
    /// The collection and placements, encoded: every rank's must be rank 0's.
    pub signature: Vec<u64>,
}

impl Layout {
    /// The layout of `placements` for `model` on `ranks` ranks, as rank `me`; or the
    /// error naming the first placement that does not fit.
    pub fn new(
        op: &'static str,
        model: &Collection,
        placements: &[Placement],
        ranks: usize,
        me: usize,
    ) -> Result<Layout, GatherError> {
        let dims = model.table_dims();
        let refuse = |detail: String| Err(GatherError::Collection { op, detail });
        if placements.len() != dims.len() {
            return refuse(format!(
                "{} placements given, but the collection has {} tables",
                placements.len(),
                dims.len()
            ));
        }
        for (t, (p, &(n, d))) in placements.iter().zip(dims).enumerate() {
            if let Err(detail) = check(p, n, d, ranks) {
                return refuse(format!("table {t}'s placement {p:?}: {detail}"));
            }
        }
        for f in 0..model.features() {
            let (t, pool, _) = model.feature_parts(f);
            if t >= dims.len() {
                return refuse(format!(
                    "feature {f} reads table {t}, but there are {} tables",
                    dims.len()
                ));
            }
            if pool.weights.is_some() {
                return refuse(format!(
                    "feature {f}'s pool has weights: they come from the batch"
                ));
            }
        }
        let blocks = blocks(placements, dims, ranks);
        let kinds = placements
            .iter()
            .map(|p| match p {
                Placement::Table(_) | Placement::Columns(_) => Kind::Whole,
                Placement::Rows(_) => Kind::Rows,
                Placement::Replicated => Kind::Replicated,
            })
            .collect::<Vec<_>>();
        let mut links = Vec::new();
        for f in 0..model.features() {
            let t = model.feature_parts(f).0;
            if kinds[t] != Kind::Replicated {
                links.extend(
                    (0..blocks.len())
                        .filter(|&b| blocks[b].shard.table == t)
                        .map(|block| Link { feature: f, block }),
                );
            }
        }
        let local = (0..blocks.len()).filter(|&b| blocks[b].owner == me).collect();
        Ok(Layout {
            blocks,
            kinds,
            links,
            local,
            signature: signature(model, placements),
        })
    }

    /// The links whose blocks rank `o` holds, in link order.
    pub fn links_at(&self, o: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.links.len()).filter(move |&l| self.blocks[self.links[l].block].owner == o)
    }

    /// Link `l`'s block.
    pub fn block(&self, l: usize) -> &Block {
        &self.blocks[self.links[l].block]
    }
}

/// Whether placement `p` fits a table of `n` rows of `d` columns on `ranks` ranks.
fn check(p: &Placement, n: usize, d: usize, ranks: usize) -> Result<(), String> {
    let rank = |r: usize| match r < ranks {
        true => Ok(()),
        false => Err(format!("rank {r} is not one of the {ranks} ranks")),
    };
    match p {
        Placement::Table(r) => rank(*r),
        Placement::Replicated => Ok(()),
        Placement::Rows(rows) if rows.ranks() != ranks => Err(format!(
            "its rows are for {} ranks, but the communicator has {ranks}",
            rows.ranks()
        )),
        Placement::Rows(rows) if rows.len() != n => {
            Err(format!("its rows are {}, but the table has {n}", rows.len()))
        }
        Placement::Rows(_) => Ok(()),
        Placement::Columns(cols) => {
            let mut at = 0;
            for (r, c) in cols {
                rank(*r)?;
                if c.start != at || c.end <= c.start {
                    return Err(format!(
                        "the column range {c:?} does not follow column {at} (ranges cover 0..{d} once, in order, none empty)"
                    ));
                }
                at = c.end;
            }
            match at == d {
                true => Ok(()),
                false => Err(format!(
                    "the column ranges end at {at}, but the table has {d} columns"
                )),
            }
        }
    }
}

/// The collection and placements as words, for the ranks' agreement.
fn signature(model: &Collection, placements: &[Placement]) -> Vec<u64> {
    let mut s = vec![model.table_dims().len() as u64];
    for &(n, d) in model.table_dims() {
        s.extend([n as u64, d as u64]);
    }
    s.push(model.features() as u64);
    for f in 0..model.features() {
        let (t, pool, weighted) = model.feature_parts(f);
        let p = Pooling::ALL.iter().position(|&q| q == pool.pooling).unwrap_or(0);
        s.extend([t as u64, p as u64, u64::from(weighted)]);
        s.extend([
            pool.skip.map_or(u64::MAX, |v| v as u64),
            pool.fill.map_or(u64::MAX, |v| u64::from(v.to_bits())),
        ]);
    }
    for p in placements {
        match p {
            Placement::Table(r) => s.extend([0, *r as u64]),
            Placement::Rows(rows) => {
                s.extend([1, rows.bounds().len() as u64]);
                s.extend(rows.bounds().iter().map(|&b| b as u64));
            }
            Placement::Columns(cols) => {
                s.extend([2, cols.len() as u64]);
                for (r, c) in cols {
                    s.extend([*r as u64, c.start as u64, c.end as u64]);
                }
            }
            Placement::Replicated => s.push(3),
        }
    }
    s
}
