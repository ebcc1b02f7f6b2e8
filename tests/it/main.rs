//! The integration tests of the gathers and plans, in one binary to keep link time down
//! (the scatters are `tests/scatter.rs`, so that the two compile in parallel).

mod attention;
mod axes;
mod bags;
mod bounds;
mod coherence;
mod docs;
mod errors;
// Files and memory maps: not under Miri (its isolation has no file system; its build
// leaves out memmap2, Cargo.toml).
#[cfg(not(miri))]
mod fixtures;
mod habits;
#[cfg(not(miri))]
mod huge;
mod lanes;
mod messages;
mod optim;
mod orders;
mod panics;
mod parallel;
mod plans;
mod props;
// Files: not under Miri (its isolation has no file system) but its error cases.
mod quant;
// Fixture files not under Miri, the property tests too.
mod sample;
mod spec;
mod support;
mod wrappers;
