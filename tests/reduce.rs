//! The gather-reduce tests: a binary of their own beside `tests/it` and `tests/scatter.rs`
//! (they compile in parallel), sharing `tests/it/support`.

#[path = "it/reduce/mod.rs"]
mod reduce;
#[path = "it/support/mod.rs"]
#[allow(dead_code)]
mod support;
