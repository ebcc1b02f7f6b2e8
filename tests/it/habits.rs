//! A Rust user's habits: indices in any form `AsArray` takes, outputs typed wherever the
//! types know the rank.

use ndarray::{
    Array, Array1, Array2, Array3, Array4, ArrayD, ArrayView1, Ix0, Ix1, Ix2, Ix3, IxDyn, arr0, array,
};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::Add;

fn table() -> Array2<i32> {
    Array::from_shape_fn((4, 3), |(i, j)| (10 * i + j) as i32)
}

#[test]
fn indices_come_from_slices_vecs_arrays_and_views() {
    let x = table();
    let want = x.gather(&array![3_i64, -4], 0).unwrap();
    let v: Vec<i64> = vec![3, -4];
    let a: [i64; 2] = [3, -4];
    let view = ArrayView1::from(&v[..]);
    let by_ref: &ndarray::ArrayRef<i64, Ix1> = &view;
    let forms = [
        x.gather(&v, 0).unwrap(),
        x.gather(&v[..], 0).unwrap(),
        x.gather(&a, 0).unwrap(),
        x.gather(view, 0).unwrap(),
        x.gather(&view, 0).unwrap(),
        x.gather(by_ref, 0).unwrap(),
        x.gather(&array![3_i64, -4].into_shared(), 0).unwrap(),
    ];
    for (k, got) in forms.iter().enumerate() {
        assert_eq!(got, want, "form {k}");
    }
    // Unsigned and 32-bit slices; a literal slice's integers default to i32.
    assert_eq!(
        x.gather(&[3_usize, 0][..], 0).unwrap(),
        x.gather(&array![3_i64, 0], 0).unwrap()
    );
    assert_eq!(
        x.gather(&[3, 0], 0).unwrap(),
        x.gather(&array![3_i32, 0], 0).unwrap()
    );
    // 2-D nested arrays are 2-D indices.
    let nested = [[2_i64, 0, 1]];
    assert_eq!(
        x.gather_elements(&nested, 0).unwrap(),
        x.gather_elements(&array![[2_i64, 0, 1]], 0).unwrap()
    );
    assert_eq!(x.gather_elements(&nested[..], 0).unwrap(), array![[20, 1, 12]]);
    // A bad index in a Vec is named as in an array.
    let e = x.gather(&vec![0_i64, 4], 0).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 4, ref position, .. } if position == &[1]),
        "{e}"
    );
}

#[test]
fn every_method_scatter_and_plan_takes_a_vec() {
    let x = table();
    let ids = vec![2_i64, 0];
    let arr = Array1::from(ids.clone());
    assert_eq!(x.gather(&ids, 1).unwrap(), x.gather(&arr, 1).unwrap());
    assert_eq!(
        x.take(&ids, None, IndexMode::Raise).unwrap(),
        array![2, 0].into_dyn()
    );
    assert_eq!(
        x.gather_batched(&ids, 1, 0).unwrap(),
        x.gather_batched(&arr, 1, 0).unwrap()
    );
    let flat = x.iter().copied().collect::<Vec<_>>();
    assert_eq!(
        Array1::from(flat).gather_multiaxis(&ids, &[0]).unwrap(),
        array![2, 0]
    );
    assert_eq!(
        GatherPlan::gather(x.shape(), &ids, 0).unwrap().apply(&x).unwrap(),
        x.gather(&arr, 0).unwrap().into_dyn()
    );
    assert_eq!(
        GatherPlan::take(x.shape(), &ids[..], None, IndexMode::Raise)
            .unwrap()
            .output_shape(),
        &[2]
    );
    let mut a = Array1::<f64>::zeros(3);
    a.scatter(&ids, &array![1.0, 2.0], 0, Add).unwrap();
    a.scatter_elements(&[2_i64, 2][..], &array![1.0, 1.0], 0, Add)
        .unwrap();
    a.put_along_axis(&[1_u32], &array![7.0], 0).unwrap();
    a.scatter_nd(&[[0_i64]], &array![1.0], 0, Add).unwrap();
    assert_eq!(a, array![3.0, 7.0, 3.0]);
}

