//! [`SamplePlan`]: a grid's corners and weights computed once, as one
//! [`GatherReducePlan`] per batch item, applied to many inputs.

use std::sync::Mutex;

use ndarray::{Array, Array1, ArrayRef, Axis, Dimension, IxDyn};

use super::shape::{by_planes, check_shapes, planes, rows, shape_err, spell};
use super::taps::Reader;
use super::walk::{backward_planes, forward};
use super::{GridSample, Interp, SampleElement};
use crate::call::zeros;
use crate::error::{GatherError, internal};
use crate::kernel::isa::{Isa, on_tier};
use crate::kernel::reduce::{Csr, Fold, SampleRows};
use crate::kernel::schedule::run_jobs;
use crate::pool::Pooling;
use crate::prepared::GatherReducePlan;
use crate::shape::ShapeArg;

/// A prepared [`grid_sample`](super::SampleExt::grid_sample): for each batch item, the
/// pixels every output point reads and their weights, computed once from a fixed grid
/// (a spatial transformer at inference, a fixed warp, a deformable layer's offsets between
/// steps), then applied to any input of the same batch and spatial sizes, any channel count
/// and any layout. Applying gives the same bits as `grid_sample`; its backward adds each
/// output's gradient into the pixels it read, with the same weights.
///
/// Each item's corners are a [`GatherReducePlan`] over the input's pixels: a channels-last
/// input's rows (its pixels' channels) are folded in place; an input whose channels lie
/// farther apart than its pixels (NCHW) is staged 64 bytes of channels at a time (its
/// planes transposed into rows, folded, transposed back), so that a corner is one cache
/// line. 12 bytes per corner and 8 per output point.
///
/// ```
/// use ndarray::{Array4, array};
/// use ndarray_gather::sample::{GridSample, Interp, SampleExt, SamplePlan};
///
/// let grid = array![[[[-0.5_f32, 0.0], [0.5, 0.0]]]]; // [1, 1, 2, 2]: two points
/// let plan = SamplePlan::grid((1, 3, 2, 2), &grid, GridSample::new(Interp::Linear))?;
/// for c in [1, 3, 8] {
///     let x = Array4::from_shape_fn((1, c, 2, 2), |(_, k, i, j)| (k * 4 + i * 2 + j) as f32);
///     assert_eq!(plan.apply(&x)?, x.grid_sample(&grid, GridSample::new(Interp::Linear))?);
/// }
/// # Ok::<(), ndarray_gather::GatherError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SamplePlan<A> {
    /// The input's batch and spatial sizes (`[N, H, W]` or `[N, D, H, W]`).
    input: Vec<usize>,
    /// The output's spatial sizes.
    out: Vec<usize>,
    items: Vec<Item<A>>,
    /// How a point's terms fold: PyTorch's kernel's arithmetic for the mode.
    fold: Fold,
}

#[derive(Debug, Clone)]
struct Item<A> {
    plan: GatherReducePlan,
    weights: Array1<A>,
    /// The points whose output is NaN (they read nothing, and have no gradient).
    nan: Vec<usize>,
}

impl<A: SampleElement> SamplePlan<A> {
    /// The plan of `grid_sample(x, grid, opts)` for inputs of `x_shape` (`x.dim()`: its
    /// batch and spatial sizes bind the plan; any channel count applies).
    ///
    /// ```
    /// use ndarray::Array4;
    /// use ndarray_gather::sample::{GridSample, Interp, SamplePlan};
    ///
    /// let plan = SamplePlan::grid([2, 8, 16, 16], &Array4::<f64>::zeros((2, 4, 5, 2)), GridSample::new(Interp::Nearest))?;
    /// assert_eq!(plan.output_shape(8), vec![2, 8, 4, 5]);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`grid_sample`](super::SampleExt::grid_sample)'s.
    pub fn grid<M, D: Dimension>(
        x_shape: impl ShapeArg<M>,
        grid: &ArrayRef<A, D>,
        opts: GridSample,
    ) -> Result<Self, GatherError> {
        let x = x_shape.into_dim();
        Self::build("SamplePlan::grid", x.slice(), grid, opts)
    }

