//! Everything a caller needs in one import: `use ndarray_gather::prelude::*;`.

#[doc(no_inline)]
pub use crate::{
    AxisArg, GatherError, GatherExt, GatherIndex, GatherPlan, GatherRank, IndexArray, IndexMode, Reducer,
    Reduction, ScatterExt, TakeAxis, reduce,
};
