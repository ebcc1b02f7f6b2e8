//! The integration tests, in one binary to keep link time down.

mod axes;
mod bounds;
mod docs;
mod errors;
mod fixtures;
mod habits;
mod huge;
mod lanes;
mod orders;
mod panics;
mod parallel;
mod plans;
mod props;
mod scatter;
mod spec;
mod support;
mod wrappers;
