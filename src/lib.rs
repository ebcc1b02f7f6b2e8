//! One gather operator for [`ndarray`], and every library's gather as a thin view over it.
//!
//! ```
//! use ndarray::array;
//! use ndarray_gather::prelude::*;
//!
//! let table = array![[0.0, 0.1], [1.0, 1.1], [2.0, 2.1]];
//! // ONNX Gather / numpy.take: rows by id.
//! assert_eq!(table.gather(&array![2_i64, 0], 0)?, array![[2.0, 2.1], [0.0, 0.1]]);
//! // ONNX GatherElements / torch.gather: one element per index.
//! assert_eq!(table.gather_elements(&array![[1_i64], [0]], 1)?, array![[0.1], [1.0]]);
//! // The operator they all lower to.
//! assert_eq!(table.gather_multiaxis(&array![[1_i64, 0]], &[0, 1])?, array![[1.0]]);
//! # Ok::<(), GatherError>(())
//! ```
//!
//! # The operator
//!
//! [`GatherExt::gather_multiaxis`] is the operator of the "Gather Multiaxis" proposal:
//! input, indices and output have the same rank; the `axes` are explicit (any order, not
//! necessarily contiguous); coordinates of `k = axes.len()` values are folded into the
//! last indices dimension; every other dimension broadcasts between input and indices.
//! Once ranks are aligned by inserting unit axes, ONNX Gather, GatherElements and
//! GatherND, numpy.take and take_along_axis, torch.gather, take and index_select, tf.gather
//! and gather_nd with `batch_dims`, CoreML's and TOSA's gathers are all this one operator:
//! each wrapper method here only builds views and calls it.
//!
//! # Every library's gather
//!
#![doc = include_str!("cheatsheet.md")]
//!
//! # Indices and errors
//!
//! Indices may be `i32`, `i64`, `isize`, `u16`, `u32`, `u64` or `usize` ([`GatherIndex`]),
//! held in any array or view, a slice, a `Vec` or a fixed-size array ([`IndexArray`]).
//! Results keep the input's dimension type wherever the types know the rank: `gather`
//! with 1-D indices turns an `Array2` into an `Array2` ([`GatherRank`]). Negative indices count from the end once, as in ONNX and numpy; [`GatherExt::take`]
//! also offers numpy's `wrap` and `clip` modes ([`IndexMode`]). Every bad shape, axis or
//! index is a [`GatherError`] naming the values, never a panic. Where the libraries
//! disagree, this crate decides:
//!
//! - broadcasting is strict: sizes broadcast only where one of them is 1;
//! - an unsigned index above `i64::MAX` is a large positive index (out of range), never a
//!   negative one;
//! - an empty gathered axis with a non-empty output is an error in every method and mode;
//!   a zero-size output is always fine, and its indices are not read (nor checked), where
//!   NumPy's `take` would still raise for an out-of-range index;
//! - `gather_elements` reads the leading block when its indices are smaller than the
//!   input (ONNX Runtime, PyTorch); `take_along_axis` broadcasts (numpy);
//! - `gather_nd` broadcasts batch dimensions of size 1; `gather_batched` requires them
//!   equal (TensorFlow);
//! - `_into` writes nothing when it returns a shape or axis error; after an index error
//!   the contents of `out` are unspecified, though every element is a valid value (its
//!   old one or some element of the input): indices are checked as they are read, not in
//!   a separate pass.
//!
//! # Layouts and threads
//!
//! Inputs, indices and outputs may have any strides: C or Fortran order, transposed,
//! stepped, reversed, or broadcast with zero strides. Broadcasting is never materialized.
//! Runs that are contiguous in both input and output are copied as slices. A gather
//! that writes 16 MiB or more, too much to stay in the caches, copies such runs of 1 KiB
//! or more (or of four whole cache lines or more, from a line boundary) with streaming
//! (non-temporal) stores on x86-64 CPUs with AVX, for elements without drop glue whose
//! size divides 64 bytes: those lines of its output are then in memory, not in the caches.
//!
//! With the default `rayon` feature, gathers moving more than about 2 MiB run on the
//! calling thread and the rayon pool together (inside `ThreadPool::install`, that pool);
//! smaller ones run on the calling thread alone. Results are identical either way, bit
//! for bit, scatters' reductions included.
//!
//! ## Optional features
//!
//! - **`mpi`:** sharded tables (`shard`; OpenMPI or MPICH and libclang
//!   to build). The crate re-exports the rsmpi it uses as `shard::mpi`.
//! - **`half`:** tables of `f16` / `bf16` rows (`quant::QTable::f16`, `bf16`); the crate
//!   re-exports the `half` it uses as `quant::half`.
//!
//! A program names only `ndarray-gather` in its `Cargo.toml` (`features = ["mpi",
//! "half"]`). docs.rs shows every feature; locally, `cargo doc --open --features
//! mpi,half` does.
//!
//! ## Choosing the threads
//!
//! - **One thread for one call, or a given pool:** run the call inside that pool's
//!   `install` (a call inside `install` on a pool of one thread runs on that thread only).
//! - **The whole program:** `RAYON_NUM_THREADS=1` (or `rayon::ThreadPoolBuilder::new()
//!   .num_threads(n).build_global()`, once, before the first parallel call) sizes rayon's
//!   global pool, which calls outside any `install` use.
//! - **No threads at all:** `default-features = false` builds the crate without rayon;
//!   every call then runs on the calling thread.
//!
//! ```
//! use ndarray::Array2;
//! use ndarray_gather::prelude::*;
//!
//! let table = Array2::from_shape_fn((100_000, 16), |(i, j)| (i + j) as f32);
//! let ids: Vec<i64> = (0..100_000).rev().collect();
//! // A pool of one thread: this gather of 6.4 MB runs on it alone.
//! let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
//! let rows = one.install(|| table.gather(&ids, 0))?;
//! assert_eq!(rows, table.gather(&ids, 0)?); // the same bits on any number of threads
//! # Ok::<(), GatherError>(())
//! ```
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod aligned;
mod axis;
pub mod bags;
mod call;
mod error;
mod ext;
mod half_bits;
mod index;
mod indices;
mod kernel;
mod layout;
mod lower;
mod machine;
pub mod optim;
mod plan;
mod pool;
pub mod prelude;
mod prepared;
pub mod quant;
mod rank;
pub mod reduce;
pub mod sample;
mod segments;
mod shape;
#[cfg(feature = "mpi")]
#[cfg_attr(docsrs, doc(cfg(feature = "mpi")))]
pub mod shard;
mod small;
mod table;

pub use aligned::zeros_aligned;
pub use axis::{AxisArg, TakeAxis};
pub use error::GatherError;
pub use ext::{GatherExt, GatherReduceExt, ScatterExt};
pub use index::{GatherIndex, IndexMode};
pub use indices::{Count, IndexArray, SegmentArray};
pub use pool::{IntoPool, ParsePoolingError, Pool, PoolElement, Pooling, WeightRank};
pub use prepared::{GatherPlan, GatherReducePlan};
pub use rank::GatherRank;
pub use reduce::{Reducer, Reduction};
pub use segments::Segments;
pub use shape::ShapeArg;
pub use table::PoolTable;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../PERFORMANCE.md")]
struct PerformanceDoctests;
