//! Which positions of a gather-reduce form which output segment: [`Segments`].

use ndarray::{Array1, ArrayView1, AsArray};

use crate::error::GatherError;
use crate::index::GatherIndex;

/// How the positions of a gather-reduce (the indices in row-major order, or the input's
/// own slices for `segment_reduce`) group into segments, one output slice each.
///
/// | constructor | segment `s` holds positions | as in |
/// |---|---|---|
/// | `offsets(&o)` (S + 1 entries) | `o[s]..o[s + 1]` | CSR `indptr`, torch_scatter `segment_csr`, torch `include_last_offset=True` |
/// | `starts(&o)` (S entries) | `o[s]..o[s + 1]`, the last to the end | torch / FBGEMM `offsets` |
/// | `lengths(&l)` (S entries) | the next `l[s]` positions | `torch.segment_reduce(lengths=)`, ragged rows |
/// | `uniform(len)` | `s·len..(s + 1)·len` | torch `embedding_bag`'s 2-D input |
/// | `ids(&ids, count)` (one per position) | every `p` with `ids[p] == s`, any order | TF `unsorted_segment_*`, torch_scatter `scatter(dim_size=count)`, `index_reduce_`, a graph's `dst` |
///
/// The arrays are 1-D index arrays of any [`GatherIndex`] type, in any form ndarray's
/// `AsArray` takes (`&Array1`, `&ArrayView1`, `&[i64]`, `&Vec<i64>`, `&[i64; N]`). They
/// are checked before anything is written: `offsets` non-decreasing from 0 to the number
/// of positions, `starts` non-decreasing from 0 and at most that number, `lengths`
/// non-negative and summing to it, `uniform(len)` a positive length dividing it, `ids`
/// one per position in `0..count` (a negative id is an error, not dropped). The error,
/// [`GatherError::Segments`], names the first bad entry and its value.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let x = array![1, 2, 3, 4, 5];
/// let sum = |s| x.segment_reduce(s, 0, Pooling::Sum);
/// assert_eq!(sum(Segments::offsets(&[0, 2, 2, 5]))?, array![3, 0, 12]);
/// assert_eq!(sum(Segments::starts(&[0, 2, 2]))?, array![3, 0, 12]);
/// assert_eq!(sum(Segments::lengths(&[2, 0, 3]))?, array![3, 0, 12]);
/// assert_eq!(sum(Segments::uniform(5))?, array![15]);
/// assert_eq!(sum(Segments::ids(&[2, 0, 2, 0, 2], 3))?, array![6, 0, 9]);
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Segments<'a, J = i64> {
    pub(crate) kind: Kind<'a, J>,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind<'a, J> {
    Offsets(ArrayView1<'a, J>),
    Starts(ArrayView1<'a, J>),
    Lengths(ArrayView1<'a, J>),
    Uniform(usize),
    Ids(ArrayView1<'a, J>, usize),
}

impl<'a, J: GatherIndex> Segments<'a, J> {
    /// `S + 1` offsets, segment `s` holding positions `offsets[s]..offsets[s + 1]` (a CSR
    /// `indptr`; torch_scatter's `segment_csr`, torch's `include_last_offset=True`).
    pub fn offsets(offsets: impl AsArray<'a, J>) -> Self {
        Segments {
            kind: Kind::Offsets(offsets.into()),
        }
    }

    /// `S` starts, segment `s` holding positions `starts[s]..starts[s + 1]` and the last
    /// one the rest (torch's and FBGEMM's `offsets`).
    pub fn starts(starts: impl AsArray<'a, J>) -> Self {
        Segments {
            kind: Kind::Starts(starts.into()),
        }
    }

    /// `S` lengths, segment `s` holding the next `lengths[s]` positions
    /// (`torch.segment_reduce(lengths=)`).
    pub fn lengths(lengths: impl AsArray<'a, J>) -> Self {
        Segments {
            kind: Kind::Lengths(lengths.into()),
        }
    }

    /// One segment id per position, in any order, each in `0..count` (TF's
    /// `unsorted_segment_*` with `num_segments = count`, torch_scatter's
    /// `scatter(dim_size=count)`, `index_reduce_`, a graph's `dst`).
    pub fn ids(ids: impl AsArray<'a, J>, count: usize) -> Self {
        Segments {
            kind: Kind::Ids(ids.into(), count),
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
        let checked = crate::call::reduce::Checked::new(op, self, positions)?;
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
    /// `len`): the count is the number of positions divided by `len`.
    pub fn uniform(len: usize) -> Self {
        Segments {
            kind: Kind::Uniform(len),
        }
    }
}
