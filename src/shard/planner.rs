//! [`Planner`]: placements for a collection's tables from a cost model (decision 64;
//! TorchRec's `EmbeddingShardingPlanner`, on CPU), deterministic and without
//! communication, and [`Estimate`]s of any placements.

use super::{Placement, Rows};
use crate::bags::Collection;
use crate::error::GatherError;

/// Chooses a [`Placement`] per table (decision 64). The same inputs give the same
/// placements on every rank; nothing is communicated.
///
/// **The cost model.** Per table `t` of `n` rows of `D` `f32` values (`4·D` bytes a row),
/// read by features of `ids_per_bag` ids per sample summing to `h` (its hotness), with
/// `batch` samples per rank and `R` ranks, per step:
/// - *bytes read*: the rows the ids read, `h · batch · 4·D` per rank's batch, on the rank
///   that pools them (a row-wise owner its share `rows / n` of every rank's ids, a
///   column-wise owner its share of the columns);
/// - *bytes sent* (forward): the ids to their owners (8 bytes each) and the pooled rows
///   back (`batch · 4·D` per feature and rank; a row-wise owner a partial for a bag only
///   where the bag has an id in its rows, `min(1, h · rows / n)` of them);
/// - *memory*: `n · (4·D + optimizer bytes per row)` on each rank that holds it (its share
///   for row-wise and column-wise).
///
/// A rank's estimated time is its bytes read plus its bytes sent. Tables are placed
/// largest read first: a table that fits no rank's memory goes row-wise (column-wise when
/// it is wider than it is hot, `D > 2 · h`: its ids travel to every block but its pooled
/// rows once); a small hot table (no more rows than one rank's batch reads from it, `n
/// <= h · batch`) is replicated when every rank has the memory; the rest go table-wise
/// onto the rank of least estimated time that has the memory (the lowest such rank on a
/// tie), or row-wise where none has.
///
/// ```
/// use ndarray_gather::bags::Collection;
/// use ndarray_gather::prelude::*;
/// use ndarray_gather::shard::{Placement, Planner, Rows};
///
/// let model = Collection::new().table(10_000_000, 128).table(50_000, 64).table(2_000, 16)
///     .feature(0, Pooling::Sum).feature(1, Pooling::Mean).feature(2, Pooling::Sum).feature(1, Pooling::Sum);
/// let planner = Planner::new(2).memory_per_rank(4 << 30).batch(4096).ids_per_bag(&[20.0, 1.0, 5.0, 3.0]);
/// let placements = planner.plan(&model)?;
/// // 5 GB fits no rank; 128 columns, 20 ids a bag: split by columns.
/// assert_eq!(placements[0], Placement::Columns(vec![(0, 0..64), (1, 64..128)]));
/// assert_eq!(placements[1], Placement::Table(0));            // the loads tie: the lowest rank
/// assert_eq!(placements[2], Placement::Replicated);          // 2000 rows, 20480 ids a batch
/// let hot = planner.clone().ids_per_bag(&[80.0, 1.0, 5.0, 3.0]).plan(&model)?;
/// assert_eq!(hot[0], Placement::Rows(Rows::even(10_000_000, 2))); // hotter than wide
/// let per_rank = planner.estimate(&model, &placements)?;
/// assert!(per_rank.iter().all(|e| e.memory <= 4 << 30));
/// # Ok::<(), GatherError>(())
/// ```
#[doc(alias = "EmbeddingShardingPlanner")]
#[derive(Debug, Clone)]
pub struct Planner {
    ranks: usize,
    memory: u64,
    batch: u64,
    ids_per_bag: Option<Vec<f64>>,
    optimizer_bytes: u64,
}

/// One rank's estimated cost of placements ([`Planner::estimate`]), per step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Estimate {
    /// Bytes of table rows the rank's pooling reads.
    pub read: u64,
    /// Bytes the rank sends (ids and pooled rows).
    pub sent: u64,
    /// Bytes of tables (and optimizer state) the rank holds.
    pub memory: u64,
}

impl Estimate {
    /// The estimated time, in bytes moved: read plus sent.
    pub fn time(&self) -> u64 {
        self.read.saturating_add(self.sent)
    }
}

impl Planner {
    /// A planner for `ranks` ranks: no memory cap, a batch of 1 sample per rank, one id
    /// per bag, no optimizer state (set each with the methods below).
    pub fn new(ranks: usize) -> Self {
        Planner {
            ranks,
            memory: u64::MAX,
            batch: 1,
            ids_per_bag: None,
            optimizer_bytes: 0,
        }
    }

