//! Tiles, strips and slabs: the order in which the kernel visits an output's positions
//! where row-major order would stride through memory.

use super::policy::{SHORT_ROW, SLAB, STAGE, TILE_CROSS, TILE_LANE};
use super::{AxisTerm, Loop};
use crate::small::Small;

/// `loops` (outermost first, never empty) whose lane strides through the output while an
/// outer *cross* loop moves through it more densely (a Fortran-order output of a C-order
/// input), strip-mined into tiles of `TILE_CROSS` x `TILE_LANE` positions: the cross loop
/// moves inside the lane's chunks and becomes the row around the lane, so that the
/// kernel stages each tile (gathers its lanes into a buffer, then writes the output along
/// the cross loop, `kernel::gather::stage`) while the input rows it reads stay in cache. A short
/// lane is staged whole; a short cross loop around it moves inside chunks of
/// `SHORT_ROW` positions of the row instead. Unchanged where the lane's output stride is
/// already unit, a length is not a multiple of its tile's, a short lane's cross loop is
/// long or is the row itself, or the lane is an element lane that the kernel can stage
/// whole.
pub(crate) fn tiled(loops: Small<Loop>) -> Small<Loop> {
    let Some((&lane, outer)) = loops.split_last() else {
        return loops;
    };
    let dense = |l: &Loop| l.out.unsigned_abs();
    let Some((x, &cross)) = outer.iter().enumerate().min_by_key(|(_, l)| dense(l)) else {
        return loops;
    };
    let fit = |len: usize, want: usize| match len {
        n if n <= want => Some(n),
        n => (n % want == 0).then_some(want),
    };
    let (Some(tl), Some(tx)) = (fit(lane.len, TILE_LANE), fit(cross.len, TILE_CROSS)) else {
        return loops;
    };
    if dense(&lane) <= 1 || dense(&cross) >= dense(&lane) {
        return loops;
    }
    if lane.inp == 0 && lane.idx != 0 && lane.len <= STAGE {
        // An element lane (its positions come from the indices alone: GatherElements
        // along the last axis, W3) reads anywhere along its axis, so a tile's 64
        // positions would read 64 rows at random, each line a miss of its own. Staged
        // whole instead, each group of lanes is gathered as in a C-order output, the next
        // lane's row prefetched (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
        return loops;
    }
    if lane.len <= 2 * TILE_LANE {
        // A lane of up to two chunks is staged whole, with the loop around it as the row
        // (W8's pixels: making the short cross loop the row took twice the time, its
        // rows too short to keep the block pipeline's reads in flight). A short cross
        // loop moves inside chunks of that row instead, so that the output lines a
        // chunk writes are written again, by the cross loop's next position, while
        // still in cache (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
        let (row, rest) = outer.split_last().unwrap_or((&lane, &[]));
        let Some(tr) = fit(row.len, SHORT_ROW).filter(|_| x < rest.len() && cross.len < TILE_CROSS) else {
            return loops;
        };
        let others = rest.iter().enumerate().filter(|&(d, _)| d != x).map(|(_, l)| *l);
        let tile = [chunks(*row, tr), cross, Loop { len: tr, ..*row }, lane];
        return others.chain(tile.into_iter().filter(|l| l.len > 1)).collect();
    }
    let others = outer.iter().enumerate().filter(|&(d, _)| d != x).map(|(_, l)| *l);
    let tile = [
        chunks(cross, tx),
        chunks(lane, tl),
        Loop { len: tx, ..cross },
        Loop { len: tl, ..lane },
    ];
    // (The lane keeps its `tl > 1` positions: it strides, so it was a loop of its own.)
    others.chain(tile.into_iter().filter(|l| l.len > 1)).collect()
}

/// Whether the positions that `lane` and the one gathered axis `a` can reach form a
/// *slab* worth copying into a buffer ([`SLAB`] elements at most) before the `row` of
/// lanes around it gathers from it: the row does not move through the input (every lane
/// of it reads the same slab: GatherElements and take_along_axis along an axis other
/// than the last), it has at least half as many lanes as the axis has positions (each
/// copied element is read twice on average), the lane reads at most every other element
/// of the input's span of the axis (else the slab is that span, already in cache or
/// streaming), and that span is larger than a slab (smaller, it stays in cache).
#[inline]
pub(crate) fn slab(row: &Loop, lane: &Loop, a: &AxisTerm) -> bool {
    // (The element lane first: a tiny block gather, W7, fails there.)
    let width = lane.len.saturating_mul(lane.inp.unsigned_abs());
    lane.idx != 0
        && lane.inp != 0
        && row.inp == 0
        && row.len.saturating_mul(2) >= a.len
        && a.len.saturating_mul(lane.len) <= SLAB
        && a.stride.unsigned_abs() >= width.saturating_mul(2)
        && a.len.saturating_mul(a.stride.unsigned_abs()) > SLAB
}

/// Row-major `loops` (outermost first, never empty) of a one-axis element gather whose
/// lane is too long for a [`slab`], strip-mined: the lane in strips of the most
/// positions a slab holds (a divisor of its length, at least 16), the strips outside
/// the row, so that the kernel copies each strip's slab once and gathers the row's lanes
/// from it (W4: each element read from another row of 16 MiB, in another 4 KiB page, as
/// a lookup in 1 MiB of contiguous copies instead). Unchanged otherwise.
///
/// The strips visit positions out of memory order: only for outputs the kernel may fill
/// in any order (an existing output, or fresh storage of elements without drop glue).
pub(crate) fn strips(loops: Small<Loop>, axes: &[AxisTerm]) -> Small<Loop> {
    let ([a], [.., row, lane]) = (axes, &loops[..]) else {
        return loops;
    };
    let most = SLAB / a.len.max(1);
    if lane.len <= most {
        return loops;
    }
    let Some(g) = (16..=most).rev().find(|g| lane.len % g == 0) else {
        return loops;
    };
    let strip = Loop { len: g, ..*lane };
    if !slab(row, &strip, a) {
        return loops;
    }
    let n = loops.len();
    let (row, lane) = (*row, *lane);
    loops[..n - 2]
        .iter()
        .copied()
        .chain([chunks(lane, g), row, strip])
        .collect()
}

/// `l` in steps of `t` positions (`t` divides its length).
pub(crate) fn chunks(l: Loop, t: usize) -> Loop {
    Loop {
        len: l.len / t,
        out: l.out * t as isize,
        inp: l.inp * t as isize,
        idx: l.idx * t as isize,
    }
}
