//! Optimizers for a training step (decisions 52-54): each touched row's gradient summed
//! exactly as [`backward_rows`](crate::GatherReducePlan::backward_rows) sums it (the same
//! bits), then the row updated once, as FBGEMM's "exact" optimizers do, in the same pass
//! ([`GatherReducePlan::step`](crate::GatherReducePlan::step),
//! [`CollectionPlan::step`](crate::bags::CollectionPlan::step), and with the `mpi`
//! feature `ShardedPlan::step`). The state is the caller's value: `Clone`, its arrays
//! readable and writable (`state()`, `state_mut()`), so a checkpoint is an array.
//!
//! Checked against FBGEMM 1.9's CPU table-batched module (`EXACT_SGD`,
//! `EXACT_ROWWISE_ADAGRAD`, `EXACT_ADAGRAD`) and torch's `optim.Adagrad` / `SparseAdam`
//! over three steps: within 8 ulps of each row's largest value. Decision 52's row-wise
//! moment sums the squares in column order; FBGEMM's CPU kernel sums them in SIMD lanes
//! (a few ulps apart).
//!
//! ```
//! use ndarray::Array2;
//! use ndarray_gather::optim::RowwiseAdagrad;
//! use ndarray_gather::prelude::*;
//!
//! let mut table = Array2::from_elem((4, 2), 1.0f32);
//! let mut opt = RowwiseAdagrad::new(4, 0.5).eps(0.0);
//! let plan = GatherReducePlan::new(table.dim(), &[3, 1, 3], Segments::starts(&[0, 2]), 0)?;
//! let out = plan.apply(&table, Pooling::Sum)?;
//! plan.step(&out.mapv(|v| v * 0.0 + 1.0), Pooling::Sum, &mut table, &mut opt)?;
//! // Row 3 got [2, 2]: m = (4 + 4) / 2 = 4, w -= 0.5 / sqrt(4) * 2.
//! assert_eq!(table.row(3).to_vec(), [0.5, 0.5]);
//! assert_eq!(opt.state()[3], 4.0);
//! # Ok::<(), GatherError>(())
//! ```

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis, Ix2};

use crate::shape::ShapeArg;

mod rows;

pub(crate) use rows::Step;

/// An optimizer a training step applies to each touched row once (decision 53: a user's own
/// implements it). [`begin_step`](Self::begin_step) hands the step its row update, which the
/// step's threads share, and its state: one row of floats per table row, of which each
/// update gets its own row's. Before anything changes, a step checks the state's shape
/// ([`state_dim`](Self::state_dim)) against the one the table needs
/// ([`state_width`](Self::state_width) values for each of its rows: decision 66).
///
/// ```
/// use ndarray::{Array2, ArrayViewMut2, array};
/// use ndarray_gather::optim::{Optimizer, RowUpdate};
/// use ndarray_gather::prelude::*;
///
/// /// SGD with momentum: one velocity per element.
/// struct Momentum { rule: Rule, velocity: Array2<f32> }
/// struct Rule { lr: f32, mu: f32 }
///
/// impl RowUpdate for Rule {
///     fn update(&self, w: &mut [f32], g: &[f32], v: &mut [f32]) {
///         for ((w, g), v) in w.iter_mut().zip(g).zip(v) {
///             *v = self.mu * *v + g;
///             *w -= self.lr * *v;
///         }
///     }
/// }
///
/// impl Optimizer for Momentum {
///     fn state_dim(&self) -> Option<(usize, usize)> {
///         Some(self.velocity.dim())
///     }
///     fn state_width(&self, len: usize) -> usize {
///         len // one velocity per value of the row
///     }
///     fn begin_step(&mut self) -> (&dyn RowUpdate, Option<ArrayViewMut2<'_, f32>>) {
///         (&self.rule, Some(self.velocity.view_mut()))
///     }
/// }
///
/// let mut table = Array2::from_elem((3, 2), 1.0f32);
/// let mut opt = Momentum { rule: Rule { lr: 0.5, mu: 0.9 }, velocity: Array2::zeros((3, 2)) };
/// let plan = GatherReducePlan::new(table.dim(), &[2, 2], Segments::starts(&[0]), 0)?;
/// plan.step(&array![[1.0, 0.0]], Pooling::Sum, &mut table, &mut opt)?;
/// assert_eq!(table, array![[1.0, 1.0], [1.0, 1.0], [0.0, 1.0]]);
/// // A velocity of another width is refused before anything changes.
/// let mut narrow = Momentum { rule: Rule { lr: 0.5, mu: 0.9 }, velocity: Array2::zeros((3, 1)) };
/// let e = plan.step(&array![[1.0, 0.0]], Pooling::Sum, &mut table, &mut narrow).unwrap_err();
/// assert_eq!(
///     e.to_string(),
///     "GatherReducePlan::step: the optimizer's state is [3, 1], but a table of 3 rows of 2 values needs [3, 2]"
/// );
/// # Ok::<(), GatherError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an optimizer",
    note = "a step takes `&mut opt` for one table, and `&mut opts` (a `Vec` or slice of optimizers, `&mut dyn Optimizer` or `Box<dyn Optimizer>`) for a collection"
)]
pub trait Optimizer {
    /// Its state's shape: `(rows, values per row)`, one row per table row; `None`
    /// without state.
    fn state_dim(&self) -> Option<(usize, usize)>;

