//! Generators: proptest configuration, random `gather_multiaxis` problems, index values
//! and element values.

use proptest::prelude::*;

use super::layouts::{Held, Layout, any_layout};

/// Cases per property; `PROPTEST_CASES` overrides (CI keeps the default). Under Miri no
/// failures are persisted (Miri's isolation has no file system).
pub fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(256),
        failure_persistence: if cfg!(miri) {
            None
        } else {
            ProptestConfig::default().failure_persistence
        },
        ..ProptestConfig::default()
    }
}

/// A dimension size: 1 to 3, sometimes 0.
pub fn size() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 8 => 1usize..=3]
}

/// A `gather_multiaxis` call: shapes, axes, index values and layouts.
#[derive(Debug, Clone)]
pub struct Problem {
    pub input_shape: Vec<usize>,
    pub indices_shape: Vec<usize>,
    pub axes: Vec<usize>,
    pub values: Vec<i64>,
    pub input_layout: Layout,
    pub indices_layout: Layout,
    pub out_layout: Layout,
    pub elem: u8,
}

impl Problem {
    /// The problem's indices as `I`, in its indices layout (each coordinate component
    /// converted for the length of its own axis).
    pub fn indices<I: TryFrom<i64> + TryFrom<u64> + Copy>(&self) -> Held<I> {
        let k = self.axes.len().max(1);
        let lens: Vec<usize> = self.axes.iter().map(|&a| self.input_shape[a]).collect();
        let values: Vec<I> = self
            .values
            .iter()
            .enumerate()
            .map(|(i, &v)| convert(v, lens.get(i % k).copied().unwrap_or(1)))
            .collect();
        Held::new(&self.indices_shape, self.indices_layout, |i| values[i])
    }
}

/// Index values for an axis of `len`: in range, negative ones included, and with
/// `bad` an out-of-range one somewhere.
pub fn index_values(lens: &[usize], count: usize, seeds: &[u64], bad: Option<u64>) -> Vec<i64> {
    let k = lens.len().max(1);
    let mut v: Vec<i64> = (0..count)
        .map(|i| {
            let len = lens.get(i % k).copied().unwrap_or(1) as i64;
            let s = seeds[i % seeds.len()].wrapping_mul(i as u64 * 2 + 1) >> 7;
            if len == 0 {
                0
            } else {
                (s % (2 * len as u64)) as i64 - len
            }
        })
        .collect();
    if let (Some(b), false) = (bad, v.is_empty()) {
        let i = (b % v.len() as u64) as usize;
        let len = lens.get(i % k).copied().unwrap_or(1) as i64;
        v[i] = match b % 4 {
            0 => len,
            1 => -len - 1,
            2 => i64::MAX,
            _ => i64::MIN,
        };
    }
    v
}

pub fn problem() -> impl Strategy<Value = Problem> {
    (0usize..=5)
        .prop_flat_map(|r| {
            (
                proptest::collection::vec(size(), r),
                proptest::collection::vec(size(), r),
                proptest::collection::vec(0u8..3, r),
                proptest::collection::vec(any::<bool>(), r),
                any::<u64>(),
            )
        })
        .prop_flat_map(|(sizes, idx_sizes, patterns, picks, order)| {
            let r = sizes.len();
            let mut axes: Vec<usize> = (0..r).filter(|&d| picks[d]).collect();
            // A random order of the chosen axes.
            let mut s = order | 1;
            for i in (1..axes.len()).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                axes.swap(i, (s >> 33) as usize % (i + 1));
            }
            let mut input_shape = sizes.clone();
            let mut indices_shape = sizes.clone();
            for d in 0..r {
                if axes.contains(&d) {
                    indices_shape[d] = idx_sizes[d];
                } else {
                    match patterns[d] {
                        1 => input_shape[d] = 1,
                        2 => indices_shape[d] = 1,
                        _ => {}
                    }
                }
            }
            if let Some(last) = indices_shape.last_mut() {
                *last *= axes.len().max(1);
            }
            let count: usize = indices_shape.iter().product();
            let lens: Vec<usize> = axes.iter().map(|&a| input_shape[a]).collect();
            (
                Just((input_shape, indices_shape, axes, lens, count)),
                proptest::collection::vec(any::<u64>(), 1..4),
                proptest::option::weighted(0.1, any::<u64>()),
                any_layout(),
                any_layout(),
                any_layout(),
                0u8..4,
            )
        })
        .prop_map(
            |((input_shape, indices_shape, axes, lens, count), seeds, bad, il, xl, ol, elem)| Problem {
                values: index_values(&lens, count, &seeds, bad),
                input_shape,
                indices_shape,
                axes,
                input_layout: il,
                indices_layout: xl,
                out_layout: ol,
                elem,
            },
        )
}

/// Element values by flat position, of four kinds.
pub trait Elem: Clone + Send + Sync + PartialEq + std::fmt::Debug + 'static {
    fn of(i: usize) -> Self;
}
impl Elem for f32 {
    fn of(i: usize) -> Self {
        i as f32 + 0.5
    }
}
impl Elem for i64 {
    fn of(i: usize) -> Self {
        (i as i64).wrapping_mul(7).wrapping_sub(3)
    }
}
impl Elem for f64 {
    fn of(i: usize) -> Self {
        -(i as f64) - 0.25
    }
}
impl Elem for u8 {
    fn of(i: usize) -> Self {
        (i % 251) as u8
    }
}
impl Elem for bool {
    fn of(i: usize) -> Self {
        i % 3 == 1
    }
}
impl Elem for String {
    fn of(i: usize) -> Self {
        format!("s{i}")
    }
}

/// Index values converted to `I`; unsigned types see negatives as in-range positives
/// (or, for the extremes, as huge values).
pub fn convert<I: TryFrom<i64> + Copy + TryFrom<u64>>(v: i64, len: usize) -> I {
    match I::try_from(v) {
        Ok(i) => i,
        Err(_) => {
            let u = if v == i64::MIN {
                u64::MAX
            } else if len > 0 {
                v.rem_euclid(len as i64) as u64
            } else {
                0
            };
            I::try_from(u)
                .ok()
                .unwrap_or_else(|| I::try_from(0i64).ok().unwrap())
        }
    }
}

/// A deterministic generator (a 64-bit LCG), for tests that draw without proptest.
pub struct Lcg(pub u64);

impl Lcg {
    /// A value below `n` (0 for `n = 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}
