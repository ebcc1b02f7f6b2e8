//! Which positions of a gather-reduce form which output segment: [`Segments`], and the
//! same checked against the number of positions before anything is written (decision 14:
//! the first bad entry is the error, which names it and its value): `Checked`, whose
//! ranges the kernel reads as `Bounds`.

use std::ops::Range;

use ndarray::{Array1, ArrayView1};

use crate::error::GatherError;
use crate::index::GatherIndex;
use crate::indices::{Count, SegmentArray};

/// How the positions of a gather-reduce (the indices in row-major order, or the input's
/// own slices for `segment_reduce`) group into segments, one output slice each.
///
/// | constructor | segment `s` holds positions | as in |
/// |---|---|---|
/// | `indptr(&o)` (S + 1 entries) | `o[s]..o[s + 1]` | CSR `indptr` (SciPy), torch_scatter `segment_csr`, torch `include_last_offset=True` |
/// | `starts(&o)` (S entries) | `o[s]..o[s + 1]`, the last to the end | **torch's and FBGEMM's `offsets`** (`embedding_bag`) |
/// | `lengths(&l)` (S entries) | the next `l[s]` positions | `torch.segment_reduce(lengths=)`, ragged rows |
/// | `uniform(len)` | `s·len..(s + 1)·len` | torch `embedding_bag`'s 2-D input |
/// | `ids(&ids, count)` (one per position) | every `p` with `ids[p] == s`, any order | TF `unsorted_segment_*`, torch_scatter `scatter(dim_size=count)`, `index_reduce_`, a graph's `dst` |
///
/// The arrays are 1-D index arrays of any [`GatherIndex`] type, in every form indices take
/// ([`SegmentArray`]: `&Array1`, `&ArrayView1`, `&[i64]`, `&Vec<i64>`, `&[i64; N]`); counts
/// and lengths are any integer type ([`Count`]). A `Segments` holds views, so it is `Copy`:
/// one value serves many calls. They are checked before anything is written: `indptr`
/// non-decreasing from 0 to the number of positions, `starts` non-decreasing from 0 and
/// at most that number, `lengths` non-negative and summing to it, `uniform(len)` a
/// positive length dividing it, `ids` one per position in `0..count` (a negative id is an
/// error, not dropped). The error, [`GatherError::Segments`], names the first bad entry
/// and its value.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let x = array![1, 2, 3, 4, 5];
/// let sum = |s| x.segment_reduce(s, 0, Pooling::Sum);
/// assert_eq!(sum(Segments::indptr(&[0, 2, 2, 5]))?, array![3, 0, 12]);
/// assert_eq!(sum(Segments::starts(&[0, 2, 2]))?, array![3, 0, 12]);
/// assert_eq!(sum(Segments::lengths(&[2, 0, 3]))?, array![3, 0, 12]);
/// assert_eq!(sum(Segments::uniform(5_u32))?, array![15]);
/// let n: i64 = 3;
/// assert_eq!(sum(Segments::ids(&[2, 0, 2, 0, 2], n))?, array![6, 0, 9]);
/// // torch's `offsets` (bag starts) are `starts`: three bags, the last empty, where the
/// // same array read as an `indptr` would be two.
/// assert_eq!(sum(Segments::starts(&[0, 2, 5]))?, array![3, 12, 0]);
/// assert_eq!(sum(Segments::indptr(&[0, 2, 5]))?, array![3, 12]);
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Segments<'a, J = i64> {
    pub(crate) kind: Kind<'a, J>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind<'a, J> {
    Indptr(ArrayView1<'a, J>),
    Starts(ArrayView1<'a, J>),
    Lengths(ArrayView1<'a, J>),
    /// The length as the caller gave it (checked by the call).
    Uniform(i128),
    /// The ids and the count as the caller gave it (checked by the call).
    Ids(ArrayView1<'a, J>, i128),
}

impl<'a, J: GatherIndex> Segments<'a, J> {
    /// `S + 1` entries, segment `s` holding positions `indptr[s]..indptr[s + 1]`: a CSR
    /// `indptr` (SciPy's `csr_matrix.indptr`, torch_scatter's `segment_csr`, torch's
    /// `include_last_offset=True`). torch's and FBGEMM's `offsets` are
    /// [`starts`](Self::starts).
    ///
    /// (Renamed from `offsets` in 0.3: torch's `offsets` passed to the old name lost an
    /// empty last bag without an error.)
    #[doc(alias = "offsets", alias = "segment_csr", alias = "include_last_offset")]
    pub fn indptr(indptr: impl SegmentArray<'a, J>) -> Self {
        Segments {
            kind: Kind::Indptr(indptr.view1()),
        }
    }

    /// `S` starts, segment `s` holding positions `starts[s]..starts[s + 1]` and the last
    /// one the rest: torch's and FBGEMM's `offsets` (`F.embedding_bag(.., offsets)`).
    #[doc(alias = "offsets", alias = "embedding_bag")]
    pub fn starts(starts: impl SegmentArray<'a, J>) -> Self {
        Segments {
            kind: Kind::Starts(starts.view1()),
        }
    }

    /// `S` lengths, segment `s` holding the next `lengths[s]` positions
    /// (`torch.segment_reduce(lengths=)`).
    pub fn lengths(lengths: impl SegmentArray<'a, J>) -> Self {
        Segments {
            kind: Kind::Lengths(lengths.view1()),
        }
    }

    /// One segment id per position, in any order, each in `0..count` (TF's
    /// `unsorted_segment_*` with `num_segments = count`, torch_scatter's
    /// `scatter(dim_size=count)`, `index_reduce_`, a graph's `dst`). `count` is any integer
    /// type; a negative one is the call's error.
    pub fn ids(ids: impl SegmentArray<'a, J>, count: impl Count) -> Self {
        Segments {
            kind: Kind::Ids(ids.view1(), count.value()),
        }
    }

    /// Each position's segment, for `positions` positions (after the same checks as the
    /// methods make): the `ids` of the same grouping, for a backward pass.
    ///
    /// # Errors
    /// [`GatherError::Segments`] if the segments do not fit `positions`;
    /// [`GatherError::SizeOverflow`] if the ids cannot be allocated.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// assert_eq!(Segments::starts(&[0, 2, 2]).to_ids(4)?, array![0, 0, 2, 2]);
    /// assert_eq!(Segments::uniform(2).to_ids(4)?, array![0, 0, 1, 1]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn to_ids(&self, positions: usize) -> Result<Array1<usize>, GatherError> {
        let op = "Segments::to_ids";
        let checked = Checked::new(op, self, positions)?;
        if crate::layout::checked_len(&[positions], size_of::<usize>()).is_none() {
            return Err(GatherError::SizeOverflow {
                op,
                shape: vec![positions],
            });
        }
        Ok(checked.to_ids(positions))
    }
}

impl<'a> Segments<'a> {
    /// Segments of `len` positions each (torch `embedding_bag`'s 2-D input of bags of
    /// `len`): the count is the number of positions divided by `len`. `len` is any
    /// integer type; zero or a negative one is the call's error.
    pub fn uniform(len: impl Count) -> Self {
        Segments {
            kind: Kind::Uniform(len.value()),
        }
    }
}

/// Segments checked against the number of positions.
#[derive(Debug)]
pub(crate) enum Checked<'a, J> {
    /// Ranges of positions, and their count.
    Sorted(Bounds<'a, J>, usize),
    /// One id per position, each below the count.
    Ids(ArrayView1<'a, J>, usize),
}

impl<'a, J: GatherIndex> Checked<'a, J> {
    /// Checks `segments` for `positions` positions: the first bad entry is the error.
    pub fn new(op: &'static str, segments: &Segments<'a, J>, positions: usize) -> Result<Self, GatherError> {
        let c = Check { op, positions };
        match &segments.kind {
            Kind::Indptr(o) => c.indptr(o),
            Kind::Starts(o) => {
                c.rising("starts", "start", o, &|| {
                    format!("from 0 and at most the {positions} positions")
                })?;
                Ok(Checked::Sorted(Bounds::Starts(*o, positions), o.len()))
            }
            Kind::Lengths(l) => c.lengths(l),
            Kind::Uniform(len) => c.uniform(*len),
            Kind::Ids(ids, count) => c.ids(ids, *count),
        }
    }

    /// The number of segments.
    pub fn count(&self) -> usize {
        match self {
            Checked::Sorted(_, n) | Checked::Ids(_, n) => *n,
        }
    }

    /// Each position's segment, into `ids` (cleared; its storage reused).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn ids_into(&self, positions: usize, ids: &mut Vec<usize>) {
        ids.clear();
        match self {
            Checked::Ids(v, _) => ids.extend(v.iter().map(|v| v.to_i128() as usize)),
            Checked::Sorted(bounds, n) => {
                ids.resize(positions, 0);
                for s in 0..*n {
                    for p in bounds.get(s) {
                        ids[p] = s;
                    }
                }
            }
        }
    }

    /// Each position's segment.
    pub fn to_ids(&self, positions: usize) -> Array1<usize> {
        match self {
            Checked::Ids(ids, _) => ids.mapv(|v| v.to_i128() as usize),
            Checked::Sorted(bounds, n) => {
                let mut ids = Array1::zeros(positions);
                for s in 0..*n {
                    for p in bounds.get(s) {
                        ids[p] = s;
                    }
                }
                ids
            }
        }
    }
}

/// Where each segment's positions start and end, for segments that are ranges.
#[derive(Debug)]
pub(crate) enum Bounds<'a, J> {
    /// `S + 1` checked offsets.
    Offsets(ndarray::ArrayView1<'a, J>),
    /// `S` checked starts, and the number of positions.
    Starts(ndarray::ArrayView1<'a, J>, usize),
    /// `S + 1` offsets computed from lengths.
    Owned(Vec<usize>),
    /// Segments of one length.
    Uniform(usize),
}

impl<J: GatherIndex> Bounds<'_, J> {
    /// Segment `s`'s positions (`s` below the count; the values were checked).
    #[inline(always)]
    pub fn get(&self, s: usize) -> Range<usize> {
        let at = |v: &ndarray::ArrayView1<'_, J>, i: usize| v[i].to_i128() as usize;
        match self {
            Bounds::Offsets(o) => at(o, s)..at(o, s + 1),
            Bounds::Starts(o, total) => at(o, s)..if s + 1 < o.len() { at(o, s + 1) } else { *total },
            Bounds::Owned(o) => o[s]..o[s + 1],
            Bounds::Uniform(len) => s * len..(s + 1) * len,
        }
    }

    /// The same segments with `usize` bounds (a copy of at most one value per segment).
    pub fn widened(&self) -> Bounds<'static, usize> {
        let to = |j: &J| j.to_i128() as usize;
        match self {
            Bounds::Offsets(o) => Bounds::Owned(o.iter().map(to).collect()),
            Bounds::Starts(o, total) => Bounds::Owned(o.iter().map(to).chain([*total]).collect()),
            Bounds::Owned(o) => Bounds::Owned(o.clone()),
            Bounds::Uniform(len) => Bounds::Uniform(*len),
        }
    }
}

/// One call's segment check: the method and its number of positions.
struct Check {
    op: &'static str,
    positions: usize,
}

impl Check {
    fn bad(&self, kind: &'static str, entry: usize, value: i128, detail: String) -> GatherError {
        GatherError::Segments {
            op: self.op,
            kind,
            entry,
            value,
            detail,
        }
    }

    /// Offsets and starts: non-decreasing from 0, at most the positions; the last entry
    /// of `o` (which the caller checks further). (`range` is formatted only for an error:
    /// a tiny call would feel it.)
    fn rising<J: GatherIndex>(
        &self,
        kind: &'static str,
        first: &str,
        o: &ArrayView1<'_, J>,
        range: &dyn Fn() -> String,
    ) -> Result<i128, GatherError> {
        let mut prev = 0;
        for (e, v) in o.iter().map(|v| v.to_i128()).enumerate() {
            if e == 0 && v != 0 {
                return Err(self.bad(kind, 0, v, format!("the first {first} must be 0")));
            }
            if v < prev || v > self.positions as i128 {
                return Err(self.bad(kind, e, v, format!("{kind} must be non-decreasing, {}", range())));
            }
            prev = v;
        }
        Ok(prev)
    }

    fn indptr<'a, J: GatherIndex>(&self, o: &ArrayView1<'a, J>) -> Result<Checked<'a, J>, GatherError> {
        let positions = self.positions;
        let last = self.rising("indptr", "entry of indptr", o, &|| {
            format!("from 0 to the {positions} positions")
        })?;
        match o.len() {
            0 => Err(self.bad(
                "indptr",
                0,
                0,
                "there are no entries: indptr needs S + 1, the first 0".into(),
            )),
            n if last != positions as i128 => Err(self.bad(
                "indptr",
                n - 1,
                last,
                format!(
                    "the last entry of indptr must be the number of positions, {positions} (torch's offsets are Segments::starts)"
                ),
            )),
            n => Ok(Checked::Sorted(Bounds::Offsets(*o), n - 1)),
        }
    }

    fn lengths<'a, J: GatherIndex>(&self, l: &ArrayView1<'a, J>) -> Result<Checked<'a, J>, GatherError> {
        let positions = self.positions;
        let mut offsets = Vec::with_capacity(l.len() + 1);
        offsets.push(0);
        let mut sum: i128 = 0;
        for (e, v) in l.iter().map(|v| v.to_i128()).enumerate() {
            if v < 0 {
                return Err(self.bad("lengths", e, v, "lengths must not be negative".into()));
            }
            sum += v;
            if sum > positions as i128 {
                return Err(self.bad(
                    "lengths",
                    e,
                    v,
                    format!("the lengths sum to {sum} by this entry, but there are {positions} positions"),
                ));
            }
            offsets.push(sum as usize);
        }
        if sum != positions as i128 {
            let (e, v) = l.len().checked_sub(1).map_or((0, 0), |e| (e, l[e].to_i128()));
            return Err(self.bad(
                "lengths",
                e,
                v,
                format!("the lengths sum to {sum}, but there are {positions} positions"),
            ));
        }
        Ok(Checked::Sorted(Bounds::Owned(offsets), l.len()))
    }

    fn uniform<'a, J>(&self, len: i128) -> Result<Checked<'a, J>, GatherError> {
        let positions = self.positions;
        match usize::try_from(len) {
            Ok(l) if l > 0 && positions.is_multiple_of(l) => {
                Ok(Checked::Sorted(Bounds::Uniform(l), positions / l))
            }
            _ if len <= 0 => Err(self.bad(
                "uniform",
                0,
                len,
                "the length of uniform segments must be positive".into(),
            )),
            _ => Err(self.bad(
                "uniform",
                0,
                len,
                format!("{positions} positions do not divide into segments of {len}"),
            )),
        }
    }

    fn ids<'a, J: GatherIndex>(
        &self,
        ids: &ArrayView1<'a, J>,
        count: i128,
    ) -> Result<Checked<'a, J>, GatherError> {
        let Ok(count) = usize::try_from(count) else {
            return Err(self.bad("ids", 0, count, format!("the segment count {count} is negative")));
        };
        if ids.len() != self.positions {
            return Err(self.bad(
                "ids",
                ids.len(),
                ids.len() as i128,
                format!(
                    "there are {} ids for {} positions (one id per position)",
                    ids.len(),
                    self.positions
                ),
            ));
        }
        let n = count as i128;
        if let Some((e, v)) = ids
            .iter()
            .map(|v| v.to_i128())
            .enumerate()
            .find(|&(_, v)| v < 0 || v >= n)
        {
            return Err(self.bad(
                "ids",
                e,
                v,
                format!("ids must be in 0..{count}, the segment count"),
            ));
        }
        Ok(Checked::Ids(*ids, count))
    }
}
