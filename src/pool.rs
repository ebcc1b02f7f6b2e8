//! How a gather-reduce pools each segment's rows: [`Pooling`] (the reduction), [`Pool`]
//! (a pooling with its per-position weights, skipped index and fill), and
//! [`PoolElement`], the element types it works on.

use std::fmt;
use std::str::FromStr;

use ndarray::{ArrayView, ArrayView2, AsArray, Axis, Ix1, Ix2};
use num_traits::{FromPrimitive, NumAssign, ToPrimitive};

use crate::index::GatherIndex;

/// The element types a gather-reduce works on: every primitive number (`f32`, `f64`, the
/// signed and unsigned integers), and any type with the same arithmetic from num-traits.
///
/// Integer overflow behaves as the scatter's [`Add`](crate::reduce::Add) and
/// [`Mul`](crate::reduce::Mul) do: Rust's arithmetic (a panic in debug builds, wrapping in
/// release builds).
///
/// ```
/// use ndarray_gather::PoolElement;
/// fn pools<A: PoolElement>() {}
/// pools::<f32>();
/// pools::<u8>();
/// ```
pub trait PoolElement: Clone + NumAssign + FromPrimitive + ToPrimitive + PartialOrd + Send + Sync {}

impl<A: Clone + NumAssign + FromPrimitive + ToPrimitive + PartialOrd + Send + Sync> PoolElement for A {}

/// How the rows of a segment combine into its output row (torch's `mode`, TF's
/// `combiner`, torch_scatter's `reduce`).
///
/// Each output element combines its segment's positions one at a time, in increasing
/// position order, so results are the same bits on any number of threads:
///
/// - `Sum`: `0 + x₀ + x₁ + …` (weighted: `0 + w₀·x₀ + …`);
/// - `Mean`: the sum divided by the count of positions (weighted: by `Σ w`, TF's weighted
///   mean); integers truncate;
/// - `Max` / `Min`: a strictly greater (smaller) value or a NaN replaces, so ties keep the
///   first position and a NaN stays;
/// - `Prod`: `x₀ · x₁ · …`;
/// - `SqrtN`: the sum divided by `sqrt(count)` (weighted: by `sqrt(Σ w²)`, TF's
///   `"sqrtn"`), the square root taken in `f64` (for integers, truncated).
///
/// An empty segment (or one whose positions are all skipped) gets the pool's fill,
/// `A::zero()` unless [`.fill`](Pooling::fill) says otherwise. A division by zero (a
/// weighted `Mean` whose weights sum to zero) gives IEEE infinities or NaN for floats and
/// zero for integers. Names parse (`FromStr`) as torch, TF and ONNX spell them: `"sum"`,
/// `"mean"`, `"max"` / `"amax"`, `"min"` / `"amin"`, `"prod"`, `"sqrtn"`.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let x = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
/// let bags = Segments::indptr(&[0, 2, 3]);
/// assert_eq!(x.segment_reduce(bags.clone(), 0, Pooling::Sum)?, array![[4.0, 6.0], [5.0, 6.0]]);
/// let mode: Pooling = "mean".parse()?;
/// assert_eq!(x.segment_reduce(bags, 0, mode)?, array![[2.0, 3.0], [5.0, 6.0]]);
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pooling {
    /// The sum (torch `mode="sum"`, `index_add_`, TF `segment_sum`).
    Sum,
    /// The sum divided by the count, or by the weights' sum (torch `mode="mean"`).
    Mean,
    /// The largest value (torch `mode="max"`, `amax`); a NaN stays.
    Max,
    /// The smallest value (torch `amin`); a NaN stays.
    Min,
    /// The product (torch `prod`).
    Prod,
    /// The sum divided by the square root of the count (TF `combiner="sqrtn"`).
    SqrtN,
}

