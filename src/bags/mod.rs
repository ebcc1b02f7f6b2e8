//! Many features in one call (decisions 49-51): a [`Collection`] of tables and the
//! features that read them, as TorchRec's `EmbeddingBagCollection`, and a [`Jagged`]
//! batch of ids, as its `KeyedJaggedTensor`. Feature `f`'s pooled rows fill columns
//! `Σ_{g<f} D_g ..` of a `[B, Σ D_f]` output (TorchRec's `KeyedTensor`), each bit for bit
//! the single [`gather_reduce`](crate::GatherReduceExt::gather_reduce) of its ids, its
//! `Segments::lengths` and its pooling. Tables may be `f32` views and
//! [`QTable`](crate::quant::QTable)s, mixed ([`Table`]).
//!
//! ```
//! use ndarray::{Array2, array};
//! use ndarray_gather::bags::{Collection, Jagged};
//! use ndarray_gather::prelude::*;
//!
//! let (t0, t1) = (Array2::from_elem((10, 2), 1.0f32), Array2::from_elem((5, 3), 2.0f32));
//! let model = Collection::new().table(10, 2).table(5, 3).feature(0, Pooling::Sum).feature(1, Pooling::Mean);
//! // Two samples; feature 0's bags hold 2 and 1 ids, feature 1's 0 and 3 (feature-major).
//! let batch = Jagged::lengths(&[3_i64, 9, 0, 4, 4, 1], &[2_i64, 1, 0, 3], 2)?;
//! let out = model.gather_reduce(&[t0.view(), t1.view()], &batch)?;
//! assert_eq!(out, array![[2.0, 2.0, 0.0, 0.0, 0.0], [1.0, 1.0, 2.0, 2.0, 2.0]]);
//! # Ok::<(), GatherError>(())
//! ```

use ndarray::{Array2, ArrayRef, Ix2, s};

mod jagged;
mod plan;
mod table;

use std::ops::Range;

use crate::call::reduce::{Rows, check_pool, resolve_rows, with_rows};
use crate::call::zeros;
use crate::error::{GatherError, internal};
use crate::index::GatherIndex;
use crate::kernel::BadIndex;
use crate::kernel::reduce::{Geometry, Pooler, Positions};
use crate::kernel::schedule::run_jobs;
use crate::plan::reduce::jobs as reduce_jobs;
use crate::plan::worth_parallel;
use crate::pool::{IntoPool, Pool};
use crate::segments::Bounds;
use crate::table::PoolTable;

pub use self::jagged::Jagged;
pub use self::plan::CollectionPlan;
pub use self::table::{AsTable, Table, TableMut};

/// A feature: the table it reads, its pooling, and whether the batch's weights weigh it.
#[derive(Debug, Clone)]
struct Feature {
    table: usize,
    pool: Pool<'static, f32>,
    weighted: bool,
}

/// Tables as `(rows, width)` and the features that read them, each with its pooling
/// (TorchRec's `EmbeddingBagCollection`: decision 49). `Clone + Send + Sync`; built once,
/// called per batch.
///
/// ```
/// use ndarray_gather::bags::Collection;
/// use ndarray_gather::prelude::*;
///
/// let model = Collection::new()
///     .table(1_000, 8).table(50, 4)
///     .feature(0, Pooling::Sum).feature(1, Pooling::Mean).feature(1, Pooling::Sum.skip(-1))
///     .weighted_feature(0, Pooling::Sum);
/// assert_eq!((model.features(), model.width()), (4, 8 + 4 + 4 + 8));
/// ```
#[doc(alias = "EmbeddingBagCollection")]
#[derive(Debug, Clone, Default)]
pub struct Collection {
    tables: Vec<(usize, usize)>,
    features: Vec<Feature>,
}

impl Collection {
    /// No tables, no features.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds table `t` (the next number, from 0) of `rows` rows of `width` values.
    pub fn table(mut self, rows: usize, width: usize) -> Self {
        self.tables.push((rows, width));
        self
    }

