//! A panicking reducer leaves valid values and drops nothing twice.

use ndarray::{Array, ArrayD, IxDyn};
use ndarray_gather::prelude::*;

/// A reducer that panics midway leaves every element valid, drops nothing twice and
/// leaks nothing, serially and in parallel.
#[test]
fn a_panicking_reducer_leaves_valid_values() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = AtomicUsize::new(0);
    // Fewer updates than elements scatter in place, more into a copy.
    for (n, threads) in [40, if cfg!(miri) { 100 } else { 400_000 }]
        .into_iter()
        .flat_map(|n| [(n, 1), (n, 3)])
    {
        let mut a: ArrayD<String> = ArrayD::from_elem(IxDyn(&[64]), String::from("x"));
        let ids = Array::from_shape_fn(n, |i| (i % 64) as i64);
        let upd = Array::from_shape_fn(n, |i| format!("{i}"));
        calls.store(0, Ordering::SeqCst);
        let reducer = |x: &mut String, u: &String| {
            if calls.fetch_add(1, Ordering::SeqCst) == n / 2 {
                panic!("reducer panics");
            }
            x.clone_from(u);
        };
        let run =
            |a: &mut ArrayD<String>| catch_unwind(AssertUnwindSafe(|| a.scatter(&ids, &upd, 0, reducer)));
        #[cfg(feature = "rayon")]
        let r = crate::support::threads::pool(threads).install(|| run(&mut a));
        #[cfg(not(feature = "rayon"))]
        let r = {
            let _ = threads;
            run(&mut a)
        };
        assert!(r.is_err(), "{threads} threads: no panic");
        // Every element is the old string or some update (dropping `a` then checks for
        // double drops, and Miri for leaks).
        assert!(
            a.iter()
                .all(|s| s == "x" || s.parse::<usize>().is_ok_and(|v| v < n))
        );
    }
}
