//! Every error leaves `self` unchanged; an empty scatter reads no index.

use ndarray::{Array, array};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::{Add, Mul, Replace};

type Call = Box<dyn Fn(&mut ndarray::Array2<f64>) -> Result<(), GatherError>>;

/// Every error leaves `self` bit for bit unchanged, and names the scatter.
#[test]
fn every_error_leaves_self_unchanged() {
    let sentinel = Array::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f64 + 0.5);
    let mut last_bad = Array::from_shape_fn((3, 4), |(i, j)| ((i + j) % 3) as i64);
    last_bad[[2, 3]] = 3;
    let cases: Vec<(&str, Call)> = vec![
        (
            "scatter: axis",
            Box::new(|a| a.scatter(&array![0_i64], &array![[1.0, 1.0, 1.0, 1.0]], 2, Add)),
        ),
        (
            "scatter: index",
            Box::new(|a| a.scatter(&array![0_i64, 3], &Array::zeros((2, 4)), 0, Add)),
        ),
        (
            "scatter: updates",
            Box::new(|a| a.scatter(&array![0_i64, 1], &Array::zeros((2, 3)), 0, Add)),
        ),
        (
            "scatter_elements: last index",
            Box::new(move |a| a.scatter_elements(&last_bad, &Array::ones((3, 4)), 0, Add)),
        ),
        (
            "scatter_elements: small updates",
            Box::new(|a| a.scatter_elements(&array![[0_i64, 1]], &array![[1.0]], 1, Add)),
        ),
        (
            "scatter_elements: rank",
            Box::new(|a| a.scatter_elements(&array![0_i64], &array![1.0], 1, Add)),
        ),
        (
            "scatter_nd: batch",
            Box::new(|a| a.scatter_nd(&array![[0_i64, 1, 2]], &array![1.0], 0, Replace)),
        ),
        (
            "scatter_nd: index",
            Box::new(|a| a.scatter_nd(&array![[0_i64, 1], [2, -5]], &array![1.0, 2.0], 0, Replace)),
        ),
        (
            "scatter_multiaxis: fold",
            Box::new(|a| a.scatter_multiaxis(&array![[0_i64, 1, 2]], &[0, 1], &array![[1.0]], Add)),
        ),
        (
            "scatter_multiaxis: broadcast",
            Box::new(|a| {
                a.scatter_multiaxis(
                    &Array::zeros((2, 2)).mapv(|v: f64| v as i64),
                    &[0],
                    &Array::zeros((2, 2)),
                    Add,
                )
            }),
        ),
        // More updates than elements: these check their indices while scattering into a
        // copy of self (one pass), which is dropped at the bad one.
        (
            "scatter: many rows, last index",
            Box::new(|a| {
                let ids = Array::from_shape_fn(10, |i| if i == 9 { 3 } else { (i % 3) as i64 });
                a.scatter(&ids, &Array::ones((10, 4)), 0, Add)
            }),
        ),
        (
            "scatter_elements: many, last index",
            Box::new(|a| {
                let ids =
                    Array::from_shape_fn((3, 8), |(i, j)| if (i, j) == (2, 7) { 4 } else { j as i64 % 4 });
                a.scatter_elements(&ids, &Array::ones((3, 8)), 1, Add)
            }),
        ),
        (
            "scatter_nd: many, last index",
            Box::new(|a| {
                let ids =
                    Array::from_shape_fn((20, 2), |(i, k)| if i == 19 { 9 } else { ((i + k) % 3) as i64 });
                a.scatter_nd(&ids, &Array::ones(20), 0, Mul)
            }),
        ),
        (
            "put_along_axis: values",
            Box::new(|a| a.put_along_axis(&array![[0_i64], [1], [2]], &array![1.0, 2.0], 1)),
        ),
        (
            "put_along_axis: index",
            Box::new(|a| a.put_along_axis(&array![[0_i64], [1], [4]], &ndarray::arr0(1.0), 1)),
        ),
    ];
    for (name, call) in &cases {
        let mut a = sentinel.clone();
        let e = call(&mut a).expect_err(name);
        let method = name.split(':').next().unwrap();
        assert!(e.to_string().starts_with(&format!("{method}: ")), "{name}: {e}");
        assert_eq!(
            a.mapv(f64::to_bits),
            sentinel.mapv(f64::to_bits),
            "{name} changed self"
        );
        match *name {
            n if n.ends_with("index") => {
                assert!(matches!(e, GatherError::IndexOutOfBounds { .. }), "{n}: {e:?}")
            }
            n if n.contains("updates") || n.contains("values") => {
                assert!(matches!(e, GatherError::UpdatesShape { .. }), "{n}: {e:?}")
            }
            _ => {}
        }
    }
    let e = cases[3].1(&mut sentinel.clone()).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 3, ref position, axis: 0, axis_len: 3, .. } if position == &vec![2, 3]),
        "{e:?}"
    );
}

#[test]
fn empty_scatters_read_no_index() {
    let mut a = array![[1.0, 2.0]];
    // A zero-size update set: no index is read, so an out-of-range one is fine (as for
    // the gathers).
    a.scatter(
        &Array::<i64, _>::from_elem((0, 3), 99),
        &Array::zeros((0, 3, 2)),
        0,
        Add,
    )
    .unwrap();
    assert_eq!(a, array![[1.0, 2.0]]);
}
