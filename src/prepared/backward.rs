//! A [`GatherReducePlan`]'s backward: the adjoint of its gather-reduce (decisions 34-36).
//! The plan's positions, grouped by the row they read, are sorted once (when a backward
//! first asks), so that each gradient row is built by one thread, in position order.

use std::sync::OnceLock;

use ndarray::{Array, Array1, ArrayRef, Axis, CowArray, Dimension, RemoveAxis, Slice};

use super::GatherReducePlan;
use crate::call::zeros;
use crate::error::{GatherError, internal};
use crate::kernel::BadIndex;
#[cfg(feature = "mpi")]
use crate::kernel::reduce::Injective;
use crate::kernel::reduce::{
    ArgRows, ByRow, Geometry, Pooler, Route, Scale, Target, backward, backward_arg, backward_each,
    backward_heads,
};
use crate::layout::unravel;
use crate::optim::{Optimizer, Step};
use crate::plan::reduce::{ReduceWalk, ahead, row_loops};
use crate::pool::{IntoPool, Pool, PoolElement, Pooling};

/// A plan's positions by row ([`ByRow`]), made when a backward first asks for them
/// (`None`: they do not fit `u32` or memory). Two plans equal but for it are equal: it
/// follows from the rest.
#[derive(Debug, Clone, Default)]
pub(crate) struct Turned(OnceLock<Option<ByRow>>);

