//! Where each position's input row comes from: [`Source`] (the indices resolved into
//! [`Resolved`] rows, or the input's own slices for `segment_reduce`) and [`Entries`] (positions grouped by segment: a
//! call's ranges of positions, or a plan's CSR).

use std::ops::Range;

use super::sort::Csr;
use crate::index::GatherIndex;
use crate::segments::Bounds;

/// The input row each position reads.
pub(crate) trait Source: Sync {
    /// Whether position `p` reads row `p` (`segment_reduce`): rows in order, which the
    /// hardware fetches ahead by itself, so a walk asks for none.
    const IN_ORDER: bool = false;
    /// Position `p`'s row, `None` if the position is skipped. `p` is below the number of
    /// positions.
    fn row(&self, p: usize) -> Option<usize>;
    /// Position `p`'s row if it has one, else anything (for a prefetch).
    fn peek(&self, p: usize) -> usize;
    /// The rows as one of the crate's concrete sources ([`Erased`]).
    fn rows(&self) -> Rows<'_>;
}

/// A [`Source`]'s rows as a concrete type: what a walk compiled inside the crate takes.
pub(crate) enum Rows<'a> {
    Narrow(&'a [u32]),
    Wide(&'a [usize]),
    InOrder,
}

/// Segments as ranges of entries, each entry a row and the position it came from.
///
/// # Safety
/// Segments' ranges are disjoint, and each position is the position of at most one entry:
/// so a position belongs to one segment, and a kernel that hands each segment to one
/// thread may write at the segment's positions without a lock (the attention kernels'
/// `Out::row`).
pub(crate) unsafe trait Entries: Sync {
    /// The number of entries.
    fn len(&self) -> usize;
    /// Segment `s`'s entries (within `0..len()`).
    fn segment(&self, s: usize) -> Range<usize>;
    /// Entry `k`'s row and position (`None`: skipped).
    fn entry(&self, k: usize) -> Option<(usize, usize)>;
    /// Entry `k`'s row if its index is good, else anything (for a prefetch: unchecked).
    fn peek(&self, k: usize) -> usize;
    /// The same entries as one of the crate's concrete types, so that a walk over them is
    /// compiled inside the crate, not in each user's build (a quantized table's: five
    /// sources times seven poolings times three instruction sets).
    fn erase(&self) -> Erased<'_>;
}

/// [`Entries`] of a concrete type ([`Entries::erase`]): a plan's CSR, or a call's positions
/// with `usize` segment bounds.
pub(crate) enum Erased<'a> {
    Csr(&'a Csr),
    /// A call's positions: their rows, segments and number.
    Positions(Rows<'a>, Bounds<'static, usize>, usize),
}

impl Erased<'_> {
    /// `f` run with these entries as a value of their concrete type.
    pub fn with<T>(&self, f: impl ErasedFn<T>) -> T {
        match self {
            Erased::Csr(c) => f.run(*c),
            Erased::Positions(rows, bounds, len) => {
                let len = *len;
                match *rows {
                    Rows::Narrow(rows) => f.run(&Positions {
                        rows: &Resolved { rows },
                        bounds,
                        len,
                    }),
                    Rows::Wide(rows) => f.run(&Positions {
                        rows: &Resolved { rows },
                        bounds,
                        len,
                    }),
                    Rows::InOrder => f.run(&Positions {
                        rows: &Identity,
                        bounds,
                        len,
                    }),
                }
            }
        }
    }
}

/// What runs with [`Erased`] entries (a closure generic over their type).
pub(crate) trait ErasedFn<T> {
    fn run<E: Entries>(self, e: &E) -> T;
}

/// A call's own positions as entries: segments from `bounds`, rows from `rows`.
pub(crate) struct Positions<'p, 'a, S, J> {
    pub rows: &'p S,
    pub bounds: &'p Bounds<'a, J>,
    pub len: usize,
}

// SAFETY: entry `k` is position `k`, and the segments are `bounds`' ranges, which never
// decrease (`Bounds`' checks): disjoint.
unsafe impl<S: Source, J: GatherIndex> Entries for Positions<'_, '_, S, J> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }
    #[inline(always)]
    fn segment(&self, s: usize) -> Range<usize> {
        self.bounds.get(s)
    }
    #[inline(always)]
    fn entry(&self, k: usize) -> Option<(usize, usize)> {
        self.rows.row(k).map(|r| (r, k))
    }
    #[inline(always)]
    fn peek(&self, k: usize) -> usize {
        self.rows.peek(k)
    }
    fn erase(&self) -> Erased<'_> {
        Erased::Positions(self.rows.rows(), self.bounds.widened(), self.len)
    }
}

/// A resolved row, as a gather-reduce keeps one per position: `u32` where the axis allows
/// (half the bytes of `i64` indices), else `usize`; [`Row::SKIP`] marks a skipped position.
pub(crate) trait Row: Copy + Default + Eq + Send + Sync {
    /// The value of a skipped position (never a row: the axis is shorter).
    const SKIP: Self;
    /// Row `r` (below the axis length, which the caller checked fits).
    fn of(r: usize) -> Self;
    /// The row as an index.
    fn get(self) -> usize;
    /// Rows of this type as [`Rows`].
    fn erase(rows: &[Self]) -> Rows<'_>;
}

impl Row for u32 {
    const SKIP: Self = u32::MAX;
    #[inline(always)]
    fn of(r: usize) -> Self {
        r as u32
    }
    #[inline(always)]
    fn get(self) -> usize {
        self as usize
    }
    fn erase(rows: &[Self]) -> Rows<'_> {
        Rows::Narrow(rows)
    }
}

impl Row for usize {
    const SKIP: Self = usize::MAX;
    #[inline(always)]
    fn of(r: usize) -> Self {
        r
    }
    #[inline(always)]
    fn get(self) -> usize {
        self
    }
    fn erase(rows: &[Self]) -> Rows<'_> {
        Rows::Wide(rows)
    }
}

/// A gather-reduce's indices resolved into rows, once, where the call or the plan checked
/// them: position `p` reads input row `rows[p]`, or nothing where it is [`Row::SKIP`].
pub(crate) struct Resolved<'a, R> {
    pub rows: &'a [R],
}

impl<R: Row> Source for Resolved<'_, R> {
    #[inline(always)]
    fn row(&self, p: usize) -> Option<usize> {
        let r = self.rows[p];
        (r != R::SKIP).then(|| r.get())
    }

    #[inline(always)]
    fn peek(&self, p: usize) -> usize {
        // (A skipped position's value gives some row to prefetch.)
        self.rows[p].get()
    }

    fn rows(&self) -> Rows<'_> {
        R::erase(self.rows)
    }
}

/// `segment_reduce`'s rows: position `p` is the input's row `p`.
pub(crate) struct Identity;

impl Source for Identity {
    const IN_ORDER: bool = true;

    #[inline(always)]
    fn row(&self, p: usize) -> Option<usize> {
        Some(p)
    }

    #[inline(always)]
    fn peek(&self, p: usize) -> usize {
        p
    }

    fn rows(&self) -> Rows<'_> {
        Rows::InOrder
    }
}
