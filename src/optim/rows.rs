//! A training step's row updates: the table's and the optimizer's rows handed to one
//! thread each, as slices (decision 53: each touched row updated once, by one thread).

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

use ndarray::{ArrayRef, ArrayView2, ArrayViewMut, Axis, RemoveAxis};

use super::{Optimizer, RowUpdate, check_state};
use crate::error::{GatherError, internal};
use crate::kernel::schedule::run_jobs;
use crate::plan::reduce::jobs;

/// The rows of a mutable array along an axis, each handed out as a slice in its
/// row-major order (a row that is not one run goes through a copy).
struct RowsMut<'a> {
    base: *mut f32,
    step: isize,
    rows: usize,
    len: usize,
    /// Each element's offset from its row's start, if a row is not one run.
    offsets: Option<Vec<isize>>,
    _rows: PhantomData<&'a mut f32>,
}

// SAFETY: the threads of a step take distinct rows (the callers' contract), so sharing the
// pointer is sharing disjoint `&mut [f32]`.
unsafe impl Sync for RowsMut<'_> {}

impl<'a> RowsMut<'a> {
    fn of<D: RemoveAxis>(mut a: ArrayViewMut<'a, f32, D>, axis: usize) -> Self {
        let (rows, step) = (a.shape()[axis], a.strides()[axis]);
        let len = a
            .shape()
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != axis)
            .map(|(_, &n)| n)
            .product();
        let base = a.as_mut_ptr();
        let offsets = (rows > 0)
            .then(|| a.index_axis(Axis(axis), 0))
            .filter(|row| row.as_slice().is_none())
            .map(|row| {
                let start = base as usize as isize;
                row.iter()
                    .map(|e| (e as *const f32 as usize as isize - start) / 4)
                    .collect()
            });
        RowsMut {
            base,
            step,
            rows,
            len,
            offsets,
            _rows: PhantomData,
        }
    }

    /// Calls `f` with row `r` as a slice (written back if it is a copy).
    ///
    /// # Safety
    /// `r < self.rows`, and no other thread is in row `r`.
    #[inline(always)]
    unsafe fn with(&self, r: usize, f: impl FnOnce(&mut [f32])) {
        let start = self.base.wrapping_offset(r as isize * self.step);
        match &self.offsets {
            // SAFETY: row `r` of the array is `len` contiguous elements from `start`, which
            // this thread alone holds (the caller's).
            None => f(unsafe { std::slice::from_raw_parts_mut(start, self.len) }),
            Some(offsets) => {
                // SAFETY: each offset is an element of row `r` (the array's own strides),
                // read and written by this thread alone.
                let mut copy: Vec<f32> = offsets.iter().map(|&o| unsafe { *start.offset(o) }).collect();
                f(&mut copy);
                for (&o, v) in offsets.iter().zip(copy) {
                    // SAFETY: as the read's.
                    unsafe { *start.offset(o) = v };
                }
            }
        }
    }
}

/// A step under way: the optimizer's update, the table's rows and the state's rows.
pub(crate) struct Step<'a> {
    op: &'static str,
    rule: &'a dyn RowUpdate,
    table: RowsMut<'a>,
    state: Option<RowsMut<'a>>,
    /// Set by an update that could not run (a bug: the callers check first).
    missed: AtomicBool,
}

impl<'a> Step<'a> {
    /// Checks `opt`'s state against `table`'s rows along `axis` and their width (decision
    /// 66), then starts its step. Nothing changes on `Err`.
    pub fn begin<D: RemoveAxis, O: Optimizer + ?Sized>(
        op: &'static str,
        opt: &'a mut O,
        table: &'a mut ArrayRef<f32, D>,
        axis: usize,
    ) -> Result<Self, GatherError> {
        let rows = table.shape()[axis];
        let len = (table.shape().iter().enumerate())
            .filter(|&(i, _)| i != axis)
            .map(|(_, &n)| n)
            .product();
        check_state(op, None, &*opt, rows, len)?;
        let said = opt.state_dim();
        let (rule, state) = opt.begin_step();
        let state = match state {
            Some(s) if Some(s.dim()) == said => Some(RowsMut::of(s, 0)),
            None if said.is_none() => None,
            state => {
                return Err(GatherError::Optimizer {
                    op,
                    detail: format!(
                        "from begin_step is {:?}, but state_dim said {said:?} (the optimizer's two methods disagree)",
                        state.map(|s| s.dim())
                    ),
                });
            }
        };
        Ok(Step {
            op,
            rule,
            table: RowsMut::of(table.view_mut(), axis),
            state,
            missed: AtomicBool::new(false),
        })
    }

    /// Updates row `r` with its gradient `g` (the row's length); a row or gradient that
    /// does not fit is recorded for [`finish`](Self::finish), never skipped silently.
    ///
    /// # Safety
    /// No other thread updates row `r` at the same time.
    #[inline]
    pub unsafe fn update(&self, r: usize, g: &[f32]) {
        if r >= self.table.rows || g.len() != self.table.len {
            self.missed.store(true, Ordering::Relaxed);
            return;
        }
        // SAFETY: `r` is a row of the table and of the state (checked as long), this
        // thread's alone (the caller's).
        unsafe {
            self.table.with(r, |w| match &self.state {
                Some(s) => s.with(r, |s| self.rule.update(w, g, s)),
                None => self.rule.update(w, g, &mut []),
            })
        }
    }

    /// Ends the step: an internal error if any update could not run.
    pub fn finish(self) -> Result<(), GatherError> {
        if self.missed.into_inner() {
            return Err(internal(
                self.op,
                "a step's row or gradient did not fit its table",
            ));
        }
        Ok(())
    }

    /// Updates the distinct rows `rows` with their gradients (`grads`' rows, in order) on
    /// the rayon pool, then [`finish`](Self::finish)es; an internal error (before any
    /// update) if the rows repeat or leave the table.
    pub fn rows(self, rows: &[usize], grads: ArrayView2<'_, f32>) -> Result<(), GatherError> {
        let distinct = rows.windows(2).all(|w| w[0] < w[1]);
        if !distinct || rows.last().is_some_and(|&r| r >= self.table.rows) || grads.nrows() != rows.len() {
            return Err(internal(self.op, "a table's touched rows out of order"));
        }
        let grads = grads.as_standard_layout();
        let len = grads.ncols();
        let per = rows
            .len()
            .div_ceil(jobs(rows.len() * len * size_of::<f32>(), rows.len()))
            .max(1);
        run_jobs(rows.len().div_ceil(per), false, |c| {
            for (k, &r) in rows.iter().enumerate().skip(c * per).take(per) {
                let g = grads.row(k);
                // (A standard-layout array's rows are slices.)
                let g = g.as_slice().unwrap_or(&[]);
                // SAFETY: the rows are distinct (checked), each in one job.
                unsafe { self.update(r, g) };
            }
            Ok(())
        })
        .finish()
        .map_err(|_| internal(self.op, "a step's job failed"))?;
        self.finish()
    }
}
