//! Round 4's coherence (decisions 67-69): every `_into` / `_arg` form against its
//! allocating twin, bit for bit and on every output layout; a plan's skip value applied
//! when the pool names none; owned tables where views go; a `QTable` over rows that are
//! not runs normalised once.

use ndarray::{Array1, Array2, Array3, ShapeBuilder, array, s};
use ndarray_gather::GatherError;
use ndarray_gather::bags::{Collection, Jagged};
use ndarray_gather::optim::Sgd;
use ndarray_gather::prelude::*;
use ndarray_gather::quant::{QTable, Rowwise};

fn bits<D: ndarray::Dimension>(a: &ndarray::Array<f32, D>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

/// A table with ties and negative zeros, ids with repeats, segments with an empty one.
fn case() -> (Array3<f32>, Vec<i64>, Vec<i64>) {
    let x = Array3::from_shape_fn((7, 3, 2), |(r, h, c)| ((r * 5 + h * 3 + c) % 4) as f32 - 1.5);
    let ids = vec![3, -1, 0, 6, 3, 2, 2, 5];
    let dst = vec![0, 0, 2, 2, 2, 3, 0, 3];
    (x, ids, dst)
}

#[test]
fn gather_reduce_arg_into_is_gather_reduce_arg_on_any_layout() {
    let (x, ids, dst) = case();
    for pooling in [
        Pooling::Max.into(),
        Pooling::Min.into(),
        Pooling::Max.fill(-9.0f32),
    ] {
        let segs = Segments::ids(&dst, 5);
        let (m, arg) = x.gather_reduce_arg(&ids, segs, 0, pooling.clone()).unwrap();
        for fortran in [false, true] {
            let (mut out, mut at) = if fortran {
                (
                    Array3::from_elem((5, 3, 2).f(), f32::NAN),
                    Array3::from_elem((5, 3, 2).f(), 99),
                )
            } else {
                (
                    Array3::from_elem((5, 3, 2), f32::NAN),
                    Array3::from_elem((5, 3, 2), 99),
                )
            };
            x.gather_reduce_arg_into(&ids, segs, 0, pooling.clone(), &mut out, &mut at)
                .unwrap();
            assert_eq!(
                (bits(&out), &at),
                (bits(&m), &arg),
                "{pooling:?} fortran {fortran}"
            );
        }
        // Along axis 1 of a transposed view.
        let xt = x.view().permuted_axes([1, 0, 2]);
        let (m1, a1) = xt
            .gather_reduce_arg(&[1, 0, 2, 6], Segments::uniform(2), 1, pooling.clone())
            .unwrap();
        let (mut o1, mut at1) = (Array3::zeros(m1.raw_dim()), Array3::zeros(m1.raw_dim()));
        xt.gather_reduce_arg_into(&[1, 0, 2, 6], Segments::uniform(2), 1, pooling, &mut o1, &mut at1)
            .unwrap();
        assert_eq!((bits(&o1), at1), (bits(&m1), a1));
    }
    // Errors write nothing: an arg of another shape, a pooling without an argmax, a bad id.
    let (mut out, mut at) = (
        Array3::from_elem((5, 3, 2), 1.0f32),
        Array3::from_elem((5, 3, 1), 7usize),
    );
    let e = x
        .gather_reduce_arg_into(&ids, Segments::ids(&dst, 5), 0, Pooling::Max, &mut out, &mut at)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "gather_reduce_arg_into: out has shape [5, 3, 1], but the output shape is [5, 3, 2]"
    );
    let mut at = Array3::from_elem((5, 3, 2), 7usize);
    let e = x
        .gather_reduce_arg_into(&ids, Segments::ids(&dst, 5), 0, Pooling::Sum, &mut out, &mut at)
        .unwrap_err();
    assert!(matches!(e, GatherError::Pooling { .. }), "{e}");
    let e = x
        .gather_reduce_arg_into(
            &[9],
            Segments::uniform(1),
            0,
            Pooling::Max,
            &mut out.slice_mut(s![..1, .., ..]),
            &mut at.slice_mut(s![..1, .., ..]),
        )
        .unwrap_err();
    assert!(matches!(e, GatherError::IndexOutOfBounds { index: 9, .. }), "{e}");
    assert!(out.iter().all(|&v| v == 1.0) && at.iter().all(|&a| a == 7));
}

