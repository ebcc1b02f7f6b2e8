//! Segments checked against the number of positions before anything is written
//! (decision 14): the first bad entry is the error, which names it and its value.

use ndarray::{Array1, ArrayView1};

use crate::error::GatherError;
use crate::index::GatherIndex;
use crate::kernel::reduce::Bounds;
use crate::segments::{Kind, Segments};

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
        let bad = |kind: &'static str, entry: usize, value: i128, detail: String| GatherError::Segments {
            op,
            kind,
            entry,
            value,
            detail,
        };
        let total = positions as i128;
        // Offsets and starts: non-decreasing from 0, at most the positions; the last entry
        // of `o` (which the caller checks further).
        let rising = |kind: &'static str, o: &ArrayView1<'_, J>, range: &str| -> Result<i128, GatherError> {
            let mut prev = 0;
            for (e, v) in o.iter().map(|v| v.to_i128()).enumerate() {
                if e == 0 && v != 0 {
                    return Err(bad(
                        kind,
                        0,
                        v,
                        format!("the first {} must be 0", &kind[..kind.len() - 1]),
                    ));
                }
                if v < prev || v > total {
                    return Err(bad(kind, e, v, format!("{kind} must be non-decreasing, {range}")));
                }
                prev = v;
            }
            Ok(prev)
        };
        match &segments.kind {
            Kind::Offsets(o) => {
                let last = rising("offsets", o, &format!("from 0 to the {positions} positions"))?;
                match o.len() {
                    0 => Err(bad(
                        "offsets",
                        0,
                        0,
                        "there are none: offsets need S + 1 entries, the first 0".into(),
                    )),
                    n if last != total => Err(bad(
                        "offsets",
                        n - 1,
                        last,
                        format!("the last offset must be the number of positions, {positions}"),
                    )),
                    n => Ok(Checked::Sorted(Bounds::Offsets(*o), n - 1)),
                }
            }
            Kind::Starts(o) => {
                rising(
                    "starts",
                    o,
                    &format!("from 0 and at most the {positions} positions"),
                )?;
                Ok(Checked::Sorted(Bounds::Starts(*o, positions), o.len()))
            }
            Kind::Lengths(l) => {
                let mut offsets = Vec::with_capacity(l.len() + 1);
                offsets.push(0);
                let mut sum: i128 = 0;
                for (e, v) in l.iter().map(|v| v.to_i128()).enumerate() {
                    if v < 0 {
                        return Err(bad("lengths", e, v, "lengths must not be negative".into()));
                    }
                    sum += v;
                    if sum > total {
                        return Err(bad(
                            "lengths",
                            e,
                            v,
                            format!(
                                "the lengths sum to {sum} by this entry, but there are {positions} positions"
                            ),
                        ));
                    }
                    offsets.push(sum as usize);
                }
                if sum != total {
                    let (e, v) = l.len().checked_sub(1).map_or((0, 0), |e| (e, l[e].to_i128()));
                    return Err(bad(
                        "lengths",
                        e,
                        v,
                        format!("the lengths sum to {sum}, but there are {positions} positions"),
                    ));
                }
                Ok(Checked::Sorted(Bounds::Owned(offsets), l.len()))
            }
            Kind::Uniform(len) => match *len {
                0 => Err(bad(
                    "uniform",
                    0,
                    0,
                    "the length of uniform segments must be positive".into(),
                )),
                len if !positions.is_multiple_of(len) => Err(bad(
                    "uniform",
                    0,
                    len as i128,
                    format!("{positions} positions do not divide into segments of {len}"),
                )),
                len => Ok(Checked::Sorted(Bounds::Uniform(len), positions / len)),
            },
            Kind::Ids(ids, count) => {
                if ids.len() != positions {
                    return Err(bad(
                        "ids",
                        ids.len(),
                        ids.len() as i128,
                        format!(
                            "there are {} ids for {positions} positions (one id per position)",
                            ids.len()
                        ),
                    ));
                }
                let n = *count as i128;
                if let Some((e, v)) = ids
                    .iter()
                    .map(|v| v.to_i128())
                    .enumerate()
                    .find(|&(_, v)| v < 0 || v >= n)
                {
                    return Err(bad(
                        "ids",
                        e,
                        v,
                        format!("ids must be in 0..{count}, the segment count"),
                    ));
                }
                Ok(Checked::Ids(*ids, *count))
            }
        }
    }

    /// The number of segments.
    pub fn count(&self) -> usize {
        match self {
            Checked::Sorted(_, n) | Checked::Ids(_, n) => *n,
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
