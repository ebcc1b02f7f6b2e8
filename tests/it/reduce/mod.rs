//! The gather-reduce tests: the reference property, hand-checked cases and errors, large
//! calls on one and three threads, and PyTorch's fixtures.

mod cases;
// Files and memory maps: not under Miri, whose build leaves out ndarray-npy (Cargo.toml).
#[cfg(not(miri))]
mod fixtures;
mod large;
mod props;