    /// The values of state each row of a table whose rows hold `len` values needs (0: no
    /// state). A step checks `state_dim() == Some((table rows, state_width(len)))` (or
    /// `None` where this is 0) before anything changes.
    fn state_width(&self, len: usize) -> usize;

    /// Starts a step (a step count advances here): the update every touched row gets,
    /// and the state's rows (of the shape [`state_dim`](Self::state_dim) says).
    fn begin_step(&mut self) -> (&dyn RowUpdate, Option<ArrayViewMut2<'_, f32>>);
}

/// Optimizers behind a pointer forward to it (decision 67): `&mut O`, so that `&mut [&mut
/// dyn Optimizer]` and `&mut [&mut Sgd]` pass where a step takes `&mut [O]`, and `Box<O>`,
/// so that a `Vec<Box<dyn Optimizer>>` passes as `&mut opts`.
macro_rules! forward_optimizer {
    ($($ptr:ty),*) => {$(
        impl<O: Optimizer + ?Sized> Optimizer for $ptr {
            fn state_dim(&self) -> Option<(usize, usize)> {
                (**self).state_dim()
            }

            fn state_width(&self, len: usize) -> usize {
                (**self).state_width(len)
            }

            fn begin_step(&mut self) -> (&dyn RowUpdate, Option<ArrayViewMut2<'_, f32>>) {
                (**self).begin_step()
            }
        }
    )*};
}

forward_optimizer!(&mut O, Box<O>);

/// `opt`'s state checked against a table of `rows` rows of `len` values (decision 66);
/// `table` names the table in the message (a collection's).
pub(crate) fn check_state<O: Optimizer + ?Sized>(
    op: &'static str,
    table: Option<usize>,
    opt: &O,
    rows: usize,
    len: usize,
) -> Result<(), crate::error::GatherError> {
    let width = opt.state_width(len);
    let needs = (width > 0).then_some((rows, width));
    let found = opt.state_dim();
    if found == needs {
        return Ok(());
    }
    let shape =
        |d: Option<(usize, usize)>| d.map_or_else(|| "none".to_string(), |(r, c)| format!("[{r}, {c}]"));
    Err(crate::error::GatherError::Optimizer {
        op,
        detail: format!(
            "{}is {}, but a table of {rows} rows of {len} values needs {}",
            table.map_or_else(String::new, |t| format!("of table {t} ")),
            shape(found),
            shape(needs)
        ),
    })
}

/// One row's update, shared by a step's threads: `w` the row's values and `g` its summed
/// gradient (both in the row's row-major order), `state` the optimizer's row for it (empty
/// without state).
pub trait RowUpdate: Sync {
    /// Updates the row.
    fn update(&self, w: &mut [f32], g: &[f32], state: &mut [f32]);
}

/// Plain SGD: `w -= lr * g` (FBGEMM's `EXACT_SGD`, `torch.optim.SGD`).
#[doc(alias = "EXACT_SGD")]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sgd {
    lr: f32,
}