impl Pooling {
    /// Every pooling, in declaration order (for a test or a fuzz target that tries each).
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let x = array![[1.0], [4.0]];
    /// for pooling in Pooling::ALL {
    ///     let r = x.segment_reduce(Segments::indptr(&[0, 2]), 0, pooling)?;
    ///     assert_eq!(r.len(), 1, "{pooling:?}");
    /// }
    /// # Ok::<(), GatherError>(())
    /// ```
    pub const ALL: [Pooling; 6] = [
        Pooling::Sum,
        Pooling::Mean,
        Pooling::Max,
        Pooling::Min,
        Pooling::Prod,
        Pooling::SqrtN,
    ];

    /// This pooling weighted: position `p`'s row is multiplied by `weights[p]` (torch's
    /// `per_sample_weights`, a graph's edge weights). One weight per position; weights
    /// with `Max`, `Min` or `Prod` are an error when the pool is used (as in torch).
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let table = array![[1.0, 1.0], [2.0, 2.0]];
    /// let w = [0.5, 2.0];
    /// let bag = table.gather_reduce(&[0, 1], Segments::uniform(2), 0, Pooling::Sum.weighted(&w))?;
    /// assert_eq!(bag, array![[4.5, 4.5]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// Weights of shape `[P, H]` weigh per head (decision 55, a graph attention's
    /// coefficients): `weights[p, h]` multiplies the `h`-th slice of position `p`'s row
    /// along the input's first dimension after the gathered axis, which must be `H` long,
    /// and broadcasts over the rest (an `x` of `[n, H, d]`). `[P, 1]` weights are `[P]`
    /// weights. Per-head weights work with a gather-reduce of an array, a
    /// [`GatherReducePlan`](crate::GatherReducePlan)'s `apply` and its `backward_into` /
    /// `backward_rows`; collections, sharded plans, quantized tables and the fused
    /// optimizer `step` take `[P]` weights only (a [`HeadWeights`](crate::GatherError::HeadWeights)
    /// error otherwise).
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// // Two heads of two elements; one segment of both positions.
    /// let x = array![[[1.0, 1.0], [1.0, 1.0]], [[2.0, 2.0], [2.0, 2.0]]];
    /// let w = array![[1.0, 0.0], [0.5, 3.0]]; // [P = 2, H = 2]
    /// let h = x.gather_reduce(&[0, 1], Segments::uniform(2), 0, Pooling::Sum.weighted(&w))?;
    /// assert_eq!(h, array![[[2.0, 2.0], [6.0, 6.0]]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn weighted<'w, A: 'w, D: WeightRank>(self, weights: impl AsArray<'w, A, D>) -> Pool<'w, A> {
        Pool::from(self).weighted(weights)
    }

    /// This pooling with positions whose index equals `value` skipped: they contribute
    /// nothing and are not counted (torch's `padding_idx`, FBGEMM's `-1` for pruned rows:
    /// `.skip(-1)`). Every other index must be in range; a negative one counts from the
    /// end (as in every gather; torch's `embedding_bag` rejects it). `value` is any index
    /// type (a `usize` padding row, an `i64` id), compared by value with the indices.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let table = array![[0.0], [2.0], [4.0]];
    /// let bag = table.gather_reduce(&[0, 2, 0, 1], Segments::uniform(4), 0, Pooling::Mean.skip(0))?;
    /// assert_eq!(bag, array![[3.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn skip<'w, A>(self, value: impl GatherIndex) -> Pool<'w, A> {
        Pool::from(self).skip(value)
    }

    /// This pooling with `value` for empty segments (instead of zero):
    /// `.fill(f32::NEG_INFINITY)` gives `torch.segment_reduce`'s empty maxima.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let x = array![1.0_f32, 5.0];
    /// let m = x.segment_reduce(Segments::lengths(&[2, 0]), 0, Pooling::Max.fill(f32::NEG_INFINITY))?;
    /// assert_eq!(m, array![5.0, f32::NEG_INFINITY]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn fill<'w, A>(self, value: A) -> Pool<'w, A> {
        Pool::from(self).fill(value)
    }

    /// The name `FromStr` parses (torch's and TF's spelling).
    ///
    /// ```
    /// use ndarray_gather::Pooling;
    /// assert_eq!(Pooling::SqrtN.name(), "sqrtn");
    /// assert_eq!(Pooling::Max.name().parse::<Pooling>()?, Pooling::Max);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Pooling::Sum => "sum",
            Pooling::Mean => "mean",
            Pooling::Max => "max",
            Pooling::Min => "min",
            Pooling::Prod => "prod",
            Pooling::SqrtN => "sqrtn",
        }
    }
}