#[test]
fn segment_reduce_arg_is_the_gather_of_every_slice_in_order() {
    let (x, _, dst) = case();
    let every: Vec<usize> = (0..x.len_of(ndarray::Axis(0))).collect();
    let dst = &dst[..7];
    for segs in [Segments::ids(dst, 4), Segments::lengths(&[2_i64, 0, 4, 1])] {
        for pooling in [Pooling::Max.into(), Pooling::Min.fill(3.0f32)] {
            let (m, arg) = x.segment_reduce_arg(segs, 0, pooling.clone()).unwrap();
            let (want, want_arg) = x.gather_reduce_arg(&every, segs, 0, pooling.clone()).unwrap();
            assert_eq!((bits(&m), &arg), (bits(&want), &want_arg), "{pooling:?}");
            assert_eq!(
                bits(&m),
                bits(&x.segment_reduce(segs, 0, pooling.clone()).unwrap())
            );
            let (mut o, mut a) = (
                Array3::from_elem((4, 3, 2).f(), f32::NAN),
                Array3::zeros((4, 3, 2)),
            );
            x.segment_reduce_arg_into(segs, 0, pooling, &mut o, &mut a)
                .unwrap();
            assert_eq!((bits(&o), a), (bits(&m), arg));
        }
    }
    // Along the last axis (negative), torch_scatter's argmax of `src` itself.
    let v = array![[2.0f32, 5.0, 5.0, 1.0]];
    let (m, arg) = v
        .segment_reduce_arg(Segments::ids(&[1, 1, 1, 0], 2), -1, Pooling::Max)
        .unwrap();
    assert_eq!((m, arg), (array![[1.0, 5.0]], array![[3, 1]]));
    let e = v
        .segment_reduce_arg(Segments::uniform(2), 1, Pooling::Mean)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "segment_reduce_arg: pooling mean has no argmax (only max and min do)"
    );
    let e = v
        .segment_reduce_arg(Segments::uniform(2), 1, Pooling::Max.skip(0))
        .unwrap_err();
    assert!(matches!(e, GatherError::Pooling { .. }), "{e}");
}

#[test]
fn a_qtables_gather_reduce_into_is_its_gather_reduce() {
    let t = Array2::from_shape_fn((6, 12), |(r, c)| ((r * 7 + c * 3) % 11) as f32 - 4.0);
    let ids = [5_i64, 0, 0, 3, -2, 1];
    let segs = Segments::starts(&[0_i64, 2, 2, 5]);
    let w = [0.5f32, 2.0, 1.0, -1.0, 0.25, 3.0];
    for layout in [Rowwise::Int8, Rowwise::Int4, Rowwise::Int2] {
        let q = layout.quantize(&t).unwrap();
        let qt = QTable::new(&q, layout).unwrap();
        for pool in [
            Pooling::Sum.weighted(&w[..]),
            Pooling::Mean.skip(0),
            Pooling::Max.fill(1.0),
        ] {
            let want = qt.gather_reduce(&ids, segs, pool.clone()).unwrap();
            let mut out = Array2::from_elem((4, 12).f(), f32::NAN);
            qt.gather_reduce_into(&ids, segs, pool.clone(), &mut out).unwrap();
            assert_eq!(bits(&out), bits(&want), "{layout:?} {:?}", pool);
        }
        let mut out = Array2::from_elem((3, 12), 2.0f32);
        let e = qt
            .gather_reduce_into(&ids, segs, Pooling::Sum, &mut out)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "QTable::gather_reduce_into: out has shape [3, 12], but the output shape is [4, 12]"
        );
        assert!(out.iter().all(|&v| v == 2.0));
    }
}

