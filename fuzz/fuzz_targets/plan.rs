#![no_main]

mod common;

use common::Op;

// Every method's plan against the method itself (and the reference).
libfuzzer_sys::fuzz_target!(|input: (u8, common::Input)| {
    let op = match input.0 % 7 {
        0 => Op::Multiaxis,
        1 => Op::Gather,
        2 => Op::Elements,
        3 => Op::Nd,
        4 => Op::Batched,
        5 => Op::Take,
        _ => Op::AlongAxis,
    };
    common::run_planned(op, &input.1)
});
