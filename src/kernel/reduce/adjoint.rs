//! The gather-reduce's adjoint: each input row collects, in position order, the gradient
//! rows of the segments that read it. [`ByRow`] turns a plan's CSR around once (a stable
//! counting sort by row), so that a backward builds each gradient row in one place, by one
//! thread, with no atomics: the same bits on any thread count.

use std::ops::Range;

use ndarray::ArrayView1;

use super::pool::{End, divide};
use super::{Entries, Geometry, Pooler, Tally};
use crate::kernel::BadIndex;
use crate::kernel::prefetch::prefetch_block;
use crate::kernel::schedule::run_ranges;
use crate::plan::policy::REDUCE_AHEAD;
use crate::pool::{PoolElement, Pooling};

/// A plan's positions grouped by the input row they read: row `rows[k]` (ascending: the
/// rows some kept position reads) has the entries `offsets[k]..offsets[k + 1]`, each its
/// segment and its position (increasing within a row). Skipped positions are not there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ByRow {
    rows: Vec<u32>,
    offsets: Vec<u32>,
    entries: Vec<[u32; 2]>,
}

/// A vector of `n` copies of `v`, or `None` if the memory is not there.
fn filled<T: Clone>(n: usize, v: T) -> Option<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(n).ok()?;
    out.resize(n, v);
    Some(out)
}

impl ByRow {
    /// The entries of `csr` (rows below `axis_len`, `positions` positions) by row; `None`
    /// if segments or entries do not fit `u32` or the memory is not there.
    pub fn of<E: Entries>(csr: &E, count: usize, axis_len: usize, positions: usize) -> Option<ByRow> {
        if u32::try_from(count).is_err() || u32::try_from(positions).is_err() {
            return None;
        }
        const NONE: u32 = u32::MAX;
        // Each position's row and segment, so that rows fill in position order.
        let mut at = filled(positions, [NONE, 0u32])?;
        for s in 0..count {
            for k in csr.segment(s) {
                if let Some((r, p)) = csr.entry(k) {
                    at[p] = [r as u32, s as u32];
                }
            }
        }
        // Per row its count, then its next free entry.
        let mut next = filled(axis_len, 0u32)?;
        for &[r, _] in &at {
            if r != NONE {
                next[r as usize] += 1;
            }
        }
        let touched = next.iter().filter(|&&c| c > 0).count();
        let mut rows = Vec::new();
        let mut offsets = Vec::new();
        rows.try_reserve_exact(touched).ok()?;
        offsets.try_reserve_exact(touched + 1).ok()?;
        offsets.push(0);
        let mut total = 0u32;
        for (r, c) in next.iter_mut().enumerate() {
            if *c > 0 {
                rows.push(r as u32);
                let n = *c;
                *c = total;
                total += n;
                offsets.push(total);
            }
        }
        let mut entries = filled(total as usize, [0u32; 2])?;
        for (p, &[r, s]) in at.iter().enumerate() {
            if r != NONE {
                let slot = &mut next[r as usize];
                entries[*slot as usize] = [s, p as u32];
                *slot += 1;
            }
        }
        Some(ByRow {
            rows,
            offsets,
            entries,
        })
    }

    /// The touched rows, ascending.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.rows.iter().map(|&r| r as usize)
    }

    /// Touched row `k`'s index along the axis.
    pub fn row(&self, k: usize) -> usize {
        self.rows[k] as usize
    }

    /// The number of touched rows.
    pub fn touched(&self) -> usize {
        self.rows.len()
    }

    /// The number of entries (kept positions).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Touched row `k`'s entries (indices into the entries).
    #[inline(always)]
    fn of_row(&self, k: usize) -> Range<usize> {
        self.offsets[k] as usize..self.offsets[k + 1] as usize
    }

    /// Entry `e`'s segment and position.
    #[inline(always)]
    fn entry(&self, e: usize) -> (usize, usize) {
        let [s, p] = self.entries[e];
        (s as usize, p as usize)
    }

    /// Asks for the gradient row of the entry [`REDUCE_AHEAD`] entries after `e`.
    #[inline(always)]
    fn prefetch<A>(&self, g: &Geometry<A>, e: usize) {
        if let Some(&[s, _]) = self.entries.get(e + REDUCE_AHEAD) {
            g.prefetch(g.x_row(s as usize));
        }
    }
}

