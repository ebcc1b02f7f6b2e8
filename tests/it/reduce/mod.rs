//! The gather-reduce tests: the reference property, hand-checked cases and errors, large
//! calls on one and three threads, and PyTorch's fixtures.

mod backward;
mod cases;
// Files: not under Miri (its isolation has no file system).
#[cfg(not(miri))]
mod fixtures;
mod large;
mod props;
mod widths;
