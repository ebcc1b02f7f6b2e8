//! The read-only pass that checks every index a scatter will read, before anything is
//! written.

use super::ScatterTask;
use crate::index::{GatherIndex, Raise, Resolve};
use crate::kernel::prefetch::{lines_ahead, prefetch_line};
use crate::kernel::schedule;
use crate::kernel::walk::{At, Visit, walk};
use crate::kernel::{BadIndex, locate};
use crate::plan::{AxisTerm, Loop};

impl<A: Clone + Send + Sync, I: GatherIndex> ScatterTask<'_, A, I> {
    /// Checks every index the scatter will read; `Err` if one is out of range. Reads only.
    pub fn check(&self) -> Result<(), BadIndex> {
        let total = self.walk.positions();
        if total == 0 || self.walk.axes.is_empty() {
            return Ok(());
        }
        let visit = |start: usize, end: usize| {
            let mut v = Check { task: self };
            // SAFETY: `ScatterTask::new`'s contract; `start..end` are positions.
            unsafe {
                walk(
                    self.walk.outer,
                    self.walk.lane.len,
                    self.walk.lane.idx == 0,
                    start,
                    end,
                    &mut v,
                )
            }
        };
        let Some(ranges) = self.strategy.check else {
            return visit(0, total);
        };
        schedule::run_jobs(ranges.count, false, |c| {
            let r = ranges.get(c);
            visit(r.start, r.end)
        })
        .finish()
    }
}

/// The index check: a lane is good if every coordinate it reads resolves.
pub(crate) struct Check<'t, 'a, A, I> {
    pub(super) task: &'t ScatterTask<'a, A, I>,
}

impl<A: Send + Sync, I: GatherIndex> Visit for Check<'_, '_, A, I> {
    /// `count` block lanes along `row`, one coordinate each ([`check_row`]).
    unsafe fn lanes(&mut self, row: Loop, count: usize, at: At) -> Result<(), BadIndex> {
        let t = self.task;
        // One or two axis terms by value: constant loops (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
        // SAFETY: (every arm) forwarded, with this task's own axis terms.
        let good = unsafe {
            match t.walk.axes {
                [a] => check_row(t.idx, &[*a], row, count, at.idx),
                [a, b] => check_row(t.idx, &[*a, *b], row, count, at.idx),
                axes => check_row(t.idx, axes, row, count, at.idx),
            }
        };
        if good { Ok(()) } else { Err(BadIndex) }
    }

    unsafe fn lane(&mut self, at: At, first: usize, last: usize) -> Result<(), BadIndex> {
        let t = self.task;
        let (first, last) = if t.walk.lane.idx == 0 {
            (0, 1)
        } else {
            (first, last)
        };
        let mut good = true;
        if let ([a], 1) = (t.walk.axes, t.walk.lane.idx) {
            // One axis, contiguous indices: a slice, checked branch-free (vectorizes).
            // SAFETY: the lane's indices `first..last` are elements of the indices.
            let run = unsafe {
                std::slice::from_raw_parts(t.idx.offset(at.idx + a.comp + first as isize), last - first)
            };
            for &v in run {
                good &= Raise::resolve_or_zero(v, a.len).1;
            }
            return if good { Ok(()) } else { Err(BadIndex) };
        }
        for i in first as isize..last as isize {
            // SAFETY: the lane's coordinates are elements of the indices (`new`'s contract).
            good &= unsafe { locate::<I, Raise>(t.idx, t.walk.axes, at.idx + i * t.walk.lane.idx) }.1;
        }
        if good { Ok(()) } else { Err(BadIndex) }
    }
}

/// Whether the coordinates of `count` lanes along `row`, the first at index offset `at`,
/// all resolve through `axes`; a tight loop that asks for the indices a few KiB ahead,
/// which the hardware's own prefetch does not (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
///
/// # Safety
/// The lanes' coordinates are elements of the indices at `idx`.
#[inline(always)]
pub(crate) unsafe fn check_row<I: GatherIndex>(
    idx: *const I,
    axes: &[AxisTerm],
    row: Loop,
    count: usize,
    at: isize,
) -> bool {
    let ahead = lines_ahead::<I>(row.idx);
    let mut good = true;
    for k in 0..count as isize {
        prefetch_line(idx.wrapping_offset(at + (k + ahead) * row.idx));
        // SAFETY: lane `k` of the row exists; its coordinate is an element of the indices.
        good &= unsafe { locate::<I, Raise>(idx, axes, at + k * row.idx) }.1;
    }
    good
}
