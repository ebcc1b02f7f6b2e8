//! Everything a caller needs in one import: `use ndarray_gather::prelude::*;`.

#[doc(no_inline)]
pub use crate::{
    AxisArg, GatherError, GatherExt, GatherIndex, GatherPlan, GatherRank, GatherReduceExt, GatherReducePlan,
    IndexArray, IndexMode, Pool, PoolElement, Pooling, Reducer, Reduction, ScatterExt, Segments, TakeAxis,
    reduce,
};