#[test]
fn gather_and_take_keep_the_rank_the_types_know() {
    let x = table();
    let one: Array2<i32> = x.gather(&array![1_i64], 0).unwrap();
    let two: Array3<i32> = x.gather(&array![[1_i64], [2]], 0).unwrap();
    let scalar: Array1<i32> = x.gather(&arr0(1_i64), 0).unwrap();
    let three: Array4<i32> = x.gather(&Array::from_elem((1, 1, 2), 0_i64), 1).unwrap();
    assert_eq!(one, array![[10, 11, 12]]);
    assert_eq!(two, array![[[10, 11, 12]], [[20, 21, 22]]]);
    assert_eq!(scalar, array![10, 11, 12]);
    assert_eq!(three.shape(), &[4, 1, 1, 2]);
    // Dynamic input or indices: dynamic output.
    let dynamic: ArrayD<i32> = x.view().into_dyn().gather(&array![1_i64], 0).unwrap();
    assert_eq!(dynamic, one.clone().into_dyn());
    let dynamic: ArrayD<i32> = x.gather(&array![1_i64].into_dyn(), 0).unwrap();
    assert_eq!(dynamic, one.clone().into_dyn());
    // take: a plain axis is typed as gather; Some(axis) and None are dynamic (None gives
    // the indices' rank, Some the gather's).
    let typed: Array2<i32> = x.take(&array![5_i64], 0, IndexMode::Wrap).unwrap();
    assert_eq!(typed, one);
    let some: ArrayD<i32> = x.take(&array![5_i64], Some(0), IndexMode::Wrap).unwrap();
    assert_eq!(some, one.into_dyn());
    let none: ArrayD<i32> = x.take(&array![5_i64], None, IndexMode::Raise).unwrap();
    assert_eq!(none, array![12].into_dyn());
    // The rank rule itself, for the fixed ranks.
    fn rank<E: GatherRank<Ix2>>() -> Option<usize> {
        <E::Out as ndarray::Dimension>::NDIM
    }
    assert_eq!(
        [
            rank::<Ix0>(),
            rank::<Ix1>(),
            rank::<Ix2>(),
            rank::<Ix3>(),
            rank::<IxDyn>()
        ],
        [Some(1), Some(2), Some(3), Some(4), None]
    );
}

#[test]
fn plans_of_rank_keeping_methods_are_typed() {
    let x = table();
    let ids = array![[2_i64, 0, 1]];
    let plan: GatherPlan<Ix2> = GatherPlan::gather_elements(x.shape(), &ids, 0).unwrap();
    let out: Array2<i32> = plan.apply(&x).unwrap();
    assert_eq!(out, x.gather_elements(&ids, 0).unwrap());
    let plan: GatherPlan<Ix2> = GatherPlan::take_along_axis(x.shape(), &ids, 0).unwrap();
    assert_eq!(plan.apply(&x).unwrap(), x.take_along_axis(&ids, 0).unwrap());
    let plan: GatherPlan<Ix2> = GatherPlan::multiaxis(x.shape(), &ids, &[0]).unwrap();
    assert_eq!(plan.apply(&x).unwrap(), x.gather_multiaxis(&ids, &[0]).unwrap());
    // One collection of plans of any method.
    let plans: Vec<GatherPlan> = vec![plan.into_dyn(), GatherPlan::gather(x.shape(), &[1], 0).unwrap()];
    assert_eq!(plans[0].apply(&x).unwrap(), out.into_dyn());
    // A typed plan still refuses an input of another shape, and an input of its shape in
    // another dimension type (here dynamic) gives the typed output.
    let plan = GatherPlan::gather_elements(x.shape(), &ids, 0).unwrap();
    assert!(matches!(
        plan.apply(&table().t()),
        Err(GatherError::InputShape { .. })
    ));
    let typed: Array2<i32> = plan.apply(&x.view().into_dyn()).unwrap();
    assert_eq!(typed, x.gather_elements(&ids, 0).unwrap());
}

#[test]
fn a_closure_names_its_element_type_once() {
    let ids = [2_i64, 0, 2, 2];
    let upd = array![1.5_f32, -1.0, 4.0, 2.0];
    let mut with = Array1::<f32>::zeros(3);
    with.scatter(
        &ids,
        &upd,
        0,
        ndarray_gather::reduce::with::<f32>(|a, b| *a = a.max(*b)),
    )
    .unwrap();
    let mut max = Array1::<f32>::zeros(3);
    max.scatter(&ids, &upd, 0, ndarray_gather::reduce::Max).unwrap();
    assert_eq!(with, max);
    assert_eq!(with, array![0.0, 0.0, 4.0]);
}