/// What multiplies a segment's gradient row for one of its positions (decision 34): the
/// weight (or one) for `Sum`; divided by the segment's weight sum or count for `Mean`, by
/// the square root of its squared weights or count for `SqrtN` (the forward's divisors).
pub(crate) struct Scale<'w, A> {
    weights: Option<ArrayView1<'w, A>>,
    /// Per segment, unweighted: its coefficient; weighted: its divisor (`None`: the
    /// coefficient is zero, as an integer division by zero gives). Empty for `Sum`.
    per: Vec<Option<A>>,
    integral: bool,
}

impl<'w, A: PoolElement> Scale<'w, A> {
    /// The coefficients of pooling `p` over the segments of `csr` (`count` of them).
    /// `Max`, `Min` and `Prod` have none (the caller refuses them).
    pub fn of<E: Entries>(p: &Pooler<'w, A>, csr: &E, count: usize) -> Option<Self> {
        Self::of_tallies(p, count, |s, tally| {
            // The forward's tally, in position order.
            for k in csr.segment(s) {
                if let Some((_, pos)) = csr.entry(k) {
                    tally.push(p.weights.is_some(), &p.weight_of(true, pos));
                }
            }
        })
    }

    /// The coefficients of pooling `p` over `count` segments, segment `s`'s tally made
    /// by `tally(s, ..)` (its kept positions in position order).
    pub fn of_tallies(
        p: &Pooler<'w, A>,
        count: usize,
        mut tally: impl FnMut(usize, &mut Tally<A>),
    ) -> Option<Self> {
        let mut per = Vec::new();
        if matches!(p.pooling, Pooling::Mean | Pooling::SqrtN) {
            per.try_reserve_exact(count).ok()?;
            for s in 0..count {
                let mut t = Tally::new();
                tally(s, &mut t);
                per.push(match (p.end(&t), &p.weights) {
                    (End::Divide(d), None) => Some(divide(&A::one(), &d, p.integral)),
                    (End::Divide(d), Some(_)) => Some(d),
                    (End::Zero, _) => None,
                    // (Empty segments have no entries to scale.)
                    (End::Fill | End::Keep, _) => Some(A::one()),
                });
            }
        } else if !matches!(p.pooling, Pooling::Sum) {
            return None;
        }
        Some(Scale {
            weights: p.weights,
            per,
            integral: p.integral,
        })
    }

    /// Position `pos` of segment `s`'s coefficient; `None` for one (a plain add).
    #[inline(always)]
    pub fn get(&self, s: usize, pos: usize) -> Option<A> {
        let w = self.weights.as_ref().map(|w| w[pos].clone());
        if self.per.is_empty() {
            return w;
        }
        Some(match (w, &self.per[s]) {
            (_, None) => A::zero(),
            (None, Some(c)) => c.clone(),
            (Some(w), Some(d)) => divide(&w, d, self.integral),
        })
    }
}

/// Where a backward writes touched row `k`: the gradient's own row (dense) or row `k` of
/// a fresh array for the touched rows (each row's first contribution written, then the
/// others added).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target<'m> {
    Dense,
    Touched,
    /// Row `map[k]` of an array of some rows (added to, as `Dense`).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    Mapped(Injective<'m>),
}

/// A map of touched rows to output rows that sends no two rows to one (strictly
/// increasing), so that the threads of distinct touched rows write distinct rows: its
/// only constructor checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Injective<'m>(&'m [usize]);

impl<'m> Injective<'m> {
    /// `map`, if it is strictly increasing.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn new(map: &'m [usize]) -> Option<Self> {
        map.windows(2).all(|w| w[0] < w[1]).then_some(Injective(map))
    }
}

impl<A> Geometry<A> {
    /// The output row of touched row `k` of `t`, or `Err` if it is not one.
    #[inline(always)]
    fn target(&self, t: &ByRow, k: usize, to: Target<'_>) -> Result<*mut A, BadIndex> {
        let r = match to {
            Target::Dense => t.rows[k] as usize,
            Target::Touched => k,
            Target::Mapped(map) => *map.0.get(k).ok_or(BadIndex)?,
        };
        if r >= self.segments {
            return Err(BadIndex);
        }
        Ok(self.out_row(r).0)
    }
}

/// Runs `row(&mut state, k)` for every touched row `k` of `t`, in `jobs` chunks of rows
/// (claimed by the calling thread and the rayon pool), each chunk with its own `init()`.
fn each_touched<S>(
    t: &ByRow,
    jobs: usize,
    init: impl Fn() -> S + Sync,
    row: impl Fn(&mut S, usize) -> Result<(), BadIndex> + Sync,
) -> Result<(), BadIndex> {
    run_ranges(t.touched(), jobs, |rows| {
        let mut state = init();
        rows.into_iter().try_for_each(|k| row(&mut state, k))
    })
}

