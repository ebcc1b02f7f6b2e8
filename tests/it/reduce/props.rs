//! Every gather-reduce method and the plan against the naive reference, over random
//! shapes, axes, layouts, segments of every kind (valid and not), poolings, weights, skip
//! and fill, for five element types and three index types.

use ndarray::{ArrayD, IxDyn};
use ndarray_gather::prelude::*;
use proptest::prelude::*;

use crate::support::generate::config;
use crate::support::layouts::Held;
use crate::support::pooling::{Seg, Spec, Why, gather_reduce as naive, same_bits};
use crate::support::reduce_cases::{Case, Elem, case, conv};
use crate::with_segs;

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
    // A sum that could leave the element type's range (a `u8` segment of 130 positions)
    // overflows, which debug builds check, the reference's arithmetic and the kernel's
    // alike: such cases are not run for that type.
    let largest =
        |v: &mut dyn Iterator<Item = A>| v.map(|a| a.to_f64().unwrap_or(0.0).abs()).fold(1.0, f64::max);
    let positions = c.idx.len().max(c.x_shape.iter().copied().max().unwrap_or(0));
    let bound = largest(&mut x.iter().copied())
        * weights
            .as_ref()
            .map_or(1.0, |w| largest(&mut w.iter().copied()).powi(2))
        * positions as f64;
    if A::from_f64(bound).is_none() {
        return Ok(());
    }
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
