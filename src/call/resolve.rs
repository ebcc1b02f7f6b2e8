//! Index resolution: every index value checked and resolved in row-major order (in
//! parallel for a plan's large indices), and the error naming the first bad one.

use ndarray::RawData;

use super::Call;
use crate::error::{GatherError, internal};
use crate::index::{GatherIndex, IndexMode, Raise, Resolve, resolve};
use crate::kernel::BadIndex;
use crate::kernel::schedule;
use crate::layout::unravel;
use crate::plan::Plan;
use crate::plan::Ranges;
use crate::plan::policy::RESOLVE_RANGE_BYTES;

impl<S: RawData, I: GatherIndex> Call<'_, S, I> {
    /// The error for the first (row-major) out-of-range index, if any. Only the indices of
    /// a non-empty output are read.
    pub fn first_bad_index(&self, plan: &Plan) -> Option<GatherError> {
        self.resolve_each(plan, |_| ()).err()
    }

    /// Resolves every index value in row-major order, passing each position to `each`,
    /// or returns the error for the first out-of-range one. Stops early, with `Ok`, when
    /// the plan has no axes (the values are never read).
    pub fn resolve_each(&self, plan: &Plan, each: impl FnMut(usize)) -> Result<(), GatherError> {
        if plan.axes.is_empty() {
            return Ok(());
        }
        // Without an iterator over dynamic-rank positions where the layout allows.
        match self.indices.as_slice() {
            Some(values) => self.scan(plan, values.iter(), each),
            None => self.scan(plan, self.indices.iter(), each),
        }
    }

    /// Whether the caller's indices are in standard layout, so that the plan's index
    /// offsets are row-major positions: where [`Call::resolve_all`] puts each value.
    pub fn indices_in_standard_layout(&self) -> bool {
        self.indices.is_standard_layout()
    }

    /// Every index value resolved, in row-major order, each converted by `convert`; or the
    /// error for the first out-of-range one. Empty when the plan has no axes.
    pub fn resolve_all<P: Copy + Default + Send>(
        &self,
        plan: &Plan,
        convert: impl Fn(usize) -> P + Sync,
    ) -> Result<Vec<P>, GatherError> {
        match (self.indices.as_slice(), &plan.axes[..], self.mode) {
            // One gathered axis, contiguous indices: a branch-free loop that vectorizes,
            // over ranges of the indices on the pool's threads when they are large
            // (PERFORMANCE.md#prepared-gathers).
            (Some(indices), [term], IndexMode::Raise) => resolve_slice(indices, |v| {
                let (i, ok) = Raise::resolve_or_zero(v, term.len);
                (convert(i), ok)
            })
            .map_err(|BadIndex| self.index_error(plan)),
            _ => {
                let mut values = Vec::with_capacity(self.indices.len());
                self.resolve_each(plan, |i| values.push(convert(i)))?;
                Ok(values)
            }
        }
    }

    /// [`Call::resolve_each`] over the index values in row-major order.
    fn scan<'v>(
        &self,
        plan: &Plan,
        values: impl Iterator<Item = &'v I>,
        mut each: impl FnMut(usize),
    ) -> Result<(), GatherError>
    where
        I: 'v,
    {
        let last = self.idx().shape.last().copied().unwrap_or(1).max(1);
        // `col` runs along the last dimension, whose values cycle through the axis terms.
        let (mut col, mut j) = (0, 0);
        for (flat, v) in values.enumerate() {
            let term = &plan.axes[j];
            let Some(i) = resolve(*v, term.len, self.mode) else {
                return Err(GatherError::IndexOutOfBounds {
                    op: self.op,
                    index: v.to_i128(),
                    position: unravel(flat, self.indices.shape()).to_vec(),
                    axis: term.axis,
                    axis_len: term.len,
                });
            };
            each(i);
            (col, j) = (col + 1, j + 1);
            if j == plan.axes.len() {
                j = 0;
            }
            if col == last {
                (col, j) = (0, 0);
            }
        }
        Ok(())
    }

    /// The error for the bad index the kernel reported.
    pub(super) fn index_error(&self, plan: &Plan) -> GatherError {
        self.first_bad_index(plan)
            .unwrap_or_else(|| internal(self.op, "a bad index the scan did not find"))
    }
}

/// `convert(v)` for every value of `values`, in order: each gives its resolved value and
/// whether `v` was good (a bad one converts to anything, branch-free). A loop that
/// vectorizes, over ranges of the values on the pool's threads when they are large
/// (PERFORMANCE.md#prepared-gathers); `Err` if any value was bad (the caller finds and
/// names the first). The one resolver of a plan's indices and a gather-reduce's.
pub(crate) fn resolve_slice<I: Copy + Sync, P: Copy + Default + Send>(
    values: &[I],
    convert: impl Fn(I) -> (P, bool) + Sync,
) -> Result<Vec<P>, BadIndex> {
    let one = |v: I, good: &mut bool| {
        let (p, ok) = convert(v);
        *good &= ok;
        p
    };
    if !crate::plan::worth_parallel(size_of_val(values)) {
        let mut good = true;
        let out: Vec<P> = values.iter().map(|&v| one(v, &mut good)).collect();
        return if good { Ok(out) } else { Err(BadIndex) };
    }
    // Every slot is written by its range's job: allocated zeroed (for the primitive types
    // resolved here), not written twice.
    let mut out = vec![P::default(); values.len()];
    let ranges = Ranges::new(values.len(), size_of_val(values), RESOLVE_RANGE_BYTES);
    schedule::run_parts(&mut out, 1, &ranges, true, |range, to| {
        let mut good = true;
        for (p, &v) in to.iter_mut().zip(&values[range]) {
            *p = one(v, &mut good);
        }
        if good { Ok(()) } else { Err(BadIndex) }
    })
    .map(|()| out)
}
