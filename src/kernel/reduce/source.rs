//! Where each position's input row comes from: [`Source`] (the indices, or the input's
//! own slices for `segment_reduce`) and [`Entries`] (positions grouped by segment: a
//! call's ranges of positions, or a plan's CSR).

use std::ops::Range;

use ndarray::{ArrayRef, Dimension};

use crate::index::GatherIndex;
use crate::kernel::BadIndex;
use crate::segments::Bounds;

/// The input row each position reads.
pub(crate) trait Source: Sync {
    /// Position `p`'s row: `Ok(None)` if the position is skipped, `Err` if its index is
    /// out of range. `p` is below the number of positions.
    fn row(&self, p: usize) -> Result<Option<usize>, BadIndex>;
    /// Position `p`'s row if its index is good, else anything (for a prefetch).
    fn peek(&self, p: usize) -> usize;
}

/// Segments as ranges of entries, each entry a row and the position it came from.
pub(crate) trait Entries: Sync {
    /// The number of entries.
    fn len(&self) -> usize;
    /// Segment `s`'s entries (within `0..len()`).
    fn segment(&self, s: usize) -> Range<usize>;
    /// Entry `k`'s row and position (`Ok(None)`: skipped).
    fn entry(&self, k: usize) -> Result<Option<(usize, usize)>, BadIndex>;
    /// Entry `k`'s row if its index is good, else anything (for a prefetch: unchecked).
    fn peek(&self, k: usize) -> usize;
}

/// A call's own positions as entries: segments from `bounds`, rows from `rows`.
pub(crate) struct Positions<'p, 'a, S, J> {
    pub rows: &'p S,
    pub bounds: &'p Bounds<'a, J>,
    pub len: usize,
}

impl<S: Source, J: GatherIndex> Entries for Positions<'_, '_, S, J> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }
    #[inline(always)]
    fn segment(&self, s: usize) -> Range<usize> {
        self.bounds.get(s)
    }
    #[inline(always)]
    fn entry(&self, k: usize) -> Result<Option<(usize, usize)>, BadIndex> {
        Ok(self.rows.row(k)?.map(|r| (r, k)))
    }
    #[inline(always)]
    fn peek(&self, k: usize) -> usize {
        self.rows.peek(k)
    }
}

/// The indices of a gather-reduce, in row-major order, as the rows they read.
pub(crate) struct Indexed<'a, I> {
    idx: &'a [I],
    shape: Vec<usize>,
    axis_len: usize,
    skip: Option<i128>,
}

impl<'a, I: GatherIndex> Indexed<'a, I> {
    /// `indices` (any rank) read along an axis of `axis_len`; `keep` holds a row-major copy
    /// of indices that are not contiguous in row-major order (a slice: the kernel's walk
    /// reads an index with one load).
    pub fn new<E: Dimension>(
        indices: &'a ArrayRef<I, E>,
        keep: &'a mut Option<Vec<I>>,
        axis_len: usize,
        skip: Option<i64>,
    ) -> Self {
        let flat = match indices.as_slice() {
            Some(v) => v,
            None => keep.insert(indices.iter().copied().collect()),
        };
        Indexed {
            idx: flat,
            shape: indices.shape().to_vec(),
            axis_len,
            skip: skip.map(i128::from),
        }
    }

    /// The number of positions.
    pub fn len(&self) -> usize {
        self.idx.len()
    }

    /// The first position whose index is out of range, with its value and its position
    /// in the indices' shape; `None` if every index is good.
    pub fn first_bad(&self) -> Option<(i128, usize, &[usize])> {
        (0..self.len())
            .find(|&p| self.row(p).is_err())
            .map(|p| (self.idx[p].to_i128(), p, &self.shape[..]))
    }
}

impl<I: GatherIndex> Source for Indexed<'_, I> {
    #[inline(always)]
    fn row(&self, p: usize) -> Result<Option<usize>, BadIndex> {
        let v = self.idx[p];
        if self.skip == Some(v.to_i128()) {
            return Ok(None);
        }
        v.resolve_raise(self.axis_len).map(Some).ok_or(BadIndex)
    }

    #[inline(always)]
    fn peek(&self, p: usize) -> usize {
        // A negative index counts from the end; a bad one gives some row to prefetch.
        let v = self.idx[p].to_i128() as isize;
        (if v < 0 {
            v.wrapping_add(self.axis_len as isize)
        } else {
            v
        }) as usize
    }
}

/// `segment_reduce`'s rows: position `p` is the input's row `p`.
pub(crate) struct Identity;

impl Source for Identity {
    #[inline(always)]
    fn row(&self, p: usize) -> Result<Option<usize>, BadIndex> {
        Ok(Some(p))
    }

    #[inline(always)]
    fn peek(&self, p: usize) -> usize {
        p
    }
}
