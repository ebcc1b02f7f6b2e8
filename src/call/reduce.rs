//! The gather-reduce's run: every check (axis, segments, pool, indices) before anything
//! is written, the output (fresh, a caller's, or with its argmax), the row geometry the
//! kernel walks, and the walk the segments call for.

use ndarray::{Array, ArrayRef, Dimension};

use crate::axis::normalize_axis;
use crate::call::resolve::resolve_slice;
use crate::call::{Fit, Raw, zeros};
use crate::error::{GatherError, internal};
use crate::index::{GatherIndex, IndexMode};
use crate::index::{Raise, Resolve};
use crate::kernel::BadIndex;
use crate::kernel::reduce::{
    Csr, Entries, Geometry, Identity, Pooler, Positions, Row, Source, by_ids, sorted_heads,
};
use crate::kernel::schedule::both;
use crate::layout::{checked_len, unravel};
use crate::lower::Lowering;
use crate::plan::reduce::{ReduceWalk, sums_by_scatter};
use crate::pool::{Pool, PoolElement, Pooling};
use crate::reduce::Add;
use crate::segments::{Checked, Segments};
use crate::table::PoolTable;

/// A gather-reduce's indices resolved into rows ([`Resolved`]), each once, where they are
/// checked: `u32` where the axis is shorter than `u32::MAX`, else `usize`.
pub(crate) enum Rows {
    Narrow(Vec<u32>),
    Wide(Vec<usize>),
}

/// `$body` with `$r` bound to the [`Resolved`] rows of `$rows` (one instantiation per
/// row type).
macro_rules! with_rows {
    ($rows:expr, $r:ident => $body:expr) => {
        match $rows {
            $crate::call::reduce::Rows::Narrow(v) => {
                let $r = &$crate::kernel::reduce::Resolved { rows: &v[..] };
                $body
            }
            $crate::call::reduce::Rows::Wide(v) => {
                let $r = &$crate::kernel::reduce::Resolved { rows: &v[..] };
                $body
            }
        }
    };
}
pub(crate) use with_rows;

/// The rows of `indices` (any rank, read in row-major order) along `axis` of `axis_len`:
/// negative indices count from the end, `skip` (if any) becomes [`Row::SKIP`]; or the
/// error that names the first index out of range.
pub(crate) fn resolve_rows<I: GatherIndex, E: Dimension>(
    op: &'static str,
    indices: &ArrayRef<I, E>,
    axis: usize,
    axis_len: usize,
    skip: Option<i128>,
) -> Result<Rows, GatherError> {
    let keep: Vec<I>;
    let flat = match indices.as_slice() {
        Some(v) => v,
        None => {
            keep = indices.iter().copied().collect();
            &keep[..]
        }
    };
    // Each value resolved without a branch: a skipped one is good and `R::SKIP`.
    fn rows<I: GatherIndex, R: Row>(
        flat: &[I],
        axis_len: usize,
        skip: Option<i128>,
    ) -> Result<Vec<R>, BadIndex> {
        // (Without a skip, no compare of every value in `i128`: a plan's build is this pass.)
        match skip {
            None => resolve_slice(flat, |v| {
                let (i, ok) = Raise::resolve_or_zero(v, axis_len);
                (R::of(i), ok)
            }),
            Some(skip) => resolve_slice(flat, |v| {
                let skipped = skip == v.to_i128();
                let (i, ok) = Raise::resolve_or_zero(v, axis_len);
                (if skipped { R::SKIP } else { R::of(i) }, ok | skipped)
            }),
        }
    }
    let resolved = if axis_len < u32::SKIP as usize {
        rows::<I, u32>(flat, axis_len, skip).map(Rows::Narrow)
    } else {
        rows::<I, usize>(flat, axis_len, skip).map(Rows::Wide)
    };
    resolved.map_err(|BadIndex| {
        let bad = |v: &I| skip != Some(v.to_i128()) && v.resolve_raise(axis_len).is_none();
        match flat.iter().position(bad) {
            Some(p) => GatherError::IndexOutOfBounds {
                op,
                index: flat[p].to_i128(),
                position: unravel(p, indices.shape()).to_vec(),
                axis,
                axis_len,
            },
            None => internal(op, "a bad index the scan did not find"),
        }
    })
}

