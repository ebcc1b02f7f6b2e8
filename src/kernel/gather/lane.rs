//! One range of a gather task, lane by lane: the visitor the walk drives.

use std::mem::{MaybeUninit, needs_drop};

use super::Task;
use super::elements::{Axis1, Isa, Rows1};
use crate::index::{GatherIndex, Resolve};
use crate::kernel::BadIndex;
use crate::kernel::store::{InitGuard, store};
use crate::kernel::walk::{At, Visit};
use crate::plan::{Loop, Stage};

/// The gather's visitor: one range of a task, with the guard over what it has written.
pub(super) struct Gather<'t, 'a, A, I, R, const INIT: bool> {
    pub(super) task: &'t Task<'a, A, I>,
    pub(super) guard: InitGuard<A>,
    /// The buffer of a staged task's rows (unallocated otherwise).
    pub(super) stage: Vec<A>,
    pub(super) _mode: std::marker::PhantomData<R>,
}

impl<'t, 'a, A, I, R, const INIT: bool> Gather<'t, 'a, A, I, R, INIT> {
    /// A visitor of `task`'s range whose first output element is at `base`.
    pub(super) fn new(task: &'t Task<'a, A, I>, base: *mut A) -> Self {
        Gather {
            task,
            guard: InitGuard::new(base, INIT && needs_drop::<A>()),
            stage: Vec::new(),
            _mode: std::marker::PhantomData,
        }
    }
}

impl<A: Clone + Send + Sync, I: GatherIndex> Task<'_, A, I> {
    /// `count` element lanes along `row` from `at`, each reading one contiguous input row
    /// (the planner's [`Strategy::rows`](crate::plan::Strategy) for short element rows:
    /// one axis of stride 1, lanes contiguous in indices and output, not advancing in the
    /// input, no drop glue to count).
    ///
    /// # Safety
    /// The lanes exist (as for [`Visit::lanes`]), and the planner's conditions hold.
    #[inline(always)]
    pub(super) unsafe fn element_rows<R: Resolve, const INIT: bool>(
        &self,
        row: Loop,
        count: usize,
        at: At,
        written: &mut usize,
    ) -> Result<(), BadIndex> {
        let (l, [a]) = (self.walk.lane, self.walk.axes) else {
            return Err(BadIndex);
        };
        // SAFETY: `Task::new`'s contract bounds every offset the loops and the axis term
        // form; with `l.inp == 0`, `a.stride == 1`, `l.idx == l.out == 1` (the planner's),
        // lane `i`'s row is `a.len` elements from `at.inp + i * row.inp`, its indices and
        // output `l.len` elements from their offsets; distinct positions are distinct
        // output elements.
        unsafe {
            let run = Rows1 {
                inp: self.inp.offset(at.inp),
                idx: self.idx.offset(at.idx + a.comp),
                out: self.out.offset(at.out),
                n: l.len,
                count,
                steps: (row.inp, row.idx, row.out),
                len: a.len,
            };
            *written += count * l.len;
            if run.fill_with::<R, INIT>(self.isa) {
                Ok(())
            } else {
                Err(BadIndex)
            }
        }
    }
}

impl<A: Clone + Send + Sync, I: GatherIndex, R: Resolve, const INIT: bool> Visit
    for Gather<'_, '_, A, I, R, INIT>
{
    #[inline(always)]
    unsafe fn lanes(&mut self, row: Loop, count: usize, at: At) -> Result<(), BadIndex> {
        let written = &mut self.guard.written;
        // SAFETY: forwarded; the walk asks for whole rows only of staged tasks (whose
        // buffer `walk_range` allocated) and of block lanes.
        unsafe {
            let buf = self.stage.spare_capacity_mut().as_mut_ptr();
            match self.task.strategy.staged {
                Stage::Output => self.task.stage_row::<R>(row, count, at, buf, written),
                Stage::Input => self.task.stage_inputs::<R, INIT>(row, count, at, buf, written),
                Stage::Slab => self.task.stage_slab::<R, INIT>(row, count, at, buf, written),
                Stage::No if self.task.walk.blocks() => {
                    self.task.block_row::<R, INIT>(row, count, at, written)
                }
                Stage::No => self.task.element_rows::<R, INIT>(row, count, at, written),
            }
        }
    }

    /// Gathers positions `first..last` of the lane; counts the elements written (per
    /// element where a panic could leave them behind, that is for `INIT` with drop glue).
    #[inline(always)]
    unsafe fn lane(&mut self, at: At, first: usize, last: usize) -> Result<(), BadIndex> {
        let t = self.task;
        let (l, f) = (t.walk.lane, first as isize);
        let written = &mut self.guard.written;
        let count_each = INIT && needs_drop::<A>();
        // SAFETY: (for the whole body) `Task::new`'s contract bounds every offset formed
        // from the loops and the axis terms; resolved indices are `< len` by `Resolve`
        // (0 for a bad one, which is reported).
        unsafe {
            let out = t.out.offset(at.out);
            if l.idx == 0 || t.walk.axes.is_empty() {
                // A block: one coordinate for the whole run.
                let (g, ok) = t.locate::<R>(t.walk.axes, at.idx);
                if !ok {
                    return Err(BadIndex);
                }
                t.copy::<INIT>(out, t.inp.offset(at.inp + g), first, last, written);
                return Ok(());
            }
            if let [a] = t.walk.axes {
                // One gathered axis (GatherElements, take_along_axis, 1-D take).
                let (idx, inp) = (t.idx.offset(at.idx + a.comp), t.inp.offset(at.inp));
                if l.out == 1 && l.idx == 1 && !count_each {
                    let n = last - first;
                    let run = Axis1 {
                        inp: inp.offset(f * l.inp),
                        step: l.inp,
                        len: a.len,
                        stride: a.stride,
                        // (The slab prefetches its lanes' indices itself.)
                        past_end: t.strategy.staged != Stage::Slab,
                        next: t.walk.outer.last().map_or(0, |r| r.inp),
                    };
                    let out = std::slice::from_raw_parts_mut(out.add(first).cast::<MaybeUninit<A>>(), n);
                    let idx = std::slice::from_raw_parts(idx.add(first), n);
                    let isa = if n >= 16 { t.isa } else { Isa::Base };
                    *written += n;
                    return if run.fill_with::<I, R, INIT>(isa, out, idx) {
                        Ok(())
                    } else {
                        Err(BadIndex)
                    };
                }
            }
            for i in f..last as isize {
                let (g, ok) = t.locate::<R>(t.walk.axes, at.idx + i * l.idx);
                if !ok {
                    return Err(BadIndex);
                }
                store::<A, INIT>(out.offset(i * l.out), &*t.inp.offset(at.inp + i * l.inp + g));
                if count_each {
                    *written += 1;
                }
            }
        }
        if !count_each {
            *written += last - first;
        }
        Ok(())
    }
}
