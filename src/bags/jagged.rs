//! [`Jagged`]: a collection's batch of ids, feature-major (TorchRec's `KeyedJaggedTensor`),
//! its bags' offsets checked once.

use ndarray::{ArrayView1, AsArray, Ix1, s};

use super::Feature;
use crate::error::GatherError;
use crate::index::GatherIndex;
use crate::pool::Pool;

/// A batch of ids for a collection, feature-major (TorchRec's `KeyedJaggedTensor`): the
/// ids `values` of every (feature, sample) bag in order, bag `f * B + b` holding
/// `lengths[f * B + b]` of them, and optional per-id weights.
///
/// ```
/// use ndarray_gather::bags::Jagged;
///
/// let batch = Jagged::offsets(&[3_i64, 9, 0, 4], &[0_i64, 2, 3, 3, 4], 2)?; // 2 features, B = 2
/// assert_eq!((batch.features(), batch.batch()), (2, 2));
/// let e = Jagged::lengths(&[3_i64, 9], &[1_i64, 2], 2).unwrap_err();
/// assert!(e.to_string().contains("sum to 3, but there are 2 values"));
/// # Ok::<(), ndarray_gather::GatherError>(())
/// ```
#[doc(alias = "KeyedJaggedTensor")]
#[derive(Debug, Clone)]
pub struct Jagged<'a, I, J = I> {
    pub(crate) values: ArrayView1<'a, I>,
    /// `F * B + 1` offsets into `values`, from 0.
    pub(crate) offsets: Vec<usize>,
    pub(crate) batch: usize,
    pub(crate) weights: Option<&'a [f32]>,
    kind: std::marker::PhantomData<J>,
}

impl<'a, I: GatherIndex, J: GatherIndex> Jagged<'a, I, J> {
    /// `F * B` lengths (feature-major) of a batch of `batch` samples.
    ///
    /// # Errors
    /// [`Segments`](GatherError::Segments) for a negative length, lengths that do not sum
    /// to the values, or a batch size that does not divide them.
    pub fn lengths(
        values: impl AsArray<'a, I, Ix1>,
        lengths: impl AsArray<'a, J, Ix1>,
        batch: usize,
    ) -> Result<Self, GatherError> {
        const OP: &str = "Jagged::lengths";
        let (values, lengths) = (values.into(), lengths.into());
        let mut offsets = Vec::with_capacity(lengths.len() + 1);
        offsets.push(0usize);
        for (e, &l) in lengths.iter().enumerate() {
            let v = l.to_i128();
            if v < 0 {
                return Err(bad(OP, "lengths", e, v, "a length is at least 0".into()));
            }
            offsets.push(offsets[e].saturating_add(v as usize));
        }
        let total = offsets[lengths.len()];
        if total != values.len() {
            return Err(bad(
                OP,
                "lengths",
                lengths.len().saturating_sub(1),
                lengths.last().map_or(0, |l| l.to_i128()),
                format!(
                    "the lengths sum to {total}, but there are {} values",
                    values.len()
                ),
            ));
        }
        Self::batched(OP, "lengths", values, offsets, batch)
    }

    /// `F * B + 1` offsets (feature-major, from 0 to the number of values) of a batch of
    /// `batch` samples.
    ///
    /// # Errors
    /// [`Segments`](GatherError::Segments) for offsets that do not start at 0, decrease,
    /// or end elsewhere than the number of values, or a batch size that does not divide
    /// their bags.
    pub fn offsets(
        values: impl AsArray<'a, I, Ix1>,
        offsets: impl AsArray<'a, J, Ix1>,
        batch: usize,
    ) -> Result<Self, GatherError> {
        const OP: &str = "Jagged::offsets";
        let (values, offsets) = (values.into(), offsets.into());
        let n = values.len() as i128;
        let mut checked = Vec::with_capacity(offsets.len());
        for (e, &o) in offsets.iter().enumerate() {
            let v = o.to_i128();
            let before = checked.last().map_or(0, |&p: &usize| p as i128);
            let last = e + 1 == offsets.len();
            if (e == 0 && v != 0) || v < before || v > n || (last && v != n) {
                let detail = match (e, last) {
                    (0, _) if v != 0 => "the first offset is 0".to_string(),
                    (_, true) if v != n => format!("the last offset is the number of values, {n}"),
                    _ if v < before => format!("offsets do not decrease (the one before is {before})"),
                    _ => format!("an offset is at most the number of values, {n}"),
                };
                return Err(bad(OP, "offsets", e, v, detail));
            }
            checked.push(v as usize);
        }
        if checked.is_empty() {
            return Err(bad(
                OP,
                "offsets",
                0,
                0,
                "there is at least one offset (0)".into(),
            ));
        }
        Self::batched(OP, "offsets", values, checked, batch)
    }

    fn batched(
        op: &'static str,
        kind: &'static str,
        values: ArrayView1<'a, I>,
        offsets: Vec<usize>,
        batch: usize,
    ) -> Result<Self, GatherError> {
        let bags = offsets.len() - 1;
        if (batch == 0 && bags > 0) || (batch > 0 && !bags.is_multiple_of(batch)) {
            return Err(bad(
                op,
                kind,
                bags,
                batch as i128,
                format!("the batch size {batch} divides the {bags} bags into features"),
            ));
        }
        Ok(Jagged {
            values,
            offsets,
            batch,
            weights: None,
            kind: std::marker::PhantomData,
        })
    }

    /// The batch with per-id weights `weights` (one per value: a call checks the count),
    /// for the collection's weighted features.
    pub fn weighted(mut self, weights: &'a [f32]) -> Self {
        self.weights = Some(weights);
        self
    }

    /// The number of features: bags / batch (0 for a batch of no samples, which fits every
    /// collection).
    pub fn features(&self) -> usize {
        (self.offsets.len() - 1).checked_div(self.batch).unwrap_or(0)
    }

    /// The batch size `B`.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Feature `f`'s ids and its pool (with its weights where it is weighted).
    pub(super) fn feature(&self, f: usize, feature: &Feature) -> (ArrayView1<'a, I>, Pool<'a, f32>) {
        let range = self.offsets[f * self.batch]..self.offsets[(f + 1) * self.batch];
        let p = &feature.pool;
        let pool = Pool {
            pooling: p.pooling,
            weights: match (feature.weighted, self.weights) {
                (true, Some(w)) => Some(ArrayView1::from(&w[range.clone()]).insert_axis(ndarray::Axis(1))),
                _ => None,
            },
            skip: p.skip,
            fill: p.fill,
        };
        (self.values.slice_move(s![range]), pool)
    }
}

fn bad(op: &'static str, kind: &'static str, entry: usize, value: i128, detail: String) -> GatherError {
    GatherError::Segments {
        op,
        kind,
        entry,
        value,
        detail,
    }
}
