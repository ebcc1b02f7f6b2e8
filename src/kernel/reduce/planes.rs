//! The walk of a plan's segments by channel planes (`sample`'s NCHW inputs): for a block
//! of segments, each channel's plane in turn, so that the block's entries are read from
//! the L1 cache by every channel, and each plane's pixels from a few of its rows.
//!
//! Each output element is `0 + w₀·x₀ + w₁·x₁ + …` in entry order: the weighted `Sum`'s
//! `RowOp`, so the planes and the rows walk give the same bits.

use std::ops::{Add, Mul};

use ndarray::{ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2};
use num_traits::Zero;

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