impl fmt::Display for Pooling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A pooling name that [`Pooling`]'s `FromStr` does not know; it names the string.
///
/// ```
/// use ndarray_gather::prelude::*;
/// let err = "average".parse::<Pooling>().unwrap_err();
/// assert!(err.to_string().contains("\"average\""));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown pooling {0:?} (expected \"sum\", \"mean\", \"max\", \"min\", \"prod\", \"amax\", \"amin\" \
     or \"sqrtn\")"
)]
pub struct ParsePoolingError(pub String);

impl FromStr for Pooling {
    type Err = ParsePoolingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sum" => Ok(Pooling::Sum),
            "mean" => Ok(Pooling::Mean),
            "max" | "amax" => Ok(Pooling::Max),
            "min" | "amin" => Ok(Pooling::Min),
            "prod" => Ok(Pooling::Prod),
            "sqrtn" => Ok(Pooling::SqrtN),
            _ => Err(ParsePoolingError(s.to_string())),
        }
    }
}

/// A [`Pooling`] with its options: per-position weights, an index value to skip, and the
/// value of empty segments. Made by [`Pooling`]'s `weighted`, `skip` and `fill` (which
/// chain on `Pool` again, in any order) or from a bare `Pooling` (`Pool: From<Pooling>`):
/// every method takes either ([`IntoPool`]).
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let table = array![[1.0], [2.0], [3.0]];
/// let w = array![1.0, 3.0, 1.0, 1.0];
/// // torch: F.embedding_bag(idx, table, offsets, mode="sum", per_sample_weights=w, padding_idx=0)
/// let pool = Pooling::Sum.weighted(&w).skip(0).fill(-1.0);
/// let bags = table.gather_reduce(&[2, 1, 0, 0], Segments::starts(&[0, 2, 2]), 0, pool)?;
/// assert_eq!(bags, array![[9.0], [-1.0], [-1.0]]);
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Pool<'w, A> {
    pub(crate) pooling: Pooling,
    /// `[P, H]`: one column (`[P]` weights, `H = 1`) or one per head.
    pub(crate) weights: Option<ArrayView2<'w, A>>,
    /// The skipped index value, exactly (any index type's).
    pub(crate) skip: Option<i128>,
    pub(crate) fill: Option<A>,
}

mod private {
    pub trait Sealed {}
}

/// What every `pool` parameter takes: a bare [`Pooling`] or a [`Pool`] of the table's
/// element type (its weights and fill are of that type). Sealed.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let table = array![[1.0_f32], [2.0]];
/// let w = array![0.5_f32, 2.0];
/// let bags = table.gather_reduce(&[0, 1], Segments::uniform(2), 0, Pooling::Sum.weighted(&w))?;
/// assert_eq!(bags, array![[4.5]]);
/// assert_eq!(table.gather_reduce(&[0, 1], Segments::uniform(2), 0, Pooling::Max)?, array![[2.0]]);
/// # Ok::<(), GatherError>(())
/// ```
///
/// Weights of another element type than the table's do not compile (the compiler's note
/// says to convert them):
///
/// ```compile_fail
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let table = array![[1.0_f32], [2.0]];
/// let w = array![0.5_f64, 2.0]; // f64 weights on an f32 table
/// table.gather_reduce(&[0, 1], Segments::uniform(2), 0, Pooling::Sum.weighted(&w));
/// ```
#[diagnostic::on_unimplemented(
    message = "a pool of `{Self}` cannot pool this table of `{A}`",
    label = "the weights (or fill) must have the table's element type `{A}`",
    note = "convert the weights to the table's element type, e.g. `w.mapv(|v| v as f32)`, or the table to theirs"
)]
pub trait IntoPool<'w, A>: private::Sealed {
    /// The pool.
    #[doc(hidden)]
    fn into_pool(self) -> Pool<'w, A>;
}

