//! Differential property tests: every call against the naive reference, over random
//! shapes, axes, broadcast patterns, layouts, index types and element types.

use ndarray::{ArrayD, IxDyn};
use ndarray_gather::prelude::*;
use proptest::prelude::*;

use crate::support::generate::{Elem, Problem, config, problem};
use crate::support::layouts::{ALL, Held, Layout};
use crate::support::reference::{self, Fail};

fn run_multiaxis<A: Elem, I>(p: &Problem) -> Result<(), TestCaseError>
where
    I: GatherIndex + TryFrom<i64> + TryFrom<u64> + TryInto<i128>,
{
    let input = Held::new(&p.input_shape, p.input_layout, A::of);
    let indices = p.indices::<I>();
    // Broadcast layouts repeat some values: take the indices as the view shows them.
    let (iv, xv) = (input.view(), indices.view());
    let expected = reference::multiaxis(&iv, &xv, &p.axes);
    let got = iv.gather_multiaxis(&xv, &p.axes);
    match (&expected, &got) {
        (Ok(e), Ok(g)) => prop_assert_eq!(e, g),
        (Err(e), Err(g)) if Fail::of(g) == *e => {}
        _ => prop_assert!(false, "reference {:?} but gather_multiaxis {:?}", expected, got),
    }
    let plan = GatherPlan::multiaxis(&p.input_shape[..], &xv, &p.axes);
    crate::support::plans::agrees(plan, &iv, &got).map_err(TestCaseError::fail)?;
    // The same into a pre-filled `out` in another layout.
    if let Ok(e) = &expected {
        let out_shape = e.shape().to_vec();
        let mut storage = Held::new(&out_shape, non_broadcast(p.out_layout), |_| A::of(usize::MAX / 2));
        let mut out = storage.view_mut();
        iv.gather_multiaxis_into(&xv, &p.axes, &mut out)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&out.to_owned(), e);
        // A wrong-shaped `out` is refused.
        let mut wrong = ArrayD::from_elem(IxDyn(&[out_shape.iter().product::<usize>() + 1]), A::of(1));
        let r = iv.gather_multiaxis_into(&xv, &p.axes, &mut wrong);
        prop_assert!(matches!(r, Err(GatherError::OutputShape { .. })), "{:?}", r);
        prop_assert!(wrong.iter().all(|x| *x == A::of(1)));
    }
    Ok(())
}

fn non_broadcast(l: Layout) -> Layout {
    match l {
        Layout::Broadcast(_) => Layout::F,
        l => l,
    }
}

/// Runs `p` with index type `I` and one of two element types, by the problem's `elem`.
/// (Ten of the twelve pairs of element and index type that `wrappers.rs` runs: every
/// element type and every index type, without instantiating the kernels for their full
/// product.)
fn run_pair<A: Elem, B: Elem, I>(p: &Problem) -> Result<(), TestCaseError>
where
    I: GatherIndex + TryFrom<i64> + TryFrom<u64> + TryInto<i128>,
{
    if p.elem.is_multiple_of(2) {
        run_multiaxis::<A, I>(p)
    } else {
        run_multiaxis::<B, I>(p)
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn multiaxis_matches_reference_i64(p in problem()) { run_pair::<f32, bool, i64>(&p)?; }
    #[test]
    fn multiaxis_matches_reference_i32(p in problem()) { run_pair::<f32, String, i32>(&p)?; }
    #[test]
    fn multiaxis_matches_reference_isize(p in problem()) { run_pair::<f64, f64, isize>(&p)?; }
    #[test]
    fn multiaxis_matches_reference_u32(p in problem()) { run_pair::<i64, bool, u32>(&p)?; }
    #[test]
    fn multiaxis_matches_reference_u64(p in problem()) { run_pair::<f64, f64, u64>(&p)?; }
    #[test]
    fn multiaxis_matches_reference_usize(p in problem()) { run_pair::<u8, String, usize>(&p)?; }
}

/// The layouts the properties run over: each shows the same logical array.
#[test]
fn layouts_show_the_same_logical_array() {
    let shape = [2, 3, 1, 4];
    let c = Held::new(&shape, Layout::C, |i| i);
    for layout in ALL {
        let h = Held::new(&shape, layout, |i| i);
        let v = h.view();
        assert_eq!(v.shape(), &shape);
        if let Layout::Broadcast(_) = layout {
            assert!(v.strides().contains(&0), "{layout:?} {:?}", v.strides());
        } else {
            assert_eq!(v, c.view(), "{layout:?}");
        }
    }
    let f = Held::new(&shape, Layout::F, |i| i);
    assert!(f.view().t().is_standard_layout());
    assert!(
        Held::new(&shape, Layout::Reversed, |i| i)
            .view()
            .strides()
            .iter()
            .any(|&s| s < 0)
    );
}

/// The inputs every property test draws: in each layout, the element at a logical
/// position holds `f` of that position's row-major index (of its source position, for a
/// broadcast), and the memory is laid out as the layout says.
#[test]
fn held_arrays_show_each_value_at_its_position() {
    for shape in [&[3, 4, 2][..], &[1, 5], &[2, 1, 3], &[0, 3], &[]] {
        let n: usize = shape.iter().product();
        for layout in ALL
            .into_iter()
            .chain([Layout::Permuted(3), Layout::Broadcast(0b110)])
        {
            // (An empty array's values are never asked for.)
            let held = Held::new(shape, layout, |k| if n == 0 { unreachable!() } else { k });
            let v = held.view();
            assert_eq!(v.shape(), shape, "{layout:?}");
            let Layout::Broadcast(mask) = layout else {
                assert_eq!(
                    v.iter().copied().collect::<Vec<_>>(),
                    (0..n).collect::<Vec<_>>(),
                    "{layout:?}"
                );
                let big = |d: usize| shape[d] > 1;
                let strides = v.strides();
                let ok = match layout {
                    Layout::C => v.is_standard_layout(),
                    Layout::F => v.t().is_standard_layout(),
                    Layout::Reversed => (0..shape.len()).all(|d| !big(d) || strides[d] < 0),
                    Layout::Stepped => (0..shape.len()).all(|d| !big(d) || strides[d] % 2 == 0),
                    _ => true,
                };
                assert!(ok || n == 0, "{layout:?}: strides {strides:?}");
                continue;
            };
            let unit = |d: usize| mask >> d & 1 == 1 && shape[d] > 1;
            let strides = v.strides();
            assert!(
                (0..shape.len()).all(|d| !unit(d) || strides[d] == 0),
                "{layout:?}: strides {strides:?}"
            );
            for (c, &x) in v.indexed_iter() {
                let source = (0..shape.len()).fold(0, |k, d| {
                    let len = if unit(d) { 1 } else { shape[d] };
                    k * len + if unit(d) { 0 } else { c[d] }
                });
                assert_eq!(x, source, "{layout:?} at {c:?}");
            }
        }
    }
}