    /// Each rank's memory for tables and their optimizer state, in bytes.
    pub fn memory_per_rank(mut self, bytes: u64) -> Self {
        self.memory = bytes;
        self
    }

    /// The samples each rank's batch holds.
    pub fn batch(mut self, samples: usize) -> Self {
        self.batch = samples as u64;
        self
    }

    /// Each feature's mean ids per bag (its pooling factor), in feature order.
    pub fn ids_per_bag(mut self, ids: &[f64]) -> Self {
        self.ids_per_bag = Some(ids.to_vec());
        self
    }

    /// Optimizer state bytes per row (`RowwiseAdagrad`: 4; `Adagrad`: `4·D`; `Adam`:
    /// `8·D`), counted in memory.
    pub fn optimizer_bytes_per_row(mut self, bytes: usize) -> Self {
        self.optimizer_bytes = bytes as u64;
        self
    }

    /// The placements of `model`'s tables, one per table (see the cost model above).
    ///
    /// # Errors
    /// [`Collection`](GatherError::Collection) for no ranks, `ids_per_bag` of another
    /// length than the features, or a table that fits no rank even row-wise (naming it,
    /// its bytes and each rank's memory left).
    pub fn plan(&self, model: &Collection) -> Result<Vec<Placement>, GatherError> {
        const OP: &str = "Planner::plan";
        let tables = self.tables(OP, model)?;
        let r = self.ranks;
        let mut order: Vec<usize> = (0..tables.len()).collect();
        order.sort_by_key(|&t| std::cmp::Reverse(tables[t].read()));
        let mut placements = vec![Placement::Replicated; tables.len()];
        let mut load = vec![Estimate::default(); r];
        for t in order {
            let c = &tables[t];
            let room = |load: &[Estimate], bytes: u64, rank: usize| {
                load[rank].memory.saturating_add(bytes) <= self.memory
            };
            let whole = c.memory();
            let placement = if c.rows <= (c.hot * self.batch as f64) as usize
                && (0..r).all(|q| room(&load, whole, q))
            {
                Placement::Replicated
            } else {
                let best = (0..r)
                    .filter(|&q| room(&load, whole, q))
                    .min_by_key(|&q| (load[q].time(), q));
                match best {
                    Some(q) => Placement::Table(q),
                    None => {
                        let p = self.split(c);
                        let shares = self.costs(c, &p);
                        if let Some(q) = (0..r).find(|&q| !room(&load, shares[q].memory, q)) {
                            return Err(GatherError::Collection {
                                op: OP,
                                detail: format!(
                                    "table {t} ({whole} bytes with its optimizer state) fits no rank even sharded: rank {q} would need {} bytes, but has {} left of {}",
                                    shares[q].memory,
                                    self.memory.saturating_sub(load[q].memory),
                                    self.memory
                                ),
                            });
                        }
                        p
                    }
                }
            };
            for (l, e) in load.iter_mut().zip(self.costs(c, &placement)) {
                l.read += e.read;
                l.sent += e.sent;
                l.memory += e.memory;
            }
            placements[t] = placement;
        }
        Ok(placements)
    }

    /// Each rank's estimated bytes read, sent and held per step under `placements` (any:
    /// the planner's or a hand-made one), by the cost model above.
    ///
    /// # Errors
    /// As [`plan`](Self::plan)'s for the inputs, and
    /// [`Collection`](GatherError::Collection) for placements of another count than the
    /// tables.
    pub fn estimate(
        &self,
        model: &Collection,
        placements: &[Placement],
    ) -> Result<Vec<Estimate>, GatherError> {
        const OP: &str = "Planner::estimate";
        let tables = self.tables(OP, model)?;
        if placements.len() != tables.len() {
            return Err(GatherError::Collection {
                op: OP,
                detail: format!("{} placements for {} tables", placements.len(), tables.len()),
            });
        }
        let mut load = vec![Estimate::default(); self.ranks];
        for (c, p) in tables.iter().zip(placements) {
            for (l, e) in load.iter_mut().zip(self.costs(c, p)) {
                l.read += e.read;
                l.sent += e.sent;
                l.memory += e.memory;
            }
        }
        Ok(load)
    }

