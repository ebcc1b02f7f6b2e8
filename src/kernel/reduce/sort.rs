//! Positions sorted by segment, their rows resolved: [`Csr`]. A stable counting sort
//! turns one id per position (COO) into CSR, so that a gather-reduce by ids builds each
//! output row once, in order, instead of combining into random output rows. A call sorts
//! for itself when its output is too large for the caches
//! ([`reduce_sorts`](crate::plan::reduce_sorts)); a [`GatherReducePlan`](crate::GatherReducePlan)
//! holds one.

use std::ops::Range;

use ndarray::ArrayView1;

use super::{Entries, Erased, Source};
use crate::index::GatherIndex;
use crate::kernel::prefetch::prefetch_line;
use crate::plan::policy::SORT_AHEAD;

/// The row of a skipped position.
const SKIPPED: u32 = u32::MAX;

/// Entries grouped by segment: segment `s`'s are `offsets[s]..offsets[s + 1]`, each an
/// input row (`SKIPPED` for a skipped position) and the position it came from
/// (increasing within a segment). Rows and positions are `u32` pairs, so that the walk
/// reads 8 bytes per entry and the sort writes one random place per position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Csr {
    offsets: Vec<usize>,
    /// Per entry, its row and its position.
    entries: Vec<[u32; 2]>,
}

/// Zeroed vectors of `n` elements, or `None` if the memory is not there.
fn zeroed<T: Clone + Default>(n: usize) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, T::default());
    Some(v)
}

impl Csr {
    /// Whether rows below `axis_len` and `positions` positions fit `u32` entries.
    pub fn fits(axis_len: usize, positions: usize) -> bool {
        axis_len < SKIPPED as usize && positions <= u32::MAX as usize
    }

    /// The positions of `ids` (each below `count`) by segment, their rows from `rows`
    /// (below `axis_len`). `None` if they do not fit `u32` entries or the memory is not
    /// there.
    pub fn by_ids<S: Source, J: GatherIndex>(
        rows: &S,
        axis_len: usize,
        ids: ArrayView1<'_, J>,
        count: usize,
    ) -> Option<Csr> {
        let n = ids.len();
        if !Self::fits(axis_len, n) {
            return None;
        }
        // Per segment, its count of positions, then its next free entry: `u32` (the
        // positions fit), so that the counters of 100k segments stay in the L2 cache.
        let (Some(mut offsets), Some(mut next), Some(mut entries)) = (
            zeroed::<usize>(count + 1),
            zeroed::<u32>(count),
            zeroed::<[u32; 2]>(n),
        ) else {
            return None;
        };
        // Checked ids are below `count`; indexing is checked all the same.
        let id = |q: usize| ids[q].to_i128() as usize;
        for q in 0..n {
            next[id(q)] += 1;
        }
        let mut at = 0;
        for (s, next) in next.iter_mut().enumerate() {
            let c = *next;
            *next = at;
            at += c;
            offsets[s + 1] = at as usize;
        }
        for q in 0..n {
            if q + SORT_AHEAD < n {
                prefetch_line(entries.as_ptr().wrapping_add(next[id(q + SORT_AHEAD)] as usize));
            }
            let slot = &mut next[id(q)];
            let k = *slot as usize;
            *slot += 1;
            entries[k] = [rows.row(q).map_or(SKIPPED, |r| r as u32), q as u32];
        }
        Some(Csr { offsets, entries })
    }

    /// Segments that are ranges of positions (`count` of them, segment `s` the positions
    /// `bounds(s)`), their rows from `rows`. As [`by_ids`](Self::by_ids) otherwise.
    pub fn by_ranges<S: Source>(
        rows: &S,
        axis_len: usize,
        positions: usize,
        count: usize,
        bounds: impl Fn(usize) -> Range<usize>,
    ) -> Option<Csr> {
        if !Self::fits(axis_len, positions) {
            return None;
        }
        let mut csr = Csr {
            offsets: Vec::new(),
            entries: Vec::new(),
        };
        if csr.offsets.try_reserve_exact(count + 1).is_err()
            || csr.entries.try_reserve_exact(positions).is_err()
        {
            return None;
        }
        csr.offsets.push(0);
        for s in 0..count {
            // (`extend` of a range's map: no capacity check per entry.)
            let entry = |p: usize| [rows.row(p).map_or(SKIPPED, |r| r as u32), p as u32];
            csr.entries.extend(bounds(s).map(entry));
            csr.offsets.push(csr.entries.len());
        }
        Some(csr)
    }

    /// Segments already built in position order: segment `s`'s rows are
    /// `rows[offsets[s]..offsets[s + 1]]`, each entry its own position. `None` if `offsets`
    /// are not a valid partition of `rows`, a row is not below `axis_len`, or the positions
    /// do not fit `u32`.
    pub fn of_runs(offsets: Vec<usize>, rows: &[u32], axis_len: usize) -> Option<Csr> {
        let ok = offsets.first() == Some(&0)
            && offsets.last() == Some(&rows.len())
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && rows.iter().all(|&r| (r as usize) < axis_len)
            && Self::fits(axis_len, rows.len());
        let entries = rows.iter().zip(0..).map(|(&r, p)| [r, p]).collect();
        ok.then_some(Csr { offsets, entries })
    }

    /// The segments' bounds (`count() + 1` offsets) and the entries (`[row, position]`).
    pub fn runs(&self) -> (&[usize], &[[u32; 2]]) {
        (&self.offsets, &self.entries)
    }

    /// The number of segments.
    pub fn count(&self) -> usize {
        self.offsets.len() - 1
    }
}

// SAFETY: the entries are the positions counting-sorted by segment (each position once),
// and segment `s` is `offsets[s]..offsets[s + 1]` of never-decreasing offsets: disjoint.
unsafe impl Entries for Csr {
    #[inline(always)]
    fn len(&self) -> usize {
        self.entries.len()
    }
    #[inline(always)]
    fn segment(&self, s: usize) -> Range<usize> {
        self.offsets[s]..self.offsets[s + 1]
    }
    #[inline(always)]
    fn entry(&self, k: usize) -> Option<(usize, usize)> {
        let [r, pos] = self.entries[k];
        (r != SKIPPED).then_some((r as usize, pos as usize))
    }
    #[inline(always)]
    fn peek(&self, k: usize) -> usize {
        self.entries[k][0] as usize
    }
    fn erase(&self) -> Erased<'_> {
        Erased::Csr(self)
    }
}
