//! Graph attention's calls (decisions 55-56): the per-position arrays checked (`[P]` or
//! `[P, H]`) and read in standard layout, a fresh output, then the kernel's walk of the
//! segments. A plan and [`segment_softmax`](crate::GatherReduceExt::segment_softmax) share
//! them.

use ndarray::{Array, ArrayRef, CowArray, Dimension};
use num_traits::Float;

use crate::call::zeros;
use crate::error::{GatherError, internal};
use crate::index::GatherIndex;
use crate::kernel::reduce::{
    Csr, Entries, Heads, Identity, Positions, softmax as softmax_kernel, softmax_backward as backward_kernel,
};
use crate::plan::reduce::jobs;
use crate::segments::{Checked, Segments};

/// `a` checked as `[positions]` or `[positions, H]`: its values in standard layout and H.
fn per_position<'a, A: Clone, D: Dimension>(
    op: &'static str,
    what: &'static str,
    a: &'a ArrayRef<A, D>,
    positions: usize,
) -> Result<(CowArray<'a, A, D>, usize), GatherError> {
    match a.shape() {
        [p] if *p == positions => Ok((a.as_standard_layout(), 1)),
        [p, h] if *p == positions => Ok((a.as_standard_layout(), *h)),
        found => Err(GatherError::Scores {
            op,
            what,
            found: found.to_vec(),
            expected: format!("[{positions}] or [{positions}, H]"),
        }),
    }
}

/// The jobs of a walk of `segments` segments over `entries` positions of `heads` values.
fn attention_jobs<A>(entries: usize, heads: usize, segments: usize) -> usize {
    // (Each value is read twice or three times, at the position's random place.)
    jobs(entries.saturating_mul(heads * size_of::<A>() * 4), segments)
}

/// The softmax of `scores` (`[positions]` or `[positions, H]`) over each segment of `e`.
pub(crate) fn softmax<A: Float + Send + Sync, D: Dimension, E: Entries>(
    op: &'static str,
    e: &E,
    segments: usize,
    scores: &ArrayRef<A, D>,
    positions: usize,
) -> Result<Array<A, D>, GatherError> {
    let (s, heads) = per_position(op, "scores", scores, positions)?;
    let mut out = zeros(op, scores.raw_dim())?;
    let (Some(v), Some(o)) = (s.as_slice(), out.as_slice_mut()) else {
        return Err(internal(op, "arrays in standard layout that are not slices"));
    };
    let jobs = attention_jobs::<A>(e.len(), heads, segments);
    softmax_kernel(e, segments, Heads { v, heads }, o, jobs)
        .map_err(|_| internal(op, "a walk failed after the checks passed"))?;
    Ok(out)
}

/// The backward of [`softmax`] from its output `alpha` and the gradient `g` of it.
pub(crate) fn softmax_backward<A: Float + Send + Sync, D: Dimension, E: Entries>(
    op: &'static str,
    e: &E,
    segments: usize,
    alpha: &ArrayRef<A, D>,
    g: &ArrayRef<A, D>,
    positions: usize,
) -> Result<Array<A, D>, GatherError> {
    let (a, heads) = per_position(op, "alpha", alpha, positions)?;
    if g.shape() != alpha.shape() {
        return Err(GatherError::Scores {
            op,
            what: "g_alpha",
            found: g.shape().to_vec(),
            expected: format!("{:?} (alpha's)", alpha.shape()),
        });
    }
    let g = g.as_standard_layout();
    let mut out = zeros(op, alpha.raw_dim())?;
    let (Some(av), Some(gv), Some(o)) = (a.as_slice(), g.as_slice(), out.as_slice_mut()) else {
        return Err(internal(op, "arrays in standard layout that are not slices"));
    };
    let jobs = attention_jobs::<A>(e.len(), heads, segments);
    let (alpha, g) = (Heads { v: av, heads }, Heads { v: gv, heads });
    backward_kernel(e, segments, alpha, g, o, jobs)
        .map_err(|_| internal(op, "a walk failed after the checks passed"))?;
    Ok(out)
}

/// [`softmax`] over `segments` of the positions along `scores`' first axis (no plan).
pub(crate) fn segment_softmax<A: Float + Send + Sync, D: Dimension, J: GatherIndex>(
    op: &'static str,
    scores: &ArrayRef<A, D>,
    segments: &Segments<'_, J>,
) -> Result<Array<A, D>, GatherError> {
    let positions = scores.shape().first().copied().unwrap_or(0);
    match Checked::new(op, segments, positions)? {
        Checked::Sorted(bounds, n) => {
            let e = Positions {
                rows: &Identity,
                bounds: &bounds,
                len: positions,
            };
            softmax(op, &e, n, scores, positions)
        }
        Checked::Ids(ids, n) => {
            let csr = Csr::by_ids(&Identity, positions, ids, n).ok_or_else(|| GatherError::SizeOverflow {
                op,
                shape: vec![positions],
            })?;
            softmax(op, &csr, n, scores, positions)
        }
    }
}