    /// Adds a feature reading table `table` pooled with `pool` (`Pooling::Sum`,
    /// `Pooling::Mean.skip(-1)`, `.fill(x)`; weights come from the batch: see
    /// [`weighted_feature`](Self::weighted_feature)).
    pub fn feature(self, table: usize, pool: impl IntoPool<'static, f32>) -> Self {
        self.add(table, pool.into_pool(), false)
    }

    /// Adds a feature whose ids are weighted by the batch's per-id weights
    /// ([`Jagged::weighted`]), as TorchRec's weighted features.
    pub fn weighted_feature(self, table: usize, pool: impl IntoPool<'static, f32>) -> Self {
        self.add(table, pool.into_pool(), true)
    }

    fn add(mut self, table: usize, pool: Pool<'static, f32>, weighted: bool) -> Self {
        self.features.push(Feature {
            table,
            pool,
            weighted,
        });
        self
    }

    /// The number of features.
    pub fn features(&self) -> usize {
        self.features.len()
    }

    #[cfg(feature = "mpi")]
    /// The tables' `(rows, width)`, in table order.
    pub(crate) fn table_dims(&self) -> &[(usize, usize)] {
        &self.tables
    }

    #[cfg(feature = "mpi")]
    /// Feature `f`'s table, its pool (pooling, skip and fill; no weights) and whether the
    /// batch's weights weigh it.
    pub(crate) fn feature_parts(&self, f: usize) -> (usize, Pool<'static, f32>, bool) {
        let g = &self.features[f];
        (g.table, g.pool.clone(), g.weighted)
    }

    /// The output's columns: `Σ D_f`, each feature's table's width.
    pub fn width(&self) -> usize {
        self.features
            .iter()
            .map(|f| self.tables.get(f.table).map_or(0, |t| t.1))
            .sum()
    }

    /// Every feature's pooled rows side by side: `[B, Σ D_f]`, feature `f` in columns
    /// `Σ_{g<f} D_g ..` (TorchRec's `KeyedTensor` order), each bit for bit the single
    /// `gather_reduce` of its ids, `Segments::lengths` and pooling (a weighted feature with
    /// the batch's weights of its ids).
    ///
    /// # Errors
    /// Before anything is written: [`Collection`](GatherError::Collection) for a table
    /// list of the wrong length or shapes, a feature of a table that is not there, a batch
    /// of another number of features, a weighted feature in a batch without weights;
    /// [`Feature`](GatherError::Feature) naming the feature, its table and the single
    /// call's error (an index out of range, a pooling's).
    pub fn gather_reduce<T, I, J>(
        &self,
        tables: &[T],
        batch: &Jagged<'_, I, J>,
    ) -> Result<Array2<f32>, GatherError>
    where
        T: AsTable,
        I: GatherIndex,
        J: GatherIndex,
    {
        const OP: &str = "Collection::gather_reduce";
        self.call(OP, tables, batch, None)
            .and_then(|out| out.ok_or_else(|| internal(OP, "a fresh output")))
    }

    /// [`gather_reduce`](Self::gather_reduce) into `out` (`[B, Σ D_f]`, any layout). On
    /// `Err`, `out` is unchanged.
    ///
    /// # Errors
    /// As `gather_reduce`, and [`OutputShape`](GatherError::OutputShape).
    pub fn gather_reduce_into<T, I, J>(
        &self,
        tables: &[T],
        batch: &Jagged<'_, I, J>,
        out: &mut ArrayRef<f32, Ix2>,
    ) -> Result<(), GatherError>
    where
        T: AsTable,
        I: GatherIndex,
        J: GatherIndex,
    {
        const OP: &str = "Collection::gather_reduce_into";
        self.call(OP, tables, batch, Some(out)).map(|_| ())
    }

