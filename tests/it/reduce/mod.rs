//! The gather-reduce tests: the reference property, hand-checked cases and errors, thread
//! counts, and PyTorch's fixtures.

mod fixtures;
mod props;
