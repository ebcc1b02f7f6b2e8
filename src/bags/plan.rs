//! A collection's plan (decisions 49-51): every feature's ids checked and sorted once, then
//! applied to any tables of the collection's shapes, and its backward per table.

use ndarray::{Array1, Array2, ArrayRef, ArrayViewMut2, Ix2, s};

use super::{AsTable, Collection, Jagged, Table, TableMut};
use crate::call::reduce::Rows;
use crate::call::zeros;
use crate::error::{GatherError, internal};
use crate::index::GatherIndex;
use crate::optim::{Optimizer, Step, check_state};
use crate::pool::{Pool, Pooling};
use crate::prepared::GatherReducePlan;
use crate::segments::Segments;

/// A [`Collection`]'s batch, checked and sorted once ([`Collection::plan`]): `apply` to
/// any tables of the collection's shapes (their values may change between calls), and the
/// backward per table. No lifetime: the batch's ids and weights are its own.
///
/// ```
/// use ndarray::{Array2, array};
/// use ndarray_gather::bags::{Collection, Jagged};
/// use ndarray_gather::prelude::*;
///
/// let t = Array2::from_shape_fn((4, 2), |(r, c)| (r * 2 + c) as f32);
/// let model = Collection::new().table(4, 2).feature(0, Pooling::Sum).feature(0, Pooling::Mean);
/// let plan = model.plan(&Jagged::lengths(&[3_i64, 1, 1], &[2_i64, 1], 1)?)?;
/// assert_eq!(plan.apply(&[t.view()])?, array![[8.0, 10.0, 2.0, 3.0]]);
/// // Row 1 gets feature 0's then feature 1's contributions.
/// let mut g = Array2::zeros((4, 2));
/// plan.backward_into(&array![[1.0, 1.0, 2.0, 2.0]], &mut [g.view_mut()])?;
/// assert_eq!(g, array![[0.0, 0.0], [3.0, 3.0], [0.0, 0.0], [1.0, 1.0]]);
/// let per_table = plan.backward_rows(&array![[1.0, 1.0, 2.0, 2.0]])?;
/// assert_eq!(per_table[0].0, array![1, 3]);
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone)]
pub struct CollectionPlan {
    collection: Collection,
    batch: usize,
    features: Vec<Planned>,
    /// Per table that several features read, its touched rows and each reading feature's
    /// positions renumbered into them (planned once, for every backward and step).
    shared: Vec<Option<Shared>>,
}

/// One feature's plan, its pool's parts and weights.
#[derive(Debug, Clone)]
struct Planned {
    plan: GatherReducePlan,
    pooling: Pooling,
    skip: Option<i128>,
    fill: Option<f32>,
    weights: Option<Vec<f32>>,
}

/// A table several features read: its touched rows (ascending) and, per reading feature in
/// feature order, that feature's plan into those rows (decision 51's summing order).
#[derive(Debug, Clone)]
struct Shared {
    touched: Vec<usize>,
    plans: Vec<(usize, GatherReducePlan)>,
}

impl Planned {
    fn pool(&self) -> Pool<'_, f32> {
        Pool {
            pooling: self.pooling,
            weights: (self.weights.as_deref())
                .map(|w| ndarray::ArrayView1::from(w).insert_axis(ndarray::Axis(1))),
            skip: self.skip,
            fill: self.fill,
        }
    }
}