/// Calls `f(s, pos, first)` for each entry of touched row `k`, in position order: `s` and
/// `pos` the entry's segment (below `g.rows`) and position, `first` whether it is the
/// row's first entry; the gradient rows of the entries ahead asked for. `Err` for a
/// segment out of range (which the plan's construction rules out).
#[inline(always)]
fn row_entries<A>(
    g: &Geometry<A>,
    t: &ByRow,
    k: usize,
    mut f: impl FnMut(usize, usize, bool),
) -> Result<(), BadIndex> {
    let entries = t.of_row(k);
    for e in entries.clone() {
        t.prefetch(g, e);
        let (s, pos) = t.entry(e);
        if s >= g.rows {
            return Err(BadIndex);
        }
        f(s, pos, e == entries.start);
    }
    Ok(())
}

/// Calls `f(o, s, pos, first)` for every entry of every touched row of `t` (as
/// [`row_entries`]), `o` the row's output row (where `to` says). `Err` for a row or
/// segment out of range (which the plan's construction rules out).
fn each_entry<A: PoolElement>(
    g: &Geometry<A>,
    t: &ByRow,
    to: Target<'_>,
    jobs: usize,
    f: impl Fn(*mut A, usize, usize, bool) + Sync,
) -> Result<(), BadIndex> {
    each_touched(
        t,
        jobs,
        || (),
        |_, k| {
            let o = g.target(t, k, to)?;
            row_entries(g, t, k, |s, pos, first| f(o, s, pos, first))
        },
    )
}

/// Adds into each touched row of `t` (where `to` says) its segments' gradient rows (`g`'s
/// input rows, one per segment) times their coefficients, in position order.
pub(crate) fn backward<A: PoolElement>(
    g: &Geometry<A>,
    t: &ByRow,
    scale: &Scale<'_, A>,
    to: Target<'_>,
    jobs: usize,
) -> Result<(), BadIndex> {
    // Fresh rows start from their first contribution, as torch's coalesced sparse
    // gradients do (a lone -0.0 stays -0.0); written before they are read, since a read
    // first would fault each fresh page twice.
    let fresh = to == Target::Touched;
    each_entry(g, t, to, jobs, |o, s, pos, first| {
        // SAFETY: `o` a target row below `segments` (the contract), written by the job
        // visiting this entry alone (distinct touched rows are distinct output rows).
        unsafe { add_scaled(g, scale, o, s, pos, fresh && first) }
    })
}

