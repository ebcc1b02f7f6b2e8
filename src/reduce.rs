//! How a scatter combines an update with the element already there: the [`Reducer`]
//! trait, its unit structs ([`Replace`], [`Add`], [`Mul`], [`Min`], [`Max`]), the run-time
//! [`Reduction`] (ONNX's `reduction` attribute) and closures.

use std::fmt;
use std::str::FromStr;

use num_traits::NumAssignOps;

/// Combines an update into the element a scatter writes to.
///
/// Implemented by the unit structs of this module, by [`Reduction`], and by every closure
/// `Fn(&mut A, &A) + Copy + Send + Sync`. Duplicates combine in row-major order of the
/// updates, one at a time, so a reducer need be neither associative nor commutative.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let mut a = array![1.0, 1.0, 1.0];
/// // A closure: keep the update with the larger magnitude.
/// let by_magnitude = |x: &mut f64, u: &f64| if u.abs() > x.abs() { *x = *u };
/// a.scatter(&array![0_i64, 0, 2], &array![-3.0, 2.0, 0.5], 0, by_magnitude)?;
/// assert_eq!(a, array![-3.0, 1.0, 1.0]);
/// # Ok::<(), GatherError>(())
/// ```
pub trait Reducer<A>: Copy + Send + Sync {
    /// Combines `update` into `slot`.
    fn reduce(&self, slot: &mut A, update: &A);
}

impl<A, F: Fn(&mut A, &A) + Copy + Send + Sync> Reducer<A> for F {
    #[inline(always)]
    fn reduce(&self, slot: &mut A, update: &A) {
        self(slot, update)
    }
}

/// A closure as a reducer, its element type named once instead of on each parameter:
/// `reduce::with::<f32>(|a, b| *a = a.max(*b))` is
/// `|a: &mut f32, b: &f32| *a = a.max(*b)`.
///
/// Rust infers a closure's parameter types only from a bound that names them where the
/// closure is written, and a scatter's reducer parameter (`impl Reducer<A>`, which unit
/// structs such as [`Add`] implement too) cannot be such a bound, so an unannotated
/// closure whose body calls a method (`a.max(..)`) does not compile (E0282). A closure
/// whose parameter types are written, or that calls no method on them, needs no `with`.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let mut best = array![0.5_f32, 0.5];
/// best.scatter(&[1, 1, 0], &array![2.0, 3.0, 0.25], 0, reduce::with::<f32>(|a, b| *a = a.max(*b)))?;
/// assert_eq!(best, array![0.5, 3.0]);
/// # Ok::<(), GatherError>(())
/// ```
#[inline(always)]
pub fn with<A>(reducer: impl Fn(&mut A, &A) + Copy + Send + Sync) -> impl Reducer<A> {
    reducer
}

/// The update replaces the element (ONNX `reduction="none"`, `torch.scatter_`, numpy's
/// fancy assignment and `put_along_axis`); of duplicates, the last one in row-major order
/// wins.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::{prelude::*, reduce::Replace};
///
/// let mut a = array![0, 0, 0];
/// a.scatter(&array![2_i64, 2], &array![7, 9], 0, Replace)?;
/// assert_eq!(a, array![0, 0, 9]);
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Replace;

/// The update is added (`np.add.at`, ONNX `reduction="add"`, `torch.scatter_add_`,
/// `index_add_`): duplicates accumulate.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::{prelude::*, reduce::Add};
///
/// let mut counts = array![0, 0, 0];
/// counts.scatter(&array![2_i64, 0, 2], &array![1, 1, 1], 0, Add)?;
/// assert_eq!(counts, array![1, 0, 2]);
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Add;

/// The element is multiplied by the update (`np.multiply.at`, ONNX `reduction="mul"`).
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::{prelude::*, reduce::Mul};
///
/// let mut a = array![1, 1, 3];
/// a.scatter(&array![2_i64, 2], &array![2, 5], 0, Mul)?;
/// assert_eq!(a, array![1, 1, 30]);
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Mul;

/// The smaller of element and update (`np.minimum.at`, ONNX `reduction="min"`): only a
/// strictly smaller update, or a NaN, replaces the element; a tie (`-0.0` against `0.0`
/// included) keeps the old value. Which NaN comes out is not specified.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::{prelude::*, reduce::Min};
///
/// let mut a = array![5.0, 5.0];
/// a.scatter(&array![0_i64, 0, 1], &array![3.0, 4.0, f64::NAN], 0, Min)?;
/// assert_eq!(a[0], 3.0);
/// assert!(a[1].is_nan());
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Min;

/// The larger of element and update (`np.maximum.at`, ONNX `reduction="max"`): only a
/// strictly larger update, or a NaN, replaces the element; a tie keeps the old value.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::{prelude::*, reduce::Max};
///
/// let mut a = array![0, 0];
/// a.scatter(&array![1_i64, 1], &array![4, 2], 0, Max)?;
/// assert_eq!(a, array![0, 4]);
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Max;

impl<A: Clone + Send + Sync> Reducer<A> for Replace {
    #[inline(always)]
    fn reduce(&self, slot: &mut A, update: &A) {
        slot.clone_from(update);
    }
}

impl<A: Clone + std::ops::AddAssign + Send + Sync> Reducer<A> for Add {
    #[inline(always)]
    fn reduce(&self, slot: &mut A, update: &A) {
        *slot += update.clone();
    }
}

impl<A: Clone + std::ops::MulAssign + Send + Sync> Reducer<A> for Mul {
    #[inline(always)]
    fn reduce(&self, slot: &mut A, update: &A) {
        *slot *= update.clone();
    }
}

