//! The benchmarks' deterministic values (shared by the gather and gather-reduce workloads).

/// Deterministic uniform values in `0..n` (a 64-bit LCG; fixed seed).
pub fn uniform(count: usize, n: usize, seed: u64) -> Vec<i64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..count)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % n as u64) as i64
        })
        .collect()
}
