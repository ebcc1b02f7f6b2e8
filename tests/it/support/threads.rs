//! Thread pools: the same call on one thread and on three must give the same bits.

use std::sync::OnceLock;

/// A rayon pool of `n` threads, 1 to 4 (rayon is a dev-dependency, so this exists without
/// the crate's `rayon` feature too). Each is built once and shared by every test: under
/// Miri, building pools (spawning their threads) took much of the scatter tests' time.
pub fn pool(n: usize) -> &'static rayon::ThreadPool {
    static POOLS: [OnceLock<rayon::ThreadPool>; 4] = [const { OnceLock::new() }; 4];
    POOLS[n - 1].get_or_init(|| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap())
}

/// Runs `f` on a pool of one thread and on one of three; asserts that both give the same
/// result, and returns it. Under Miri the second pool has two threads: still parallel,
/// and a third idle worker spinning for work cost a third of the scatter tests' time.
#[cfg(feature = "rayon")]
pub fn on_1_and_3<T: PartialEq + std::fmt::Debug + Send>(f: impl Fn() -> T + Sync) -> T {
    let serial = pool(1).install(&f);
    let parallel = pool(if cfg!(miri) { 2 } else { 3 }).install(&f);
    assert_eq!(serial, parallel);
    serial
}

/// Without the pool, one run.
#[cfg(not(feature = "rayon"))]
pub fn on_1_and_3<T>(f: impl Fn() -> T) -> T {
    f()
}

/// [`on_1_and_3`] natively; under Miri one run on the global pool (thread pools are slow
/// to build there). (Only the scatter tests' binary calls it.)
#[allow(dead_code)]
pub fn on_1_and_3_natively<T: PartialEq + std::fmt::Debug + Send>(f: impl Fn() -> T + Sync) -> T {
    if cfg!(miri) { f() } else { on_1_and_3(f) }
}

/// Runs `f` on one thread (where small gathers run as one range, so that whole rows reach
/// the staging even under Miri, whose parallel ranges are a few elements) and, outside
/// Miri, on the default pool as well.
pub fn serial_and_parallel(f: impl Fn() + Send + Sync) {
    pool(1).install(&f);
    if !cfg!(miri) {
        f();
    }
}
