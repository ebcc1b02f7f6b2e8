//! The tiny calls for counting instructions per call under callgrind: W7 (`_into` and
//! allocating), P7 (`apply_into` and `apply`), S4 and a tiny `gather_reduce`, each run
//! `N` times by itself.
//!
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/tiny_calls W7_into 2000`
//! prints the total; run it with `N` and `2N` and divide the difference by `N`
//! (`benches/peers/tiny_calls.sh` does that for every call).

use std::hint::black_box;

use ndarray::{Array1, Array2, ArrayD, IxDyn, array};
use ndarray_gather::prelude::*;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(which), Some(n)) = (args.first(), args.get(1).and_then(|n| n.parse::<usize>().ok())) else {
        eprintln!("usage: tiny_calls W7_into|W7_alloc|P7_into|P7_apply|S4|R_tiny N");
        std::process::exit(2);
    };
    // W7: two rows of a 4 x 3 table (BENCH-WORKLOADS.md).
    let x = ArrayD::from_shape_vec(
        IxDyn(&[4, 3]),
        vec![0., 1., 2., 10., 11., 12., 20., 21., 22., 30., 31., 32.],
    )
    .unwrap_or_default();
    let ix = Array1::from(vec![3_i64, 1]);
    let mut out = Array2::<f32>::zeros((2, 3));
    match which.as_str() {
        "W7_into" => {
            let (x4, ix2) = (
                x.view().into_shape_with_order((4, 3)).unwrap(),
                ix.view().insert_axis(ndarray::Axis(1)),
            );
            let mut out = Array2::<f32>::zeros((2, 3));
            for _ in 0..n {
                x4.gather_multiaxis_into(black_box(&ix2), &[0], &mut out).unwrap();
            }
            black_box(&out);
        }
        "W7_alloc" => {
            for _ in 0..n {
                black_box(x.gather(black_box(&ix), 0).unwrap());
            }
        }
        "P7_into" | "P7_apply" => {
            let plan = GatherPlan::gather(x.shape(), &ix, 0).unwrap();
            for _ in 0..n {
                if which == "P7_into" {
                    plan.apply_into(black_box(&x), &mut out).unwrap();
                } else {
                    black_box(plan.apply(black_box(&x)).unwrap());
                }
            }
            black_box(&out);
        }
        "S4" => {
            // S4: eight updates added into 16 elements.
            let i = array![3_i64, 7, 1, 3, 15, 0, 9, 3];
            let u = Array1::<f32>::from_elem(8, 0.5);
            let mut d = Array1::<f32>::zeros(16);
            for _ in 0..n {
                d.scatter_elements(black_box(&i), &u, 0, reduce::Add).unwrap();
            }
            black_box(&d);
        }
        "R_tiny" => {
            // A tiny bag: five ids of the 4 x 3 table into two bags, summed.
            let t = x.view().into_shape_with_order((4, 3)).unwrap();
            let i = array![3_i64, 1, 0, 2, 1];
            let starts = array![0_i64, 2];
            let mut o = Array2::<f32>::zeros((2, 3));
            for _ in 0..n {
                t.gather_reduce_into(black_box(&i), Segments::starts(&starts), 0, Pooling::Sum, &mut o)
                    .unwrap();
            }
            black_box(&o);
        }
        other => {
            eprintln!("unknown call {other}");
            std::process::exit(2);
        }
    }
}
