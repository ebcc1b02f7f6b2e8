//! The walk of a plan's segments by channel planes (`sample`'s NCHW inputs): for a block
//! of segments, each channel's plane in turn, so that the block's entries are read from
//! the L1 cache by every channel, and each plane's pixels from a few of its rows.
//!
//! Each output element is `0 + w₀·x₀ + w₁·x₁ + …` in entry order: the weighted `Sum`'s
//! `RowOp`, so the planes and the rows walk give the same bits.

use std::ops::{Add, Mul};

use ndarray::{ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2};
use num_traits::Zero;

use super::Entries;

/// `out[c, j] = Σ w[pos]·x[c, row]` over segment `first + j`'s entries, for every channel
/// `c`. Rows must lie below `x`'s columns and positions below `w`'s length (the plan's
/// maker checked both); a skipped entry adds nothing.
pub(crate) fn planes_forward<A, E>(
    e: &E,
    w: &[A],
    x: ArrayView2<'_, A>,
    mut out: ArrayViewMut2<'_, A>,
    first: usize,
) where
    A: Copy + Zero + Add<Output = A> + Mul<Output = A>,
    E: Entries,
{
    for (xc, mut oc) in x.outer_iter().zip(out.outer_iter_mut()) {
        for (j, o) in oc.iter_mut().enumerate() {
            let mut acc = A::zero();
            for k in e.segment(first + j) {
                if let Some((row, pos)) = e.entry(k) {
                    acc = acc + w[pos] * xc[row];
                }
            }
            *o = acc;
        }
    }
}

/// `g_x[row] += w[pos]·g_y[s]` for every segment `s` in order and its entries in order:
/// one channel plane of the input's gradient, each element's contributions in output
/// order.
pub(crate) fn planes_backward<A, E>(e: &E, w: &[A], g_y: ArrayView1<'_, A>, mut g_x: ArrayViewMut1<'_, A>)
where
    A: Copy + Add<Output = A> + Mul<Output = A>,
    E: Entries,
{
    for (s, &g) in g_y.iter().enumerate() {
        for k in e.segment(s) {
            if let Some((row, pos)) = e.entry(k) {
                g_x[row] = g_x[row] + w[pos] * g;
            }
        }
    }
}
