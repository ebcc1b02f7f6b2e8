//! The integration tests, in one binary to keep link time down.

mod axes;
mod bounds;
mod docs;
mod errors;
mod fixtures;
mod huge;
mod lanes;
mod layouts;
mod orders;
mod panics;
mod parallel;
mod plans;
mod props;
mod reference;
mod scatter;
mod spec;
mod wrappers;
