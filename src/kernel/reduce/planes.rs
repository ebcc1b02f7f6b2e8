//! The interpolating gathers' walks (`sample`): a plan's points folded from pixel rows
//! (the forward), the plan's adjoint on one channel plane, and RoIAlign's bins.
//!
//! The forward reads rows of `cols` contiguous channels (a channels-last input's own, or
//! a block of an NCHW input's channels staged as rows) and writes an output row per
//! point: each element's terms fold in corner order, so every layout gives the same bits.

use ndarray::{ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, ArrayViewMut3, Axis};
use num_traits::Float;

use super::{BadIndex, Csr};
use crate::kernel::isa::{Isa, on_tier};

/// How a point's terms `wₖ·xₖ` fold into its output element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fold {
    /// `0 + w₀·x₀ + w₁·x₁ + …`, each product rounded (PyTorch's scalar kernels: 3-D).
    Plain,
    /// `x₀·w₀`, then `fma(xₖ, wₖ, acc)`, and `+ 0` for a point that reads fewer than
    /// `full` pixels: PyTorch's vectorized 2-D kernel, whose compiler fuses the corner
    /// sum, and whose masked corners add `0·w`.
    Fused { full: usize },
}

/// One batch item's plan as the forward walks it: segment `s`'s entries (rows below
/// `rows_below`, a plan made by `Csr::of_runs(.., rows_below)`) with weights `w`, folded
/// by `fold`.
#[derive(Clone, Copy)]
pub(crate) struct SampleRows<'a, A> {
    pub csr: &'a Csr,
    pub rows_below: usize,
    pub w: &'a [A],
    pub fold: Fold,
}

