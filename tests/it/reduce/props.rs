//! Every gather-reduce method and the plan against the naive reference, over random
//! shapes, axes, layouts, segments of every kind (valid and not), poolings, weights, skip
//! and fill, for five element types and three index types.

use ndarray::{ArrayD, IxDyn};
use ndarray_gather::prelude::*;
use proptest::prelude::*;

use crate::support::generate::{config, size};
use crate::support::layouts::{Held, Layout, any_layout};
use crate::support::pooling::{Seg, Spec, Why, gather_reduce as naive, same_bits};

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
fn conv<I: TryFrom<i64>>(v: &[i64]) -> Option<Vec<I>> {
    v.iter().map(|&v| I::try_from(v).ok()).collect()
}

/// Evaluates `$body` with `$s` the case's segments over `$arr` (uniform segments are
/// `Segments<i64>` whatever the ids' type, so each kind is its own arm).
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

/// Runs `c` with elements `A`, indices `I` and segment ids `J` through every entry point
/// and compares each with the reference.
pub fn run<A: Elem, I: GatherIndex + TryFrom<i64>, J: GatherIndex + TryFrom<i64>>(
    c: &Case,
) -> Result<(), TestCaseError> {
    let Some(idx) = conv::<I>(&c.idx) else {
        return Ok(());
    };
    let seg_arrays: Option<Vec<J>> = match &c.seg {
        Seg::Indptr(v) | Seg::Starts(v) | Seg::Lengths(v) | Seg::Ids(v, _) => conv::<J>(v),
        Seg::Uniform(_) => Some(vec![]),
    };
    let Some(seg_arrays) = seg_arrays else {
        return Ok(());
    };
    let seeds = &c.seeds;
    let x = Held::new(&c.x_shape, c.x_layout, |i| {
        A::value(seeds[i % seeds.len()], c.pooling)
    });
    let x = x.view();
    let weights: Option<Vec<A>> = c
        .weights
        .as_ref()
        .map(|w| w.iter().map(|&v| A::small(v)).collect());
    let fill = c.fill.map(A::small);
    let spec = Spec {
        pooling: c.pooling,
        weights: weights.clone(),
        skip: c.skip,
        fill,
        arg: c.arg,
    };
    let idx_i64 = c
        .idx_shape
        .as_ref()
        .map(|s| ArrayD::from_shape_vec(IxDyn(s), c.idx.clone()).unwrap());
    let expected = naive(
        &x,
        idx_i64.as_ref().map(|a| a.view()).as_ref(),
        &c.seg,
        c.axis,
        &spec,
    );
    let pool = || {
        let mut p: Pool<'_, A> = c.pooling.into();
        if let Some(w) = &weights {
            p = p.weighted(w);
        }
        if let Some(s) = c.skip {
            p = p.skip(s);
        }
        if let Some(f) = fill {
            p = p.fill(f);
        }
        p
    };
    let idx_shape = c.idx_shape.clone().unwrap_or_default();
    let idx = idx_i64
        .as_ref()
        .map(|a| ArrayD::from_shape_vec(a.raw_dim(), idx.clone()).unwrap());
    let check = |got: Result<ArrayD<A>, GatherError>, what: &str| -> Result<(), TestCaseError> {
        match (&expected, got) {
            (Ok((e, _)), Ok(g)) => prop_assert!(same_bits(e, &g), "{what}: expected {e:?}, got {g:?}"),
            (Err(w), Err(g)) => prop_assert_eq!(w, &Why::of(&g, &idx_shape), "{}: {}", what, g),
            (e, g) => prop_assert!(false, "{what}: expected {e:?}, got {g:?}"),
        }
        Ok(())
    };
    let arr = &seg_arrays[..];
    if c.arg {
        let got = match &idx {
            Some(i) => with_segs!(c, arr, |s| x.gather_reduce_arg(i, s, c.axis, pool())),
            None => return Ok(()),
        };
        match (&expected, got) {
            (Ok((e, ea)), Ok((g, ga))) => {
                prop_assert!(same_bits(e, &g), "arg: expected {e:?}, got {g:?}");
                prop_assert_eq!(ea, &ga);
            }
            (Err(w), Err(g)) => prop_assert_eq!(w, &Why::of(&g, &idx_shape), "arg: {}", g),
            (e, g) => prop_assert!(false, "arg: expected {e:?}, got {g:?}"),
        }
        return Ok(());
    }
    let fresh = match &idx {
        Some(i) => with_segs!(c, arr, |s| x.gather_reduce(i, s, c.axis, pool())),
        None => with_segs!(c, arr, |s| x.segment_reduce(s, c.axis, pool())),
    };
    check(fresh, "fresh")?;
    // `_into` into every writable layout: the output, or `out` unchanged on Err.
    if let Ok((e, _)) = &expected {
        let sentinel = A::small(1);
        let mut held = Held::new(e.shape(), c.out_layout, |_| sentinel);
        let mut out = held.view_mut();
        let got = match &idx {
            Some(i) => with_segs!(c, arr, |s| x.gather_reduce_into(i, s, c.axis, pool(), &mut out)),
            None => with_segs!(c, arr, |s| x.segment_reduce_into(s, c.axis, pool(), &mut out)),
        };
        check(got.map(|()| out.to_owned()), "into")?;
    } else {
        let mut out = ArrayD::from_elem(IxDyn(x.shape()), A::small(1));
        let before = out.clone();
        let got = match &idx {
            Some(i) => with_segs!(c, arr, |s| x.gather_reduce_into(i, s, c.axis, pool(), &mut out)),
            None => with_segs!(c, arr, |s| x.segment_reduce_into(s, c.axis, pool(), &mut out)),
        };
        // The reference's error (every check comes before `out`'s shape), and nothing written.
        check(got.map(|()| out.clone()), "into")?;
        prop_assert!(same_bits(&before, &out), "into wrote on Err");
    }
    // The plan: made from the indices (and skip), applied with the pool.
    if let Some(i) = &idx {
        let plan = match c.skip {
            Some(k) => with_segs!(c, arr, |s| GatherReducePlan::new_skipping(
                x.shape(),
                i,
                k,
                s,
                c.axis
            )),
            None => with_segs!(c, arr, |s| GatherReducePlan::new(x.shape(), i, s, c.axis)),
        };
        // A plan knows no pool when it is made: its own errors (axis, segments, indices)
        // come first, then the pool's when it is applied.
        let plain = Spec {
            pooling: Pooling::Sum,
            weights: None,
            skip: c.skip,
            fill: None,
            arg: false,
        };
        match (
            naive(
                &x,
                idx_i64.as_ref().map(|a| a.view()).as_ref(),
                &c.seg,
                c.axis,
                &plain,
            ),
            plan,
        ) {
            (Err(w), Err(g)) => prop_assert_eq!(w, Why::of(&g, &idx_shape), "plan: {}", g),
            (Ok(_), Ok(p)) => check(p.apply(&x, pool()), "plan")?,
            (e, g) => prop_assert!(false, "plan: expected {e:?}, got {g:?}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn gather_reduce_matches_reference_f64(c in case()) { run::<f64, i64, i64>(&c)?; }
    #[test]
    fn gather_reduce_matches_reference_f32(c in case()) { run::<f32, i64, i64>(&c)?; }
    #[test]
    fn gather_reduce_matches_reference_i32(c in case()) { run::<i32, i64, i64>(&c)?; }
    #[test]
    fn gather_reduce_matches_reference_i64(c in case()) { run::<i64, i64, i64>(&c)?; }
    #[test]
    fn gather_reduce_matches_reference_u8(c in case()) { run::<u8, i64, i64>(&c)?; }
    #[test]
    fn gather_reduce_matches_reference_other_index_types(c in case()) {
        // (One combination: each instantiates every walk again, and the build is CI's
        // longest step; the index types share `GatherIndex`'s one conversion.)
        run::<f64, i32, u32>(&c)?;
    }
}
