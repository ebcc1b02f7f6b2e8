#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|input: common::Input| common::run(common::Op::Nd, &input));
