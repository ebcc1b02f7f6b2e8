//! The grid's gradient of `grid_sample` (decision 72): per point, the slope of each
//! corner's weight along each axis, times the corner's value and the output's gradient,
//! summed over the channels.

use std::sync::Mutex;

use ndarray::{Array, ArrayRef, ArrayViewMut2, Axis, CowArray, Dimension, Ix2, IxDyn};

use super::shape::{check_shapes, planes_or_copy};
use super::taps::Reader;
use super::{GridSample, Interp, SampleElement};
use crate::call::zeros;
use crate::error::{GatherError, internal};
use crate::kernel::BadIndex;
use crate::kernel::schedule::run_jobs;
use crate::plan::policy::SAMPLE_BLOCK;

/// `v` in standard layout (copied if it is not), so that a tap is one index into a slice.
fn standard<A: Clone>(v: CowArray<'_, A, Ix2>) -> CowArray<'_, A, Ix2> {
    if v.is_standard_layout() {
        v
    } else {
        v.as_standard_layout().into_owned().into()
    }
}

/// The most pixels a point reads for its slopes: bicubic's 16 (trilinear's 8).
const MAX_TAPS: usize = 16;

pub(super) fn grid_grad<A: SampleElement, D: Dimension>(
    op: &'static str,
    x: &ArrayRef<A, D>,
    grid: &ArrayRef<A, D>,
    g_y: &ArrayRef<A, D>,
    opts: GridSample,
) -> Result<Array<A, D>, GatherError> {
    let out = check_shapes(op, x.shape(), grid.shape(), opts)?;
    let (batch, c) = (x.shape()[0], x.shape()[1]);
    let mut want = vec![batch, c];
    want.extend_from_slice(&out);
    if g_y.shape() != want.as_slice() {
        return Err(GatherError::SampleShape {
            op,
            what: "g_y",
            found: g_y.shape().to_vec(),
            expected: format!("{want:?}, the output's shape"),
        });
    }
    let dims = x.ndim() - 2;
    let points: usize = out.iter().product();
    let mut g: Array<A, IxDyn> = zeros(op, IxDyn(grid.shape()))?;
    if opts.interp() != Interp::Nearest && points > 0 && batch > 0 {
        let sizes = &x.shape()[2..];
        let reader = Reader { sizes, opts };
        let (x, g_y, grid) = (x.view().into_dyn(), g_y.view().into_dyn(), grid.view().into_dyn());
        let mut flat = g
            .view_mut()
            .into_shape_with_order((batch * points, dims))
            .map_err(|_| internal(op, "a fresh gradient's shape"))?;
        let mut jobs = Vec::new();
        for (n, item) in flat.axis_chunks_iter_mut(Axis(0), points).enumerate() {
            let xp = standard(planes_or_copy(op, x.index_axis(Axis(0), n))?);
            let gp = standard(planes_or_copy(op, g_y.index_axis(Axis(0), n))?);
            let pts = grid.index_axis(Axis(0), n);
            let pts = pts
                .to_shape((points, dims))
                .map_err(|_| internal(op, "the grid's points"))?
                .into_owned();
            let shared = std::sync::Arc::new((xp, gp, pts));
            let (mut rest, mut first): (ArrayViewMut2<'_, A>, usize) = (item, 0);
            while !rest.is_empty() {
                let k = SAMPLE_BLOCK.min(rest.nrows());
                let (block, tail) = rest.split_at(Axis(0), k);
                jobs.push(Mutex::new((shared.clone(), first, block)));
                (rest, first) = (tail, first + SAMPLE_BLOCK);
            }
        }
        let outcome = run_jobs(jobs.len(), false, |j| {
            let mut job = jobs[j].lock().map_err(|_| BadIndex)?;
            let (ref shared, first, ref mut block) = *job;
            let (xp, gp, pts) = (&shared.0, &shared.1, &shared.2);
            let (Some(xs), Some(gs)) = (xp.as_slice(), gp.as_slice()) else {
                return Err(BadIndex);
            };
            let (hw, np) = (xp.ncols(), gp.ncols());
            for (i, mut row) in block.outer_iter_mut().enumerate() {
                let p = first + i;
                let mut at = [A::zero(); 3];
                for (a, &v) in at.iter_mut().zip(pts.row(p)) {
                    *a = v;
                }
                let point = &at[..dims];
                let mut acc = [A::zero(); 3];
                // At most 16 taps (bicubic's), on the stack.
                let mut taps = [(0usize, [A::zero(); 3]); MAX_TAPS];
                let mut n = 0;
                let Some(scale) = reader.slopes(point, |at, s| {
                    if let Some(t) = taps.get_mut(n) {
                        *t = (at, s);
                    }
                    n += 1;
                }) else {
                    row.fill(A::nan());
                    continue;
                };
                let taps = taps.get(..n).ok_or(BadIndex)?;
                for ch in 0..c {
                    let gv = gs[ch * np + p];
                    let plane = &xs[ch * hw..(ch + 1) * hw];
                    let mut sum = [A::zero(); 3];
                    for &(at, s) in taps {
                        let v = plane[at];
                        for d in 0..dims {
                            sum[d] += s[d] * v;
                        }
                    }
                    for d in 0..dims {
                        acc[d] += sum[d] * gv;
                    }
                }
                for d in 0..dims {
                    row[dims - 1 - d] = acc[d] * scale[d];
                }
            }
            Ok(())
        });
        if outcome.failed() {
            return Err(internal(op, "a block of the grid's gradient failed"));
        }
    }
    g.into_dimensionality()
        .map_err(|_| internal(op, "the gradient's rank"))
}