/// A `QTable` over bytes whose rows are not runs (a column-major array) holds a row-major
/// copy made once: `bytes()` shows it, and every call gives the row-major table's bits.
#[test]
fn a_qtable_of_rows_that_are_not_runs_is_normalised_once() {
    let t = Array2::from_shape_fn((5, 8), |(r, c)| (r * 8 + c) as f32 / 3.0 - 4.0);
    let q = Rowwise::Int8.quantize(&t).unwrap();
    let f = Array2::from_shape_vec(q.raw_dim().f(), q.t().iter().copied().collect()).unwrap();
    assert_eq!(f, q);
    let (row_major, col_major) = (
        QTable::new(&q, Rowwise::Int8).unwrap(),
        QTable::new(&f, Rowwise::Int8).unwrap(),
    );
    let bytes = col_major.bytes().unwrap();
    assert_eq!((bytes.strides()[1], bytes), (1, q.view()));
    // The view as given stays in place where its rows are runs (any row step).
    let every_other = q.slice(s![..;2, ..]);
    let sliced = QTable::new(every_other, Rowwise::Int8).unwrap();
    assert_eq!(sliced.bytes().unwrap().as_ptr(), every_other.as_ptr());
    let ids = [4, 0, 2, 2];
    for p in [Pooling::Sum, Pooling::Max] {
        let a = row_major.gather_reduce(&ids, Segments::uniform(2), p).unwrap();
        let b = col_major
            .clone()
            .gather_reduce(&ids, Segments::uniform(2), p)
            .unwrap();
        assert_eq!(bits(&a), bits(&b));
    }
}

/// Decision 69: a plan made with a skip value applies it; a pool without `.skip` is the
/// pool with the plan's, in every call; another value is an error.
#[test]
fn a_skipping_plan_applies_its_skip_to_a_pool_without_one() {
    let t = Array2::from_shape_fn((5, 3), |(r, c)| (r * 3 + c) as f32 / 2.0 - 3.0);
    let ids = [-1_i64, 4, 2, -1, -1, 0, 4, 2];
    let segs = Segments::starts(&[0_i64, 3, 5]);
    let plan = GatherReducePlan::new_skipping(t.dim(), &ids, -1, segs, 0).unwrap();
    for pooling in [
        Pooling::Sum,
        Pooling::Mean,
        Pooling::SqrtN,
        Pooling::Max,
        Pooling::Prod,
    ] {
        let want = t.gather_reduce(&ids, segs, 0, pooling.skip(-1)).unwrap();
        assert_eq!(
            bits(&plan.apply(&t, pooling).unwrap()),
            bits(&want),
            "{pooling:?}"
        );
        assert_eq!(bits(&plan.apply(&t, pooling.skip(-1)).unwrap()), bits(&want));
        let e = plan.apply(&t, pooling.skip(4)).unwrap_err();
        assert!(matches!(e, GatherError::Pooling { .. }), "{e}");
    }
    let (m, arg) = plan.apply_arg(&t, Pooling::Min).unwrap();
    assert_eq!(
        (m, arg),
        t.gather_reduce_arg(&ids, segs, 0, Pooling::Min.skip(-1)).unwrap()
    );
    let g = Array2::from_shape_fn((3, 3), |(b, c)| (b * 3 + c) as f32 - 4.0);
    let (rows, grads) = plan.backward_rows(&g, Pooling::Mean).unwrap();
    let (rows1, grads1) = plan.backward_rows(&g, Pooling::Mean.skip(-1)).unwrap();
    assert_eq!((rows, bits(&grads)), (rows1, bits(&grads1)));
    let (mut a, mut b) = (t.clone(), t.clone());
    plan.step(&g, Pooling::Sum, &mut a, &mut Sgd::new(0.5)).unwrap();
    plan.step(&g, Pooling::Sum.skip(-1), &mut b, &mut Sgd::new(0.5))
        .unwrap();
    assert_eq!(bits(&a), bits(&b));
}