/// Decisions 27-31 written the way a newcomer wrote them: one `Segments` value reused,
/// offsets from a `Vec`, a `usize` padding row, an `i64` segment count, plan shapes from
/// `dim()`, a typed plan result.
#[test]
fn a_newcomers_bags_and_plans_compile_and_agree() {
    const PAD: usize = 0;
    let t = Array::from_shape_fn((5, 3), |(i, j)| (10 * i + j) as f32);
    let ids: Vec<i64> = vec![1, PAD as i64, 4, 2, 2];
    let offsets: Vec<i64> = vec![0, 2, 5];
    let segs = Segments::starts(&offsets); // `Copy`: no clone below
    let sum = t.gather_reduce(&ids, segs, 0, Pooling::Sum.skip(PAD)).unwrap();
    let mean = t.gather_reduce(&ids, segs, 0, Pooling::Mean.skip(PAD)).unwrap();
    assert_eq!(sum.row(0), t.row(1));
    assert_eq!(mean.row(1), (&t.row(4) + &t.row(2) + t.row(2)) / 3.0);
    // The segments in every form indices take.
    let view = ArrayView1::from(&offsets[..]);
    let arr = Array1::from(offsets.clone());
    for s in [
        Segments::starts(&offsets[..]),
        Segments::starts(view),
        #[allow(clippy::needless_borrows_for_generic_args)] // (the borrowed form, on purpose)
        Segments::starts(&view),
        Segments::starts(&arr),
        Segments::starts(&[0_i64, 2, 5]),
    ] {
        assert_eq!(t.gather_reduce(&ids, s, 0, Pooling::Sum.skip(PAD)).unwrap(), sum);
    }
    // A graph's segment count as an `i64`, a length as a `u32`.
    let (dst, n): (Vec<i64>, i64) = (vec![1, 0, 1, 0, 2], 3);
    let h = t
        .gather_reduce(&ids, Segments::ids(&dst, n), 0, Pooling::Sum)
        .unwrap();
    assert_eq!(h.row(2), t.row(2));
    let len: u32 = 5;
    assert_eq!(
        t.gather_reduce(&ids, Segments::uniform(len), 0, Pooling::Max)
            .unwrap()
            .dim(),
        (1, 3)
    );
    // Plan shapes as the arrays report them; a typed plan result.
    let plan = GatherReducePlan::new(t.dim(), &ids, Segments::ids(&dst, n), 0).unwrap();
    assert_eq!(plan.apply(&t, Pooling::Sum).unwrap(), h);
    let plan = GatherReducePlan::new_skipping(t.raw_dim(), &ids, PAD, segs, 0).unwrap();
    assert_eq!(plan.apply(&t, Pooling::Sum.skip(PAD)).unwrap(), sum);
    let rows: Array2<f32> = GatherPlan::gather(t.dim(), &ids, 0).unwrap().apply(&t).unwrap();
    assert_eq!(rows, t.gather(&ids, 0).unwrap());
    let taken: Array2<f32> = GatherPlan::take(t.dim(), &ids, ndarray::Axis(0), IndexMode::Raise)
        .unwrap()
        .apply(&t)
        .unwrap();
    assert_eq!(taken, rows);
    let dynamic: ArrayD<f32> = GatherPlan::gather(t.shape(), &ids, 0).unwrap().apply(&t).unwrap();
    assert_eq!(dynamic, rows.into_dyn());
}