impl Sgd {
    /// SGD with learning rate `lr`.
    ///
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::optim::Sgd;
    /// use ndarray_gather::prelude::*;
    ///
    /// let mut table = Array2::from_elem((2, 2), 1.0f32);
    /// let plan = GatherReducePlan::new(table.dim(), &[1], Segments::starts(&[0]), 0)?;
    /// plan.step(&array![[2.0, 4.0]], Pooling::Sum, &mut table, &mut Sgd::new(0.25))?;
    /// assert_eq!(table, array![[1.0, 1.0], [0.5, 0.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn new(lr: f32) -> Self {
        Sgd { lr }
    }
}

impl RowUpdate for Sgd {
    fn update(&self, w: &mut [f32], g: &[f32], _: &mut [f32]) {
        let lr = self.lr;
        w.iter_mut().zip(g).for_each(|(w, &g)| *w -= lr * g);
    }
}

impl Optimizer for Sgd {
    fn state_dim(&self) -> Option<(usize, usize)> {
        None
    }

    fn state_width(&self, _: usize) -> usize {
        0
    }

    fn begin_step(&mut self) -> (&dyn RowUpdate, Option<ArrayViewMut2<'_, f32>>) {
        (self, None)
    }
}

/// How a [`RowwiseAdagrad`] decays its weights.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Decay {
    None,
    /// L2: `wd * w` added to the gradient first (in the row's moment too).
    L2(f32),
    /// Decoupled: `w *= 1 - lr * wd` before the update.
    Decoupled(f32),
}

/// Row-wise Adagrad, FBGEMM's `EXACT_ROWWISE_ADAGRAD` (decision 52): one moment per row,
/// `m_r += (Σ_j g_j², from 0 in column order) / D`, `mult = lr / (sqrt(m_r) + eps)`,
/// `w_j -= mult * g_j`. `eps` is 1e-8 unless set.
#[doc(alias = "EXACT_ROWWISE_ADAGRAD")]
#[derive(Debug, Clone, PartialEq)]
pub struct RowwiseAdagrad {
    rule: Rowwise,
    moments: Array1<f32>,
}

/// [`RowwiseAdagrad`]'s update.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rowwise {
    lr: f32,
    eps: f32,
    decay: Decay,
}

impl RowwiseAdagrad {
    /// A zero moment for each of `rows` rows, learning rate `lr`.
    pub fn new(rows: usize, lr: f32) -> Self {
        RowwiseAdagrad {
            rule: Rowwise {
                lr,
                eps: 1e-8,
                decay: Decay::None,
            },
            moments: Array1::zeros(rows),
        }
    }

    /// The `eps` added to each row's root.
    pub fn eps(mut self, eps: f32) -> Self {
        self.rule.eps = eps;
        self
    }

    /// L2 weight decay: `wd * w_j` added to `g_j` first (in the moment too).
    pub fn weight_decay(mut self, wd: f32) -> Self {
        self.rule.decay = Decay::L2(wd);
        self
    }

    /// Decoupled weight decay: `w_j *= 1 - lr * wd` before the update.
    pub fn decoupled_weight_decay(mut self, wd: f32) -> Self {
        self.rule.decay = Decay::Decoupled(wd);
        self
    }

    /// The rows' moments.
    pub fn state(&self) -> ArrayView1<'_, f32> {
        self.moments.view()
    }

    /// The rows' moments, to restore a checkpoint.
    pub fn state_mut(&mut self) -> ArrayViewMut1<'_, f32> {
        self.moments.view_mut()
    }
}

