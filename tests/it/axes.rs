//! API decisions 12 and 22: every `axis` parameter takes ndarray's `Axis(n)`, an `isize`, an
//! `i32` literal (negative from the end), an `i64` (an ONNX attribute), or a `usize` / `u32`
//! (an axis the program computed), with the same result and the same errors.

use ndarray::{Array, Axis, array};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::Add;

#[test]
fn every_axis_parameter_takes_axis_isize_and_i32() {
    let x = Array::from_shape_fn((3, 4), |(i, j)| (10 * i + j) as f64);
    let ids = array![[2_i64, 0], [1, 3], [0, 0]];
    let col = array![3_i64, -1];
    let n = 1_usize;
    let (s, neg) = (1_isize, -1_isize);
    let i32_axis = 1_i32;

    // Gathers and their plans.
    let g = x.gather(&col, Axis(n)).unwrap();
    for (label, other) in [
        ("isize", x.gather(&col, s)),
        ("negative", x.gather(&col, neg)),
        ("i32", x.gather(&col, i32_axis)),
        ("literal", x.gather(&col, -1)),
        (
            "plan",
            // A plan of `gather` gives an ArrayD; `?` types it.
            GatherPlan::gather(x.shape(), &col, Axis(n))
                .and_then(|p| Ok(p.apply(&x)?.into_dimensionality()?)),
        ),
    ] {
        assert_eq!(other.unwrap(), g, "gather {label}");
    }
    let e = x
        .gather_elements(&ids.slice(ndarray::s![.., ..2]), Axis(n))
        .unwrap();
    assert_eq!(
        x.gather_elements(&ids.slice(ndarray::s![.., ..2]), -1).unwrap(),
        e
    );
    let plan = GatherPlan::gather_elements(x.shape(), &ids, Axis(1)).unwrap();
    assert_eq!(plan.apply(&x).unwrap(), x.gather_elements(&ids, 1_isize).unwrap());
    let b = x.gather_batched(&ids, Axis(1), 1).unwrap();
    assert_eq!(x.gather_batched(&ids, -1, 1).unwrap(), b);
    assert_eq!(
        GatherPlan::gather_batched(x.shape(), &ids, Axis(1), 1)
            .unwrap()
            .apply(&x)
            .unwrap(),
        b
    );
    let t = x.take_along_axis(&ids, Axis(1)).unwrap();
    assert_eq!(x.take_along_axis(&ids, -1).unwrap(), t);
    assert_eq!(
        GatherPlan::take_along_axis(x.shape(), &ids, Axis(1))
            .unwrap()
            .apply(&x)
            .unwrap(),
        t
    );
    // take: None flattens; Some(n), a bare Axis or a bare integer pick an axis.
    let m = IndexMode::Raise;
    let flat = x.take(&col, None, m).unwrap();
    assert_eq!(flat, array![3.0, 23.0].into_dyn());
    let along = x.take(&col, Some(-1), m).unwrap();
    assert_eq!(along, g.clone().into_dyn());
    assert_eq!(x.take(&col, Axis(1), m).unwrap(), g);
    assert_eq!(x.take(&col, 1, m).unwrap(), g);
    assert_eq!(x.take(&col, Some(s), m).unwrap(), g.clone().into_dyn());
    assert_eq!(
        GatherPlan::take(x.shape(), &col, Axis(1), m)
            .unwrap()
            .apply(&x)
            .unwrap(),
        g.clone().into_dyn()
    );
    assert_eq!(
        GatherPlan::take(x.shape(), &col, None, m)
            .unwrap()
            .apply(&x)
            .unwrap(),
        flat
    );

    // Scatters.
    let scattered = |f: &dyn Fn(&mut Array<f64, ndarray::Ix2>)| {
        let mut a = x.clone();
        f(&mut a);
        a
    };
    let u = Array::ones((3, 2));
    let by_axis = scattered(&|a| a.scatter(&col, &u, Axis(1), Add).unwrap());
    assert_eq!(scattered(&|a| a.scatter(&col, &u, -1, Add).unwrap()), by_axis);
    assert_ne!(by_axis, x);
    let uu = Array::ones((3, 2));
    let ids2 = ids.slice(ndarray::s![.., ..2]).to_owned();
    let by_axis = scattered(&|a| a.scatter_elements(&ids2, &uu, Axis(1), Add).unwrap());
    assert_eq!(
        scattered(&|a| a.scatter_elements(&ids2, &uu, 1, Add).unwrap()),
        by_axis
    );
    let by_axis = scattered(&|a| a.put_along_axis(&ids2, &ndarray::arr0(-1.0), Axis(1)).unwrap());
    assert_eq!(
        scattered(&|a| a.put_along_axis(&ids2, &ndarray::arr0(-1.0), -1).unwrap()),
        by_axis
    );
}

