//! Reducers: duplicates combine in row-major order, ties and NaNs, broadcasting.

use ndarray::{Array, array};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::{Add, Max, Min, Mul, Replace};

#[test]
fn reducers_combine_duplicates_in_row_major_order() {
    let idx = array![1_i64, 1, 0, 1];
    let upd = array![2.0, -1.0, 5.0, 3.0];
    let run = |r: Reduction| {
        let mut a = array![1.0, 1.0];
        a.scatter(&idx, &upd, 0, r).unwrap();
        a
    };
    assert_eq!(run(Reduction::Replace), array![5.0, 3.0]); // the last one wins
    assert_eq!(run(Reduction::Add), array![6.0, 5.0]);
    assert_eq!(run(Reduction::Mul), array![5.0, -6.0]);
    assert_eq!(run(Reduction::Min), array![1.0, -1.0]);
    assert_eq!(run(Reduction::Max), array![5.0, 3.0]);
    for (s, r) in [
        ("none", Reduction::Replace),
        ("add", Reduction::Add),
        ("mul", Reduction::Mul),
        ("min", Reduction::Min),
        ("max", Reduction::Max),
    ] {
        assert_eq!(s.parse::<Reduction>(), Ok(r));
        assert_eq!(r.to_string(), s);
    }
    // API decision 25: torch's names too; "mean" is refused, saying why.
    for (s, r) in [
        ("sum", Reduction::Add),
        ("prod", Reduction::Mul),
        ("amin", Reduction::Min),
        ("amax", Reduction::Max),
    ] {
        assert_eq!(s.parse::<Reduction>(), Ok(r));
    }
    let unknown = "average".parse::<Reduction>().unwrap_err().to_string();
    assert!(
        unknown.contains("\"average\"") && unknown.contains("\"amax\""),
        "{unknown}"
    );
    let mean = "mean".parse::<Reduction>().unwrap_err().to_string();
    assert!(mean.contains("\"mean\"") && mean.contains("count"), "{mean}");
    // `?` converts the parse error (and ndarray's shape errors) into a GatherError.
    let parse = |s: &str| -> Result<Reduction, GatherError> { Ok(s.parse::<Reduction>()?) };
    assert!(matches!(parse("average"), Err(GatherError::ParseReduction { source }) if source.0 == "average"));
    let reshape = || -> Result<ndarray::Array2<f64>, GatherError> {
        Ok(array![1.0, 2.0, 3.0]
            .into_dyn()
            .into_dimensionality::<ndarray::Ix2>()?)
    };
    assert!(matches!(reshape(), Err(GatherError::Ndarray { .. })));
    assert!(reshape().unwrap_err().to_string().starts_with("ndarray: "));
    // Unit structs and closures agree with the run-time reductions.
    let mut a = array![1.0, 1.0];
    a.scatter(&idx, &upd, 0, Mul).unwrap();
    assert_eq!(a, run(Reduction::Mul));
    let mut a = array![1.0, 1.0];
    a.scatter(&idx, &upd, 0, |x: &mut f64, u: &f64| *x = *x * 10.0 + u)
        .unwrap();
    assert_eq!(a, array![15.0, ((10.0 + 2.0) * 10.0 - 1.0) * 10.0 + 3.0]);
}

#[test]
fn min_and_max_keep_ties_and_let_nan_win() {
    let mut a = array![0.0_f64, 1.0, 1.0];
    a.scatter(&array![0_i64, 1, 2], &array![-0.0, f64::NAN, 1.0], 0, Min)
        .unwrap();
    assert!(a[0].to_bits() == 0.0_f64.to_bits(), "a tie keeps the old value");
    assert!(a[1].is_nan());
    let mut a = array![-0.0_f64, 1.0];
    a.scatter(&array![0_i64, 1, 1], &array![0.0, f64::NAN, 7.0], 0, Max)
        .unwrap();
    assert!(a[0].to_bits() == (-0.0_f64).to_bits());
    assert!(a[1].is_nan(), "a NaN stays");
    let mut i = array![3, 3];
    i.scatter(&array![0_i64, 0, 1], &array![5, 2, 1], 0, Reduction::Min)
        .unwrap();
    assert_eq!(i, array![2, 1]);
}

#[test]
fn broadcast_self_and_broadcast_updates() {
    // self of size 1 on the second dimension, indices of 3: three updates per element.
    let mut a = array![[0.0], [0.0]];
    let idx = array![[1_i64, 0, 1]];
    a.scatter_multiaxis(&idx, &[0], &array![[1.0, 2.0, 4.0]], Add)
        .unwrap();
    assert_eq!(a, array![[2.0], [5.0]]);
    // A zero-stride scalar update: a histogram.
    let mut h = Array::<f64, _>::zeros(4);
    let ids = array![3_i64, 1, 3, 3, 0];
    let one = ndarray::arr0(1.0);
    h.scatter(&ids, &one.broadcast(5).unwrap(), 0, Add).unwrap();
    assert_eq!(h, array![1.0, 1.0, 0.0, 3.0]);
    // put_along_axis broadcasts its values (numpy).
    let mut m = array![[1, 2, 3], [4, 5, 6]];
    m.put_along_axis(&array![[0_i64], [2]], &ndarray::arr1(&[9]), 1)
        .unwrap();
    assert_eq!(m, array![[9, 2, 3], [4, 5, 9]]);
    // scatter_elements uses the leading block of larger updates (torch).
    let mut e = array![[0, 0, 0], [0, 0, 0]];
    e.scatter_elements(&array![[2_i64, 0]], &array![[1, 2, 3], [4, 5, 6]], 1, Replace)
        .unwrap();
    assert_eq!(e, array![[2, 0, 1], [0, 0, 0]]);
    // API decision 25: a scalar (0-d) update broadcasts in every scatter.
    let one = ndarray::arr0(1);
    let mut h = array![0, 0, 0];
    h.scatter(&array![2_i64, 0, 2, 2], &one, 0, Add).unwrap(); // np.add.at(h, idx, 1)
    assert_eq!(h, array![1, 0, 3]);
    let mut g = array![[0, 0], [0, 0]];
    g.scatter_elements(&array![[1_i64], [1]], &one, 1, Add).unwrap();
    g.scatter_nd(&array![[0_i64, 0]], &one, 0, Add).unwrap();
    g.scatter_multiaxis(&array![[1_i64], [0]], &[1], &one, Add)
        .unwrap();
    g.put_along_axis(&array![[0_i64], [0]], &ndarray::arr0(7), 1)
        .unwrap();
    assert_eq!(g, array![[7, 2], [7, 1]]);
    let e = g.scatter(&array![0_i64], &array![1, 2, 3], 0, Add).unwrap_err();
    assert!(matches!(e, GatherError::UpdatesShape { .. }), "{e}");
    assert_eq!(g, array![[7, 2], [7, 1]], "a refused scatter writes nothing");
}
