//! The scatter tests: a binary of their own beside `tests/it`, so that the two compile in
//! parallel (one binary took 78 of a cold `cargo test`'s 135 s to compile). They share
//! `tests/it/support`, of which they use a part.

#[path = "it/scatter/mod.rs"]
mod scatter;
#[path = "it/support/mod.rs"]
#[allow(dead_code)]
mod support;
