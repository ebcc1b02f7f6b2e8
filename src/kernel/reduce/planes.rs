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

/// A RoIAlign point outside the input (its corners' pixel).
pub(crate) const OUTSIDE: u32 = u32::MAX;

/// How a RoIAlign bin folds its points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoiFold {
    /// torchvision's: `Σ (w₁v₁ + w₂v₂ + w₃v₃ + w₄v₄)` over the points, over the count.
    Mean,
    /// ONNX Runtime's max: the largest `wᵢvᵢ` (`a < b ? b : a`, C++'s `std::max`), a point
    /// outside giving 0.
    Max,
}

/// C++'s `std::max(a, b)`: `b` only if `a < b` (a NaN `a` stays, a NaN `b` is passed over).
#[inline(always)]
fn keep<A: PartialOrd>(a: A, b: A) -> A {
    if a < b { b } else { a }
}

/// One channel plane of one box: `out[s]` folds bin `s`'s points (`per_bin` of them, bin
/// after bin: their 4 corners' pixels in `rows` (`OUTSIDE` for none) and weights).
pub(crate) fn roi_forward<A: Float>(
    rows: &[[u32; 4]],
    weights: &[[A; 4]],
    per_bin: usize,
    count: A,
    fold: RoiFold,
    x: ArrayView1<'_, A>,
    mut out: ArrayViewMut1<'_, A>,
) {
    let v = |p: u32| x.get(p as usize).copied().unwrap_or_else(A::zero);
    for (s, o) in out.iter_mut().enumerate() {
        let r = (s * per_bin).min(rows.len())..((s + 1) * per_bin).min(rows.len());
        let points = rows[r.clone()].iter().zip(&weights[r]);
        *o = match fold {
            RoiFold::Mean => {
                let mut acc = A::zero();
                for (p, w) in points.filter(|(p, _)| p[0] != OUTSIDE) {
                    acc = acc + (w[0] * v(p[0]) + w[1] * v(p[1]) + w[2] * v(p[2]) + w[3] * v(p[3]));
                }
                acc / count
            }
            RoiFold::Max => {
                let mut acc = None;
                for (p, w) in points {
                    let m = if p[0] == OUTSIDE {
                        A::zero()
                    } else {
                        keep(
                            keep(keep(w[0] * v(p[0]), w[1] * v(p[1])), w[2] * v(p[2])),
                            w[3] * v(p[3]),
                        )
                    };
                    acc = Some(acc.map_or(m, |a| keep(a, m)));
                }
                acc.unwrap_or_else(A::zero)
            }
        };
    }
}

/// The adjoint of [`roi_forward`]'s mean on one channel plane of one box: for each bin in
/// order, each point, its 4 corners `g_x[p] += g · w / count` (torchvision's order).
pub(crate) fn roi_backward<A: Float>(
    rows: &[[u32; 4]],
    weights: &[[A; 4]],
    per_bin: usize,
    count: A,
    g: ArrayView1<'_, A>,
    mut g_x: ArrayViewMut1<'_, A>,
) {
    for (s, &gs) in g.iter().enumerate() {
        let r = (s * per_bin).min(rows.len())..((s + 1) * per_bin).min(rows.len());
        for (p, w) in rows[r.clone()].iter().zip(&weights[r]) {
            for (&p, &w) in p.iter().zip(w) {
                if let Some(e) = g_x.get_mut(p as usize) {
                    *e = *e + gs * w / count;
                }
            }
        }
    }
}