/// A checked call, ready to write: its table, axis, segment count and pooling.
pub(crate) struct Frame<'a, 'w, A, D, X: ?Sized> {
    pub op: &'static str,
    pub x: &'a X,
    dim: D,
    pub axis: usize,
    pub segments: usize,
    pub pooler: Pooler<'w, A>,
    /// Per-head weights' poolers, one per head (decision 55): the walk runs once a head.
    heads: Option<Vec<Pooler<'w, A>>>,
}

/// What runs the kernel for a frame: the walk the planner chose, given the geometry and
/// the pooling (one of each, or one per head: [`walk_sorted`]), and what the call prepared (`P`:
/// its ids sorted).
pub(crate) trait Walk<A, P>:
    FnOnce(&[Geometry<A>], &[Pooler<'_, A>], Option<P>) -> Result<(), BadIndex>
{
}
impl<A, P, F: FnOnce(&[Geometry<A>], &[Pooler<'_, A>], Option<P>) -> Result<(), BadIndex>> Walk<A, P> for F {}

/// The sorted walk of `e` for one geometry ([`PoolTable::sorted`]), or for one per head
/// (an array's: [`sorted_heads`]).
pub(crate) fn walk_sorted<A: PoolElement, D: Dimension, X: PoolTable<A, D> + ?Sized, E: Entries>(
    x: &X,
    gs: &[Geometry<A>],
    e: &E,
    ps: &[Pooler<'_, A>],
    jobs: usize,
) -> Result<(), BadIndex> {
    match (gs, ps) {
        ([g], [p]) => x.sorted(g, e, p, jobs),
        _ => sorted_heads(gs, e, ps, jobs),
    }
}

/// What a call prepares before it walks, where it has anything to prepare.
pub(crate) trait Prepare<P>: FnOnce() -> P + Send {}
impl<P, F: FnOnce() -> P + Send> Prepare<P> for F {}

/// `fresh()` with `prepare()` beside it (the allocation of a large output is the kernel
/// zeroing its pages, on one thread: PERFORMANCE.md, "Fresh outputs").
fn beside<T: Send, P: Send>(
    fresh: impl FnOnce() -> T + Send,
    prepare: Option<impl Prepare<P>>,
) -> (T, Option<P>) {
    match prepare {
        Some(f) => {
            let (t, p) = both(fresh, f);
            (t, Some(p))
        }
        None => (fresh(), None),
    }
}

/// The pooling checked against what the call asks of it; `heads`: where the call weighs
/// per head, its input's shape and axis (else it takes `[P]` weights only).
pub(crate) fn check_pool<A: PoolElement>(
    op: &'static str,
    pool: &Pool<'_, A>,
    positions: usize,
    arg: bool,
    heads: Option<(&[usize], usize)>,
) -> Result<(), GatherError> {
    let refuse = |detail: &str| GatherError::Pooling {
        op,
        pooling: pool.pooling,
        detail: detail.to_string(),
    };
    let extremum = matches!(pool.pooling, Pooling::Max | Pooling::Min);
    if let Some(w) = &pool.weights {
        if extremum || pool.pooling == Pooling::Prod {
            return Err(refuse("cannot be weighted (weights are for sum, mean and sqrtn)"));
        }
        if w.nrows() != positions {
            return Err(GatherError::Weights {
                op,
                len: w.nrows(),
                positions,
            });
        }
        let h = w.ncols();
        let fault = match heads {
            _ if h == 1 => None,
            None => Some(format!(
                "weigh {h} heads, but {op} takes one weight per position ([P] or [P, 1])"
            )),
            Some((shape, axis)) => match shape.get(axis + 1) {
                Some(&n) if n == h => None,
                Some(&n) => Some(format!(
                    "weigh {h} heads, but the input's dimension {} (after the axis) is {n} long",
                    axis + 1
                )),
                None => Some(format!(
                    "weigh {h} heads, but the input has no dimension after the axis"
                )),
            },
        };
        if let Some(detail) = fault {
            return Err(GatherError::HeadWeights {
                op,
                found: w.shape().to_vec(),
                detail,
            });
        }
    }
    if arg && !extremum {
        return Err(refuse("has no argmax (only max and min do)"));
    }
    Ok(())
}

impl<'a, 'w, A: PoolElement, D: Dimension, X: PoolTable<A, D> + ?Sized> Frame<'a, 'w, A, D, X> {
    /// A frame for `x` along `axis` into `segments` segments, pooling `positions`
    /// positions with `pool`.
    pub fn new(
        op: &'static str,
        x: &'a X,
        axis: usize,
        segments: usize,
        pool: Pool<'w, A>,
        positions: usize,
    ) -> Self {
        Frame {
            op,
            x,
            dim: x.dim(),
            axis,
            segments,
            heads: pool
                .heads()
                .map(|n| (0..n).map(|h| Pooler::of(pool.head(h), positions)).collect()),
            pooler: Pooler::of(pool, positions),
        }
    }

    /// The bytes of one row (the input's slice at one index) as `A`s.
    pub fn row_bytes(&self) -> usize {
        let shape = self.dim.slice();
        let elems: usize = (0..shape.len())
            .filter(|&d| d != self.axis)
            .map(|d| shape[d])
            .product();
        elems.saturating_mul(size_of::<A>())
    }

    /// The bytes of the output (0 for an output too large to exist, which the run reports).
    pub fn out_bytes(&self) -> usize {
        self.out_dim().map_or(0, |d| d.size() * size_of::<A>())
    }

    fn out_dim(&self) -> Result<D, GatherError> {
        let mut dim = self.dim.clone();
        dim[self.axis] = self.segments;
        let size = size_of::<A>().max(size_of::<usize>());
        match checked_len(dim.slice(), size) {
            Some(_) => Ok(dim),
            None => Err(GatherError::SizeOverflow {
                op: self.op,
                shape: dim.slice().to_vec(),
            }),
        }
    }

    /// The output in a fresh array.
    pub fn fresh<P: Send>(
        &self,
        prepare: Option<impl Prepare<P>>,
        walk: impl Walk<A, P>,
    ) -> Result<Array<A, D>, GatherError> {
        let dim = self.out_dim()?;
        let op = self.op;
        let (out, prepared) = beside(|| zeros(op, dim), prepare);
        let mut out = out?;
        self.run(&mut out, None, prepared, walk)?;
        Ok(out)
    }

    /// The output into `out`, which must have its shape.
    pub fn into<P: Send>(
        &self,
        out: &mut ArrayRef<A, D>,
        prepare: Option<impl Prepare<P>>,
        walk: impl Walk<A, P>,
    ) -> Result<(), GatherError> {
        let dim = self.out_dim()?;
        if out.shape() != dim.slice() {
            return Err(GatherError::OutputShape {
                op: self.op,
                expected: dim.slice().to_vec(),
                found: out.shape().to_vec(),
            });
        }
        if !self.x.writes(out) {
            // (The table's walk writes rows that are single runs.)
            out.assign(&self.fresh(prepare, walk)?);
            return Ok(());
        }
        self.run(out, None, prepare.map(|f| f()), walk)
    }

    /// The output and its argmax into `out` and `arg`, which must have its shape.
    pub fn arg_into<P: Send>(
        &self,
        out: &mut ArrayRef<A, D>,
        arg: &mut ArrayRef<usize, D>,
        prepare: Option<impl Prepare<P>>,
        walk: impl Walk<A, P>,
    ) -> Result<(), GatherError> {
        let dim = self.out_dim()?;
        for found in [out.shape(), arg.shape()] {
            if found != dim.slice() {
                return Err(GatherError::OutputShape {
                    op: self.op,
                    expected: dim.slice().to_vec(),
                    found: found.to_vec(),
                });
            }
        }
        if arg.strides() == out.strides() && self.x.writes(out) {
            return self.run(out, Some(arg), prepare.map(|f| f()), walk);
        }
        // (The kernel writes the argmax at the output's offsets, and some tables' walks
        // rows that are single runs only.)
        let (o, a) = self.with_arg(prepare, walk)?;
        out.assign(&o);
        arg.assign(&a);
        Ok(())
    }

    /// The output and its argmax, in fresh arrays.
    pub fn with_arg<P: Send>(
        &self,
        prepare: Option<impl Prepare<P>>,
        walk: impl Walk<A, P>,
    ) -> Result<WithArg<A, D>, GatherError> {
        let dim = self.out_dim()?;
        let op = self.op;
        let (outs, prepared) = beside(
            || Ok::<_, GatherError>((zeros(op, dim.clone())?, zeros(op, dim)?)),
            prepare,
        );
        let (mut out, mut arg) = outs?;
        self.run(&mut out, Some(&mut arg), prepared, walk)?;
        Ok((out, arg))
    }

    fn run<P>(
        &self,
        out: &mut ArrayRef<A, D>,
        arg: Option<&mut ArrayRef<usize, D>>,
        prepared: Option<P>,
        walk: impl Walk<A, P>,
    ) -> Result<(), GatherError> {
        if out.is_empty() {
            return Ok(());
        }
        let arg = match arg {
            Some(a) if a.strides() != out.strides() => {
                return Err(internal(self.op, "an argmax array of another layout"));
            }
            Some(a) => a.as_mut_ptr(),
            None => std::ptr::null_mut(),
        };
        if !self.x.writes(out) {
            return Err(internal(self.op, "an output the table's walk cannot write"));
        }
        let bad = |BadIndex| internal(self.op, "a walk failed after the checks passed");
        let Some(heads) = &self.heads else {
            let g = self.x.geometry(self.axis, out, arg, self.segments);
            return walk(&[g], std::slice::from_ref(&self.pooler), prepared).map_err(bad);
        };
        // Each head is a gather-reduce of its slice with its column of weights.
        let mut gs = Vec::with_capacity(heads.len());
        for h in 0..heads.len() {
            let Some(g) = self.x.head_geometry(self.axis, out, arg, self.segments, h) else {
                // (`check_kind` refused heads on tables without them.)
                return Err(internal(self.op, "per-head weights on a table without heads"));
            };
            gs.push(g);
        }
        walk(&gs, heads, prepared).map_err(bad)
    }
}

/// An output and its argmax.
pub(crate) type WithArg<A, D> = (Array<A, D>, Array<usize, D>);

/// Where a gather-reduce writes.
pub(crate) enum Out<'o, A, D> {
    /// A fresh array.
    Fresh,
    /// The caller's array.
    Into(&'o mut ArrayRef<A, D>),
    /// Fresh arrays of the output and its argmax.
    Arg,
    /// The caller's arrays of the output and its argmax.
    ArgInto(&'o mut ArrayRef<A, D>, &'o mut ArrayRef<usize, D>),
}

/// What a gather-reduce returns, as [`Out`] asked.
pub(crate) enum Done<A, D> {
    Fresh(Array<A, D>),
    Into,
    Arg(Array<A, D>, Array<usize, D>),
}

impl<A, D> Done<A, D> {
    /// The fresh output `Out::Fresh` asked for.
    pub fn fresh(self, op: &'static str) -> Result<Array<A, D>, GatherError> {
        match self {
            Done::Fresh(out) => Ok(out),
            _ => Err(internal(op, "a fresh output was asked for")),
        }
    }

    /// The output and argmax `Out::Arg` asked for.
    pub fn with_arg(self, op: &'static str) -> Result<WithArg<A, D>, GatherError> {
        match self {
            Done::Arg(out, arg) => Ok((out, arg)),
            _ => Err(internal(op, "an argmax was asked for")),
        }
    }
}

impl<'a, 'w, A: PoolElement, D: Dimension, X: PoolTable<A, D> + ?Sized> Frame<'a, 'w, A, D, X> {
    /// Writes where `out` says, after `prepare` (beside the allocation of a fresh output).
    pub fn finish<P: Send>(
        &self,
        out: Out<'_, A, D>,
        prepare: Option<impl Prepare<P>>,
        walk: impl Walk<A, P>,
    ) -> Result<Done<A, D>, GatherError> {
        Ok(match out {
            Out::Fresh => Done::Fresh(self.fresh(prepare, walk)?),
            Out::Into(o) => {
                self.into(o, prepare, walk)?;
                Done::Into
            }
            Out::Arg => {
                let (o, a) = self.with_arg(prepare, walk)?;
                Done::Arg(o, a)
            }
            Out::ArgInto(o, a) => {
                self.arg_into(o, a, prepare, walk)?;
                Done::Into
            }
        })
    }
}

/// A checked gather-reduce of `x` along `axis`, its positions' rows from `rows`.
#[allow(clippy::too_many_arguments)]
fn reduce<A: PoolElement, D: Dimension, X: PoolTable<A, D> + ?Sized, S: Source, J: GatherIndex>(
    op: &'static str,
    x: &X,
    axis: usize,
    rows: &S,
    positions: usize,
    segs: Checked<'_, J>,
    pool: Pool<'_, A>,
    out: Out<'_, A, D>,
) -> Result<Done<A, D>, GatherError> {
    let frame = Frame::new(op, x, axis, segs.count(), pool, positions);
    let ids = matches!(segs, Checked::Ids(..));
    let axis_len = x.dim()[axis];
    // A table read through a row source of its own walks sorted positions only.
    let sorts = !X::BY_IDS && ids;
    if sorts && !Csr::fits(axis_len, positions) {
        return Err(GatherError::SizeOverflow {
            op,
            shape: vec![positions],
        });
    }
    let out_bytes = if sorts { usize::MAX } else { frame.out_bytes() };
    let walk = ReduceWalk::of(ids, segs.count(), positions, frame.row_bytes(), out_bytes);
    // Ids to sort are sorted beside the allocation of a fresh output.
    let sort = match (&segs, walk) {
        (Checked::Ids(ids, n), ReduceWalk::SortIds { .. }) => Some(|| Csr::by_ids(rows, axis_len, *ids, *n)),
        _ => None,
    };
    frame.finish(out, sort, |gs: &[Geometry<A>], ps: &[Pooler<'_, A>], csr| {
        match (&segs, walk, csr) {
            (Checked::Sorted(bounds, _), ReduceWalk::Sorted { jobs }, _) => {
                let e = Positions {
                    rows,
                    bounds,
                    len: positions,
                };
                walk_sorted(x, gs, &e, ps, jobs)
            }
            (Checked::Ids(..), ReduceWalk::SortIds { jobs, .. }, Some(Some(csr))) => {
                walk_sorted(x, gs, &csr, ps, jobs)
            }
            (Checked::Ids(ids, _), ReduceWalk::ByIds { spans } | ReduceWalk::SortIds { spans, .. }, _)
                if X::BY_IDS =>
            {
                gs.iter()
                    .zip(ps)
                    .try_for_each(|(g, p)| by_ids(g, rows, *ids, p, spans.count, spans.sorted))
            }
            // (The planner's walk follows the segments' kind; ids that fit are sorted.)
            _ => Err(BadIndex),
        }
    })
}

/// `gather_reduce` and its `_into` / `_arg` forms, of any table.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather_reduce<
    A: PoolElement,
    D: Dimension,
    X: PoolTable<A, D> + ?Sized,
    I: GatherIndex,
    E: Dimension,
    J: GatherIndex,
>(
    op: &'static str,
    x: &X,
    indices: &ArrayRef<I, E>,
    segments: &Segments<'_, J>,
    axis: isize,
    pool: Pool<'_, A>,
    out: Out<'_, A, D>,
) -> Result<Done<A, D>, GatherError> {
    let dim = x.dim();
    let axis = normalize_axis(op, axis, dim.ndim())?;
    let positions = indices.len();
    // Segments, then the pool, then the indices: the order of the arguments.
    let segs = Checked::new(op, segments, positions)?;
    check_kind::<A, D, X>(op, &pool)?;
    check_pool(
        op,
        &pool,
        positions,
        matches!(out, Out::Arg | Out::ArgInto(..)),
        Some((dim.slice(), axis)),
    )?;
    let rows = resolve_rows(op, indices, axis, dim[axis], pool.skip)?;
    with_rows!(rows, r => reduce(op, x, axis, r, positions, segs, pool, out))
}

/// Per-head weights refused on a table whose rows are whole (a `QTable`: decision 55
/// weighs an array's heads), before anything is allocated.
pub(crate) fn check_kind<A: PoolElement, D: Dimension, X: PoolTable<A, D> + ?Sized>(
    op: &'static str,
    pool: &Pool<'_, A>,
) -> Result<(), GatherError> {
    match (&pool.weights, pool.heads()) {
        (Some(w), Some(_)) if !X::HEADS => Err(GatherError::TableKind {
            op,
            kind: "quantized",
            detail: format!(
                "takes one weight per position ([P]), not weights of shape {:?} (per-head weights need an f32 array)",
                w.shape()
            ),
        }),
        _ => Ok(()),
    }
}

/// `segment_reduce` and its `_into` form.
pub(crate) fn segment_reduce<A: PoolElement, D: Dimension, J: GatherIndex>(
    op: &'static str,
    x: &ArrayRef<A, D>,
    segments: &Segments<'_, J>,
    axis: isize,
    pool: Pool<'_, A>,
    out: Out<'_, A, D>,
) -> Result<Done<A, D>, GatherError> {
    let axis = normalize_axis(op, axis, x.ndim())?;
    let positions = x.shape()[axis];
    let segs = Checked::new(op, segments, positions)?;
    check_pool(
        op,
        &pool,
        positions,
        matches!(out, Out::Arg | Out::ArgInto(..)),
        Some((x.shape(), axis)),
    )?;
    if let Some(v) = pool.skip {
        return Err(GatherError::Pooling {
            op,
            pooling: pool.pooling,
            detail: format!("cannot skip index {v}: segment_reduce reads no indices"),
        });
    }
    if let Checked::Ids(ids, n) = segs
        && matches!(out, Out::Fresh | Out::Into(_))
        && pool.pooling == Pooling::Sum
        && pool.weights.is_none()
        && pool.fill.is_none()
    {
        let frame = Frame::new(op, x, axis, n, pool.clone(), positions);
        if sums_by_scatter(frame.row_bytes(), frame.out_bytes()) {
            let dim = frame.out_dim()?;
            return match out {
                Out::Into(o) => {
                    if o.shape() != dim.slice() {
                        return Err(GatherError::OutputShape {
                            op,
                            expected: dim.slice().to_vec(),
                            found: o.shape().to_vec(),
                        });
                    }
                    o.fill(A::zero());
                    add_by_ids(op, x, axis, ids, o).map(|()| Done::Into)
                }
                _ => {
                    let mut o = zeros(op, dim)?;
                    add_by_ids(op, x, axis, ids, &mut o).map(|()| Done::Fresh(o))
                }
            };
        }
    }
    reduce(op, x, axis, &Identity, positions, segs, pool, out)
}

/// `out[.., ids[p], ..] += x[.., p, ..]` along `axis` in position order: the scatter's
/// `index_add` (`out` of `x`'s shape but `axis`; the ids checked, in `0..` its length, so
/// the scatter reads them once, unchecked).
fn add_by_ids<A: PoolElement, D: Dimension, J: GatherIndex>(
    op: &'static str,
    x: &ArrayRef<A, D>,
    axis: usize,
    ids: ndarray::ArrayView1<'_, J>,
    out: &mut ArrayRef<A, D>,
) -> Result<(), GatherError> {
    let zero = [J::ZERO];
    let views = (Raw::of_mut(out), Raw::of(&ids));
    Lowering::gather(axis)
        .call(op, None, views, &zero, IndexMode::Raise)?
        .scatter_with(x, Fit::Exact, Add, true)
}
