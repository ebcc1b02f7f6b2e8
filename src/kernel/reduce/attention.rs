//! Graph attention's per-segment kernels (decisions 55-56): each segment's softmax per
//! head, its backward, and the dot products of each position's row with its segment's
//! gradient row (an SDDMM). A segment is one thread's and is read in position order, so
//! the bits do not depend on the thread count; its results land at its own positions,
//! which no other segment has, so no message array and no atomics.

use num_traits::Float;

use super::Entries;
use super::ops::better;
use crate::kernel::BadIndex;
use crate::kernel::prefetch::{prefetch_block, prefetch_line};
use crate::kernel::schedule::run_ranges;
use crate::plan::policy::REDUCE_AHEAD;

/// `[P, H]` values per position and head, standard layout.
#[derive(Clone, Copy)]
pub(crate) struct Heads<'a, A> {
    pub v: &'a [A],
    pub heads: usize,
}

impl<A> Heads<'_, A> {
    /// Position `p`'s row.
    #[inline(always)]
    fn row(&self, p: usize) -> Result<&[A], BadIndex> {
        self.v.get(p * self.heads..(p + 1) * self.heads).ok_or(BadIndex)
    }
}

/// A `[P, H]` output in standard layout that the segments' threads write, each at its own
/// positions.
struct Out<A> {
    ptr: *mut A,
    len: usize,
    heads: usize,
}

// SAFETY: the threads write disjoint rows (`row`'s contract), so sharing the pointer is
// sharing disjoint `&mut [A]`, which `A: Send` allows.
unsafe impl<A: Send> Sync for Out<A> {}

impl<A> Out<A> {
    fn new(out: &mut [A], heads: usize) -> Self {
        Out {
            ptr: out.as_mut_ptr(),
            len: out.len(),
            heads,
        }
    }

    /// Position `p`'s row.
    ///
    /// # Safety
    /// No other reference to row `p` lives meanwhile (positions are one segment's, and a
    /// segment is one thread's).
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    unsafe fn row(&self, p: usize) -> Result<&mut [A], BadIndex> {
        let at = p.checked_mul(self.heads).ok_or(BadIndex)?;
        if at + self.heads > self.len {
            return Err(BadIndex);
        }
        // SAFETY: in bounds (checked), and this row is the caller's alone.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), self.heads) })
    }
}

/// `f(s, scratch)` for every segment `s < n`, in `jobs` chunks of segments, each job with
/// a scratch of `scratch` zeros.
fn each_segment<A: Float + Send>(
    n: usize,
    jobs: usize,
    scratch: usize,
    f: impl Fn(usize, &mut [A]) -> Result<(), BadIndex> + Sync,
) -> Result<(), BadIndex> {
    run_ranges(n, jobs, |segs| {
        let mut buf = vec![A::zero(); scratch];
        segs.into_iter().try_for_each(|s| f(s, &mut buf))
    })
}

/// The kept positions of segment `s` of `e`, in position order.
fn kept<E: Entries>(e: &E, s: usize) -> impl Iterator<Item = usize> + '_ {
    e.segment(s).filter_map(|k| e.entry(k).map(|(_, p)| p))
}

/// Asks for the rows (in `rows` of `per` values) of the entries [`REDUCE_AHEAD`] after
/// segment `s`'s, while the segment reads its own: a segment's positions are anywhere.
#[inline(always)]
fn ask_ahead<A, E: Entries>(e: &E, s: usize, rows: [*const A; 2], per: usize) {
    let end = e.segment(s).end;
    for k in end..(end + REDUCE_AHEAD).min(e.len()) {
        if let Some((_, p)) = e.entry(k) {
            for v in rows {
                prefetch_line(v.wrapping_add(p * per));
            }
        }
    }
}

/// Each segment's softmax of `scores` per head into `out` (`scores`' shape, zeroed where
/// no segment keeps the position): the segment's max subtracted, `exp`, the sum in
/// position order, a division. A segment of `-inf` scores gives zeros; a NaN propagates.
pub(crate) fn softmax<A: Float + Send + Sync, E: Entries>(
    e: &E,
    segments: usize,
    scores: Heads<'_, A>,
    out: &mut [A],
    jobs: usize,
) -> Result<(), BadIndex> {
    let (heads, out) = (scores.heads, Out::new(out, scores.heads));
    each_segment(segments, jobs, 2 * heads, |s, buf: &mut [A]| {
        let (max, sum) = buf.split_at_mut(heads);
        max.fill(A::neg_infinity());
        sum.fill(A::zero());
        ask_ahead(e, s, [scores.v.as_ptr(), out.ptr], heads);
        for p in kept(e, s) {
            for (m, v) in max.iter_mut().zip(scores.row(p)?) {
                if better(true, m, v) {
                    *m = *v;
                }
            }
        }
        for p in kept(e, s) {
            // SAFETY: position `p` is this segment's alone.
            let o = unsafe { out.row(p)? };
            for (((o, v), m), sum) in o.iter_mut().zip(scores.row(p)?).zip(&*max).zip(sum.iter_mut()) {
                *o = if *m == A::neg_infinity() {
                    A::zero()
                } else {
                    (*v - *m).exp()
                };
                *sum = *sum + *o;
            }
        }
        for p in kept(e, s) {
            // SAFETY: as above.
            let o = unsafe { out.row(p)? };
            for ((o, m), sum) in o.iter_mut().zip(&*max).zip(&*sum) {
                if *m != A::neg_infinity() {
                    *o = *o / *sum;
                }
            }
        }
        Ok(())
    })
}

