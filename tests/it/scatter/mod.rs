//! Scatter, every gather's adjoint, by concern: property tests against the one-at-a-time
//! reference (`props`), reducers (`reducers`), errors and empty calls (`checks`), threads
//! (`threads`), block and row scatters (`blocks`), panics (`unwind`) and a plan's scatter
//! (`plans`).

mod blocks;
mod checks;
mod plans;
mod props;
mod reducers;
mod threads;
mod unwind;
