//! The walk of a plan's segments by channel planes (`sample`'s NCHW inputs): for a block
//! of segments, each channel's plane in turn, so that the block's entries are read from
//! the L1 cache by every channel, and each plane's pixels from a few of its rows.
//!
//! Each output element is `0 + w₀·x₀ + w₁·x₁ + …` in entry order: the weighted `Sum`'s
//! `RowOp`, so the planes and the rows walk give the same bits.

use std::ops::{Add, Mul};

use ndarray::{ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2};
use num_traits::{Float, Zero};

use super::Csr;

/// `Σ w[k]·x[row_k]` over entries `k` of `range`, from `0`, in order: one output element.
/// `x(row)` reads a pixel of the plane.
#[inline(always)]
fn dot<A>(entries: &[[u32; 2]], w: &[A], x: impl Fn(usize) -> A) -> A
where
    A: Copy + Zero + Add<Output = A> + Mul<Output = A>,
{
    if let ([e0, e1, e2, e3], [w0, w1, w2, w3]) = (entries, w) {
        // A bilinear point inside: the same sum, unrolled.
        let (x0, x1, x2, x3) = (
            x(e0[0] as usize),
            x(e1[0] as usize),
            x(e2[0] as usize),
            x(e3[0] as usize),
        );
        return A::zero() + *w0 * x0 + *w1 * x1 + *w2 * x2 + *w3 * x3;
    }
    let mut acc = A::zero();
    for (e, &wk) in entries.iter().zip(w) {
        acc = acc + wk * x(e[0] as usize);
    }
    acc
}

/// `out[c, j] = Σ w[k]·x[c, row_k]` over segment `first + j`'s entries, for every channel
/// `c` (a plan made by `Csr::of_runs(.., rows_below)`: entry `k` is position `k`, its
/// weight `w[k]`, its row below `rows_below`, which `x`'s columns must reach).
pub(crate) fn planes_forward<A>(
    csr: &Csr,
    rows_below: usize,
    w: &[A],
    x: ArrayView2<'_, A>,
    mut out: ArrayViewMut2<'_, A>,
    first: usize,
) where
    A: Copy + Zero + Add<Output = A> + Mul<Output = A>,
{
    let (offsets, entries) = csr.runs();
    let segs = first..first + out.ncols();
    if offsets.len() <= segs.end || w.len() < entries.len() || x.ncols() < rows_below {
        debug_assert!(false, "planes_forward: a plan that does not fit its input");
        return;
    }
    let bounds = |s: usize| offsets[s]..offsets[s + 1];
    for (xc, mut oc) in x.outer_iter().zip(out.outer_iter_mut()) {
        match xc.as_slice() {
            Some(xs) => {
                for (o, s) in oc.iter_mut().zip(segs.clone()) {
                    let r = bounds(s);
                    // SAFETY: every entry's row is below `rows_below` (`Csr::of_runs`
                    // checked them), which is at most `x.ncols()` = `xs.len()` (checked
                    // above).
                    *o = dot(&entries[r.clone()], &w[r], |row| unsafe {
                        *xs.get_unchecked(row)
                    });
                }
            }
            None => {
                for (o, s) in oc.iter_mut().zip(segs.clone()) {
                    let r = bounds(s);
                    *o = dot(&entries[r.clone()], &w[r], |row| xc[row]);
                }
            }
        }
    }
}

/// `g_x[row_k] += w[k]·g_y[s]` for every segment `s` in order and its entries in order:
/// one channel plane of the input's gradient, each element's contributions in output
/// order.
pub(crate) fn planes_backward<A>(csr: &Csr, w: &[A], g_y: ArrayView1<'_, A>, mut g_x: ArrayViewMut1<'_, A>)
where
    A: Copy + Add<Output = A> + Mul<Output = A>,
{
    let (offsets, entries) = csr.runs();
    for (s, &g) in g_y.iter().enumerate().take(offsets.len().saturating_sub(1)) {
        let r = offsets[s]..offsets[s + 1];
        for (e, &wk) in entries[r.clone()].iter().zip(&w[r]) {
            let row = e[0] as usize;
            g_x[row] = g_x[row] + wk * g;
        }
    }
}

/// How a RoIAlign bin folds its points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoiFold {
    /// torchvision's: `Σ (w₁v₁ + w₂v₂ + w₃v₃ + w₄v₄)` over the points, over the count.
    Mean,
    /// ONNX Runtime's max: the largest `wᵢvᵢ` (`a < b ? b : a`, C++'s `std::max`).
    Max,
}

