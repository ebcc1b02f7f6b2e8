//! Optimizers for a plan's training step (decisions 52-54, issue 66's first part): each
//! touched row's gradient summed exactly as
//! [`backward_rows`](crate::GatherReducePlan::backward_rows) sums it (the same bits), then
//! updated once, in FBGEMM's "exact" order. The state is the caller's value: `Clone`,
//! its arrays readable and writable (`state()`), so a checkpoint is an array.
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

use ndarray::{Array1, Array2, ArrayView1, ArrayViewMut1, Ix2};

use crate::error::GatherError;
use crate::shape::ShapeArg;

/// A row update: what [`GatherReducePlan::step`](crate::GatherReducePlan::step) applies to
/// each touched row once, with that row's summed gradient (decision 53: a user's own
/// optimizer implements it).
pub trait Optimizer {
    /// The rows its state holds, checked against the table before anything changes
    /// (`None`: no per-row state).
    fn rows(&self) -> Option<usize>;

    /// Called once per step, before its rows are updated (a step count advances here).
    fn begin_step(&mut self) {}

    /// Updates row `r`'s values `w` with its gradient `g` (both the row's values in
    /// row-major order).
    fn update(&mut self, r: usize, w: ArrayViewMut1<'_, f32>, g: ArrayView1<'_, f32>);
}

/// Plain SGD: `w -= lr * g`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sgd {
    lr: f32,
}

impl Sgd {
    /// SGD with learning rate `lr`.
    pub fn new(lr: f32) -> Self {
        Sgd { lr }
    }
}

impl Optimizer for Sgd {
    fn rows(&self) -> Option<usize> {
        None
    }

