#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|input: common::Input| common::run_scatter(common::Op::Elements, &input));