/// Shapes in every form Rust code holds them (decision 58): what `IntoDimension` takes,
/// and `&Vec<usize>` and `&[usize; N]`, as 0.2 took them; the fixed forms keep a typed
/// plan's rank.
#[test]
fn shapes_come_from_vecs_arrays_tuples_and_references() {
    let x = table();
    let shape: Vec<usize> = x.shape().to_vec();
    let fixed: [usize; 2] = [4, 3];
    let ids = [3_i64, 0];
    let want = x.gather(&ids, 0).unwrap();
    // Typed: the fixed forms give an `Array2`.
    let typed: [GatherPlan<Ix2>; 5] = [
        GatherPlan::gather(&fixed, &ids, 0).unwrap(),
        GatherPlan::gather(fixed, &ids, 0).unwrap(),
        GatherPlan::gather(&[4, 3], &ids, 0).unwrap(),
        GatherPlan::gather((4, 3), &ids, 0).unwrap(),
        GatherPlan::gather(x.raw_dim(), &ids, 0).unwrap(),
    ];
    for plan in &typed {
        let out: Array2<i32> = plan.apply(&x).unwrap();
        assert_eq!(out, want);
    }
    // Dynamic: slices and `Vec`s, by value or by reference.
    let dynamic: [GatherPlan<IxDyn>; 4] = [
        GatherPlan::gather(&shape, &ids, 0).unwrap(),
        GatherPlan::gather(&shape[..], &ids, 0).unwrap(),
        GatherPlan::gather(shape.clone(), &ids, 0).unwrap(),
        GatherPlan::gather(x.shape(), &ids, 0).unwrap(),
    ];
    for plan in &dynamic {
        assert_eq!(plan.apply(&x).unwrap(), want.clone().into_dyn());
    }
    let segs = Segments::uniform(1);
    let plans = [
        GatherReducePlan::new(&shape, &ids, segs, 0).unwrap(),
        GatherReducePlan::new(&fixed, &ids, segs, 0).unwrap(),
        GatherReducePlan::new_skipping(&shape, &ids, -1, segs, 0).unwrap(),
        GatherPlan::gather_elements(&shape, &array![[0_i64, 1, 2]], 0)
            .map(|_| GatherReducePlan::new(x.dim(), &ids, segs, 0).unwrap())
            .unwrap(),
    ];
    for plan in &plans {
        assert_eq!(plan.apply(&x, Pooling::Sum).unwrap(), want);
    }
    // A bad shape in a Vec is still the plan's error, naming it.
    let e = GatherReducePlan::new(&vec![4_usize], &[9_i64], segs, 0).unwrap_err();
    assert!(e.to_string().starts_with("GatherReducePlan::new: index 9"), "{e}");
}

/// `zeros_aligned`: a zeroed, standard-layout owned array whose first element (so every
/// row of whole lines) starts on a 64-byte line, for every element size, rank and length.
#[test]
fn aligned_tables_start_on_a_cache_line() {
    fn check<A: Clone + num_traits::Zero + PartialEq + std::fmt::Debug>(shapes: &[&[usize]]) {
        for &shape in shapes {
            let a: ArrayD<A> = ndarray_gather::zeros_aligned(shape).unwrap();
            assert_eq!(a.shape(), shape);
            assert!(a.is_standard_layout());
            assert!(a.iter().all(|v| v.is_zero()), "{shape:?}");
            if !a.is_empty() {
                assert_eq!(
                    a.as_ptr() as usize % 64,
                    0,
                    "{shape:?} of {}",
                    std::any::type_name::<A>()
                );
            }
        }
    }
    let shapes: &[&[usize]] = &[&[0], &[1], &[5], &[7, 64], &[3, 4, 5], &[2, 0, 3]];
    check::<f32>(shapes);
    check::<f64>(shapes);
    check::<u8>(shapes);
    check::<i16>(shapes);
    check::<u128>(shapes);
    // Typed, filled and used as any table.
    let mut t: Array2<f32> = ndarray_gather::zeros_aligned((4, 16)).unwrap();
    t.assign(&Array2::from_shape_fn((4, 16), |(r, c)| (r * 16 + c) as f32));
    assert_eq!(t.as_ptr() as usize % 64, 0);
    let bags = t
        .gather_reduce(&[3, 1], Segments::starts(&[0]), 0, Pooling::Sum)
        .unwrap();
    assert_eq!(bags.row(0), (&t.row(3) + &t.row(1)));
    // A shape too large is the call's error.
    let e = ndarray_gather::zeros_aligned::<_, f32, _>((usize::MAX / 2, 4)).unwrap_err();
    assert!(matches!(e, GatherError::SizeOverflow { .. }), "{e}");
}
