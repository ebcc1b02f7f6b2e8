//! The instruction sets the kernels' hot loops are compiled for, chosen once per call:
//! the loops are `#[inline(always)]` generic code, instantiated inside one
//! `#[target_feature]` function per set, so the compiler vectorizes them for each.

/// The instruction sets the hot loops are compiled for (the gather's element loop, the
/// gather-reduce's row loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    /// Whatever the target's baseline is.
    Base,
    /// x86-64 with AVX2.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86-64 with AVX-512 F, VL, DQ and BW.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The widest variant this CPU runs.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512f") && has!("avx512vl") && has!("avx512dq") && has!("avx512bw") {
                return Isa::Avx512;
            }
            if has!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Base
    }

    /// Every variant this CPU runs, narrowest first (for tests).
    #[cfg(test)]
    pub fn all_available() -> Vec<Isa> {
        let mut v = vec![Isa::Base];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Isa::Avx2);
            }
            if Isa::detect() == Isa::Avx512 {
                v.push(Isa::Avx512);
            }
        }
        v
    }
}