impl private::Sealed for Pooling {}
impl<'w, A> IntoPool<'w, A> for Pooling {
    #[inline]
    fn into_pool(self) -> Pool<'w, A> {
        self.into()
    }
}

impl<A> private::Sealed for Pool<'_, A> {}
impl<'w, A> IntoPool<'w, A> for Pool<'w, A> {
    #[inline]
    fn into_pool(self) -> Pool<'w, A> {
        self
    }
}

impl<A> From<Pooling> for Pool<'_, A> {
    fn from(pooling: Pooling) -> Self {
        Pool {
            pooling,
            weights: None,
            skip: None,
            fill: None,
        }
    }
}

impl<'w, A> Pool<'w, A> {
    /// The pooling. The options chain in any order, a later one replacing an earlier one
    /// of its kind:
    ///
    /// ```
    /// use ndarray_gather::prelude::*;
    ///
    /// let w = [1.0, 2.0];
    /// let pool: Pool<'_, f64> = Pooling::Mean.fill(-1.0).skip(0).weighted(&w).fill(0.5);
    /// assert_eq!(pool.pooling(), Pooling::Mean);
    /// ```
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// See [`Pooling::weighted`].
    pub fn weighted<'v, D: WeightRank>(self, weights: impl AsArray<'v, A, D>) -> Pool<'v, A>
    where
        A: 'v,
        'w: 'v,
    {
        Pool {
            pooling: self.pooling,
            weights: Some(D::columns(weights.into())),
            skip: self.skip,
            fill: self.fill,
        }
    }

    /// The number of heads its weights weigh (`[P, H]`), if not one.
    pub(crate) fn heads(&self) -> Option<usize> {
        self.weights.as_ref().map(|w| w.ncols()).filter(|&h| h != 1)
    }

    /// The pool of head `h` (below [`heads`](Self::heads)): its column of weights.
    pub(crate) fn head(&self, h: usize) -> Self
    where
        A: Clone,
    {
        Pool {
            weights: self.weights.map(|w| w.slice_move(ndarray::s![.., h..h + 1])),
            ..self.clone()
        }
    }

    /// See [`Pooling::skip`].
    pub fn skip(self, value: impl GatherIndex) -> Self {
        Pool {
            skip: Some(value.to_i128()),
            ..self
        }
    }

    /// See [`Pooling::fill`].
    pub fn fill(self, value: A) -> Self {
        Pool {
            fill: Some(value),
            ..self
        }
    }
}

/// The ranks weights come in: `[P]` (one per position) or `[P, H]` (one per position and
/// head, decision 55). Sealed: weights of another rank do not compile.
///
/// ```
/// use ndarray::{Array2, array};
/// use ndarray_gather::prelude::*;
///
/// let x = Array2::<f32>::ones((3, 2)); // 2 heads of one element
/// let per_position = array![1.0_f32, 2.0];
/// let per_head = array![[1.0_f32, 0.5], [2.0, 0.0]];
/// let pool = Pooling::Sum;
/// assert_eq!(x.gather_reduce(&[0, 2], Segments::uniform(2), 0, pool.weighted(&per_position))?, array![[3.0, 3.0]]);
/// assert_eq!(x.gather_reduce(&[0, 2], Segments::uniform(2), 0, pool.weighted(&per_head))?, array![[3.0, 0.5]]);
/// # Ok::<(), GatherError>(())
/// ```
pub trait WeightRank: ndarray::Dimension + private::Sealed {
    /// The weights as `[P, H]` columns.
    #[doc(hidden)]
    fn columns<A>(w: ArrayView<'_, A, Self>) -> ArrayView2<'_, A>;
}

impl private::Sealed for Ix1 {}
impl WeightRank for Ix1 {
    fn columns<A>(w: ArrayView<'_, A, Self>) -> ArrayView2<'_, A> {
        w.insert_axis(Axis(1))
    }
}

impl private::Sealed for Ix2 {}
impl WeightRank for Ix2 {
    fn columns<A>(w: ArrayView<'_, A, Self>) -> ArrayView2<'_, A> {
        w
    }
}
