//! Random gather-reduce calls for the property tests (the methods', the plan's and its
//! backward's): shapes, axes, layouts, segments of every kind (valid or not), poolings,
//! weights, skip and fill; the element types and how values are made of seeds.

use ndarray_gather::prelude::*;
use proptest::prelude::*;

use super::generate::size;
use super::layouts::{Layout, any_layout};
use super::pooling::Seg;

/// A random gather-reduce call, element values as small integers (or special floats).
#[derive(Debug, Clone)]
pub struct Case {
    pub x_shape: Vec<usize>,
    pub axis: isize,
    /// `None`: `segment_reduce`.
    pub idx_shape: Option<Vec<usize>>,
    pub idx: Vec<i64>,
    pub seg: Seg,
    pub pooling: Pooling,
    pub weights: Option<Vec<u8>>,
    pub skip: Option<i64>,
    pub fill: Option<u8>,
    pub arg: bool,
    pub x_layout: Layout,
    pub out_layout: Layout,
    pub seeds: Vec<u8>,
}

fn pooling() -> impl Strategy<Value = Pooling> {
    prop_oneof![
        Just(Pooling::Sum),
        Just(Pooling::Mean),
        Just(Pooling::Max),
        Just(Pooling::Min),
        Just(Pooling::Prod),
        Just(Pooling::SqrtN)
    ]
}

/// Segments for `p` positions from `r` (random words): valid unless `spoil`.
fn segments(p: usize, kind: u8, r: &[u64], spoil: Option<u64>) -> Seg {
    let n = (r[0] % 4) as usize + usize::from(p > 0 && kind == 4);
    let mut cuts: Vec<i64> = (0..n.saturating_sub(1))
        .map(|i| (r[1 + i % 7] % (p as u64 + 1)) as i64)
        .collect();
    cuts.sort();
    let mut seg = match kind {
        0 => Seg::Indptr([vec![0], cuts.clone(), vec![p as i64]].concat()),
        1 => Seg::Starts(if n == 0 && p > 0 {
            vec![0]
        } else {
            [if n > 0 { vec![0] } else { vec![] }, cuts].concat()
        }),
        2 => {
            let o = [vec![0], cuts, vec![p as i64]].concat();
            Seg::Lengths(o.windows(2).map(|w| w[1] - w[0]).collect())
        }
        3 => {
            let divs: Vec<usize> = (1..=p.max(1)).filter(|&d| p.is_multiple_of(d)).collect();
            Seg::Uniform(divs[r[2] as usize % divs.len()])
        }
        _ => Seg::Ids(
            (0..p)
                .map(|i| (r[(i % 7) + 1] >> (i % 5)) as i64 % n.max(1) as i64)
                .collect(),
            n.max(1),
        ),
    };
    if let Some(s) = spoil {
        let bump = |v: &mut Vec<i64>| {
            if !v.is_empty() {
                let i = s as usize % v.len();
                v[i] += if s & 1 == 1 { 1 } else { -1 - (p as i64) };
            }
        };
        match &mut seg {
            Seg::Indptr(v) | Seg::Starts(v) | Seg::Lengths(v) => bump(v),
            Seg::Uniform(l) => *l = if s & 1 == 1 { 0 } else { *l + 1 },
            Seg::Ids(v, n) => {
                if s & 2 == 2 {
                    *n = n.saturating_sub(1)
                } else {
                    bump(v)
                }
            }
        }
    }
    seg
}

/// A dimension, now and then as wide as the kernel's register blocks (64 columns, then 32
/// and 16) or wider: 48, 64, 65 and 130 columns.
fn wide() -> impl Strategy<Value = usize> {
    prop_oneof![15 => size(), 1 => prop_oneof![Just(48usize), Just(64), Just(65), Just(130)]]
}