/// The softmax's backward per segment and head into `out`: `alpha · (g − Σ g · alpha)`, the
/// sum over the segment's positions in position order.
pub(crate) fn softmax_backward<A: Float + Send + Sync, E: Entries>(
    e: &E,
    segments: usize,
    alpha: Heads<'_, A>,
    g: Heads<'_, A>,
    out: &mut [A],
    jobs: usize,
) -> Result<(), BadIndex> {
    let (heads, out) = (alpha.heads, Out::new(out, alpha.heads));
    each_segment(segments, jobs, heads, |s, dot: &mut [A]| {
        dot.fill(A::zero());
        ask_ahead(e, s, [alpha.v.as_ptr(), g.v.as_ptr()], heads);
        for p in kept(e, s) {
            for ((d, a), g) in dot.iter_mut().zip(alpha.row(p)?).zip(g.row(p)?) {
                *d = *d + *g * *a;
            }
        }
        for p in kept(e, s) {
            // SAFETY: position `p` is this segment's alone.
            let o = unsafe { out.row(p)? };
            for (((o, a), g), d) in o.iter_mut().zip(alpha.row(p)?).zip(g.row(p)?).zip(&*dot) {
                *o = *a * (*g - *d);
            }
        }
        Ok(())
    })
}

/// Rows in standard layout: `outer` blocks of `rows` rows of `len` elements.
#[derive(Clone, Copy)]
pub(crate) struct RowBlocks<'a, A> {
    pub v: &'a [A],
    pub outer: usize,
    pub rows: usize,
    pub len: usize,
}

impl<A> RowBlocks<'_, A> {
    /// Row `r` of block `b`.
    #[inline(always)]
    fn row(&self, b: usize, r: usize) -> Result<&[A], BadIndex> {
        let at = (b * self.rows + r) * self.len;
        self.v.get(at..at + self.len).ok_or(BadIndex)
    }
}

/// For each kept position `p` of segment `s` reading row `r`, per head `h`: the sum over
/// the blocks and the head's elements, in order, of `x[b, r, h, ·] · grad[b, s, h, ·]`,
/// into `out[p, h]` (an SDDMM: the gradient of per-head weights).
pub(crate) fn dot_rows<A: Float + Send + Sync, E: Entries>(
    e: &E,
    x: RowBlocks<'_, A>,
    grad: RowBlocks<'_, A>,
    out: &mut [A],
    heads: usize,
    jobs: usize,
) -> Result<(), BadIndex> {
    let out = Out::new(out, heads);
    // (Rows of no elements: sums of nothing, zero.)
    let per = x.len.checked_div(heads).unwrap_or(0).max(1);
    let bytes = x.len * size_of::<A>();
    each_segment(grad.rows, jobs, heads, |s, acc: &mut [A]| {
        for k in e.segment(s) {
            // The row REDUCE_AHEAD entries on (its first block's).
            if let Some((r, p)) = (k + REDUCE_AHEAD < e.len())
                .then(|| e.entry(k + REDUCE_AHEAD))
                .flatten()
            {
                prefetch_block(x.v.as_ptr().wrapping_add(r * x.len), bytes);
                prefetch_line(out.ptr.wrapping_add(p * heads));
            }
            let Some((r, p)) = e.entry(k) else { continue };
            acc.fill(A::zero());
            for b in 0..x.outer {
                let (xr, gr) = (x.row(b, r)?, grad.row(b, s)?);
                // Each head's sum in its elements' order (the heads' sums are independent:
                // the CPU overlaps them).
                for ((acc, xh), gh) in acc.iter_mut().zip(xr.chunks_exact(per)).zip(gr.chunks_exact(per)) {
                    *acc = xh.iter().zip(gh).fold(*acc, |a, (x, g)| a + *x * *g);
                }
            }
            // SAFETY: position `p` is this segment's alone.
            unsafe { out.row(p)? }.copy_from_slice(acc);
        }
        Ok(())
    })
}