impl<A: Float> SampleRows<'_, A> {
    /// Whether rows of `cols` channels (`x`: `[rows_below, cols]`) and `points` outputs
    /// from segment `first` fit the plan.
    fn fits(&self, x: usize, cols: usize, first: usize, points: usize) -> bool {
        let (offsets, entries) = self.csr.runs();
        let fit = cols > 0 && x == self.rows_below * cols && offsets.len() > first + points;
        fit && self.w.len() >= entries.len()
    }

    /// `out[j, ..]` = segment `first + j` folded from the rows of `x` (`[rows_below,
    /// cols]`, row-major); `out` is `[points, cols]`, row-major. Compiled for `isa`.
    /// `Err` for arguments that do not fit the plan (nothing written).
    pub fn rows(&self, isa: Isa, x: &[A], out: &mut [A], first: usize) -> Result<(), BadIndex> {
        let cols = x.len() / self.rows_below.max(1);
        if out.is_empty() {
            return Ok(());
        }
        if !self.fits(x.len(), cols, first, out.len() / cols.max(1)) || !out.len().is_multiple_of(cols) {
            return Err(BadIndex);
        }
        on_tier(
            isa,
            #[inline(always)]
            || self.fold_rows(x, out, first),
        );
        Ok(())
    }

    /// `out[c, j]` = segment `j` folded from planes `x[c, ..]` (`[cb, rows_below]` into
    /// `[cb, points]`): the planes transposed into `rows` (`x.len()` long), folded into
    /// `out_rows` (`out.len()` long), transposed back. Compiled for `isa`. `Err` for
    /// arguments that do not fit the plan (nothing written).
    pub fn staged(
        &self,
        isa: Isa,
        x: ArrayView2<'_, A>,
        rows: &mut [A],
        out_rows: &mut [A],
        out: ArrayViewMut2<'_, A>,
    ) -> Result<(), BadIndex> {
        let cb = x.nrows();
        if out.is_empty() {
            return Ok(());
        }
        let fit = x.ncols() == self.rows_below && out.nrows() == cb && rows.len() == x.len();
        if !(fit && out_rows.len() == out.len() && self.fits(rows.len(), cb, 0, out.ncols())) {
            return Err(BadIndex);
        }
        on_tier(
            isa,
            #[inline(always)]
            || {
                to_rows(x, rows);
                self.fold_rows(rows, out_rows, 0);
                from_rows(out_rows, out);
            },
        );
        Ok(())
    }

    /// Adds the plan's adjoint into planes `g_x` (`[cb, rows_below]`) from planes `g_y`
    /// (`[cb, points]`): `g_x[c, row] += w · g_y[c, s]` for each segment `s` in order and
    /// its entries in order (each element's contributions in output order). Staged as the
    /// forward: `g_y` and `g_x` transposed into `g_rows` and `x_rows`, added, `g_x` back.
    /// `Err` for arguments that do not fit the plan (nothing written).
    pub fn staged_backward(
        &self,
        isa: Isa,
        g_y: ArrayView2<'_, A>,
        g_rows: &mut [A],
        x_rows: &mut [A],
        g_x: ArrayViewMut2<'_, A>,
    ) -> Result<(), BadIndex> {
        let cb = g_y.nrows();
        if g_x.is_empty() {
            return Ok(());
        }
        let points = self.csr.runs().0.len().saturating_sub(1);
        let fit = g_x.dim() == (cb, self.rows_below) && g_y.ncols() == points && g_rows.len() == g_y.len();
        if !(fit && x_rows.len() == g_x.len() && self.fits(x_rows.len(), cb, 0, points)) {
            return Err(BadIndex);
        }
        on_tier(
            isa,
            #[inline(always)]
            || {
                to_rows(g_y, g_rows);
                to_rows(g_x.view(), x_rows);
                self.add_rows(g_rows, x_rows);
                from_rows(x_rows, g_x);
            },
        );
        Ok(())
    }

    /// The adjoint's additions (the arguments checked by `staged_backward`).
    #[inline(always)]
    fn add_rows(&self, g: &[A], x: &mut [A]) {
        let (offsets, entries) = self.csr.runs();
        let cols = x.len() / self.rows_below;
        for (s, gs) in g.chunks_exact(cols).enumerate().take(offsets.len() - 1) {
            let r = offsets[s]..offsets[s + 1];
            for (e, &w) in entries[r.clone()].iter().zip(&self.w[r]) {
                let dst = &mut x[e[0] as usize * cols..][..cols];
                for (d, &g) in dst.iter_mut().zip(gs) {
                    *d = *d + w * g;
                }
            }
        }
    }

    /// The fold of every output row (the arguments checked by `fits`).
    #[inline(always)]
    fn fold_rows(&self, x: &[A], out: &mut [A], first: usize) {
        let (offsets, entries) = self.csr.runs();
        let cols = x.len() / self.rows_below;
        let row = |e: &[u32; 2]| &x[e[0] as usize * cols..][..cols];
        for (j, o) in out.chunks_exact_mut(cols).enumerate() {
            let r = offsets[first + j]..offsets[first + j + 1];
            let (e, w) = (&entries[r.clone()], &self.w[r]);
            match (self.fold, e, w) {
                (Fold::Fused { .. }, [e0, e1, e2, e3], &[w0, w1, w2, w3]) => {
                    // A bilinear point inside: the fused chain, one pass.
                    let (x0, x1, x2, x3) = (row(e0), row(e1), row(e2), row(e3));
                    for ((((o, &a), &b), &c), &d) in o.iter_mut().zip(x0).zip(x1).zip(x2).zip(x3) {
                        *o = d.mul_add(w3, c.mul_add(w2, b.mul_add(w1, a * w0)));
                    }
                }
                (Fold::Fused { full }, ..) => {
                    o.fill(A::zero());
                    for (k, (e, &wk)) in e.iter().zip(w).enumerate() {
                        for (o, &v) in o.iter_mut().zip(row(e)) {
                            *o = if k == 0 { v * wk } else { v.mul_add(wk, *o) };
                        }
                    }
                    if e.len() < full {
                        o.iter_mut().for_each(|o| *o = *o + A::zero());
                    }
                }
                (Fold::Plain, ..) => {
                    o.fill(A::zero());
                    for (e, &wk) in e.iter().zip(w) {
                        for (o, &v) in o.iter_mut().zip(row(e)) {
                            *o = *o + wk * v;
                        }
                    }
                }
            }
        }
    }
}

/// The side of the square blocks the transposes move through registers.
const SIDE: usize = 8;