/// [`backward`] of one geometry and scale per head (decision 55: each head its slice of the
/// rows and its column of weights): each touched row's heads in turn, while its segments'
/// rows are in the cache, the next row's segments' whole rows asked for first.
pub(crate) fn backward_heads<A: PoolElement>(
    gs: &[Geometry<A>],
    t: &ByRow,
    scales: &[Scale<'_, A>],
    to: Target<'_>,
    jobs: usize,
) -> Result<(), BadIndex> {
    let Some(first) = gs.first() else {
        return Ok(());
    };
    let (fresh, span) = (to == Target::Touched, super::head_span(gs));
    each_touched(
        t,
        jobs,
        || (),
        |_, k| {
            if k + 1 < t.touched() {
                for e in t.of_row(k + 1) {
                    let (s, _) = t.entry(e);
                    prefetch_block(first.x_row(s.min(first.rows.saturating_sub(1))), span);
                }
            }
            for (g, scale) in gs.iter().zip(scales) {
                let o = g.target(t, k, to)?;
                // SAFETY: as `backward`'s, for each head's geometry.
                row_entries(g, t, k, |s, pos, first| unsafe {
                    add_scaled(g, scale, o, s, pos, fresh && first)
                })?;
            }
            Ok(())
        },
    )
}

/// How a fused pass builds a row's gradient: scaled contributions, or through an argmax.
pub(crate) enum Route<'a, 'w, A> {
    Scale(&'a Scale<'w, A>),
    Arg(ArgRows),
}

/// Each touched row's gradient as [`backward`] sums a fresh row (from its first
/// contribution; `scale` `None`: through the argmax `arg`, from zero, each element its
/// routed contributions), built in a row of the job's own (`len` elements: `g`'s output
/// is a one-row array in standard layout, whose strides the lanes follow), then handed to
/// `done(k, row, routed)` (`routed`: some element of it was routed, always for a scale).
/// The training step's fused pass: no gradient array.
pub(crate) fn backward_each<A: PoolElement>(
    g: &Geometry<A>,
    t: &ByRow,
    how: Route<'_, '_, A>,
    len: usize,
    jobs: usize,
    done: impl Fn(usize, &mut [A], bool) + Sync,
) -> Result<(), BadIndex> {
    each_touched(
        t,
        jobs,
        || vec![A::zero(); len],
        |row, k| {
            let o = row.as_mut_ptr();
            let mut routed = false;
            match &how {
                Route::Scale(scale) => {
                    routed = true;
                    // SAFETY: `o` is the job's row of `len` elements, the one-row output the
                    // geometry's lanes address (its contract with a single segment).
                    row_entries(g, t, k, |s, pos, first| unsafe {
                        add_scaled(g, scale, o, s, pos, first)
                    })?
                }
                Route::Arg(arg) => {
                    row.fill(A::zero());
                    // SAFETY: as above; `arg` has the gradient's strides (`backward_arg`'s).
                    row_entries(g, t, k, |s, pos, _| unsafe {
                        g.each_lane_by(g.x_row(s), arg.at(s as isize * g.x_step), o, |o, x, a| {
                            if a == pos {
                                *o += x.clone();
                                routed = true;
                            }
                        })
                    })?
                }
            }
            done(k, row, routed);
            Ok(())
        },
    )
}

/// Adds (or, `first`, writes) segment `s`'s gradient row times position `pos`'s
/// coefficient into the output row `o`.
///
/// # Safety
/// `s < g.rows` and `o` an output row of `g`'s lanes that no other thread touches.
#[inline(always)]
unsafe fn add_scaled<A: PoolElement>(
    g: &Geometry<A>,
    scale: &Scale<'_, A>,
    o: *mut A,
    s: usize,
    pos: usize,
    first: bool,
) {
    let (x, c) = (g.x_row(s), scale.get(s, pos));
    // SAFETY: the caller's; rows that are runs are `len` contiguous elements of the
    // gradient and of the output, distinct arrays.
    unsafe {
        if g.runs() {
            let len = g.lane.len;
            scaled(
                std::slice::from_raw_parts_mut(o, len),
                std::slice::from_raw_parts(x, len),
                c,
                first,
            );
        } else {
            match (c, first) {
                (None, false) => g.each_lane(x, o, |o, x| *o += x.clone()),
                (Some(c), false) => g.each_lane(x, o, |o, x| *o += c.clone() * x.clone()),
                (None, true) => g.each_lane(x, o, |o, x| *o = x.clone()),
                (Some(c), true) => g.each_lane(x, o, |o, x| *o = c.clone() * x.clone()),
            }
        }
    }
}

/// `o = c·x` (`first`) or `o += c·x` (`c` `None`: one) on rows that are runs: slices that
/// cannot alias, so that the loop vectorizes (in the lanes' closures it ran one element at
/// a time, reloading `c`).
#[inline(never)]
fn scaled<A: PoolElement>(o: &mut [A], x: &[A], c: Option<A>, first: bool) {
    match (c, first) {
        (None, false) => o.iter_mut().zip(x).for_each(|(o, x)| *o += x.clone()),
        (Some(c), false) => o.iter_mut().zip(x).for_each(|(o, x)| *o += c.clone() * x.clone()),
        (None, true) => o.clone_from_slice(x),
        (Some(c), true) => o.iter_mut().zip(x).for_each(|(o, x)| *o = c.clone() * x.clone()),
    }
}

/// An argmax array beside a gradient (its strides), read by the backward's threads.
pub(crate) struct ArgRows(pub *const usize);

// SAFETY: the threads only read through it, as they would a `&[usize]`.
unsafe impl Sync for ArgRows {}

impl ArgRows {
    /// The element `at` elements on.
    #[inline(always)]
    fn at(&self, at: isize) -> *const usize {
        self.0.wrapping_offset(at)
    }
}

/// Adds into each touched row of `t` (where `to` says) the elements of its segments'
/// gradient rows whose argmax (`arg`, with the gradient's strides) names the entry's
/// position, in position order.
pub(crate) fn backward_arg<A: PoolElement>(
    g: &Geometry<A>,
    t: &ByRow,
    arg: ArgRows,
    to: Target<'_>,
    jobs: usize,
) -> Result<(), BadIndex> {
    each_entry(g, t, to, jobs, |o, s, pos, _| {
        // SAFETY: as `backward`'s; `arg` has the gradient's strides, so its row `s` is at
        // the gradient row's offset.
        unsafe {
            g.each_lane_by(g.x_row(s), arg.at(s as isize * g.x_step), o, |o, x, a| {
                if a == pos {
                    *o += x.clone();
                }
            })
        }
    })
}