/// Whether `v` is unordered against itself (a NaN).
#[inline(always)]
#[allow(clippy::eq_op)]
fn is_nan<A: PartialOrd>(v: &A) -> bool {
    v != v
}

impl<A: Clone + PartialOrd + Send + Sync> Reducer<A> for Min {
    #[inline(always)]
    fn reduce(&self, slot: &mut A, update: &A) {
        keep_if(slot, update, update < slot || is_nan(update));
    }
}

impl<A: Clone + PartialOrd + Send + Sync> Reducer<A> for Max {
    #[inline(always)]
    fn reduce(&self, slot: &mut A, update: &A) {
        keep_if(slot, update, update > slot || is_nan(update));
    }
}

/// Replaces `slot` by `update` if `replace`. Elements without drop glue (numbers) are
/// written either way, the old or the new value, so that the choice compiles to a select
/// and a loop of them vectorizes; others are cloned only when they replace.
#[inline(always)]
fn keep_if<A: Clone>(slot: &mut A, update: &A, replace: bool) {
    if std::mem::needs_drop::<A>() {
        if replace {
            slot.clone_from(update);
        }
    } else {
        let kept = if replace { update.clone() } else { slot.clone() };
        *slot = kept;
    }
}

/// A reduction chosen at run time, for numeric elements (every primitive integer and
/// float): the unit structs of this module as one enum. Parses ONNX's `reduction`
/// attribute (`"none" | "add" | "mul" | "min" | "max"`) and torch's `reduce` argument of
/// `scatter_reduce_` / `index_reduce_` (`"sum" | "prod" | "amin" | "amax"`); torch's
/// `"mean"` is not a reducer that combines one update at a time, and is refused with a
/// message that says so.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
///
/// let reduction: Reduction = "max".parse().unwrap();
/// let mut x = array![[1.0, 1.0], [1.0, 1.0]];
/// x.scatter_elements(&array![[1_i64, 1]], &array![[3.0, 0.5]], 1, reduction)?;
/// assert_eq!(x, array![[1.0, 3.0], [1.0, 1.0]]);
/// assert_eq!("sum".parse::<Reduction>()?, Reduction::Add); // torch's name
/// assert_eq!("amax".parse::<Reduction>()?, Reduction::Max);
/// assert!("mean".parse::<Reduction>().is_err());
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// [`Replace`] (ONNX `"none"`).
    #[default]
    Replace,
    /// [`Add`] (ONNX `"add"`, torch `"sum"`).
    Add,
    /// [`Mul`] (ONNX `"mul"`, torch `"prod"`).
    Mul,
    /// [`Min`] (ONNX `"min"`, torch `"amin"`).
    Min,
    /// [`Max`] (ONNX `"max"`, torch `"amax"`).
    Max,
}

impl<A: Clone + PartialOrd + NumAssignOps + Send + Sync> Reducer<A> for Reduction {
    #[inline(always)]
    fn reduce(&self, slot: &mut A, update: &A) {
        match self {
            Reduction::Replace => Replace.reduce(slot, update),
            Reduction::Add => Add.reduce(slot, update),
            Reduction::Mul => Mul.reduce(slot, update),
            Reduction::Min => Min.reduce(slot, update),
            Reduction::Max => Max.reduce(slot, update),
        }
    }
}

/// A string that is not one of ONNX's or torch's reductions (from
/// `str::parse::<Reduction>`); `?` converts it into a [`GatherError`](crate::GatherError).
///
/// ```
/// use ndarray_gather::{Reduction, reduce::ParseReductionError};
///
/// let e = "average".parse::<Reduction>().unwrap_err();
/// assert_eq!(e, ParseReductionError("average".to_string()));
/// assert_eq!(
///     e.to_string(),
///     r#"unknown reduction "average" (expected ONNX's "none", "add", "mul", "min", "max" or torch's "sum", "prod", "amin", "amax")"#
/// );
/// assert!("mean".parse::<Reduction>().unwrap_err().to_string().contains("count"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ParseReductionError(pub String);

impl fmt::Display for ParseReductionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == "mean" {
            // torch's scatter_reduce_ / index_reduce_ "mean" divides by each element's count
            // of updates, which no reducer combining one update at a time can know.
            return write!(
                f,
                "reduction \"mean\" is not a scatter reducer: a scatter combines one update at a \
                 time, and a mean needs each element's count (gather_reduce / segment_reduce \
                 with Pooling::Mean compute it, torch's index_reduce_(\"mean\", \
                 include_self=False))"
            );
        }
        write!(
            f,
            "unknown reduction {:?} (expected ONNX's \"none\", \"add\", \"mul\", \"min\", \"max\" \
             or torch's \"sum\", \"prod\", \"amin\", \"amax\")",
            self.0
        )
    }
}

impl FromStr for Reduction {
    type Err = ParseReductionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Reduction::Replace),
            "add" | "sum" => Ok(Reduction::Add),
            "mul" | "prod" => Ok(Reduction::Mul),
            "min" | "amin" => Ok(Reduction::Min),
            "max" | "amax" => Ok(Reduction::Max),
            _ => Err(ParseReductionError(s.to_string())),
        }
    }
}

impl fmt::Display for Reduction {
    /// ONNX's spelling, which [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reduction::Replace => "none",
            Reduction::Add => "add",
            Reduction::Mul => "mul",
            Reduction::Min => "min",
            Reduction::Max => "max",
        })
    }
}
