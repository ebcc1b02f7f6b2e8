//! Which rank holds which rows of a sharded table: [`Rows`].

use std::ops::Range;

use crate::error::GatherError;

/// How the rows `0..n` of a table are sharded over the ranks of a communicator: rank `r`
/// holds rows `bounds[r]..bounds[r + 1]` (TorchRec's row-wise sharding). A rank may hold
/// no rows.
///
/// ```
/// use ndarray_gather::shard::Rows;
///
/// let rows = Rows::even(10, 4); // the first 10 % 4 ranks hold one row more
/// assert_eq!(rows.bounds(), &[0, 3, 6, 8, 10]);
/// assert_eq!((rows.len(), rows.ranks(), rows.range(1)), (10, 4, 3..6));
/// assert_eq!((rows.owner(7), rows.owner(10)), (Some(2), None));
/// let uneven = Rows::from_bounds(&[0, 0, 5, 9])?; // rank 0 holds nothing
/// assert_eq!(uneven.owner(0), Some(1));
/// assert!(Rows::from_bounds(&[0, 5, 3]).is_err());
/// # Ok::<(), ndarray_gather::GatherError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    bounds: Vec<usize>,
}

impl Rows {
    /// `n` rows over `ranks` ranks, as evenly as they go: the first `n % ranks` ranks hold
    /// one row more. (No ranks: no bounds but the first, which a table then refuses.)
    pub fn even(n: usize, ranks: usize) -> Rows {
        let mut bounds = Vec::with_capacity(ranks + 1);
        bounds.push(0);
        if let (Some(per), Some(extra)) = (n.checked_div(ranks), n.checked_rem(ranks)) {
            for r in 0..ranks {
                let last = bounds[r];
                bounds.push(last + per + usize::from(r < extra));
            }
        }
        Rows { bounds }
    }

    /// The rows of explicit bounds: `ranks + 1` of them, from 0, never decreasing (a rank
    /// may hold no rows).
    ///
    /// # Errors
    /// [`GatherError::Bounds`] naming the first bad bound.
    pub fn from_bounds(bounds: &[usize]) -> Result<Rows, GatherError> {
        let op = "Rows::from_bounds";
        let bad = |entry: usize, detail: &str| GatherError::Bounds {
            op,
            entry,
            value: bounds.get(entry).copied().unwrap_or(0),
            detail: detail.to_string(),
        };
        match bounds.first() {
            None => return Err(bad(0, "there are none: a table of R ranks needs R + 1 bounds")),
            Some(&b) if b != 0 => return Err(bad(0, "the first bound must be 0")),
            _ => {}
        }
        if let Some(e) = (1..bounds.len()).find(|&e| bounds[e] < bounds[e - 1]) {
            return Err(bad(e, "bounds must not decrease"));
        }
        Ok(Rows {
            bounds: bounds.to_vec(),
        })
    }

    /// The bounds: rank `r` holds rows `bounds[r]..bounds[r + 1]`.
    pub fn bounds(&self) -> &[usize] {
        &self.bounds
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.bounds.len() - 1
    }

    /// The number of rows, `n`.
    pub fn len(&self) -> usize {
        self.bounds[self.bounds.len() - 1]
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows rank `r` holds (empty for a rank beyond the last).
    pub fn range(&self, r: usize) -> Range<usize> {
        match (self.bounds.get(r), self.bounds.get(r + 1)) {
            (Some(&lo), Some(&hi)) => lo..hi,
            _ => self.len()..self.len(),
        }
    }

    /// The rank that holds row `i`, `None` for `i >= n`.
    pub fn owner(&self, i: usize) -> Option<usize> {
        (i < self.len()).then(|| self.bounds.partition_point(|&b| b <= i) - 1)
    }
}