pub fn case() -> impl Strategy<Value = Case> {
    (1usize..=3, (size(), wide(), size()).prop_map(|(a, b, c)| vec![a, b, c]), -4isize..4, proptest::option::of(proptest::collection::vec(1usize..=3, 0..=2)))
        .prop_flat_map(|(r, dims, axis, idx_shape)| {
            let x_shape = dims[..r].to_vec();
            let a = axis.rem_euclid(r as isize) as usize;
            let len = x_shape[a] as i64;
            let n_idx: usize = idx_shape.as_ref().map_or(x_shape[a], |s| s.iter().product());
            (
                Just(x_shape),
                prop_oneof![9 => Just(axis.rem_euclid(r as isize) - if axis < 0 { r as isize } else { 0 }), 1 => Just(axis + 4)],
                Just(idx_shape),
                proptest::collection::vec(prop_oneof![12 => -len..len.max(1), 1 => Just(len), 1 => Just(-len - 1)], n_idx),
                (0u8..5, proptest::collection::vec(any::<u64>(), 8), proptest::option::weighted(0.1, any::<u64>())),
                (pooling(), proptest::option::weighted(0.3, prop_oneof![10 => proptest::collection::vec(0u8..3, n_idx), 1 => proptest::collection::vec(0u8..3, n_idx + 1)])),
                (proptest::option::weighted(0.25, -1i64..3), proptest::option::weighted(0.3, 0u8..3), proptest::bool::weighted(0.25)),
                (any_layout(), any_layout().prop_filter("writable", |l| !matches!(l, Layout::Broadcast(_)))),
                proptest::collection::vec(0u8..8, 1..=24),
            )
        })
        .prop_map(|(x_shape, axis, idx_shape, idx, (kind, r, spoil), (pooling, weights), (skip, fill, arg), (x_layout, out_layout), seeds)| {
            let skip = if idx_shape.is_none() { skip.filter(|_| seeds[0] == 0) } else { skip };
            Case {
                seg: segments(idx.len(), kind, &r, spoil),
                x_shape,
                axis,
                idx_shape,
                idx,
                pooling,
                weights,
                skip,
                fill,
                arg,
                x_layout,
                out_layout,
                seeds,
            }
        })
}

/// The element types of the test: how a seed (0..8) and a small weight become values.
pub trait Elem: PoolElement + Copy + std::fmt::Debug + 'static {
    fn value(seed: u8, pooling: Pooling) -> Self;
    fn small(v: u8) -> Self;
}

macro_rules! float_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn value(seed: u8, _: Pooling) -> Self {
                [-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, <$t>::NAN][seed as usize]
            }
            fn small(v: u8) -> Self {
                [0.5, -1.0, 2.0][v as usize % 3]
            }
        }
    )*};
}
float_elem!(f32, f64);

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn value(seed: u8, pooling: Pooling) -> Self {
                // Products of up to 9 positions stay in range (no overflow: debug builds panic).
                if pooling == Pooling::Prod { (seed % 2) as $t } else { (seed % 3) as $t }
            }
            fn small(v: u8) -> Self {
                v as $t
            }
        }
    )*};
}
int_elem!(i32, i64, u8);

/// Converts an index value to `I` where it fits (else the case is not run for `I`).
pub fn conv<I: TryFrom<i64>>(v: &[i64]) -> Option<Vec<I>> {
    v.iter().map(|&v| I::try_from(v).ok()).collect()
}

/// Evaluates `$body` with `$s` the case's segments over `$arr` (uniform segments are
/// `Segments<i64>` whatever the ids' type, so each kind is its own arm).
#[macro_export]
macro_rules! with_segs {
    ($c:expr, $arr:expr, |$s:ident| $body:expr) => {
        match &$c.seg {
            Seg::Indptr(_) => {
                let $s = Segments::indptr($arr);
                $body
            }
            Seg::Starts(_) => {
                let $s = Segments::starts($arr);
                $body
            }
            Seg::Lengths(_) => {
                let $s = Segments::lengths($arr);
                $body
            }
            Seg::Uniform(l) => {
                let $s = Segments::uniform(*l);
                $body
            }
            Seg::Ids(_, n) => {
                let $s = Segments::ids($arr, *n);
                $body
            }
        }
    };
}