#[test]
fn an_axis_out_of_range_is_named_whichever_way_it_is_written() {
    let x = array![[1, 2], [3, 4]];
    let ids = array![0_i64];
    for (e, shown) in [
        (x.gather(&ids, Axis(2)).unwrap_err(), 2),
        (x.gather(&ids, 2).unwrap_err(), 2),
        (x.gather(&ids, -3).unwrap_err(), -3),
        (x.take(&ids, Axis(5), IndexMode::Raise).unwrap_err(), 5),
        (
            GatherPlan::take_along_axis([2, 2], &array![[0_i64]], Axis(7)).unwrap_err(),
            7,
        ),
        (
            x.clone()
                .scatter(&ids, &array![[1, 1]], Axis(3), Add)
                .unwrap_err(),
            3,
        ),
        (x.gather(&ids, Axis(usize::MAX)).unwrap_err(), isize::MAX),
    ] {
        assert!(
            matches!(e, GatherError::AxisOutOfBounds { axis, .. } if axis == shown),
            "{e:?} should name axis {shown}"
        );
    }
}

/// API decision 22: an axis the program computed (`usize`, `u32`) or an ONNX attribute
/// (`i64`) works in every method, with the same result and errors as `Axis(n)`.
#[test]
fn every_axis_parameter_takes_usize_u32_and_i64() {
    let x = Array::from_shape_fn((3, 4), |(i, j)| (10 * i + j) as f64);
    let ids = array![[2_i64, 0], [1, 3], [0, 0]];
    let col = array![3_i64, -1];
    let last: usize = x.ndim() - 1;
    let (u, onnx) = (1_u32, -1_i64);
    let g = x.gather(&col, Axis(1)).unwrap();
    assert_eq!(x.gather(&col, last).unwrap(), g);
    assert_eq!(x.gather(&col, u).unwrap(), g);
    assert_eq!(x.gather(&col, onnx).unwrap(), g);
    let e = x.gather_elements(&ids, Axis(1)).unwrap();
    assert_eq!(x.gather_elements(&ids, last).unwrap(), e);
    assert_eq!(
        x.take_along_axis(&ids, onnx).unwrap(),
        x.take_along_axis(&ids, u).unwrap()
    );
    assert_eq!(
        x.gather_batched(&ids, last, 1).unwrap(),
        x.gather_batched(&ids, Axis(1), 1).unwrap()
    );
    assert_eq!(x.take(&col, last, IndexMode::Raise).unwrap(), g);
    let plan = GatherPlan::gather(x.shape(), &col, onnx).unwrap();
    assert_eq!(plan.apply(&x).unwrap(), g.clone().into_dyn());
    let mut a = x.clone();
    a.scatter(&col, &Array::ones((3, 2)), last, Add).unwrap();
    let mut b = x.clone();
    b.scatter(&col, &Array::ones((3, 2)), Axis(1), Add).unwrap();
    assert_eq!(a, b);
    for (e, shown) in [
        (x.gather(&col, 2_usize).unwrap_err(), 2),
        (x.gather(&col, 9_u32).unwrap_err(), 9),
        (x.gather(&col, -3_i64).unwrap_err(), -3),
        (x.gather(&col, i64::MAX).unwrap_err(), isize::MAX),
    ] {
        assert!(
            matches!(e, GatherError::AxisOutOfBounds { axis, .. } if axis == shown),
            "{e:?} should name axis {shown}"
        );
    }
}