    fn update(&mut self, _: usize, mut w: ArrayViewMut1<'_, f32>, g: ArrayView1<'_, f32>) {
        let lr = self.lr;
        w.zip_mut_with(&g, |w, &g| *w -= lr * g);
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
#[derive(Debug, Clone, PartialEq)]
pub struct RowwiseAdagrad {
    lr: f32,
    eps: f32,
    decay: Decay,
    moments: Array1<f32>,
}

impl RowwiseAdagrad {
    /// A zero moment for each of `rows` rows, learning rate `lr`.
    pub fn new(rows: usize, lr: f32) -> Self {
        RowwiseAdagrad {
            lr,
            eps: 1e-8,
            decay: Decay::None,
            moments: Array1::zeros(rows),
        }
    }

    /// The `eps` added to each row's root.
    pub fn eps(mut self, eps: f32) -> Self {
        self.eps = eps;
        self
    }

    /// L2 weight decay: `wd * w_j` added to `g_j` first (in the moment too).
    pub fn weight_decay(mut self, wd: f32) -> Self {
        self.decay = Decay::L2(wd);
        self
    }

    /// Decoupled weight decay: `w_j *= 1 - lr * wd` before the update.
    pub fn decoupled_weight_decay(mut self, wd: f32) -> Self {
        self.decay = Decay::Decoupled(wd);
        self
    }

    /// The rows' moments.
    pub fn state(&self) -> &Array1<f32> {
        &self.moments
    }

    /// The rows' moments, to restore a checkpoint.
    pub fn state_mut(&mut self) -> &mut Array1<f32> {
        &mut self.moments
    }
}

impl Optimizer for RowwiseAdagrad {
    fn rows(&self) -> Option<usize> {
        Some(self.moments.len())
    }

    fn update(&mut self, r: usize, mut w: ArrayViewMut1<'_, f32>, g: ArrayView1<'_, f32>) {
        let d = w.len().max(1) as f32;
        let l2 = match self.decay {
            Decay::L2(wd) => wd,
            _ => 0.0,
        };
        // (Products and sums apart: no fused multiply-add, as FBGEMM's reference.)
        let grad = |w: f32, g: f32| if l2 != 0.0 { g + l2 * w } else { g };
        let sum = w.iter().zip(&g).fold(0.0f32, |s, (&w, &g)| {
            let g = grad(w, g);
            s + g * g
        });
        self.moments[r] += sum / d;
        let mult = self.lr / (self.moments[r].sqrt() + self.eps);
        let keep = match self.decay {
            Decay::Decoupled(wd) => 1.0 - self.lr * wd,
            _ => 1.0,
        };
        w.zip_mut_with(&g, |w, &g| {
            let g = grad(*w, g);
            if keep != 1.0 {
                *w *= keep;
            }
            *w -= mult * g;
        });
    }
}

/// Element-wise Adagrad, as `torch.optim.Adagrad` on a sparse gradient: `s += g²`,
/// `w -= lr * g / (sqrt(s) + eps)`. `eps` is 1e-10 unless set (torch's).
#[derive(Debug, Clone, PartialEq)]
pub struct Adagrad {
    lr: f32,
    eps: f32,
    sums: Array2<f32>,
}

impl Adagrad {
    /// Zero sums of a table of `shape` (`(rows, cols)`), learning rate `lr`.
    pub fn new<M>(shape: impl ShapeArg<M, Dim = Ix2>, lr: f32) -> Self {
        Adagrad {
            lr,
            eps: 1e-10,
            sums: Array2::zeros(shape.into_dim()),
        }
    }

    /// The `eps` added to each root.
    pub fn eps(mut self, eps: f32) -> Self {
        self.eps = eps;
        self
    }

    /// The sums of squares.
    pub fn state(&self) -> &Array2<f32> {
        &self.sums
    }
}

impl Optimizer for Adagrad {
    fn rows(&self) -> Option<usize> {
        Some(self.sums.nrows())
    }

    fn update(&mut self, r: usize, mut w: ArrayViewMut1<'_, f32>, g: ArrayView1<'_, f32>) {
        let (lr, eps) = (self.lr, self.eps);
        let mut s = self.sums.row_mut(r);
        ndarray::Zip::from(&mut w)
            .and(&mut s)
            .and(&g)
            .for_each(|w, s, &g| {
                *s += g * g;
                *w -= lr * g / (s.sqrt() + eps);
            });
    }
}

/// Lazy Adam, as `torch.optim.SparseAdam`: the moments of touched rows only, bias
/// correction by a step count that each step advances once. `betas` (0.9, 0.999) and
/// `eps` 1e-8 unless set.
#[derive(Debug, Clone, PartialEq)]
pub struct Adam {
    lr: f32,
    betas: (f32, f32),
    eps: f32,
    step: i32,
    first: Array2<f32>,
    second: Array2<f32>,
}

impl Adam {
    /// Zero moments of a table of `shape` (`(rows, cols)`), learning rate `lr`.
    pub fn new<M>(shape: impl ShapeArg<M, Dim = Ix2>, lr: f32) -> Self {
        let dim = shape.into_dim();
        Adam {
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            step: 0,
            first: Array2::zeros(dim),
            second: Array2::zeros(dim),
        }
    }

    /// The moments' decay rates.
    pub fn betas(mut self, b1: f32, b2: f32) -> Self {
        self.betas = (b1, b2);
        self
    }

    /// The `eps` added to the second moment's root.
    pub fn eps(mut self, eps: f32) -> Self {
        self.eps = eps;
        self
    }

    /// The step count and the first and second moments.
    pub fn state(&self) -> (i32, &Array2<f32>, &Array2<f32>) {
        (self.step, &self.first, &self.second)
    }
}

impl Optimizer for Adam {
    fn rows(&self) -> Option<usize> {
        Some(self.first.nrows())
    }

    fn begin_step(&mut self) {
        self.step += 1;
    }

    fn update(&mut self, r: usize, mut w: ArrayViewMut1<'_, f32>, g: ArrayView1<'_, f32>) {
        let ((b1, b2), eps, t) = (self.betas, self.eps, self.step);
        // (The bias corrections in `f64`, as torch computes its Python scalars.)
        let (c1, c2) = (1.0 - f64::from(b1).powi(t), 1.0 - f64::from(b2).powi(t));
        let size = (f64::from(self.lr) * c2.sqrt() / c1) as f32;
        let (mut m, mut v) = (self.first.row_mut(r), self.second.row_mut(r));
        ndarray::Zip::from(&mut w)
            .and(&mut m)
            .and(&mut v)
            .and(&g)
            .for_each(|w, m, v, &g| {
                *m += (g - *m) * (1.0 - b1);
                *v += (g * g - *v) * (1.0 - b2);
                *w -= size * (*m / (v.sqrt() + eps));
            });
    }
}

/// The optimizer's state, checked against a table of `rows` rows before anything changes.
pub(crate) fn check_state(op: &'static str, opt: &impl Optimizer, rows: usize) -> Result<(), GatherError> {
    match opt.rows() {
        Some(n) if n != rows => Err(GatherError::InputShape {
            op,
            expected: vec![rows],
            found: vec![n],
        }),
        _ => Ok(()),
    }
}