/// `planes` `[cb, pixels]` as rows: `rows[p·cb + c] = planes[c, p]`.
#[inline(always)]
fn to_rows<A: Float>(planes: ArrayView2<'_, A>, rows: &mut [A]) {
    let (cb, n) = planes.dim();
    let slices = planes
        .outer_iter()
        .map(|p| p.to_slice())
        .collect::<Option<Vec<&[A]>>>();
    let (Some(slices), 0) = (slices, cb % SIDE) else {
        rows.iter_mut().zip(planes.t()).for_each(|(r, &v)| *r = v);
        return;
    };
    let whole = n - n % SIDE;
    for p0 in (0..whole).step_by(SIDE) {
        for (c0, group) in slices.chunks_exact(SIDE).enumerate() {
            let mut block = [[A::zero(); SIDE]; SIDE];
            for (b, plane) in block.iter_mut().zip(group) {
                b.copy_from_slice(&plane[p0..p0 + SIDE]);
            }
            for (i, row) in rows[p0 * cb..].chunks_exact_mut(cb).take(SIDE).enumerate() {
                let dst = &mut row[c0 * SIDE..c0 * SIDE + SIDE];
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = block[j][i];
                }
            }
        }
    }
    for (p, row) in rows.chunks_exact_mut(cb).enumerate().skip(whole) {
        row.iter_mut().zip(&slices).for_each(|(r, s)| *r = s[p]);
    }
}