impl RowUpdate for Rowwise {
    fn update(&self, w: &mut [f32], g: &[f32], m: &mut [f32]) {
        let d = w.len().max(1) as f32;
        let l2 = match self.decay {
            Decay::L2(wd) => wd,
            _ => 0.0,
        };
        // (Products and sums apart: no fused multiply-add, as FBGEMM's reference.)
        let grad = |w: f32, g: f32| if l2 != 0.0 { g + l2 * w } else { g };
        let sum = w.iter().zip(g).fold(0.0f32, |s, (&w, &g)| {
            let g = grad(w, g);
            s + g * g
        });
        m[0] += sum / d;
        let mult = self.lr / (m[0].sqrt() + self.eps);
        let keep = match self.decay {
            Decay::Decoupled(wd) => 1.0 - self.lr * wd,
            _ => 1.0,
        };
        w.iter_mut().zip(g).for_each(|(w, &g)| {
            let g = grad(*w, g);
            if keep != 1.0 {
                *w *= keep;
            }
            *w -= mult * g;
        });
    }
}

impl Optimizer for RowwiseAdagrad {
    fn state_dim(&self) -> Option<(usize, usize)> {
        Some((self.moments.len(), 1))
    }

    fn state_width(&self, _: usize) -> usize {
        1
    }

    fn begin_step(&mut self) -> (&dyn RowUpdate, Option<ArrayViewMut2<'_, f32>>) {
        (&self.rule, Some(self.moments.view_mut().insert_axis(Axis(1))))
    }
}

/// Element-wise Adagrad, as `torch.optim.Adagrad` on a sparse gradient and FBGEMM's
/// `EXACT_ADAGRAD`: `s += g²`, `w -= lr * (g / (sqrt(s) + eps))`. `eps` is 1e-10 unless
/// set (torch's).
#[doc(alias = "EXACT_ADAGRAD")]
#[derive(Debug, Clone, PartialEq)]
pub struct Adagrad {
    rule: Elementwise,
    sums: Array2<f32>,
}

/// [`Adagrad`]'s update.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Elementwise {
    lr: f32,
    eps: f32,
}

impl Adagrad {
    /// Zero sums of a table of `shape` (`(rows, cols)`), learning rate `lr`.
    pub fn new<M>(shape: impl ShapeArg<M, Dim = Ix2>, lr: f32) -> Self {
        Adagrad {
            rule: Elementwise { lr, eps: 1e-10 },
            sums: Array2::zeros(shape.into_dim()),
        }
    }

    /// The `eps` added to each root.
    pub fn eps(mut self, eps: f32) -> Self {
        self.rule.eps = eps;
        self
    }

    /// The sums of squares.
    pub fn state(&self) -> ArrayView2<'_, f32> {
        self.sums.view()
    }

    /// The sums of squares, to restore a checkpoint.
    pub fn state_mut(&mut self) -> ArrayViewMut2<'_, f32> {
        self.sums.view_mut()
    }
}

impl RowUpdate for Elementwise {
    fn update(&self, w: &mut [f32], g: &[f32], s: &mut [f32]) {
        let Elementwise { lr, eps } = *self;
        for ((w, &g), s) in w.iter_mut().zip(g).zip(s) {
            *s += g * g;
            *w -= lr * (g / (s.sqrt() + eps));
        }
    }
}

impl Optimizer for Adagrad {
    fn state_dim(&self) -> Option<(usize, usize)> {
        Some(self.sums.dim())
    }

    fn state_width(&self, len: usize) -> usize {
        len
    }

    fn begin_step(&mut self) -> (&dyn RowUpdate, Option<ArrayViewMut2<'_, f32>>) {
        (&self.rule, Some(self.sums.view_mut()))
    }
}