    /// Each table's cost inputs.
    fn tables(&self, op: &'static str, model: &Collection) -> Result<Vec<Cost>, GatherError> {
        let refuse = |detail: String| Err(GatherError::Collection { op, detail });
        if self.ranks == 0 {
            return refuse("a planner of no ranks".into());
        }
        let ids = match &self.ids_per_bag {
            Some(ids) if ids.len() != model.features() => {
                return refuse(format!(
                    "{} ids per bag given, but the collection has {} features",
                    ids.len(),
                    model.features()
                ));
            }
            Some(ids) => ids.clone(),
            None => vec![1.0; model.features()],
        };
        let mut tables: Vec<Cost> = model
            .table_dims()
            .iter()
            .map(|&(rows, width)| Cost {
                rows,
                width,
                hot: 0.0,
                features: 0,
                batch: self.batch,
                ranks: self.ranks as u64,
                optimizer: self.optimizer_bytes,
            })
            .collect();
        for (f, &h) in ids.iter().enumerate() {
            if let Some(c) = tables.get_mut(model.feature_parts(f).0) {
                c.hot += h.max(0.0);
                c.features += 1;
            }
        }
        Ok(tables)
    }

    /// The sharded placement of a table that fits no rank whole.
    fn split(&self, c: &Cost) -> Placement {
        let r = self.ranks;
        if c.width as f64 > 2.0 * c.hot && c.width >= r {
            let cols = (0..r)
                .map(|q| (q, q * c.width / r..(q + 1) * c.width / r))
                .collect();
            return Placement::Columns(cols);
        }
        Placement::Rows(Rows::even(c.rows, r))
    }

    /// Each rank's cost of table `c` under placement `p`.
    fn costs(&self, c: &Cost, p: &Placement) -> Vec<Estimate> {
        let r = self.ranks;
        let mut e = vec![Estimate::default(); r];
        let (b, row) = (c.batch as f64, 4.0 * c.width as f64);
        let ids = c.hot * b;
        let pooled = c.features as f64 * b * row;
        let ranks = r as f64;
        match p {
            Placement::Replicated => {
                for x in &mut e {
                    x.read = (ids * row) as u64;
                    x.memory = c.memory();
                }
            }
            Placement::Table(q) => {
                for (k, x) in e.iter_mut().enumerate() {
                    if k == *q {
                        x.read = (ids * row * ranks) as u64;
                        x.sent = (pooled * (ranks - 1.0)) as u64;
                        x.memory = c.memory();
                    } else {
                        x.sent = (ids * 8.0) as u64;
                    }
                }
            }
            Placement::Columns(cols) => {
                for (q, range) in cols {
                    let share = range.len() as f64 / c.width.max(1) as f64;
                    if let Some(x) = e.get_mut(*q) {
                        x.read += (ids * row * ranks * share) as u64;
                        x.sent += (pooled * share * (ranks - 1.0)) as u64;
                        x.memory += (c.memory() as f64 * share) as u64;
                    }
                    for (k, x) in e.iter_mut().enumerate() {
                        if k != *q {
                            x.sent += (ids * 8.0) as u64;
                        }
                    }
                }
            }
            Placement::Rows(rows) => {
                for (q, x) in e.iter_mut().enumerate() {
                    let share = rows.range(q).len() as f64 / c.rows.max(1) as f64;
                    let hit = (c.hot * rows.range(q).len() as f64 / c.rows.max(1) as f64).min(1.0);
                    x.read = (ids * row * ranks * share) as u64;
                    x.sent = (ids * 8.0 * (1.0 - share) + pooled * hit * (ranks - 1.0)) as u64;
                    x.memory = (c.memory() as f64 * share) as u64;
                }
            }
        }
        e
    }
}

/// A table's cost inputs: its shape, hotness (ids per sample over its features) and
/// features, and the planner's batch, ranks and optimizer bytes.
struct Cost {
    rows: usize,
    width: usize,
    hot: f64,
    features: usize,
    batch: u64,
    ranks: u64,
    optimizer: u64,
}

impl Cost {
    /// The bytes its rows read in a step (every rank's batch).
    fn read(&self) -> u64 {
        (self.hot * self.batch as f64 * self.ranks as f64 * 4.0 * self.width as f64) as u64
    }

    /// Its bytes with its optimizer state.
    fn memory(&self) -> u64 {
        (self.rows as u64).saturating_mul(4 * self.width as u64 + self.optimizer)
    }
}
