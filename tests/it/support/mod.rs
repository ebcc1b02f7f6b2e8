//! What every test module imports, and no test module defines: the naive references,
//! layouts, generators, the fixtures' `.npy` reader, the wrappers' cases, the plans'
//! agreement check and thread-pool helpers. Test modules import from here only, never from each other.

pub mod cases;
pub mod generate;
pub mod layouts;
// The fixtures' manifests and data; not under Miri, which runs no fixture test.
#[cfg(not(miri))]
pub mod manifest;
// The fixture modules' reader; not under Miri, which runs no fixture test.
#[cfg(not(miri))]
pub mod npy;
pub mod plans;
// Only the gather-reduce binary (tests/reduce.rs) uses it.
#[allow(dead_code)]
pub mod pooling;
// The interpolating gathers' reference (issue 76).
pub mod sample;
// Only the gather-reduce binary (tests/reduce.rs) uses them.
#[allow(dead_code)]
pub mod backward;
#[allow(dead_code)]
pub mod reduce_cases;
pub mod reference;
pub mod threads;
