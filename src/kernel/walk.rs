//! The odometer walk shared by gather and scatter: a range of flat positions (row-major
//! over the plan's loops) visited lane by lane.
//!
//! The innermost loop is the *lane*; the loop around it is a *row* of lanes; an odometer
//! over the remaining loops moves from row to row, carrying each operand's offset along.

use super::BadIndex;
use crate::plan::policy::INLINE_RANK;
use crate::plan::{AxisTerm, Loop, positions, split_innermost};
use crate::small::Small;

/// Element offsets of one position in the three operands a plan describes: the output
/// (for a scatter, the updates), the input (for a scatter, the destination) and the
/// indices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct At {
    pub out: isize,
    pub inp: isize,
    pub idx: isize,
}

impl At {
    /// The offsets `n` steps further along `l`.
    #[inline(always)]
    pub fn step(self, l: &Loop, n: isize) -> At {
        At {
            out: self.out + n * l.out,
            inp: self.inp + n * l.inp,
            idx: self.idx + n * l.idx,
        }
    }
}

/// What a walk does with the lanes it visits.
pub(crate) trait Visit {
    /// `count` whole lanes along `row`, the first at `at` (only when the walk was asked
    /// for whole rows).
    ///
    /// # Safety
    /// The lanes exist: `at` are the offsets of a position the plan's loops reach.
    unsafe fn lanes(&mut self, row: Loop, count: usize, at: At) -> Result<(), BadIndex>;

    /// Positions `first..last` of the lane at `at`.
    ///
    /// # Safety
    /// As for [`Visit::lanes`]; `first < last <= lane.len`.
    unsafe fn lane(&mut self, at: At, first: usize, last: usize) -> Result<(), BadIndex>;
}

/// Visits positions `start..end` of `outer` loops around lanes of `lane_len` (> 0),
/// handing runs of whole lanes within a row to [`Visit::lanes`] when `whole_rows`.
///
/// # Safety
/// `start <= end <=` the number of positions; the visitor's own contract for every lane
/// of the loops.
pub(crate) unsafe fn walk<V: Visit>(
    outer: &[Loop],
    lane_len: usize,
    whole_rows: bool,
    start: usize,
    end: usize,
    v: &mut V,
) -> Result<(), BadIndex> {
    let (row, upper) = split_innermost(outer);
    let mut coord: Small<usize> = upper.iter().map(|_| 0).collect();
    let (mut first, mut c, mut r) = (0, 0, At::default());
    if start > 0 {
        // Start at the lane holding `start` (divisions a whole walk need not pay).
        let lane_no = start / lane_len;
        (first, c) = (start % lane_len, lane_no % row.len);
        let mut rem = lane_no / row.len;
        for (k, l) in coord.iter_mut().zip(upper).rev() {
            *k = rem % l.len;
            rem /= l.len;
            r = r.step(l, *k as isize);
        }
    }
    let mut remaining = end - start;
    while remaining > 0 {
        let mut at = r.step(&row, c as isize);
        while c < row.len && remaining > 0 {
            if whole_rows && first == 0 && remaining >= lane_len {
                let k = (row.len - c).min(remaining / lane_len);
                // SAFETY: lanes `c..c + k` of this row exist.
                unsafe { v.lanes(row, k, at)? };
                c += k;
                remaining -= k * lane_len;
                at = at.step(&row, k as isize);
                continue;
            }
            let last = lane_len.min(first + remaining);
            // SAFETY: the odometer never leaves the loops' bounds, and `first..last` is
            // within the lane.
            unsafe { v.lane(at, first, last)? };
            remaining -= last - first;
            first = 0;
            c += 1;
            at = at.step(&row, 1);
        }
        if remaining == 0 {
            break;
        }
        c = 0;
        for (k, l) in coord.iter_mut().zip(upper).rev() {
            *k += 1;
            r = r.step(l, 1);
            if *k < l.len {
                break;
            }
            *k = 0;
            r = r.step(l, -(l.len as isize));
        }
    }
    Ok(())
}

/// The loops a task walks, the lane innermost, and the axis terms that turn a lane's
/// index values into input offsets: one description for the gather and the scatter tasks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walk<'a> {
    /// The loops around the lane, outermost first.
    pub outer: &'a [Loop],
    /// The innermost loop.
    pub lane: Loop,
    pub axes: &'a [AxisTerm],
}

impl Walk<'_> {
    /// The number of positions.
    #[inline(always)]
    pub fn positions(&self) -> usize {
        positions(self.outer, &self.lane)
    }

    /// Whether lanes are blocks: one coordinate each (the indices do not advance).
    #[inline(always)]
    pub fn blocks(&self) -> bool {
        self.lane.idx == 0 && !self.axes.is_empty()
    }
}

/// Calls `lane` with the offsets of every lane of `outer` loops, in row-major order,
/// until one fails.
#[inline(always)]
pub(crate) fn each_lane(
    outer: &[Loop],
    mut lane: impl FnMut(At) -> Result<(), BadIndex>,
) -> Result<(), BadIndex> {
    // The odometer on the stack up to `INLINE_RANK`: a `Small`'s every access branches on
    // where its items are (PERFORMANCE.md#tiny-calls-store-forwarding).
    let mut inline = [0usize; INLINE_RANK];
    let mut spilled;
    let coord: &mut [usize] = match inline.get_mut(..outer.len()) {
        Some(c) => c,
        None => {
            spilled = vec![0; outer.len()];
            &mut spilled
        }
    };
    let mut at = At::default();
    loop {
        lane(at)?;
        let mut d = outer.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            let l = &outer[d];
            coord[d] += 1;
            at = at.step(l, 1);
            if coord[d] < l.len {
                break;
            }
            coord[d] = 0;
            at = at.step(l, -(l.len as isize));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records every position as (out offset, in-lane position).
    struct Record(Vec<(isize, usize)>, Loop);

    impl Visit for Record {
        unsafe fn lanes(&mut self, row: Loop, count: usize, at: At) -> Result<(), BadIndex> {
            for k in 0..count {
                // SAFETY: forwarded.
                unsafe { self.lane(at.step(&row, k as isize), 0, self.1.len)? };
            }
            Ok(())
        }
        unsafe fn lane(&mut self, at: At, first: usize, last: usize) -> Result<(), BadIndex> {
            self.0
                .extend((first..last).map(|i| (at.out + i as isize * self.1.out, i)));
            Ok(())
        }
    }

    #[test]
    fn any_range_visits_its_positions_in_order() {
        // A [2, 3, 4] row-major walk: flat position p has out offset p.
        let lane = Loop {
            len: 4,
            out: 1,
            inp: 0,
            idx: 0,
        };
        let outer = [
            Loop {
                len: 2,
                out: 12,
                ..Loop::default()
            },
            Loop {
                len: 3,
                out: 4,
                ..Loop::default()
            },
        ];
        for whole in [false, true] {
            for start in 0..24 {
                for end in start..=24 {
                    let mut r = Record(Vec::new(), lane);
                    // SAFETY: the recorder touches no memory.
                    unsafe { walk(&outer, 4, whole, start, end, &mut r).unwrap() };
                    let offs: Vec<isize> = r.0.iter().map(|p| p.0).collect();
                    assert_eq!(offs, (start as isize..end as isize).collect::<Vec<_>>());
                }
            }
        }
    }
}