impl Collection {
    /// The plan of `batch` (decision 51): checked as [`gather_reduce`](Self::gather_reduce)
    /// checks it, each feature's ids sorted by bag once.
    ///
    /// # Errors
    /// As `gather_reduce`'s, but the tables'.
    pub fn plan<I: GatherIndex, J: GatherIndex>(
        &self,
        batch: &Jagged<'_, I, J>,
    ) -> Result<CollectionPlan, GatherError> {
        const OP: &str = "Collection::plan";
        let rows = self.check_batch(OP, batch)?;
        let b = batch.batch;
        let mut features = Vec::with_capacity(self.features.len());
        // Each feature's rows (`usize::MAX` where skipped) and bags' bounds, for the shared
        // tables' plans.
        let mut positions: Vec<(Vec<usize>, Vec<usize>)> = Vec::with_capacity(self.features.len());
        for (f, (feature, rows)) in self.features.iter().zip(rows).enumerate() {
            let t = feature.table;
            let (ids, pool) = batch.feature(f, feature);
            let base = batch.offsets[f * b];
            let bounds: Vec<usize> = batch.offsets[f * b..=(f + 1) * b]
                .iter()
                .map(|&o| o - base)
                .collect();
            let plan = GatherReducePlan::build(
                FEATURE_OP,
                self.tables[t],
                &ids,
                pool.skip,
                Segments::indptr(&bounds),
                0,
            )
            .map_err(|source| GatherError::Feature {
                op: OP,
                feature: f,
                table: t,
                source: Box::new(source),
            })?;
            let rows = match rows {
                Rows::Narrow(v) => v
                    .iter()
                    .map(|&r| if r == u32::MAX { usize::MAX } else { r as usize })
                    .collect(),
                Rows::Wide(v) => v,
            };
            features.push(Planned {
                plan,
                pooling: pool.pooling,
                skip: pool.skip,
                fill: pool.fill,
                weights: pool.weights.map(|w| w.iter().copied().collect()),
            });
            positions.push((rows, bounds));
        }
        let shared = (0..self.tables.len())
            .map(|t| self.shared(OP, t, &positions))
            .collect::<Result<_, _>>()?;
        Ok(CollectionPlan {
            collection: self.clone(),
            batch: b,
            features,
            shared,
        })
    }

    /// Table `t`'s touched rows and its features' plans into them, if several features
    /// read it (`positions`: each feature's rows and bounds).
    fn shared(
        &self,
        op: &'static str,
        t: usize,
        positions: &[(Vec<usize>, Vec<usize>)],
    ) -> Result<Option<Shared>, GatherError> {
        let reading: Vec<usize> = (0..self.features.len())
            .filter(|&f| self.features[f].table == t)
            .collect();
        if reading.len() < 2 {
            return Ok(None);
        }
        let mut touched: Vec<usize> = reading
            .iter()
            .flat_map(|&f| positions[f].0.iter().copied().filter(|&r| r != usize::MAX))
            .collect();
        touched.sort_unstable();
        touched.dedup();
        let d = self.tables[t].1;
        let plans = reading
            .iter()
            .map(|&f| {
                let (rows, bounds) = &positions[f];
                let slots: Vec<i64> = rows
                    .iter()
                    .map(|&r| match r {
                        usize::MAX => -1,
                        r => touched.partition_point(|&x| x < r) as i64,
                    })
                    .collect();
                let plan = GatherReducePlan::build(
                    op,
                    (touched.len(), d),
                    &slots,
                    Some(-1),
                    Segments::indptr(bounds),
                    0,
                )
                .map_err(|_| internal(op, "a renumbered plan failed"))?;
                Ok((f, plan))
            })
            .collect::<Result<_, GatherError>>()?;
        Ok(Some(Shared { touched, plans }))
    }
}

/// The single call a feature's error names.
const FEATURE_OP: &str = "GatherReducePlan";

impl CollectionPlan {
    /// The batch size.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The collection's call with the plan's batch on `tables`, in a fresh `[B, Σ D_f]`
    /// array: bit for bit [`Collection::gather_reduce`].
    ///
    /// # Errors
    /// [`Collection`](GatherError::Collection) for a table list of the wrong length or shapes.
    pub fn apply<T: AsTable>(&self, tables: &[T]) -> Result<Array2<f32>, GatherError> {
        const OP: &str = "CollectionPlan::apply";
        let tables = self.tables(OP, tables)?;
        let mut out = zeros::<f32, _>(OP, Ix2(self.batch, self.collection.width()))?;
        self.run(OP, &tables, &mut out)?;
        Ok(out)
    }

    /// [`apply`](Self::apply) into `out` (`[B, Σ D_f]`, any layout); on `Err` unchanged.
    ///
    /// # Errors
    /// As `apply`, and [`OutputShape`](GatherError::OutputShape).
    pub fn apply_into<T: AsTable>(
        &self,
        tables: &[T],
        out: &mut ArrayRef<f32, Ix2>,
    ) -> Result<(), GatherError> {
        const OP: &str = "CollectionPlan::apply_into";
        let tables = self.tables(OP, tables)?;
        self.check_out(OP, out.shape())?;
        self.run(OP, &tables, out)
    }

