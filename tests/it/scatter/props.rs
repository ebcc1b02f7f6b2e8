//! Scatter against a naive reference that applies the updates one at a time, in row-major
//! order, at the positions the matching gather's naive reference reads: the references
//! gather an array of *addresses* (each element its own row-major position), which says
//! where every update goes without using the crate.

use approx::assert_relative_eq;
use ndarray::{Array, ArrayD, ArrayViewD, IxDyn, array};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::{Add, Replace};
use proptest::prelude::*;

use crate::support::cases::{Case, Op, case};
use crate::support::generate::{Problem, config, convert, problem};
use crate::support::layouts::{Held, Layout};
use crate::support::reference::{self, Fail, Mode};

/// `base` (row-major) with `updates[o]` combined into `base[addr[o]]` one at a time.
fn apply<A: Clone>(
    base: &[A],
    addr: &ArrayD<usize>,
    updates: &ArrayViewD<A>,
    f: impl Fn(&mut A, &A),
) -> Vec<A> {
    let mut out = base.to_vec();
    assert_eq!(addr.shape(), updates.shape());
    for (a, u) in addr.iter().zip(updates.iter()) {
        f(&mut out[*a], u);
    }
    out
}

/// Where the matching gather of `c` reads, by the naive references, for a `self` of
/// `c.input_shape`.
fn addresses(c: &Case, xv: &ArrayViewD<i64>) -> Option<Result<ArrayD<usize>, Fail>> {
    let n: usize = c.input_shape.iter().product();
    let addr = ArrayD::from_shape_vec(IxDyn(&c.input_shape), (0..n).collect()).unwrap();
    let av = addr.view();
    Some(match c.op {
        Op::Gather => reference::gather(&av, xv, c.axis, Mode::Raise),
        Op::Elements => reference::elements(&av, xv, c.axis),
        Op::AlongAxis => reference::along_axis(&av, xv, c.axis),
        Op::Nd => reference::nd(&av, xv, c.batch_dims),
        _ => return None,
    })
}