    pub(super) fn build<D: Dimension>(
        op: &'static str,
        x: &[usize],
        grid: &ArrayRef<A, D>,
        opts: GridSample,
    ) -> Result<Self, GatherError> {
        let out = check_shapes(op, x, grid.shape(), opts)?;
        let (batch, dims, sizes, g) = (x[0], x.len() - 2, &x[2..], grid.shape());
        let pixels: usize = sizes.iter().product();
        let reader = Reader { sizes, opts };
        let slots: Vec<Mutex<Option<Item<A>>>> = (0..batch).map(|_| Mutex::new(None)).collect();
        let most = match (opts.interp, dims) {
            (Interp::Nearest, _) => 1,
            (Interp::Cubic, _) => 16,
            _ => 1 << dims,
        };
        let isa = Isa::detect();
        let outcome = run_jobs(batch, false, |n| {
            // The taps' `floor` and fused multiply-adds are one instruction each there.
            let built = on_tier(
                isa,
                #[inline(always)]
                || -> Option<Item<A>> {
                    let points = grid.view().into_dyn().index_axis_move(Axis(0), n);
                    let count = out.iter().product::<usize>();
                    let mut offsets = Vec::with_capacity(count + 1);
                    let (mut rows, mut weights) =
                        (Vec::with_capacity(count * most), Vec::with_capacity(count * most));
                    offsets.push(0);
                    let mut nan = Vec::new();
                    // Consecutive coordinate pairs (triples), the grid copied if it is not standard.
                    let points = points.as_standard_layout();
                    for (p, point) in points.as_slice()?.chunks_exact(dims).enumerate() {
                        let is_nan = reader.taps(point, |r, w| {
                            rows.push(r as u32);
                            weights.push(w);
                        });
                        if is_nan {
                            nan.push(p);
                        }
                        offsets.push(rows.len());
                    }
                    let csr = Csr::of_runs(offsets, &rows, pixels)?;
                    Some(Item {
                        plan: GatherReducePlan::of_csr(vec![pixels, 1], 0, csr),
                        weights: Array1::from(weights),
                        nan,
                    })
                },
            );
            let mut slot = slots[n].lock().map_err(|_| crate::kernel::BadIndex)?;
            *slot = built;
            Ok(())
        });
        if outcome.failed() {
            return Err(internal(op, "a plan item's job failed"));
        }
        let mut items = Vec::with_capacity(batch);
        for slot in slots {
            let item = slot.into_inner().ok().flatten();
            items.push(item.ok_or_else(|| GatherError::SizeOverflow {
                op,
                shape: g.to_vec(),
            })?);
        }
        let mut input = vec![batch];
        input.extend_from_slice(sizes);
        let fold = match (opts.interp, dims) {
            // PyTorch's vectorized 2-D kernel (its compiler fuses the corner sum).
            (Interp::Linear, 2) => Fold::Fused { full: 4 },
            // A copy of the pixel (`x · 1`), or 0 outside.
            (Interp::Nearest, _) => Fold::Fused { full: 1 },
            _ => Fold::Plain,
        };
        Ok(SamplePlan {
            input,
            out,
            items,
            fold,
        })
    }

    /// The output's shape for `channels` channels: `[N, C, Ho, Wo]` (`[N, C, Do, Ho, Wo]`).
    pub fn output_shape(&self, channels: usize) -> Vec<usize> {
        let mut s = vec![self.input[0], channels];
        s.extend_from_slice(&self.out);
        s
    }

    /// The input's shape for `channels` channels.
    pub fn input_shape(&self, channels: usize) -> Vec<usize> {
        let mut s = vec![self.input[0], channels];
        s.extend_from_slice(&self.input[1..]);
        s
    }

    /// The corners the plan reads in all (a point outside reads fewer).
    pub fn corners(&self) -> usize {
        self.items.iter().map(|i| i.weights.len()).sum()
    }