impl PartialEq for Turned {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Turned {}

/// Where a backward adds: the caller's dense gradient, or fresh rows for the touched rows.
enum Grad<'o, A, D> {
    Dense(&'o mut ArrayRef<A, D>),
    Touched(&'o mut ArrayRef<A, D>),
    /// Touched row `k` adds into row `map[k]`.
    #[cfg(feature = "mpi")]
    Mapped(&'o mut ArrayRef<A, D>, Injective<'o>),
}

impl GatherReducePlan {
    /// The positions by row, sorted on first use.
    fn by_row(&self, op: &'static str) -> Result<&ByRow, GatherError> {
        self.turned
            .0
            .get_or_init(|| ByRow::of(&self.csr, self.segments(), self.shape[self.axis], self.positions))
            .as_ref()
            .ok_or_else(|| GatherError::SizeOverflow {
                op,
                shape: vec![self.positions],
            })
    }

    /// `grad_out`'s shape checked against the forward's output (the segments along the
    /// axis, the plan's dimensions before it, any rows after it), and `grad_in`'s (if any)
    /// against the plan's input with `grad_out`'s rows.
    pub(super) fn check_grads<A, D: Dimension>(
        &self,
        op: &'static str,
        grad_out: &ArrayRef<A, D>,
        grad_in: Option<&ArrayRef<A, D>>,
    ) -> Result<(), GatherError> {
        let (axis, found) = (self.axis, grad_out.shape());
        let rows = found.get(axis + 1..).unwrap_or(&[]);
        let bound = &self.shape[..axis];
        if found.get(..axis) != Some(bound) || found.get(axis) != Some(&self.segments()) {
            return Err(GatherError::GradShape {
                op,
                expected: bound
                    .iter()
                    .chain(&[self.segments()])
                    .chain(rows)
                    .copied()
                    .collect(),
                found: found.to_vec(),
                segments: self.segments(),
                axis,
            });
        }
        match grad_in {
            Some(g) => self.check_input(op, g.shape(), Some(rows)),
            None => Ok(()),
        }
    }

    /// Adds the gradient of the plan's gather-reduce with `pool` into `grad_in` (the plan's
    /// input shape up to its axis, then `grad_out`'s rows; any layout), given `grad_out`
    /// (the forward's output shape: the segments along the axis, any rows): for each
    /// kept position `p` of segment `s`, `grad_in[idx[p]] += c_p * grad_out[s]`, with
    /// `c_p` the weight `w_p` (or 1) for `Sum`, `w_p / Σw` (or `1 / count`) for `Mean`,
    /// `w_p / sqrt(Σw²)` (or `1 / sqrt(count)`) for `SqrtN`, the sums over the segment's
    /// kept positions in position order, as the forward divides. Each `grad_in` row gets
    /// its contributions in increasing position order, whatever the thread count (the
    /// plan sorts its positions by row once, on the first backward). Skipped positions
    /// and empty segments add nothing; the fill plays no part. On a zeroed gradient, the
    /// rows of PyTorch's `embedding_bag(..., sparse=True)` backward, coalesced, to the bit
    /// (every pooling and weight). PyTorch's dense `sparse=False` backward adds in another
    /// order: it equals this to the bit for unweighted `Sum` only (with weights, on B2's
    /// data, about half the elements differ in their last bits: PyTorch's two paths
    /// disagree with each other there); `index_add_` /
    /// `index_reduce_` / `segment_reduce` backward (whose `mean` divides the gradient by
    /// the count, where `c_p` multiplies it by `1 / count`: the last bit may differ).
    /// Zero and reuse one gradient across steps: a fresh `Array::zeros` of hundreds of MiB
    /// has its pages faulted in by the backward's random writes, several times slower
    /// (PERFORMANCE.md, "The backward through a plan").
    ///
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// // Two bags over a table of 3 rows: {2, 0} and {2}.
    /// let plan = GatherReducePlan::new([3, 2], &[2, 0, 2], Segments::starts(&[0, 2]), 0)?;
    /// let grad_out = array![[1.0, 2.0], [4.0, 8.0]];
    /// let mut grad = Array2::zeros((3, 2));
    /// plan.backward_into(&grad_out, Pooling::Mean, &mut grad)?;
    /// assert_eq!(grad, array![[0.5, 1.0], [0.0, 0.0], [4.5, 9.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`GradShape`](GatherError::GradShape) for a `grad_out` not shaped as the forward's
    /// output, [`InputShape`](GatherError::InputShape) for a `grad_in` of another shape than
    /// the plan's input with `grad_out`'s rows; [`Pooling`](GatherError::Pooling) for `Prod` (no backward
    /// here), `Max` / `Min` (theirs is [`backward_arg_into`](Self::backward_arg_into)) or
    /// a `.skip` other than the plan's; [`Weights`](GatherError::Weights) as `apply`'s.
    /// On `Err`, `grad_in` is unchanged.
    #[doc(alias = "embedding_bag_backward", alias = "index_add_")]
    pub fn backward_into<'w, A: PoolElement + 'w, D: Dimension>(
        &self,
        grad_out: &ArrayRef<A, D>,
        pool: impl IntoPool<'w, A>,
        grad_in: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError> {
        const OP: &str = "GatherReducePlan::backward_into";
        self.check_grads(OP, grad_out, Some(grad_in))?;
        let pool = pool.into_pool();
        self.check_backward_pool(OP, &pool, Some(grad_out.shape()))?;
        self.run_backward(OP, grad_out, pool, Grad::Dense(grad_in))
    }

    /// The gradient of [`backward_into`](Self::backward_into) on the touched rows only:
    /// their indices along the axis, ascending (each once, negative indices resolved),
    /// and an array of the input's shape but for the axis, as long as the rows, holding
    /// each row's sum in position order, from its first contribution: PyTorch's
    /// `embedding_bag(..., sparse=True)` backward, coalesced, to the bit (where
    /// `backward_into` on a zeroed gradient adds the first to `0.0`: a lone `-0.0` is
    /// `-0.0` here, `0.0` there). An optimizer updates only these rows.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([5, 2], &[4, -5, 4], Segments::starts(&[0, 2]), 0)?;
    /// let (rows, grads) = plan.backward_rows(&array![[1.0, 2.0], [4.0, 8.0]], Pooling::Sum)?;
    /// assert_eq!(rows, array![0, 4]);
    /// assert_eq!(grads, array![[1.0, 2.0], [5.0, 10.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`backward_into`](Self::backward_into)'s (but `grad_in`'s), and
    /// [`SizeOverflow`](GatherError::SizeOverflow) if the rows cannot be allocated.
    #[allow(clippy::type_complexity)]
    pub fn backward_rows<'w, A: PoolElement + 'w, D: Dimension>(
        &self,
        grad_out: &ArrayRef<A, D>,
        pool: impl IntoPool<'w, A>,
    ) -> Result<(Array1<usize>, Array<A, D>), GatherError> {
        const OP: &str = "GatherReducePlan::backward_rows";
        self.check_grads::<A, D>(OP, grad_out, None)?;
        let pool = pool.into_pool();
        self.check_backward_pool(OP, &pool, Some(grad_out.shape()))?;
        let t = self.by_row(OP)?;
        let mut dim = grad_out.raw_dim();
        dim[self.axis] = t.touched();
        let mut grads = zeros(OP, dim)?;
        self.run_backward(OP, grad_out, pool, Grad::Touched(&mut grads))?;
        Ok((t.rows().collect(), grads))
    }

    /// The touched rows along the axis, ascending (each once).
    #[cfg(feature = "mpi")]
    pub(crate) fn touched(&self, op: &'static str) -> Result<Vec<usize>, GatherError> {
        Ok(self.by_row(op)?.rows().collect())
    }

    /// [`backward_into`](Self::backward_into) with touched row `k` (of
    /// [`touched`](Self::touched)) adding into row `map[k]` of `grads` (its rows along the
    /// axis any number; `grad_out`'s shape checked, `pool` checked by the caller); `map`
    /// must be strictly increasing (an internal error otherwise: no two threads share a
    /// row).
    #[cfg(feature = "mpi")]
    pub(crate) fn backward_mapped<A: PoolElement, D: Dimension>(
        &self,
        op: &'static str,
        grad_out: &ArrayRef<A, D>,
        pool: Pool<'_, A>,
        map: &[usize],
        grads: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError> {
        self.check_grads(op, grad_out, None)?;
        self.check_skip(op, &pool)?;
        let map = Injective::new(map).ok_or_else(|| internal(op, "a map that sends two rows to one"))?;
        self.run_backward(op, grad_out, pool, Grad::Mapped(grads, map))
    }

    /// A training step (decision 52): each touched row's gradient summed exactly as
    /// [`backward_rows`](Self::backward_rows) sums it, then that row of `table` updated
    /// once by `opt` (FBGEMM's "exact" optimizers: a row touched by half the batch is one
    /// update), in one pass with no gradient array: each thread builds a row's gradient
    /// and updates the row. The same bits on any thread count. `table` has the plan's input
    /// shape with `grad_out`'s rows (any layout); `opt`'s state, as many rows as the table
    /// along the axis, each as wide as the optimizer needs
    /// ([`Optimizer::state_width`](crate::optim::Optimizer::state_width)).
    ///
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::optim::Sgd;
    /// use ndarray_gather::prelude::*;
    ///
    /// let mut table = Array2::from_elem((3, 2), 1.0f32);
    /// let plan = GatherReducePlan::new(table.dim(), &[2, 2, 0], Segments::starts(&[0, 2]), 0)?;
    /// plan.step(&array![[1.0, 0.5], [2.0, 2.0]], Pooling::Sum, &mut table, &mut Sgd::new(0.25))?;
    /// assert_eq!(table, array![[0.5, 0.5], [1.0, 1.0], [0.5, 0.75]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`backward_rows`](Self::backward_rows)'s, [`InputShape`](GatherError::InputShape)
    /// for a table of another shape, [`Optimizer`](GatherError::Optimizer) for a state of
    /// another shape than the table needs: as many rows as the table along the axis, each
    /// of the width the optimizer needs for the table's rows (decision 66: an `Adagrad` of
    /// `(n, d - 1)` for an `(n, d)` table). On `Err`, no row changed and no step began.
    #[doc(alias = "EXACT_ROWWISE_ADAGRAD", alias = "fused_backward")]
    pub fn step<'w, D: Dimension + RemoveAxis>(
        &self,
        grad_out: &ArrayRef<f32, D>,
        pool: impl IntoPool<'w, f32>,
        table: &mut ArrayRef<f32, D>,
        opt: &mut (impl Optimizer + ?Sized),
    ) -> Result<(), GatherError> {
        const OP: &str = "GatherReducePlan::step";
        self.check_grads(OP, grad_out, Some(table))?;
        let pool = pool.into_pool();
        self.check_backward_pool(OP, &pool, None)?;
        let scale = self.scale(OP, pool)?;
        self.fused(OP, grad_out, Route::Scale(&scale), table, opt)
    }

    /// A `Max` / `Min` training step (decision 54): the gradient routed through the
    /// argmax `arg` as [`backward_arg_into`](Self::backward_arg_into) routes it, each row
    /// that some element goes to (from zero) updated once by `opt`, as
    /// [`step`](Self::step) does; rows read but never the argmax are not updated (as
    /// PyTorch's sparse gradient of `embedding_bag(mode="max")` leaves them out).
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::optim::Sgd;
    /// use ndarray_gather::prelude::*;
    ///
    /// let mut table = array![[1.0f32, 5.0], [4.0, 2.0]];
    /// let plan = GatherReducePlan::new(table.dim(), &[0, 1], Segments::starts(&[0]), 0)?;
    /// let (_, arg) = plan.apply_arg(&table, Pooling::Max)?;
    /// plan.step_arg(&array![[1.0, 2.0]], &arg, &mut table, &mut Sgd::new(0.5))?;
    /// assert_eq!(table, array![[1.0, 4.0], [3.5, 2.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`backward_arg_into`](Self::backward_arg_into)'s and [`step`](Self::step)'s.
    /// On `Err`, no row changed.
    pub fn step_arg<D: Dimension + RemoveAxis>(
        &self,
        grad_out: &ArrayRef<f32, D>,
        arg: &ArrayRef<usize, D>,
        table: &mut ArrayRef<f32, D>,
        opt: &mut (impl Optimizer + ?Sized),
    ) -> Result<(), GatherError> {
        const OP: &str = "GatherReducePlan::step_arg";
        self.check_grads(OP, grad_out, Some(table))?;
        self.check_arg(OP, grad_out, arg)?;
        let (grad_out, arg) = Self::beside(grad_out, arg);
        self.fused(OP, &grad_out, Route::Arg(ArgRows(arg.as_ptr())), table, opt)
    }

    /// The fused pass of a step: each touched row's gradient built by `route` in a row of
    /// its thread's, then the row updated (shapes checked).
    fn fused<D: Dimension + RemoveAxis>(
        &self,
        op: &'static str,
        grad_out: &ArrayRef<f32, D>,
        route: Route<'_, '_, f32>,
        table: &mut ArrayRef<f32, D>,
        opt: &mut (impl Optimizer + ?Sized),
    ) -> Result<(), GatherError> {
        let t = self.by_row(op)?;
        // The one row each thread builds: `grad_out`'s shape with one segment.
        let mut dim = grad_out.raw_dim();
        dim[self.axis] = 1;
        let mut one = zeros::<f32, D>(op, dim)?;
        let geometry = self.adjoint_geometry(grad_out, &mut one)?;
        let jobs = self.backward_jobs(t, &geometry);
        let step = Step::begin(op, opt, table, self.axis)?;
        backward_each(&geometry, t, route, one.len(), jobs, |k, g, routed| {
            if routed {
                // SAFETY: touched rows are distinct, each built and updated by one job.
                unsafe { step.update(t.row(k), g) }
            }
        })
        .map_err(|BadIndex| internal(op, "a walk failed after the checks passed"))?;
        step.finish()
    }

    /// Adds into `grad_in` the gradient of a `Max` / `Min` forward through its argmax
    /// (`arg`, from [`apply_arg`](Self::apply_arg) or
    /// [`apply_arg_into`](Self::apply_arg_into) of this plan): each element of `grad_out`
    /// goes to the one input element its `arg` names (the same place along the row, in
    /// the row that position read); an empty segment's (its `arg` is the number of
    /// positions) goes nowhere. Contributions to one element come in increasing position
    /// order, whatever the thread count. PyTorch's `index_reduce_(amax)` backward, and
    /// `embedding_bag(mode="max")`'s.
    ///
    /// ```
    /// use ndarray::{Array1, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([3], &[2, 0, 1], Segments::ids(&[0, 0, 1], 2), 0)?;
    /// let (m, arg) = plan.apply_arg(&array![1.0, 5.0, 4.0], Pooling::Max)?;
    /// assert_eq!((m, &arg), (array![4.0, 5.0], &array![0, 2]));
    /// let mut grad = Array1::zeros(3);
    /// plan.backward_arg_into(&array![10.0, 20.0], &arg, &mut grad)?;
    /// assert_eq!(grad, array![0.0, 20.0, 10.0]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`backward_into`](Self::backward_into)'s shapes, and
    /// [`Arg`](GatherError::Arg) for an `arg` of another shape than `grad_out` or a value
    /// above the number of positions. On `Err`, `grad_in` is unchanged.
    #[doc(alias = "index_reduce_", alias = "amax")]
    pub fn backward_arg_into<A: PoolElement, D: Dimension>(
        &self,
        grad_out: &ArrayRef<A, D>,
        arg: &ArrayRef<usize, D>,
        grad_in: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError> {
        const OP: &str = "GatherReducePlan::backward_arg_into";
        self.check_grads(OP, grad_out, Some(grad_in))?;
        self.check_arg(OP, grad_out, arg)?;
        let t = self.by_row(OP)?;
        let (grad_out, arg) = Self::beside(grad_out, arg);
        let geometry = self.adjoint_geometry(&grad_out, grad_in)?;
        let jobs = self.backward_jobs(t, &geometry);
        backward_arg(&geometry, t, ArgRows(arg.as_ptr()), Target::Dense, jobs)
            .map_err(|BadIndex| internal(OP, "a walk failed after the checks passed"))
    }

    /// `arg` checked against `grad_out`: its shape, and positions of the plan.
    fn check_arg<D: Dimension>(
        &self,
        op: &'static str,
        grad_out: &ArrayRef<impl Sized, D>,
        arg: &ArrayRef<usize, D>,
    ) -> Result<(), GatherError> {
        if arg.shape() != grad_out.shape() {
            return Err(GatherError::Arg {
                op,
                detail: format!(
                    "has shape {:?}, but the plan's output shape is {:?}",
                    arg.shape(),
                    grad_out.shape()
                ),
            });
        }
        if let Some((at, &v)) = arg.iter().enumerate().find(|&(_, &v)| v > self.positions) {
            return Err(GatherError::Arg {
                op,
                detail: format!(
                    "names position {v} at {:?}, but the plan has {n} positions ({n} marks an empty segment)",
                    &unravel(at, arg.shape())[..],
                    n = self.positions
                ),
            });
        }
        Ok(())
    }

    /// `grad_out` and `arg` with the same strides (the argmax walks beside the gradient):
    /// as given, or both in standard layout.
    fn beside<'a, A: Clone, D: Dimension>(
        grad_out: &'a ArrayRef<A, D>,
        arg: &'a ArrayRef<usize, D>,
    ) -> (CowArray<'a, A, D>, CowArray<'a, usize, D>) {
        if arg.strides() == grad_out.strides() {
            (grad_out.view().into(), arg.view().into())
        } else {
            (grad_out.as_standard_layout(), arg.as_standard_layout())
        }
    }

    /// The coefficients of `pool` (checked) over the plan's segments.
    fn scale<'w, A: PoolElement>(
        &self,
        op: &'static str,
        pool: Pool<'w, A>,
    ) -> Result<Scale<'w, A>, GatherError> {
        let pooler = Pooler::of(pool, self.positions);
        Scale::of(&pooler, &self.csr, self.segments()).ok_or_else(|| GatherError::SizeOverflow {
            op,
            shape: vec![self.segments()],
        })
    }

    /// `pool` checked for a backward: a pooling that has one here, the plan's skip, the
    /// weights' length (and heads, against `grad_out`'s shape where the call takes them).
    fn check_backward_pool<A: PoolElement>(
        &self,
        op: &'static str,
        pool: &Pool<'_, A>,
        heads: Option<&[usize]>,
    ) -> Result<(), GatherError> {
        let refuse = |detail: &str| GatherError::Pooling {
            op,
            pooling: pool.pooling,
            detail: detail.to_string(),
        };
        match pool.pooling {
            Pooling::Prod => {
                return Err(refuse(
                    "has no backward here (a product's gradient divides by zero)",
                ));
            }
            Pooling::Max | Pooling::Min => {
                return Err(refuse(
                    "routes its gradient through its argmax: backward_arg_into",
                ));
            }
            _ => {}
        }
        self.check_skip(op, pool)?;
        crate::call::reduce::check_pool(op, pool, self.positions, false, heads.map(|s| (s, self.axis)))
    }

    /// The backward of `pool` (checked) from `grad_out` into `to`, shapes checked.
    fn run_backward<A: PoolElement, D: Dimension>(
        &self,
        op: &'static str,
        grad_out: &ArrayRef<A, D>,
        pool: Pool<'_, A>,
        to: Grad<'_, A, D>,
    ) -> Result<(), GatherError> {
        let t = self.by_row(op)?;
        let (out, target) = match to {
            Grad::Dense(o) => (o, Target::Dense),
            Grad::Touched(o) => (o, Target::Touched),
            #[cfg(feature = "mpi")]
            Grad::Mapped(o, map) => (o, Target::Mapped(map)),
        };
        let bad = |BadIndex| internal(op, "a walk failed after the checks passed");
        let Some(heads) = pool.heads() else {
            let scale = self.scale(op, pool)?;
            let geometry = self.adjoint_geometry(grad_out, out)?;
            let jobs = self.backward_jobs(t, &geometry);
            return backward(&geometry, t, &scale, target, jobs).map_err(bad);
        };
        // Per-head weights: each head's slice is a backward with its column (decision 55),
        // every head's coefficients made before anything is written.
        let scales = (0..heads)
            .map(|h| self.scale(op, pool.head(h)))
            .collect::<Result<Vec<_>, _>>()?;
        let d = Axis(self.axis + 1);
        let mut gs = Vec::with_capacity(heads);
        for h in 0..heads {
            let head = Slice::from(h..h + 1);
            gs.push(self.adjoint_geometry(&grad_out.slice_axis(d, head), &mut out.slice_axis_mut(d, head))?);
        }
        let jobs = gs.first().map_or(1, |g| self.backward_jobs(t, g));
        backward_heads(&gs, t, &scales, target, jobs).map_err(bad)
    }

    /// The geometry of the adjoint: the gradient's segment rows are its input rows, and
    /// `out`'s rows along the plan's axis its output rows.
    fn adjoint_geometry<A, D: Dimension>(
        &self,
        grad_out: &ArrayRef<A, D>,
        out: &mut ArrayRef<A, D>,
    ) -> Result<Geometry<A>, GatherError> {
        let axis = self.axis;
        let (lane, outer) = row_loops(grad_out.shape(), grad_out.strides(), out.strides(), axis);
        // The contract of `Geometry`: `grad_out` and `out` have the same shape but along
        // `axis` (`segments` and `out`'s rows long), the lanes are their other dimensions;
        // `out` is a mutable array, so its rows are distinct.
        Ok(Geometry {
            x: grad_out.as_ptr(),
            x_step: grad_out.strides()[axis],
            rows: grad_out.shape()[axis],
            out: out.as_mut_ptr(),
            o_step: out.strides()[axis],
            segments: out.shape()[axis],
            arg: std::ptr::null_mut(),
            ahead: ahead(lane.len * outer.iter().map(|l| l.len).product::<usize>() * size_of::<A>()),
            lane,
            outer,
        })
    }

    /// The jobs of a backward: chunks of touched rows, as the forward chunks segments.
    fn backward_jobs<A>(&self, t: &ByRow, g: &Geometry<A>) -> usize {
        let row_bytes = g.lane.len * g.outer.iter().map(|l| l.len).product::<usize>() * size_of::<A>();
        match ReduceWalk::of(false, t.touched(), t.len(), row_bytes, 0) {
            ReduceWalk::Sorted { jobs } => jobs,
            _ => 1,
        }
    }
}
