//! The forward of a [`SamplePlan`](super::SamplePlan): each batch item's points folded from
//! pixel rows. A channels-last item is read and written in place, a block of points per
//! job; any other (NCHW) is staged a block of channels at a time: the block's planes
//! transposed into rows, folded, and the rows transposed back into the output's planes.
//! Both fold the same terms in the same order, so every layout gives the same bits.

use std::sync::Mutex;

use ndarray::{Array, ArrayView2, ArrayViewD, ArrayViewMut2, ArrayViewMutD, Axis, CowArray, Ix2, s};

use super::SampleElement;
use super::shape::{each_block_mut, planes, planes_or_copy, rows};
use crate::error::{GatherError, internal};
use crate::kernel::BadIndex;
use crate::kernel::isa::Isa;
use crate::kernel::reduce::SampleRows;
use crate::kernel::schedule::run_jobs;
use crate::plan::policy::{SAMPLE_BLOCK, SAMPLE_STAGE_BYTES};

/// One job of the forward.
enum Task<'y, A> {
    /// Item `n`'s points from `first`, channels-last: rows `[points, C]` in place.
    Rows {
        n: usize,
        first: usize,
        out: &'y mut [A],
    },
    /// Item `n`'s channels from `c0`: `[cb, points]` planes of the output, staged.
    Planes {
        n: usize,
        c0: usize,
        out: ArrayViewMut2<'y, A>,
    },
}

/// An item's input: its rows in place, or its planes (copied if they do not merge).
enum Source<'x, A> {
    Rows(&'x [A]),
    Planes(CowArray<'x, A, Ix2>),
}

/// `y[n]` = `items[n]`'s plan folded from `x[n]` for every item: checked arrays
/// `[N, C, spatial..]`. A `y` whose planes do not merge is computed in a standard copy.
pub(super) fn forward<A: SampleElement>(
    op: &'static str,
    items: &[SampleRows<'_, A>],
    x: ArrayViewD<'_, A>,
    mut y: ArrayViewMutD<'_, A>,
) -> Result<(), GatherError> {
    let in_place = |n: usize| {
        let rows_of = |v: ArrayViewD<'_, A>| rows(v).is_some_and(|r| r.is_standard_layout());
        rows_of(x.index_axis(Axis(0), n)) && rows_of(y.index_axis(Axis(0), n))
    };
    let direct: Vec<bool> = (0..items.len()).map(in_place).collect();
    let planes_merge = (0..items.len()).all(|n| direct[n] || planes(y.index_axis(Axis(0), n)).is_some());
    if !planes_merge {
        let mut standard = Array::zeros(y.raw_dim());
        forward(op, items, x, standard.view_mut())?;
        y.assign(&standard);
        return Ok(());
    }
    let mut sources = Vec::with_capacity(items.len());
    for (n, &d) in direct.iter().enumerate() {
        let xn = x.index_axis(Axis(0), n);
        sources.push(match rows(xn.clone()).and_then(|r| r.to_slice()) {
            Some(r) if d => Source::Rows(r),
            _ => Source::Planes(planes_or_copy(op, xn)?),
        });
    }
    let cb = (SAMPLE_STAGE_BYTES / size_of::<A>()).max(1);
    let mut tasks = Vec::new();
    for ((n, yn), &d) in y.outer_iter_mut().enumerate().zip(&direct) {
        if d {
            let c = yn.shape()[0];
            let out = rows(yn)
                .and_then(|r| r.into_slice())
                .ok_or_else(|| internal(op, "rows of y"))?;
            for (b, out) in out.chunks_mut(SAMPLE_BLOCK * c.max(1)).enumerate() {
                tasks.push(Mutex::new(Task::Rows {
                    n,
                    first: b * SAMPLE_BLOCK,
                    out,
                }));
            }
        } else {
            let (mut rest, mut c0) = (planes(yn).ok_or_else(|| internal(op, "planes of y"))?, 0);
            while rest.nrows() > 0 {
                let k = cb.min(rest.nrows());
                let (out, tail) = rest.split_at(Axis(0), k);
                tasks.push(Mutex::new(Task::Planes { n, c0, out }));
                (rest, c0) = (tail, c0 + cb);
            }
        }
    }
    let isa = Isa::detect();
    let buffers: Mutex<Vec<(Vec<A>, Vec<A>)>> = Mutex::new(Vec::new());
    let outcome = run_jobs(tasks.len(), false, |t| {
        let mut task = tasks[t].lock().map_err(|_| BadIndex)?;
        match (&mut *task, &sources) {
            (
                &mut Task::Rows {
                    n,
                    first,
                    ref mut out,
                },
                s,
            ) => {
                let (item, Some(Source::Rows(x))) = (&items[n], s.get(n)) else {
                    return Err(BadIndex);
                };
                item.rows(isa, x, out, first)?;
            }
            (&mut Task::Planes { n, c0, ref mut out }, s) => {
                let (item, Some(Source::Planes(x))) = (&items[n], s.get(n)) else {
                    return Err(BadIndex);
                };
                let block = x.slice(s![c0..c0 + out.nrows(), ..]);
                let mut pair = buffers.lock().map_err(|_| BadIndex)?.pop().unwrap_or_default();
                let (x_rows, y_rows) = (&mut pair.0, &mut pair.1);
                x_rows.resize(block.len(), A::zero());
                y_rows.resize(out.len(), A::zero());
                item.staged(isa, block, x_rows, y_rows, out.view_mut())?;
                buffers.lock().map_err(|_| BadIndex)?.push(pair);
            }
        }
        Ok(())
    });
    if outcome.failed() {
        return Err(internal(op, "a forward job failed"));
    }
    Ok(())
}

/// Adds `item`'s adjoint into one item's input gradient `g_x` (`[C, spatial..]`) from its
/// output gradient planes `g_y` (`[C, points]`), staged a block of channels per job as the
/// forward.
pub(super) fn backward_planes<A: SampleElement>(
    op: &'static str,
    item: &SampleRows<'_, A>,
    g_y: ArrayView2<'_, A>,
    g_x: ArrayViewMutD<'_, A>,
) -> Result<(), GatherError> {
    let (isa, buffers) = (Isa::detect(), Mutex::new(Vec::<(Vec<A>, Vec<A>)>::new()));
    let cb = (SAMPLE_STAGE_BYTES / size_of::<A>()).max(1);
    each_block_mut(op, g_x, cb, |c0, mut block| {
        let g = g_y.slice(s![c0..c0 + block.nrows(), ..]);
        let mut pair = buffers.lock().ok().and_then(|mut p| p.pop()).unwrap_or_default();
        pair.0.resize(g.len(), A::zero());
        pair.1.resize(block.len(), A::zero());
        item.staged_backward(isa, g, &mut pair.0, &mut pair.1, block.view_mut())?;
        if let Ok(mut pool) = buffers.lock() {
            pool.push(pair);
        }
        Ok(())
    })
}