/// Decision 67: a collection takes owned tables (`&Vec<Array2<f32>>`) wherever it takes
/// views, and `&mut Vec<Array2<f32>>` for gradients.
#[test]
fn a_collection_takes_owned_tables_as_it_takes_views() {
    let tables = vec![
        Array2::from_shape_fn((6, 2), |(r, c)| (r * 2 + c) as f32),
        Array2::from_shape_fn((3, 3), |(r, c)| (r * 3 + c) as f32 / 4.0),
    ];
    let model = Collection::new()
        .table(6, 2)
        .table(3, 3)
        .feature(0, Pooling::Sum)
        .feature(1, Pooling::Mean)
        .feature(0, Pooling::Max);
    let batch = Jagged::lengths(&[5_i64, 1, 2, 0, 2, 4, 3], &[2_i64, 1, 1, 1, 1, 1], 2).unwrap();
    let views = [tables[0].view(), tables[1].view()];
    let want = model.gather_reduce(&views, &batch).unwrap();
    assert_eq!(bits(&model.gather_reduce(&tables, &batch).unwrap()), bits(&want));
    let refs = [&tables[0], &tables[1]];
    assert_eq!(bits(&model.gather_reduce(&refs, &batch).unwrap()), bits(&want));
    let plan = Collection::new()
        .table(6, 2)
        .table(3, 3)
        .feature(0, Pooling::Sum)
        .feature(1, Pooling::Mean)
        .feature(0, Pooling::SqrtN)
        .plan(&batch)
        .unwrap();
    let out = plan.apply(&tables).unwrap();
    assert_eq!(bits(&out), bits(&plan.apply(&views).unwrap()));
    let mut into = Array2::zeros(out.raw_dim());
    plan.apply_into(&tables, &mut into).unwrap();
    assert_eq!(bits(&into), bits(&out));
    // Gradients as owned arrays and as views: the same bits.
    let g = Array2::from_shape_fn(out.raw_dim(), |(b, c)| (b * 7 + c) as f32 / 8.0);
    let mut owned = vec![Array2::zeros((6, 2)), Array2::zeros((3, 3))];
    plan.backward_into(&g, &mut owned).unwrap();
    let (mut g0, mut g1) = (Array2::zeros((6, 2)), Array2::zeros((3, 3)));
    plan.backward_into(&g, &mut [g0.view_mut(), g1.view_mut()])
        .unwrap();
    assert_eq!((bits(&owned[0]), bits(&owned[1])), (bits(&g0), bits(&g1)));
    // The shared table 0's rows: planned once, the same sums as its dense gradient's rows.
    let per_table = plan.backward_rows(&g).unwrap();
    let (rows, grads) = &per_table[0];
    assert_eq!(rows, &Array1::from(vec![1, 2, 3, 4, 5]));
    for (k, &r) in rows.iter().enumerate() {
        assert_eq!(
            bits(&grads.row(k).to_owned()),
            bits(&g0.row(r).to_owned()),
            "row {r}"
        );
    }
}

/// The by-ids walk reads its ids as a slice: ids of a strided view (copied once) give the
/// bits of the same ids contiguous, on one span and on several (a large call).
#[test]
fn ids_of_a_strided_view_pool_as_contiguous_ids() {
    for (n, segments) in [(40, 7), (if cfg!(miri) { 64 } else { 200_000 }, 2_000)] {
        let v = Array2::from_shape_fn((n, 4), |(p, h)| ((p * 7 + h * 3) % 97) as f32 / 16.0 - 3.0);
        let every_other: Array1<i64> = (0..2 * n as i64)
            .map(|q| (q * 31 + q / 3) % segments as i64)
            .collect();
        let strided = every_other.slice(s![..;2]);
        let contiguous = strided.to_owned();
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
            let a = v
                .segment_reduce(Segments::ids(strided, segments), 0, pooling)
                .unwrap();
            let b = v
                .segment_reduce(Segments::ids(&contiguous, segments), 0, pooling)
                .unwrap();
            assert_eq!(bits(&a), bits(&b), "{n} {pooling:?}");
        }
    }
}
