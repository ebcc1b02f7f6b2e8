//! Shapes and layouts of the interpolating gathers: the argument checks, and an item's
//! `[C, spatial..]` seen as channel planes `[C, pixels]` or pixel rows `[pixels, C]`.

use std::sync::Mutex;

use ndarray::{ArrayBase, ArrayViewMut2, ArrayViewMutD, Axis, IxDyn, RawData};

use super::{GridSample, Interp};
use crate::error::{GatherError, internal};
use crate::kernel::BadIndex;
use crate::kernel::reduce::Csr;
use crate::kernel::schedule::run_jobs;
use crate::plan::reduce::samples_by_planes;

/// Whether an array whose channel axis is `channel` is walked by planes, else by rows (a
/// pixel's channels).
pub(super) fn by_planes<S: RawData>(a: &ArrayBase<S, IxDyn>, channel: usize) -> bool {
    let s = a.strides();
    samples_by_planes(s[channel], s[s.len() - 1])
}

/// `a` with its axes `from..to` merged into one, if their strides allow (row-major). The
/// axes must not be empty (every caller's spatial axes are checked non-empty).
fn merged<S: RawData>(mut a: ArrayBase<S, IxDyn>, from: usize, to: usize) -> Option<ArrayBase<S, IxDyn>> {
    let last = to - 1;
    for d in (from..last).rev() {
        if !a.merge_axes(Axis(d), Axis(last)) {
            return None;
        }
    }
    for _ in from..last {
        a = a.index_axis_move(Axis(from), 0);
    }
    Some(a)
}

/// One item `[C, spatial..]` as `[C, pixels]` planes, if its strides allow.
pub(super) fn planes<S: RawData>(a: ArrayBase<S, IxDyn>) -> Option<ArrayBase<S, ndarray::Ix2>> {
    let n = a.ndim();
    merged(a, 1, n)?.into_dimensionality().ok()
}

/// One item `[C, spatial..]` as `[pixels, C]` rows, if its strides allow.
pub(super) fn rows<S: RawData>(a: ArrayBase<S, IxDyn>) -> Option<ArrayBase<S, ndarray::Ix2>> {
    let n = a.ndim();
    let mut order: Vec<usize> = (1..n).collect();
    order.push(0);
    merged(a.permuted_axes(order), 0, n - 1)?
        .into_dimensionality()
        .ok()
}

/// The error for an argument (`what`) of shape `found`.
pub(super) fn shape_err(
    op: &'static str,
    what: &'static str,
    found: &[usize],
    expected: String,
) -> GatherError {
    GatherError::SampleShape {
        op,
        what,
        found: found.to_vec(),
        expected,
    }
}

/// `[N, C, sizes..]` spelled out, `C` free.
pub(super) fn spell(batch: usize, c: Option<usize>, sizes: &[usize]) -> String {
    let mut s = format!("[{batch}, {}", c.map_or("C".to_string(), |c| c.to_string()));
    for v in sizes {
        s += &format!(", {v}");
    }
    s + "]"
}

/// Checks an input shape `x` and a grid shape `g` for `opts`; the output's spatial sizes.
pub(super) fn check_shapes(
    op: &'static str,
    x: &[usize],
    g: &[usize],
    opts: GridSample,
) -> Result<Vec<usize>, GatherError> {
    if x.len() != 4 && x.len() != 5 {
        return Err(shape_err(op, "x", x, "[N, C, H, W] or [N, C, D, H, W]".into()));
    }
    let (batch, dims, sizes) = (x[0], x.len() - 2, &x[2..]);
    if sizes.contains(&0) {
        return Err(shape_err(op, "x", x, "non-empty spatial axes".into()));
    }
    if opts.interp() == Interp::Cubic && dims == 3 {
        return Err(shape_err(op, "x", x, "[N, C, H, W]: cubic is 2-D".into()));
    }
    if g.len() != x.len() || g[0] != batch || g[g.len() - 1] != dims {
        let out = if dims == 2 { "Ho, Wo" } else { "Do, Ho, Wo" };
        let expected = format!("[{batch}, {out}, {dims}] (x has shape {x:?})");
        return Err(shape_err(op, "grid", g, expected));
    }
    if !Csr::fits(sizes.iter().product(), 0) {
        return Err(GatherError::SizeOverflow {
            op,
            shape: x.to_vec(),
        });
    }
    Ok(g[1..g.len() - 1].to_vec())
}

/// One item `[C, spatial..]` as `[C, pixels]` planes, copied into standard layout if its
/// axes do not merge.
pub(super) fn planes_or_copy<'a, A: Clone>(
    op: &'static str,
    a: ndarray::ArrayViewD<'a, A>,
) -> Result<ndarray::CowArray<'a, A, ndarray::Ix2>, GatherError> {
    if let Some(v) = planes(a.clone()) {
        return Ok(v.into());
    }
    let c = a.shape()[0];
    let rest = a.shape()[1..].iter().product::<usize>();
    let owned = a.as_standard_layout().into_owned();
    let flat = owned.into_shape_with_order((c, rest));
    flat.map(Into::into)
        .map_err(|_| internal(op, "planes of a standard array"))
}

/// Runs `job(c0, planes)` on each block of `block` channel planes `[block, pixels]` of a
/// mutable item `[C, spatial..]` (the last block may be shorter), a block per job (copied
/// into standard layout first, and back after, if its axes do not merge).
pub(super) fn each_block_mut<A: Clone + Send>(
    op: &'static str,
    mut item: ArrayViewMutD<'_, A>,
    block: usize,
    job: impl Fn(usize, ArrayViewMut2<'_, A>) -> Result<(), BadIndex> + Sync,
) -> Result<(), GatherError> {
    let mut copy = None;
    let mut rest = match planes(item.view_mut()) {
        Some(p) => p,
        None => planes(copy.insert(item.as_standard_layout().into_owned()).view_mut())
            .ok_or_else(|| internal(op, "planes of a standard array"))?,
    };
    let (mut jobs, mut c0) = (Vec::new(), 0);
    while rest.nrows() > 0 {
        let k = block.max(1).min(rest.nrows());
        let (head, tail) = rest.split_at(Axis(0), k);
        jobs.push(Mutex::new((c0, head)));
        (rest, c0) = (tail, c0 + k);
    }
    let outcome = run_jobs(jobs.len(), false, |j| {
        let mut planes = jobs[j].lock().map_err(|_| BadIndex)?;
        let (c0, ref mut planes) = *planes;
        job(c0, planes.view_mut())
    });
    if outcome.failed() {
        return Err(internal(op, "a plane's job failed"));
    }
    drop(jobs);
    if let Some(c) = copy {
        item.assign(&c);
    }
    Ok(())
}