    /// The tables, checked against the collection's shapes.
    fn tables<'t, T: AsTable>(
        &self,
        op: &'static str,
        tables: &'t [T],
    ) -> Result<Vec<Table<'t>>, GatherError> {
        let tables: Vec<Table<'t>> = tables.iter().map(AsTable::as_table).collect();
        let dims: Vec<(usize, usize)> = tables.iter().map(Table::dim).collect();
        self.collection.check_tables(op, &dims)?;
        Ok(tables)
    }

    fn check_out(&self, op: &'static str, found: &[usize]) -> Result<(), GatherError> {
        let expected = [self.batch, self.collection.width()];
        if found != expected {
            return Err(GatherError::OutputShape {
                op,
                expected: expected.to_vec(),
                found: found.to_vec(),
            });
        }
        Ok(())
    }

    fn run(
        &self,
        op: &'static str,
        tables: &[Table<'_>],
        out: &mut ArrayRef<f32, Ix2>,
    ) -> Result<(), GatherError> {
        let mut at = 0;
        for (feature, planned) in self.collection.features.iter().zip(&self.features) {
            let d = self.collection.tables[feature.table].1;
            let mut cols = out.slice_mut(s![.., at..at + d]);
            let done = match &tables[feature.table] {
                Table::F32(x) => planned.plan.apply_into(x, planned.pool(), &mut cols),
                Table::Quantized(q) => planned.plan.apply_into(q, planned.pool(), &mut cols),
            };
            done.map_err(|_| internal(op, "a checked plan failed"))?;
            at += d;
        }
        Ok(())
    }

    /// Adds the gradient of the forward into each table's gradient `grads[t]` (decision
    /// 51): each feature's plan's `backward_into` with its columns of `grad_out`, so that
    /// each row receives its features' contributions in (feature, position) order.
    ///
    /// # Errors
    /// Before anything is written: [`GradShape`](GatherError::GradShape) for a `grad_out`
    /// of another shape than `[B, Σ D_f]`; [`Collection`](GatherError::Collection) for a
    /// gradient list of another length or shapes; [`Feature`](GatherError::Feature) for a
    /// feature pooled with `Max`, `Min` or `Prod` (no backward here).
    pub fn backward_into<G: TableMut>(
        &self,
        grad_out: &ArrayRef<f32, Ix2>,
        grads: &mut [G],
    ) -> Result<(), GatherError> {
        const OP: &str = "CollectionPlan::backward_into";
        let (mut grads, _) = self.backward_tables(OP, grad_out, grads)?;
        let mut at = 0;
        for (feature, planned) in self.collection.features.iter().zip(&self.features) {
            let d = self.collection.tables[feature.table].1;
            let g = grad_out.slice(s![.., at..at + d]);
            planned
                .plan
                .backward_into(&g, planned.pool(), &mut grads[feature.table])
                .map_err(|_| internal(OP, "a checked backward failed"))?;
            at += d;
        }
        Ok(())
    }

    /// The gradient on the touched rows only, per table: `(rows ascending, their gradient
    /// rows)`, each row's sum of its features' contributions in (feature, position) order
    /// from its first (as [`GatherReducePlan::backward_rows`] per plan: decision 51).
    ///
    /// # Errors
    /// As [`backward_into`](Self::backward_into)'s (but the gradients').
    #[allow(clippy::type_complexity)]
    pub fn backward_rows(
        &self,
        grad_out: &ArrayRef<f32, Ix2>,
    ) -> Result<Vec<(Array1<usize>, Array2<f32>)>, GatherError> {
        const OP: &str = "CollectionPlan::backward_rows";
        self.check_backward(OP, grad_out)?;
        (0..self.collection.tables.len())
            .map(|t| self.table_rows(OP, grad_out, t))
            .collect()
    }

    /// A training step per table (decision 52): each table's touched rows' gradients built
    /// as [`backward_rows`](Self::backward_rows) builds them, then each row updated once by
    /// that table's optimizer (`opts[t]` for `tables[t]`; any mix of optimizers), a table
    /// at a time. A table one feature reads steps in its feature's plan's fused pass
    /// ([`GatherReducePlan::step`]); a shared table's rows (planned with the batch) are
    /// summed first. A table no feature reads still begins a step (its step count
    /// advances). The tables are owned arrays or views (`&mut tables`, `&mut [t0.view_mut(),
    /// ..]`), the optimizers any slice of them (decision 67): a `Vec<Box<dyn Optimizer>>`, a
    /// `Vec` of one kind, or `&mut [&mut dyn Optimizer]`.
    ///
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::bags::{Collection, Jagged};
    /// use ndarray_gather::optim::{Adam, Optimizer, Sgd};
    /// use ndarray_gather::prelude::*;
    ///
    /// let mut tables = vec![Array2::from_elem((4, 2), 1.0f32), Array2::from_elem((3, 1), 1.0f32)];
    /// let model = Collection::new().table(4, 2).table(3, 1).feature(0, Pooling::Sum).feature(1, Pooling::Sum);
    /// let plan = model.plan(&Jagged::lengths(&[3_i64, 2], &[1_i64, 1], 1)?)?;
    /// let mut opts: Vec<Box<dyn Optimizer>> = vec![Box::new(Sgd::new(0.5)), Box::new(Adam::new((3, 1), 0.1))];
    /// plan.step(&array![[2.0, 4.0, 1.0]], &mut tables, &mut opts)?;
    /// assert_eq!(tables[0].row(3), array![0.0, -1.0]);
    /// assert!((tables[1][[2, 0]] - 0.9).abs() < 1e-6); // Adam's first step moves by lr
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`backward_into`](Self::backward_into)'s, with the tables in place of the
    /// gradients; [`Collection`](GatherError::Collection) for a list of optimizers of
    /// another length; [`Optimizer`](GatherError::Optimizer), naming the table, for a state
    /// of another shape than its table needs (rows, or the width the optimizer needs for
    /// the table's rows: decision 66), every table's checked first. On `Err`, no row
    /// changed.
    pub fn step<T: TableMut, O: Optimizer>(
        &self,
        grad_out: &ArrayRef<f32, Ix2>,
        tables: &mut [T],
        opts: &mut [O],
    ) -> Result<(), GatherError> {
        const OP: &str = "CollectionPlan::step";
        let (mut tables, dims) = self.backward_tables(OP, grad_out, tables)?;
        if opts.len() != tables.len() {
            return Err(GatherError::Collection {
                op: OP,
                detail: format!("has {} optimizers for {} tables", opts.len(), tables.len()),
            });
        }
        // Every table's optimizer before any row changes (decision 66).
        for (t, (opt, &(rows, d))) in opts.iter().zip(&dims).enumerate() {
            check_state(OP, Some(t), opt, rows, d)?;
        }
        for (t, (table, opt)) in tables.iter_mut().zip(opts.iter_mut()).enumerate() {
            match &self.shared[t] {
                // A table several features read: its rows' sums first, then each row once.
                Some(shared) => {
                    let grads = self.shared_rows(OP, grad_out, shared, t)?;
                    Step::begin(OP, opt, table, 0)?.rows(&shared.touched, grads.view())
                }
                None => match self.reading(t).next() {
                    // One feature: its plan's fused step (the same sums, no gradient rows).
                    Some(f) => {
                        let (at, d) = (self.column(f), self.collection.tables[t].1);
                        let planned = &self.features[f];
                        let g = grad_out.slice(s![.., at..at + d]);
                        planned.plan.step(&g, planned.pool(), table, opt)
                    }
                    // None: the step still begins (a step count advances).
                    None => Step::begin(OP, opt, table, 0)?.rows(&[], Array2::zeros((0, dims[t].1)).view()),
                },
            }
            .map_err(|e| match e {
                GatherError::Optimizer { .. } | GatherError::Internal { .. } => e,
                _ => internal(OP, "a checked step failed"),
            })?;
        }
        Ok(())
    }

    #[cfg(feature = "mpi")]
    /// Feature `f`'s plan and pool (for a sharded collection's argmax of a feature).
    pub(crate) fn feature_plan(&self, f: usize) -> (&GatherReducePlan, Pool<'_, f32>) {
        (&self.features[f].plan, self.features[f].pool())
    }

    /// A backward's checks (`grad_out`, every feature's pooling) and its tables (or
    /// gradients) borrowed as views, checked against the collection's shapes.
    #[allow(clippy::type_complexity)]
    fn backward_tables<'t, T: TableMut>(
        &self,
        op: &'static str,
        grad_out: &ArrayRef<f32, Ix2>,
        tables: &'t mut [T],
    ) -> Result<(Vec<ArrayViewMut2<'t, f32>>, Vec<(usize, usize)>), GatherError> {
        self.check_backward(op, grad_out)?;
        let tables: Vec<ArrayViewMut2<'t, f32>> = tables.iter_mut().map(TableMut::table_mut).collect();
        let dims: Vec<(usize, usize)> = tables.iter().map(|g| g.dim()).collect();
        self.collection.check_tables(op, &dims)?;
        Ok((tables, dims))
    }

    /// The features that read table `t`, in feature order.
    fn reading(&self, t: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.features.len()).filter(move |&f| self.collection.features[f].table == t)
    }

    /// Table `t`'s touched rows, ascending, and their gradient rows (`backward_rows`').
    fn table_rows(
        &self,
        op: &'static str,
        grad_out: &ArrayRef<f32, Ix2>,
        t: usize,
    ) -> Result<(Array1<usize>, Array2<f32>), GatherError> {
        if let Some(shared) = &self.shared[t] {
            let grads = self.shared_rows(op, grad_out, shared, t)?;
            return Ok((Array1::from(shared.touched.clone()), grads));
        }
        let d = self.collection.tables[t].1;
        match self.reading(t).next() {
            Some(f) => {
                let at = self.column(f);
                let planned = &self.features[f];
                let g = grad_out.slice(s![.., at..at + d]);
                (planned.plan.backward_rows(&g, planned.pool()))
                    .map_err(|_| internal(op, "a checked backward failed"))
            }
            None => Ok((Array1::zeros(0), Array2::zeros((0, d)))),
        }
    }

    /// A shared table's gradient rows: each feature's contributions added in (feature,
    /// position) order, each sum from its first (from `-0.0`: `-0.0 + x` is `x`).
    fn shared_rows(
        &self,
        op: &'static str,
        grad_out: &ArrayRef<f32, Ix2>,
        shared: &Shared,
        t: usize,
    ) -> Result<Array2<f32>, GatherError> {
        let d = self.collection.tables[t].1;
        let mut grad = Array2::from_elem((shared.touched.len(), d), -0.0f32);
        for (f, plan) in &shared.plans {
            let at = self.column(*f);
            let g = grad_out.slice(s![.., at..at + d]);
            let mut pool = self.features[*f].pool();
            pool.skip = Some(-1);
            plan.backward_into(&g, pool, &mut grad)
                .map_err(|_| internal(op, "a checked backward failed"))?;
        }
        Ok(grad)
    }

    /// Feature `f`'s first column.
    fn column(&self, f: usize) -> usize {
        let c = &self.collection;
        c.features[..f].iter().map(|g| c.tables[g.table].1).sum()
    }

    fn check_backward(&self, op: &'static str, grad_out: &ArrayRef<f32, Ix2>) -> Result<(), GatherError> {
        let expected = [self.batch, self.collection.width()];
        if grad_out.shape() != expected {
            return Err(GatherError::GradShape {
                op,
                expected: expected.to_vec(),
                found: grad_out.shape().to_vec(),
                segments: self.batch,
                axis: 0,
            });
        }
        for (f, (feature, planned)) in self.collection.features.iter().zip(&self.features).enumerate() {
            if !matches!(planned.pooling, Pooling::Sum | Pooling::Mean | Pooling::SqrtN) {
                return Err(GatherError::Feature {
                    op,
                    feature: f,
                    table: feature.table,
                    source: Box::new(GatherError::Pooling {
                        op: FEATURE_OP,
                        pooling: planned.pooling,
                        detail: "has no backward in a collection (sum, mean and sqrtn have)".into(),
                    }),
                });
            }
        }
        Ok(())
    }
}