/// One scatter case: `f64` elements, an order-sensitive `Add` (values with many
/// significant bits) or `Replace`; any layout of self, indices and updates.
fn check_case(c: &Case, add: bool, upd_layout: Layout) -> Result<(), TestCaseError> {
    let len = c.input_shape.iter().product::<usize>().max(1);
    let values: Vec<i64> = c.values.iter().map(|&v| convert(v, len.min(4))).collect();
    let indices = Held::new(&c.indices_shape, c.indices_layout, |i| values[i]);
    let xv = indices.view();
    let Some(expected_addr) = addresses(c, &xv) else {
        return Ok(());
    };
    let start = |i: usize| 1.0 + i as f64 / 3.0;
    let self_layout = match c.input_layout {
        Layout::Broadcast(_) => Layout::C,
        l => l,
    };
    let mut held = Held::new(&c.input_shape, self_layout, start);
    let mut dst = held.view_mut();
    let base: Vec<f64> = dst.iter().copied().collect();
    // Updates of the gather's output shape (or, on error, of some shape).
    // (for an index error, that of in-range indices; shape errors come first anyway)
    let zeros = ndarray::ArrayD::<i64>::zeros(IxDyn(&c.indices_shape));
    let out_shape = match (&expected_addr, addresses(c, &zeros.view())) {
        (Ok(a), _) => a.shape().to_vec(),
        (Err(_), Some(Ok(a))) => a.shape().to_vec(),
        _ => c.indices_shape.clone(),
    };
    let upd = Held::new(&out_shape, upd_layout, |i| {
        0.1 + i as f64 * 1.0e-3 + (i % 7) as f64 / 7.0
    });
    let uv = upd.view();
    let got = match (c.op, add) {
        (Op::Gather, true) => dst.scatter(&xv, &uv, c.axis, Add),
        (Op::Gather, false) => dst.scatter(&xv, &uv, c.axis, Replace),
        (Op::Elements, true) => dst.scatter_elements(&xv, &uv, c.axis, Add),
        (Op::Elements, false) => dst.scatter_elements(&xv, &uv, c.axis, Replace),
        (Op::AlongAxis, true) => {
            // take_along_axis is gather_multiaxis with axes [axis], counted from the end
            // when negative; an axis out of range stays out of range.
            let r = c.input_shape.len() as isize;
            let axis = if (-r..r).contains(&c.axis) {
                c.axis.rem_euclid(r)
            } else {
                r + 5
            };
            dst.scatter_multiaxis(&xv, &[axis as usize], &uv, Add)
        }
        (Op::AlongAxis, false) => dst.put_along_axis(&xv, &uv, c.axis),
        (Op::Nd, true) => dst.scatter_nd(&xv, &uv, c.batch_dims, Add),
        (Op::Nd, false) => dst.scatter_nd(&xv, &uv, c.batch_dims, Replace),
        _ => unreachable!(),
    };
    let after: Vec<u64> = dst.iter().map(|v| v.to_bits()).collect();
    match (&expected_addr, got) {
        (Ok(addr), Ok(())) => {
            let want = if add {
                apply(&base, addr, &uv, |x, u| *x += u)
            } else {
                apply(&base, addr, &uv, |x, u| *x = *u)
            };
            let want: Vec<u64> = want.iter().map(|v| v.to_bits()).collect();
            prop_assert_eq!(after, want, "{:?}", c);
        }
        (Err(e), Err(g)) => {
            // An axis-multiaxis call reports an out-of-range axis as the gather does.
            prop_assert_eq!(Fail::of(&g), *e, "{:?}: {}", c, g);
            prop_assert!(g.to_string().starts_with("scatter") || g.to_string().starts_with("put_along_axis"));
            let unchanged: Vec<u64> = base.iter().map(|v| v.to_bits()).collect();
            prop_assert_eq!(after, unchanged, "self changed on an error");
        }
        (e, g) => prop_assert!(false, "{:?}: reference {:?}, scatter {:?}", c, e, g),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// Every scatter against the one-at-a-time reference, bit for bit.
    #[test]
    fn every_scatter_matches_the_one_at_a_time_reference(
        c in case().prop_filter("a scatter exists", |c| matches!(c.op, Op::Gather | Op::Elements | Op::AlongAxis | Op::Nd)),
        add in any::<bool>(),
        upd_layout in crate::support::layouts::any_layout(),
    ) {
        check_case(&c, add, upd_layout)?;
    }

    /// `<gather(x), u> == <x, scatter_add(0, u)>`: scatter with `Add` is the adjoint of
    /// `gather_multiaxis`, for random shapes, axes and layouts.
    #[test]
    fn scatter_add_is_the_adjoint_of_gather(p in problem()) {
        adjoint(&p)?;
    }
}

fn adjoint(p: &Problem) -> Result<(), TestCaseError> {
    let indices = p.indices::<i64>();
    let x = Held::new(&p.input_shape, p.input_layout, |i| ((i * 7919) % 13) as f64 - 6.5);
    let Ok(gx) = x.view().gather_multiaxis(&indices.view(), &p.axes) else {
        return Ok(());
    };
    let u = Held::new(gx.shape(), p.out_layout, |i| {
        ((i * 104_729) % 11) as f64 * 0.25 - 1.0
    });
    let mut s = Held::new(&p.input_shape, Layout::Reversed, |_| 0.0);
    s.view_mut()
        .scatter_multiaxis(&indices.view(), &p.axes, &u.view(), Add)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let lhs: f64 = gx.iter().zip(u.view().iter()).map(|(a, b)| a * b).sum();
    let rhs: f64 = x.view().iter().zip(s.view().iter()).map(|(a, b)| a * b).sum();
    assert_relative_eq!(lhs, rhs, epsilon = 1e-9, max_relative = 1e-12);
    Ok(())
}

#[test]
fn scatter_after_gather_with_replace_restores_the_gathered_positions() {
    // The seed's worked example, run backwards: gather, then scatter the result into a
    // blank array; where indices repeat a position, both wrote the same value.
    let input = Array::from_shape_vec((4, 2, 1, 2), (0..16).map(|v| v as f64).collect()).unwrap();
    let idx = array![[[[0_i64, 1], [1, 0]], [[1, 1], [0, 0]], [[0, 0], [1, 1]]]];
    let g = input.gather_multiaxis(&idx, &[1]).unwrap();
    let mut back = Array::from_elem(input.raw_dim(), -1.0);
    back.scatter_multiaxis(&idx, &[1], &g, Replace).unwrap();
    for ((pos, &b), &a) in back.indexed_iter().zip(input.iter()) {
        assert!(b == -1.0 || b == a, "{pos:?}: {b} vs {a}");
    }
    assert!(back.iter().filter(|&&b| b != -1.0).count() >= 12);
}