    /// Checks `a` (named `what`) against the input (`input`) or output shape, with `c`
    /// channels (`None`: its own).
    fn check(
        &self,
        op: &'static str,
        what: &'static str,
        a: &[usize],
        input: bool,
        c: Option<usize>,
    ) -> Result<usize, GatherError> {
        let ch = c.or(a.get(1).copied()).unwrap_or(0);
        let want = if input {
            self.input_shape(ch)
        } else {
            self.output_shape(ch)
        };
        if a != want.as_slice() {
            let sizes = if input { &self.input[1..] } else { &self.out[..] };
            return Err(shape_err(op, what, a, spell(self.input[0], c, sizes)));
        }
        Ok(ch)
    }

    /// `grid_sample` of `x` in a fresh array, in `x`'s layout (channels-last for a
    /// channels-last `x`, as PyTorch does).
    ///
    /// # Errors
    /// [`SampleShape`](GatherError::SampleShape) if `x`'s batch or spatial sizes are not the
    /// plan's.
    pub fn apply<D: Dimension>(&self, x: &ArrayRef<A, D>) -> Result<Array<A, D>, GatherError> {
        self.run_fresh("SamplePlan::apply", x)
    }

    pub(super) fn run_fresh<D: Dimension>(
        &self,
        op: &'static str,
        x: &ArrayRef<A, D>,
    ) -> Result<Array<A, D>, GatherError> {
        let c = self.check(op, "x", x.shape(), true, None)?;
        let shape = self.output_shape(c);
        let xd = x.view().into_dyn();
        let mut y = if shape.len() == xd.ndim() && !by_planes(&xd, 1) {
            // Channels last: `[N, spatial.., C]` seen as `[N, C, spatial..]`.
            let mut last: Vec<usize> = shape.clone();
            last.remove(1);
            last.push(c);
            let mut order = vec![0, shape.len() - 1];
            order.extend(1..shape.len() - 1);
            zeros(op, IxDyn(&last))?.permuted_axes(IxDyn(&order))
        } else {
            zeros(op, IxDyn(&shape))?
        };
        self.forward(op, xd, y.view_mut())?;
        y.into_dimensionality()
            .map_err(|_| internal(op, "the output's rank"))
    }