/// C++'s `std::max(a, b)`: `b` only if `a < b` (a NaN `a` stays, a NaN `b` is passed over).
#[inline(always)]
fn keep<A: PartialOrd>(a: A, b: A) -> A {
    if a < b { b } else { a }
}

/// One box's RoIAlign points: `per_bin` a bin, bin after bin, each its 4 corners' pixels
/// (each below `below`, the plane's length) and weights; a point outside the input reads
/// pixel 0 with weights 0, as torchvision's and ONNX Runtime's do.
pub(crate) struct RoiPoints<A> {
    rows: Vec<[u32; 4]>,
    weights: Vec<[A; 4]>,
    per_bin: usize,
    count: A,
    below: usize,
}

impl<A: Float> RoiPoints<A> {
    /// The points, if every row lies below `below` and each has its weights.
    pub fn new(
        rows: Vec<[u32; 4]>,
        weights: Vec<[A; 4]>,
        per_bin: usize,
        count: A,
        below: usize,
    ) -> Option<Self> {
        let ok = rows.len() == weights.len() && rows.iter().flatten().all(|&p| (p as usize) < below);
        ok.then_some(RoiPoints {
            rows,
            weights,
            per_bin,
            count,
            below,
        })
    }

    /// Bin `s`'s points.
    #[inline(always)]
    fn bin(&self, s: usize) -> impl Iterator<Item = (&[u32; 4], &[A; 4])> {
        let r = (s * self.per_bin).min(self.rows.len())..((s + 1) * self.per_bin).min(self.rows.len());
        self.rows[r.clone()].iter().zip(&self.weights[r])
    }
}

/// One box on one channel plane: `out[s]` folds bin `s`'s points.
pub(crate) fn roi_forward<A: Float>(
    p: &RoiPoints<A>,
    fold: RoiFold,
    x: ArrayView1<'_, A>,
    out: ArrayViewMut1<'_, A>,
) {
    match x.as_slice() {
        Some(xs) if xs.len() >= p.below => {
            // SAFETY: every row is below `p.below` (`RoiPoints::new` checked them), which is
            // at most `xs.len()` (checked just above).
            roi_bins(p, fold, |r| unsafe { *xs.get_unchecked(r as usize) }, out)
        }
        _ => roi_bins(
            p,
            fold,
            |r| x.get(r as usize).copied().unwrap_or_else(A::zero),
            out,
        ),
    }
}

#[inline(always)]
fn roi_bins<A: Float>(p: &RoiPoints<A>, fold: RoiFold, v: impl Fn(u32) -> A, mut out: ArrayViewMut1<'_, A>) {
    for (s, o) in out.iter_mut().enumerate() {
        *o = match fold {
            RoiFold::Mean => {
                let mut acc = A::zero();
                for (r, w) in p.bin(s) {
                    acc = acc + (w[0] * v(r[0]) + w[1] * v(r[1]) + w[2] * v(r[2]) + w[3] * v(r[3]));
                }
                acc / p.count
            }
            RoiFold::Max => {
                let mut acc = None;
                for (r, w) in p.bin(s) {
                    let m = keep(
                        keep(keep(w[0] * v(r[0]), w[1] * v(r[1])), w[2] * v(r[2])),
                        w[3] * v(r[3]),
                    );
                    acc = Some(acc.map_or(m, |a| keep(a, m)));
                }
                acc.unwrap_or_else(A::zero)
            }
        };
    }
}

/// The adjoint of [`roi_forward`]'s mean on one channel plane of one box: for each bin in
/// order, each point inside the input (weights not all 0), its 4 corners
/// `g_x[p] += g · w / count` (torchvision's order).
pub(crate) fn roi_backward<A: Float>(p: &RoiPoints<A>, g: ArrayView1<'_, A>, mut g_x: ArrayViewMut1<'_, A>) {
    for (s, &gs) in g.iter().enumerate() {
        for (r, w) in p.bin(s) {
            if w.iter().all(|w| w.is_zero()) {
                continue;
            }
            for (&r, &w) in r.iter().zip(w) {
                if let Some(e) = g_x.get_mut(r as usize) {
                    *e = *e + gs * w / p.count;
                }
            }
        }
    }
}
