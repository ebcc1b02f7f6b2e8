//! The instruction sets the kernels' hot loops are compiled for, chosen once per call:
//! the loops are `#[inline(always)]` generic code, instantiated inside one
//! `#[target_feature]` function per set, so the compiler vectorizes them for each.
//! `NDARRAY_GATHER_ISA` (`base`, `avx2` or `avx512`, any case; decision 60) caps the set
//! at what the CPU has, read once per process, as PyTorch's `ATEN_CPU_CAPABILITY`.

use std::sync::OnceLock;

/// The environment variable that caps the instruction set (decision 60).
pub(crate) const ISA_VAR: &str = "NDARRAY_GATHER_ISA";

/// The instruction sets the hot loops are compiled for (the gather's element loop, the
/// gather-reduce's row loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Isa {
    /// Whatever the target's baseline is.
    Base,
    /// x86-64-v3: AVX2 with FMA and F16C (every CPU with AVX2 since 2013), so that a
    /// `mul_add` is one instruction and half floats widen in registers.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86-64 with AVX-512 F, VL, DQ and BW (which imply AVX2, FMA and F16C).
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The set the kernels use: the widest this CPU runs, capped by `NDARRAY_GATHER_ISA`
    /// (read once per process; unset or unknown: no cap).
    pub fn detect() -> Isa {
        #[cfg(test)]
        if let Some(isa) = tiers::forced() {
            return isa;
        }
        static CHOSEN: OnceLock<Isa> = OnceLock::new();
        *CHOSEN.get_or_init(|| Isa::capped(Isa::widest(), std::env::var(ISA_VAR).ok().as_deref()))
    }

    /// `widest` capped by the variable's value `cap`, if it names a set.
    fn capped(widest: Isa, cap: Option<&str>) -> Isa {
        let cap = match cap.map(str::to_ascii_lowercase).as_deref() {
            Some("base") => Isa::Base,
            #[cfg(target_arch = "x86_64")]
            Some("avx2") => Isa::Avx2,
            #[cfg(target_arch = "x86_64")]
            Some("avx512") => Isa::Avx512,
            _ => return widest,
        };
        widest.min(cap)
    }

    /// The widest set this CPU runs.
    fn widest() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let v3 = has!("avx2") && has!("fma") && has!("f16c");
            if v3 && has!("avx512f") && has!("avx512vl") && has!("avx512dq") && has!("avx512bw") {
                return Isa::Avx512;
            }
            if v3 {
                return Isa::Avx2;
            }
        }
        Isa::Base
    }

    /// Every variant this CPU runs, narrowest first (for tests).
    #[cfg(test)]
    pub fn all_available() -> Vec<Isa> {
        let widest = Isa::widest();
        let mut v = vec![Isa::Base];
        #[cfg(target_arch = "x86_64")]
        v.extend([Isa::Avx2, Isa::Avx512].into_iter().filter(|&i| i <= widest));
        v
    }
}

/// Runs `f` compiled for `isa`, which must run on this CPU ([`Isa::detect`]'s or
/// [`Isa::all_available`]'s): `f` (an `#[inline(always)]` closure, and what it calls
/// `#[inline]`) is inlined into the tier's `#[target_feature]` function.
#[inline(always)]
pub(crate) fn on_tier<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    match isa {
        Isa::Base => f(),
        // SAFETY: (both) `isa` runs on this CPU (the contract above: every caller's comes
        // from `Isa::detect` or `Isa::all_available`, which ask the CPU).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { on_avx2(f) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Isa::Avx512 => unsafe { on_avx512(f) },
    }
}

/// `f` compiled for x86-64-v3 (a `mul_add` is one instruction, `floor` one `roundss`).
///
/// # Safety
/// The CPU has AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn on_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f` compiled for AVX-512.
///
/// # Safety
/// The CPU has AVX-512 F, VL, DQ and BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
unsafe fn on_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// A unit test's choice of set, so that one process runs each tier in turn (the tiers'
/// tests compare them bit for bit).
#[cfg(test)]
pub(crate) mod tiers {
    use std::sync::Mutex;

    use super::Isa;

    static FORCED: Mutex<Option<Isa>> = Mutex::new(None);
    /// One test forces a set at a time.
    static TURN: Mutex<()> = Mutex::new(());

    pub(super) fn forced() -> Option<Isa> {
        *FORCED.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `f()` on each set this CPU runs, narrowest first: its results, by set.
    pub fn each<R>(mut f: impl FnMut() -> R) -> Vec<(Isa, R)> {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let results = Isa::all_available()
            .into_iter()
            .map(|isa| {
                *FORCED.lock().unwrap_or_else(|e| e.into_inner()) = Some(isa);
                assert_eq!(Isa::detect(), isa, "the kernels' choice ignores the test's");
                (isa, f())
            })
            .collect();
        *FORCED.lock().unwrap_or_else(|e| e.into_inner()) = None;
        results
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_caps_the_set_at_what_the_cpu_has() {
        let w = Isa::widest();
        assert_eq!(Isa::capped(w, None), w);
        assert_eq!(Isa::capped(w, Some("BASE")), Isa::Base);
        assert_eq!(Isa::capped(w, Some("sse9")), w, "an unknown value is no cap");
        assert_eq!(
            Isa::capped(Isa::Base, Some("avx512")),
            Isa::Base,
            "never above the CPU"
        );
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(Isa::capped(Isa::Avx512, Some("Avx2")), Isa::Avx2);
            assert_eq!(Isa::capped(Isa::Avx2, Some("avx512")), Isa::Avx2);
        }
    }

    /// The variable is read: this test's binary, run again with `NDARRAY_GATHER_ISA=base`
    /// and only this test, must see `Base` (the child asserts it).
    #[test]
    #[cfg_attr(miri, ignore)]
    fn the_variable_is_read_once_per_process() {
        const CHILD: &str = "NDARRAY_GATHER_ISA_CHILD";
        if std::env::var_os(CHILD).is_some() {
            assert_eq!(Isa::detect(), Isa::Base, "{ISA_VAR}=base was ignored");
            return;
        }
        let me = std::env::current_exe().expect("the test binary");
        let status = std::process::Command::new(me)
            .args([
                "--exact",
                "kernel::isa::tests::the_variable_is_read_once_per_process",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env(ISA_VAR, "base")
            .status()
            .expect("the test binary runs");
        assert!(status.success(), "the child saw another set than Base");
    }
}