    /// [`apply`](Self::apply) into `y`, which must have the output's shape (any layout).
    ///
    /// ```
    /// use ndarray::{Array4, array};
    /// use ndarray_gather::sample::{GridSample, Interp, SamplePlan};
    ///
    /// let plan = SamplePlan::grid((1, 1, 1, 2), &array![[[[0.0_f32, 0.0]]]], GridSample::new(Interp::Linear))?;
    /// let mut y = Array4::zeros((1, 1, 1, 1));
    /// plan.apply_into(&array![[[[2.0_f32, 4.0]]]], &mut y)?;
    /// assert_eq!(y[[0, 0, 0, 0]], 3.0);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As `apply`, and `SampleShape` for a `y` not of the output's shape. On `Err`, `y` is
    /// unchanged.
    pub fn apply_into<D: Dimension>(
        &self,
        x: &ArrayRef<A, D>,
        y: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError> {
        const OP: &str = "SamplePlan::apply_into";
        let c = self.check(OP, "x", x.shape(), true, None)?;
        self.check(OP, "y", y.shape(), false, Some(c))?;
        self.forward(OP, x.view().into_dyn(), y.view_mut().into_dyn())
    }

    /// The forward of checked arrays.
    fn forward(
        &self,
        op: &'static str,
        x: ndarray::ArrayViewD<'_, A>,
        mut y: ndarray::ArrayViewMutD<'_, A>,
    ) -> Result<(), GatherError> {
        if x.is_empty() || y.is_empty() {
            return Ok(());
        }
        let walks: Vec<SampleRows<'_, A>> = self
            .items
            .iter()
            .map(|item| {
                let weights = item.weights.as_slice().ok_or_else(|| internal(op, "weights"))?;
                let (csr, rows_below, fold) = (item.plan.csr(), item.plan.shape()[0], self.fold);
                Ok(SampleRows {
                    csr,
                    rows_below,
                    w: weights,
                    fold,
                })
            })
            .collect::<Result<_, GatherError>>()?;
        forward(op, &walks, x, y.view_mut())?;
        for (n, item) in self.items.iter().enumerate() {
            let mut yn = y.index_axis_mut(Axis(0), n);
            for &p in &item.nan {
                // The point's spatial index, row-major over the output's sizes.
                let mut at = vec![0; self.out.len() + 1];
                let mut rest = p;
                for (d, &len) in self.out.iter().enumerate().rev() {
                    (at[d + 1], rest) = (rest % len, rest / len);
                }
                for c in 0..yn.shape()[0] {
                    at[0] = c;
                    if let Some(v) = yn.get_mut(at.as_slice()) {
                        *v = A::nan();
                    }
                }
            }
        }
        Ok(())
    }

    /// Adds the input's gradient of `Σ y · g_y` into `g_x` (decision 72): each output's
    /// gradient times each corner's weight, added into the corner in output order (no
    /// atomics: the same bits on any thread count). On a zeroed `g_x`, PyTorch's input
    /// gradient to rounding (its vectorized 2-D kernel adds a block of points' corners one
    /// corner at a time).
    ///
    /// ```
    /// use ndarray::{Array4, array};
    /// use ndarray_gather::sample::{GridSample, Interp, SamplePlan};
    ///
    /// let plan = SamplePlan::grid((1, 1, 1, 2), &array![[[[0.0_f32, 0.0]]]], GridSample::new(Interp::Linear))?;
    /// let mut g_x = Array4::zeros((1, 1, 1, 2));
    /// plan.backward_into(&array![[[[4.0_f32]]]], &mut g_x)?;
    /// assert_eq!(g_x, array![[[[2.0, 2.0]]]]);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    ///
    /// # Errors
    /// `SampleShape` for a `g_y` not of the output's shape or a `g_x` not of the input's
    /// with `g_y`'s channels. On `Err`, `g_x` is unchanged.
    #[doc(alias = "grid_sampler_2d_backward")]
    pub fn backward_into<D: Dimension>(
        &self,
        g_y: &ArrayRef<A, D>,
        g_x: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError> {
        const OP: &str = "SamplePlan::backward_into";
        let c = self.check(OP, "g_y", g_y.shape(), false, None)?;
        self.check(OP, "g_x", g_x.shape(), true, Some(c))?;
        let (gy, mut gx) = (g_y.view().into_dyn(), g_x.view_mut().into_dyn());
        if gy.is_empty() || gx.is_empty() {
            return Ok(());
        }
        for (n, item) in self.items.iter().enumerate() {
            let gyn = gy.index_axis(Axis(0), n);
            let mut gxn = gx.index_axis_mut(Axis(0), n);
            let standard;
            let gyn = if planes(gyn.clone()).is_some() {
                gyn
            } else {
                standard = gyn.as_standard_layout().into_owned();
                standard.view()
            };
            let pool = Pooling::Sum.weighted(&item.weights);
            if !by_planes(&gxn, 0)
                && let (Some(gr), Some(mut xr)) = (rows(gyn.clone()), rows(gxn.view_mut()))
            {
                item.plan.backward_into(&gr, pool, &mut xr)?;
                continue;
            }
            let gp = planes(gyn).ok_or_else(|| internal(OP, "planes of g_y"))?;
            let w = item.weights.as_slice().ok_or_else(|| internal(OP, "weights"))?;
            let (csr, rows_below) = (item.plan.csr(), item.plan.shape()[0]);
            let walk = SampleRows {
                csr,
                rows_below,
                w,
                fold: self.fold,
            };
            backward_planes(OP, &walk, gp, gxn)?;
        }
        Ok(())
    }
}