/// Lazy Adam, as `torch.optim.SparseAdam`: the moments of touched rows only, bias
/// correction by a step count that each step advances once, in SparseAdam's order (`m +=
/// (g - m) * (1 - b1)`, `v += (g² - v) * (1 - b2)`, `w -= size * (m / (sqrt(v) + eps))`
/// with `size = lr * sqrt(1 - b2^t) / (1 - b1^t)` in `f64`). `betas` (0.9, 0.999) and
/// `eps` 1e-8 unless set.
#[doc(alias = "SparseAdam")]
#[derive(Debug, Clone, PartialEq)]
pub struct Adam {
    rule: Lazy,
    /// Per row, its first moments, then its second.
    moments: Array2<f32>,
}

/// [`Adam`]'s update at one step.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Lazy {
    lr: f32,
    betas: (f64, f64),
    eps: f32,
    step: i32,
    /// The step's `size`.
    size: f32,
}

impl Adam {
    /// Zero moments of a table of `shape` (`(rows, cols)`), learning rate `lr`.
    pub fn new<M>(shape: impl ShapeArg<M, Dim = Ix2>, lr: f32) -> Self {
        let dim = shape.into_dim();
        let (rows, cols) = (dim[0], dim[1]);
        Adam {
            rule: Lazy {
                lr,
                betas: (0.9, 0.999),
                eps: 1e-8,
                step: 0,
                size: 0.0,
            },
            moments: Array2::zeros((rows, 2 * cols)),
        }
    }

    /// The moments' decay rates (`f64`, as torch's Python floats: `1 - b` is rounded to
    /// `f32` once).
    pub fn betas(mut self, b1: f64, b2: f64) -> Self {
        self.rule.betas = (b1, b2);
        self
    }

    /// The `eps` added to the second moment's root.
    pub fn eps(mut self, eps: f32) -> Self {
        self.rule.eps = eps;
        self
    }

    /// The step count and the first and second moments.
    pub fn state(&self) -> (i32, ArrayView2<'_, f32>, ArrayView2<'_, f32>) {
        let c = self.moments.ncols() / 2;
        let (m, v) = self.moments.view().split_at(Axis(1), c);
        (self.rule.step, m, v)
    }

    /// The step count and the moments, to restore a checkpoint.
    pub fn state_mut(&mut self) -> (&mut i32, ArrayViewMut2<'_, f32>, ArrayViewMut2<'_, f32>) {
        let c = self.moments.ncols() / 2;
        let (m, v) = self.moments.view_mut().split_at(Axis(1), c);
        (&mut self.rule.step, m, v)
    }
}

impl RowUpdate for Lazy {
    fn update(&self, w: &mut [f32], g: &[f32], mv: &mut [f32]) {
        let (m, v) = mv.split_at_mut(w.len());
        let (k1, k2) = ((1.0 - self.betas.0) as f32, (1.0 - self.betas.1) as f32);
        let (eps, size) = (self.eps, self.size);
        for (((w, &g), m), v) in w.iter_mut().zip(g).zip(m).zip(v) {
            *m += (g - *m) * k1;
            *v += (g * g - *v) * k2;
            *w -= size * (*m / (v.sqrt() + eps));
        }
    }
}

impl Optimizer for Adam {
    fn state_dim(&self) -> Option<(usize, usize)> {
        Some(self.moments.dim())
    }

    fn state_width(&self, len: usize) -> usize {
        // Each row's first moments, then its second.
        2 * len
    }

    fn begin_step(&mut self) -> (&dyn RowUpdate, Option<ArrayViewMut2<'_, f32>>) {
        let r = &mut self.rule;
        r.step = r.step.saturating_add(1);
        // (In `f64`, as torch computes its Python scalars.)
        let (c1, c2) = (1.0 - r.betas.0.powi(r.step), 1.0 - r.betas.1.powi(r.step));
        r.size = (f64::from(r.lr) * c2.sqrt() / c1) as f32;
        (&self.rule, Some(self.moments.view_mut()))
    }
}