    /// The call into `out`, or into a fresh output (returned): checked first, `out`'s shape
    /// too.
    fn call<T: AsTable, I: GatherIndex, J: GatherIndex>(
        &self,
        op: &'static str,
        tables: &[T],
        batch: &Jagged<'_, I, J>,
        out: Option<&mut ArrayRef<f32, Ix2>>,
    ) -> Result<Option<Array2<f32>>, GatherError> {
        let tables: Vec<Table<'_>> = tables.iter().map(AsTable::as_table).collect();
        let rows = self.check(op, &tables, batch)?;
        let expected = [batch.batch, self.width()];
        let Some(out) = out else {
            let mut out = zeros::<f32, _>(op, Ix2(expected[0], expected[1]))?;
            self.run(op, &tables, batch, &rows, &mut out)?;
            return Ok(Some(out));
        };
        if out.shape() != expected {
            return Err(GatherError::OutputShape {
                op,
                expected: expected.to_vec(),
                found: out.shape().to_vec(),
            });
        }
        self.run(op, &tables, batch, &rows, out)?;
        Ok(None)
    }

    /// Every check of a call (decision 50), before anything is written: the tables, then
    /// the batch (each feature's ids resolved).
    fn check<I: GatherIndex, J: GatherIndex>(
        &self,
        op: &'static str,
        tables: &[Table<'_>],
        batch: &Jagged<'_, I, J>,
    ) -> Result<Vec<Rows>, GatherError> {
        let dims: Vec<(usize, usize)> = tables.iter().map(Table::dim).collect();
        self.check_tables(op, &dims)?;
        self.check_batch(op, batch)
    }

    /// Tables (or their gradients) of shapes `dims`, checked against the collection's.
    fn check_tables(&self, op: &'static str, dims: &[(usize, usize)]) -> Result<(), GatherError> {
        let refuse = |detail: String| Err(GatherError::Collection { op, detail });
        if dims.len() != self.tables.len() {
            return refuse(format!(
                "{} tables given, but the collection has {}",
                dims.len(),
                self.tables.len()
            ));
        }
        for (t, (given, want)) in dims.iter().zip(&self.tables).enumerate() {
            if given != want {
                return refuse(format!(
                    "table {t} has shape {given:?}, but the collection declared {want:?}"
                ));
            }
        }
        Ok(())
    }

    /// The batch against the collection: its weights, its features, each feature's table,
    /// pool and indices (resolved into rows).
    pub(crate) fn check_batch<I: GatherIndex, J: GatherIndex>(
        &self,
        op: &'static str,
        batch: &Jagged<'_, I, J>,
    ) -> Result<Vec<Rows>, GatherError> {
        let refuse = |detail: String| Err(GatherError::Collection { op, detail });
        if let Some(w) = batch.weights.filter(|w| w.len() != batch.values.len()) {
            return Err(GatherError::Weights {
                op,
                len: w.len(),
                positions: batch.values.len(),
            });
        }
        // (A batch of no samples has no bags: it fits every collection.)
        if batch.batch > 0 && batch.features() != self.features.len() {
            return refuse(format!(
                "the batch has {} features ({} lengths of batch size {}), but the collection has {}",
                batch.features(),
                batch.offsets.len() - 1,
                batch.batch,
                self.features.len()
            ));
        }
        let mut resolved = Vec::with_capacity(self.features.len());
        for (f, feature) in self.features.iter().enumerate() {
            let t = feature.table;
            if t >= self.tables.len() {
                return refuse(format!(
                    "feature {f} reads table {t}, but there are {} tables",
                    self.tables.len()
                ));
            }
            if feature.pool.weights.is_some() {
                return refuse(format!(
                    "feature {f}'s pool has weights: a collection's weights come from the batch (weighted_feature, Jagged::weighted)"
                ));
            }
            if feature.weighted && batch.weights.is_none() {
                return refuse(format!(
                    "feature {f} is weighted, but the batch has no weights (Jagged::weighted)"
                ));
            }
            let named = |source: GatherError| GatherError::Feature {
                op,
                feature: f,
                table: t,
                source: Box::new(source),
            };
            let (ids, pool) = batch.feature(f, feature);
            let positions = ids.len();
            check_pool(FEATURE_OP, &pool, positions, false, None).map_err(named)?;
            resolved.push(resolve_rows(FEATURE_OP, &ids, 0, self.tables[t].0, pool.skip).map_err(named)?);
        }
        Ok(resolved)
    }

    /// Every feature into its columns of `out`, its ids resolved into `rows` (checked): one
    /// schedule over all features, each feature's segments in chunks of about a job's
    /// bytes, claimed by the calling thread and the pool's (decision 51: each segment is
    /// built by one thread in position order, as its single call builds it).
    fn run<I: GatherIndex, J: GatherIndex>(
        &self,
        op: &'static str,
        tables: &[Table<'_>],
        batch: &Jagged<'_, I, J>,
        rows: &[Rows],
        out: &mut ArrayRef<f32, Ix2>,
    ) -> Result<(), GatherError> {
        if out.is_empty() {
            return Ok(());
        }
        if out.ncols() > 1 && out.strides()[1] != 1 {
            // (The walks write rows that are single runs.)
            let mut fresh = zeros::<f32, _>(op, out.raw_dim())?;
            self.run(op, tables, batch, rows, &mut fresh)?;
            out.assign(&fresh);
            return Ok(());
        }
        let b = batch.batch;
        let mut parts = Vec::with_capacity(self.features.len());
        let mut at = 0;
        for (f, feature) in self.features.iter().enumerate() {
            let d = self.tables[feature.table].1;
            let (ids, pool) = batch.feature(f, feature);
            let base = batch.offsets[f * b];
            let bounds = batch.offsets[f * b..=(f + 1) * b]
                .iter()
                .map(|&o| o - base)
                .collect();
            let mut cols = out.slice_mut(s![.., at..at + d]);
            // Each feature's geometry: its table's rows into its own columns (distinct
            // features' columns share no element).
            let g = match &tables[feature.table] {
                Table::F32(x) => x.geometry(0, &mut cols, std::ptr::null_mut(), b),
                Table::Quantized(q) => PoolTable::geometry(q, 0, &mut cols, std::ptr::null_mut(), b),
            };
            parts.push(Part {
                g,
                bounds: Bounds::Owned(bounds),
                pooler: Pooler::of(pool, ids.len()),
                positions: ids.len(),
                bytes: ids.len().saturating_mul(d * size_of::<f32>()),
            });
            at += d;
        }
        let mut jobs: Vec<(usize, Range<usize>)> = Vec::new();
        for (f, part) in parts.iter().enumerate() {
            let per = b.div_ceil(reduce_jobs(part.bytes, b)).max(1);
            jobs.extend((0..b).step_by(per).map(|c| (f, c..(c + per).min(b))));
        }
        let walk = |i: usize| {
            let (f, segs) = jobs[i].clone();
            let (part, rows) = (&parts[f], &rows[f]);
            // SAFETY: the jobs' segments are disjoint: each feature's chunks split its
            // segments, and each feature writes its own columns.
            unsafe {
                match &tables[self.features[f].table] {
                    Table::F32(x) => part.walk(x, rows, segs),
                    Table::Quantized(q) => part.walk(q, rows, segs),
                }
            }
        };
        let total = parts.iter().fold(0usize, |t, p| t.saturating_add(p.bytes));
        let done = if jobs.len() <= 1 || !worth_parallel(total) {
            (0..jobs.len()).try_for_each(walk)
        } else {
            run_jobs(jobs.len(), false, walk).finish()
        };
        done.map_err(|BadIndex| internal(op, "a walk failed after the checks passed"))
    }
}

/// One feature of a call, ready to walk: its geometry (its table's rows into its columns),
/// its bags' bounds, pooler and bytes.
struct Part<'w> {
    g: Geometry<f32>,
    bounds: Bounds<'static, usize>,
    pooler: Pooler<'w, f32>,
    positions: usize,
    bytes: usize,
}

impl Part<'_> {
    /// Builds segments `segs` of this feature from table `x`, rows `rows`.
    ///
    /// # Safety
    /// No other thread builds any of `segs` of this feature meanwhile.
    unsafe fn walk<X: PoolTable<f32, Ix2>>(
        &self,
        x: &X,
        rows: &Rows,
        segs: Range<usize>,
    ) -> Result<(), BadIndex> {
        with_rows!(rows, r => {
            let e = Positions { rows: r, bounds: &self.bounds, len: self.positions };
            // SAFETY: the caller's.
            unsafe { x.walk(&self.g, &e, &self.pooler, segs) }
        })
    }
}

/// The single call a feature's error names.
const FEATURE_OP: &str = "gather_reduce";