/// Rows `[points, cb]` into `planes` `[cb, points]`: `planes[c, p] = rows[p·cb + c]`.
#[inline(always)]
fn from_rows<A: Float>(rows: &[A], mut planes: ArrayViewMut2<'_, A>) {
    let (cb, n) = planes.dim();
    let all = match planes.as_slice_mut() {
        Some(all) if cb % SIDE == 0 => all,
        _ => {
            planes
                .view_mut()
                .reversed_axes()
                .iter_mut()
                .zip(rows)
                .for_each(|(o, &v)| *o = v);
            return;
        }
    };
    let mut slices: Vec<&mut [A]> = all.chunks_exact_mut(n.max(1)).collect();
    let whole = n - n % SIDE;
    for p0 in (0..whole).step_by(SIDE) {
        for (c0, group) in slices.chunks_exact_mut(SIDE).enumerate() {
            let mut block = [[A::zero(); SIDE]; SIDE];
            for (i, row) in rows[p0 * cb..].chunks_exact(cb).take(SIDE).enumerate() {
                block[i].copy_from_slice(&row[c0 * SIDE..c0 * SIDE + SIDE]);
            }
            for (j, plane) in group.iter_mut().enumerate() {
                for (i, d) in plane[p0..p0 + SIDE].iter_mut().enumerate() {
                    *d = block[i][j];
                }
            }
        }
    }
    for (p, row) in rows.chunks_exact(cb).enumerate().skip(whole) {
        row.iter().zip(slices.iter_mut()).for_each(|(&v, s)| s[p] = v);
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

/// The most channels [`roi_staged`] folds at once (64 bytes of `f32`).
pub(crate) const ROI_LANES: usize = 16;

/// RoIAlign's bins of a block of `cb` channel planes `x` (`[cb, below]`, `cb` at most
/// [`ROI_LANES`]) for each `(k, points)` of `boxes`, into `out[k]` (`[cb, bins]`): the
/// planes transposed once into `rows` (`x.len()` long), then each point's corners read as
/// rows of `cb` lanes, each lane [`RoiFold`]'s arithmetic in its order (its bits).
/// Compiled for `isa`. `Err` for arguments that do not fit (nothing written).
pub(crate) fn roi_staged<A: Float>(
    isa: Isa,
    fold: RoiFold,
    x: ArrayView2<'_, A>,
    rows: &mut [A],
    boxes: &[(usize, &RoiPoints<A>)],
    mut out: ArrayViewMut3<'_, A>,
) -> Result<(), BadIndex> {
    let (cb, below) = x.dim();
    let fit = cb <= ROI_LANES && rows.len() == x.len() && out.shape()[1] == cb;
    let boxes_fit = boxes.iter().all(|&(k, p)| k < out.shape()[0] && p.below == below);
    if !(fit && boxes_fit) {
        return Err(BadIndex);
    }
    if cb == 0 {
        return Ok(());
    }
    on_tier(
        isa,
        #[inline(always)]
        || {
            to_rows(x, rows);
            for &(k, p) in boxes {
                roi_lanes(p, fold, rows, out.index_axis_mut(Axis(0), k));
            }
        },
    );
    Ok(())
}

/// One box's bins from rows of `cb = out.nrows()` lanes: `out[c, s]` folds bin `s`'s
/// points on lane `c`.
#[inline(always)]
fn roi_lanes<A: Float>(p: &RoiPoints<A>, fold: RoiFold, rows: &[A], mut out: ArrayViewMut2<'_, A>) {
    let cb = out.nrows();
    let mut acc = [A::zero(); ROI_LANES];
    let acc = &mut acc[..cb];
    for s in 0..out.ncols() {
        let mut any = false;
        acc.fill(A::zero());
        for (r, w) in p.bin(s) {
            let x = |k: usize| &rows[r[k] as usize * cb..][..cb];
            let lanes = acc.iter_mut().zip(x(0)).zip(x(1)).zip(x(2)).zip(x(3));
            match fold {
                RoiFold::Mean => {
                    for ((((a, &x0), &x1), &x2), &x3) in lanes {
                        *a = *a + (w[0] * x0 + w[1] * x1 + w[2] * x2 + w[3] * x3);
                    }
                }
                RoiFold::Max => {
                    for ((((a, &x0), &x1), &x2), &x3) in lanes {
                        let m = keep(keep(keep(w[0] * x0, w[1] * x1), w[2] * x2), w[3] * x3);
                        *a = if any { keep(*a, m) } else { m };
                    }
                }
            }
            any = true;
        }
        for (o, &a) in out.column_mut(s).iter_mut().zip(acc.iter()) {
            *o = match fold {
                RoiFold::Mean => a / p.count,
                RoiFold::Max => a,
            };
        }
    }
}

/// The adjoint of [`roi_staged`]'s mean on one channel plane of one box: for each bin in
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The literal folds of one element, for `rows_forward`'s tiers to match.
    fn literal(fold: Fold, terms: &[(f32, f32)]) -> f32 {
        match fold {
            Fold::Plain => terms.iter().fold(0.0, |acc, &(w, x)| acc + w * x),
            Fold::Fused { full } => {
                let Some((&(w0, x0), rest)) = terms.split_first() else {
                    return 0.0;
                };
                let acc = rest.iter().fold(x0 * w0, |acc, &(w, x)| x.mul_add(w, acc));
                if terms.len() < full { acc + 0.0 } else { acc }
            }
        }
    }

    /// Every tier folds each point as the literal loop, to the bit: the unrolled bilinear
    /// point, fewer and more entries, none, a `-0` term (kept by a point of every corner,
    /// `+0` for one that misses a corner), at widths that fill a vector and that do not.
    #[test]
    fn every_tier_folds_as_the_literal_loop() {
        let points: [&[u32]; 6] = [&[], &[2], &[0, 1, 3, 4], &[4, 4, 0], &[1, 2, 3, 4, 0], &[5]];
        let mut offsets = vec![0];
        let rows: Vec<u32> = points.iter().flat_map(|p| p.iter().copied()).collect();
        points
            .iter()
            .for_each(|p| offsets.push(offsets.last().unwrap_or(&0) + p.len()));
        let csr = Csr::of_runs(offsets, &rows, 6).expect("rows below 6");
        let w: Vec<f32> = (0..rows.len()).map(|k| k as f32 * 0.37 - 0.5).collect();
        for cols in [1, 3, 16, 17] {
            let mut x: Vec<f32> = (0..6 * cols)
                .map(|i| ((i * 7919 % 23) as f32 - 11.0) / 7.0)
                .collect();
            x[5 * cols..].fill(-0.0);
            for fold in [Fold::Plain, Fold::Fused { full: 4 }, Fold::Fused { full: 1 }] {
                let mut want = Vec::new();
                let mut k = 0;
                for p in points {
                    for c in 0..cols {
                        let terms: Vec<(f32, f32)> = p
                            .iter()
                            .zip(&w[k..])
                            .map(|(&r, &w)| (w, x[r as usize * cols + c]))
                            .collect();
                        want.push(literal(fold, &terms).to_bits());
                    }
                    k += p.len();
                }
                for isa in Isa::all_available() {
                    let mut out = vec![f32::NAN; points.len() * cols];
                    SampleRows {
                        csr: &csr,
                        rows_below: 6,
                        w: &w,
                        fold,
                    }
                    .rows(isa, &x, &mut out, 0)
                    .expect("the rows fit the plan");
                    let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, want, "{isa:?} {fold:?} cols {cols}");
                }
            }
        }
    }
}
