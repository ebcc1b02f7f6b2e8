//! Every method works on every kind of array: through a method call on an `ArrayBase`
//! (which derefs to ndarray's `ArrayRef`), in a function generic over the storage, and
//! through a `T: GatherExt` / `T: ScatterExt` bound.

use ndarray::{ArcArray2, Array2, ArrayBase, ArrayD, Data, DataMut, Ix2, array};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::Add;

/// Every gather method of a `[3, 2]` array, from a function generic over the storage.
fn every_gather<S: Data<Elem = i32>>(a: &ArrayBase<S, Ix2>) -> Vec<ArrayD<i32>> {
    let rows = array![2_i64, 0];
    let mut into = Array2::zeros((2, 2));
    a.gather_multiaxis_into(&array![[2_i64], [0]], &[0], &mut into)
        .unwrap();
    vec![
        a.gather_multiaxis(&array![[2_i64], [0]], &[0])
            .unwrap()
            .into_dyn(),
        into.into_dyn(),
        a.gather(&rows, 0).unwrap().into_dyn(),
        a.gather_elements(&array![[1_i64, 0]], 1).unwrap().into_dyn(),
        a.gather_nd(&array![[2_i64, 1]], 0).unwrap(),
        a.gather_batched(&array![[1_i64], [0], [1]], 1, 1).unwrap(),
        a.take(&rows, None, IndexMode::Raise).unwrap(),
        a.take_along_axis(&array![[1_i64], [0], [1]], 1)
            .unwrap()
            .into_dyn(),
    ]
}

/// The same through a trait bound.
fn through_bound<T: GatherExt<i32, Ix2> + ?Sized>(a: &T) -> Array2<i32> {
    a.gather(&array![2_i64, 0], 0).unwrap()
}

/// Every scatter method into a `[3, 2]` array, from a function generic over the storage.
fn every_scatter<S: DataMut<Elem = i32>>(a: &mut ArrayBase<S, Ix2>) {
    a.scatter_multiaxis(&array![[2_i64], [0]], &[0], &array![[1, 1], [1, 1]], Add)
        .unwrap();
    a.scatter(&array![1_i64], &array![[10, 10]], 0, Add).unwrap();
    a.scatter_elements(&array![[1_i64]], &array![[100]], 1, Add)
        .unwrap();
    a.scatter_nd(&array![[2_i64, 1]], &array![1000], 0, Add).unwrap();
    a.put_along_axis(&array![[0_i64], [0], [0]], &array![[7], [8], [9]], 1)
        .unwrap();
}

fn scatter_through_bound<T: ScatterExt<i32, Ix2> + ?Sized>(a: &mut T) {
    a.scatter(&array![0_i64], &array![[5, 5]], 0, Add).unwrap();
}

#[test]
fn every_method_works_on_every_kind_of_array() {
    let owned = array![[0, 1], [10, 11], [20, 21]];
    let want = every_gather(&owned);
    assert_eq!(want[2], array![[20, 21], [0, 1]].into_dyn());
    assert_eq!(want[4], array![21].into_dyn());
    assert_eq!(every_gather(&owned.view()), want);
    assert_eq!(every_gather(&ArcArray2::from(owned.clone())), want);
    for a in [
        through_bound(&owned),
        through_bound(&owned.view()),
        through_bound(&*owned),
    ] {
        assert_eq!(a.into_dyn(), want[2]);
    }

    let mut expect = owned.clone();
    every_scatter(&mut expect);
    assert_eq!(expect, array![[7, 102], [8, 21], [9, 1022]]);
    let mut arc = ArcArray2::from(owned.clone());
    every_scatter(&mut arc);
    assert_eq!(arc, expect);
    let mut viewed = owned.clone();
    every_scatter(&mut viewed.view_mut());
    assert_eq!(viewed, expect);
    scatter_through_bound(&mut viewed);
    scatter_through_bound(&mut viewed.view_mut());
    scatter_through_bound(&mut *viewed);
    assert_eq!(viewed.row(0), array![22, 117]);
}
