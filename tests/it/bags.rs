//! A collection's call (decisions 49-51) against each feature's single `gather_reduce`,
//! bit for bit: every pooling, weights, skip and fill, empty bags and empty features,
//! features sharing a table, `f32` and quantized tables mixed, any output layout, 1 and 3
//! threads; its errors name the feature and its table and write nothing.

use ndarray::{Array2, ShapeBuilder, s};
use ndarray_gather::GatherError;
use ndarray_gather::bags::{Collection, Jagged, Table};
use ndarray_gather::prelude::*;
use ndarray_gather::quant::{QTable, Rowwise};

use crate::support::generate::Lcg;
use crate::support::pooling;

/// A feature of the test: its table, pooling, skip, fill and whether it is weighted.
type Spec = (usize, Pooling, Option<i64>, Option<f32>, bool);

/// A spec's pool, with `weights` if given.
fn pool_of<'w>(&(_, pooling, skip, fill, _): &Spec, weights: Option<&'w [f32]>) -> Pool<'w, f32> {
    pooling::pool_of(pooling, weights, skip, fill)
}

/// Each feature's single call, its columns side by side.
fn singles(
    model: &[Spec],
    tables: &[Table<'_>],
    values: &[i64],
    lengths: &[i64],
    weights: &[f32],
    batch: usize,
) -> Array2<f32> {
    let mut cols = Vec::new();
    let mut at = 0usize;
    for (f, spec) in model.iter().enumerate() {
        let lens = &lengths[f * batch..(f + 1) * batch];
        let n: i64 = lens.iter().sum();
        let ids = &values[at..at + n as usize];
        let p = pool_of(spec, spec.4.then(|| &weights[at..at + n as usize]));
        let t = &spec.0;
        let segs = Segments::lengths(lens);
        cols.push(match &tables[*t] {
            Table::F32(x) => x.gather_reduce(ids, segs, 0, p).unwrap(),
            Table::Quantized(q) => q.gather_reduce(ids, segs, p).unwrap(),
        });
        at += n as usize;
    }
    let views: Vec<_> = cols.iter().map(|c| c.view()).collect();
    ndarray::concatenate(ndarray::Axis(1), &views).unwrap()
}

#[test]
fn a_collection_is_its_features_single_calls() {
    let mut g = Lcg(0xBA65);
    let rounds = if cfg!(miri) { 2 } else { 40 };
    for round in 0..rounds {
        // Tables: f32 of widths 1-70, and an Int8 and an Int4 table.
        let shapes = [
            (30, 1 + g.below(70)),
            (7, 1 + g.below(20)),
            (50, 16),
            (40, 8 + 2 * g.below(20)),
        ];
        let f32s: Vec<Array2<f32>> = shapes[..2]
            .iter()
            .map(|&(n, d)| Array2::from_shape_fn((n, d), |_| g.below(2001) as f32 / 8.0 - 125.0))
            .collect();
        let q8 = Rowwise::Int8
            .quantize(&Array2::from_shape_fn(shapes[2], |_| g.below(1000) as f32 / 10.0))
            .unwrap();
        let q4 = Rowwise::Int4
            .quantize(&Array2::from_shape_fn(shapes[3], |_| g.below(1000) as f32 / 10.0))
            .unwrap();
        let tables = [
            Table::from(f32s[0].view()),
            Table::from(f32s[1].view()),
            Table::from(QTable::new(&q8, Rowwise::Int8).unwrap()),
            Table::from(QTable::new(&q4, Rowwise::Int4).unwrap()),
        ];
        let mut collection = Collection::new();
        for &(n, d) in &shapes {
            collection = collection.table(n, d);
        }
        // Features: any table (shared), any pooling, skip and fill, some weighted.
        let features = 1 + g.below(6);
        let mut model = Vec::new();
        for _ in 0..features {
            let t = g.below(4);
            let pooling = Pooling::ALL[g.below(6)];
            let skip = (g.below(3) == 0).then_some(-1);
            let fill = (g.below(2) == 0).then_some(-3.5);
            let weighted =
                matches!(pooling, Pooling::Sum | Pooling::Mean | Pooling::SqrtN) && g.below(2) == 0;
            let spec = (t, pooling, skip, fill, weighted);
            collection = if weighted {
                collection.weighted_feature(t, pool_of(&spec, None))
            } else {
                collection.feature(t, pool_of(&spec, None))
            };
            model.push(spec);
        }
        let batch = g.below(9);
        let mut lengths = Vec::new();
        let mut values = Vec::new();
        for (t, ..) in &model {
            // Some features empty, some bags empty.
            let empty = g.below(5) == 0;
            for _ in 0..batch {
                let l = if empty { 0 } else { g.below(6) };
                lengths.push(l as i64);
                for _ in 0..l {
                    let n = shapes[*t].0 as i64;
                    values.push(g.below(2 * n as usize) as i64 - n);
                }
            }
        }
        let weights: Vec<f32> = (0..values.len()).map(|_| g.below(9) as f32 / 4.0 - 1.0).collect();
        let jagged = Jagged::lengths(&values, &lengths, batch)
            .unwrap()
            .weighted(&weights);
        let want = singles(&model, &tables, &values, &lengths, &weights, batch);
        let what = format!("round {round}: {model:?}");
        let got = collection.gather_reduce(&tables, &jagged).unwrap();
        assert_eq!(got.mapv(f32::to_bits), want.mapv(f32::to_bits), "{what}");
        // Into a caller's output holding other values, in column-major order.
        let mut out = Array2::from_elem((batch, collection.width()).f(), 9.0f32);
        collection.gather_reduce_into(&tables, &jagged, &mut out).unwrap();
        assert_eq!(out.mapv(f32::to_bits), want.mapv(f32::to_bits), "{what}: into");
        // Offsets give the same batch.
        let mut offsets = vec![0_i64];
        for l in &lengths {
            offsets.push(offsets.last().unwrap() + l);
        }
        let by_offsets = Jagged::offsets(&values, &offsets, batch)
            .unwrap()
            .weighted(&weights);
        assert_eq!(
            collection
                .gather_reduce(&tables, &by_offsets)
                .unwrap()
                .mapv(f32::to_bits),
            got.mapv(f32::to_bits),
            "{what}: offsets"
        );
    }
}

#[test]
fn a_collection_gives_the_same_bits_on_any_thread_count() {
    if cfg!(miri) {
        return;
    }
    let tables: Vec<Array2<f32>> = (0..3)
        .map(|t| Array2::from_shape_fn((20_000, 32), |(r, c)| ((r * 7 + c * 3 + t) % 101) as f32 - 50.25))
        .collect();
    let views: Vec<_> = tables.iter().map(|t| t.view()).collect();
    let model = Collection::new()
        .table(20_000, 32)
        .table(20_000, 32)
        .table(20_000, 32)
        .feature(0, Pooling::Sum)
        .feature(1, Pooling::Mean)
        .feature(2, Pooling::Max)
        .feature(0, Pooling::SqrtN);
    let batch = 2048;
    let lengths: Vec<i64> = (0..4 * batch).map(|i| (i * 7 % 20) as i64).collect();
    let values: Vec<i64> = (0..lengths.iter().sum::<i64>())
        .map(|p| p * 7919 % 20_000)
        .collect();
    let jagged = Jagged::lengths(&values, &lengths, batch).unwrap();
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| model.gather_reduce(&views, &jagged)).unwrap()
    };
    assert_eq!(run(1).mapv(f32::to_bits), run(3).mapv(f32::to_bits));
}

#[test]
fn a_collections_errors_name_the_feature_and_write_nothing() {
    let t = Array2::<f32>::zeros((4, 2));
    let u = Array2::<f32>::zeros((3, 1));
    let model = Collection::new()
        .table(4, 2)
        .table(3, 1)
        .feature(0, Pooling::Sum)
        .weighted_feature(1, Pooling::Mean);
    let values = [0_i64, 3, 2, 9];
    let batch = Jagged::lengths(&values, &[2_i64, 0, 1, 1], 2).unwrap();
    let w = [1.0f32; 4];
    let mut out = Array2::from_elem((2, 3), 5.0f32);
    let e = model
        .gather_reduce_into(&[t.view(), u.view()], &batch.clone().weighted(&w), &mut out)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Collection::gather_reduce_into: feature 1 (table 1): gather_reduce: index 9 at position [1] of the \
         indices is out of bounds for axis 0 of length 3 (valid: -3..=2)"
    );
    assert!(
        matches!(&e, GatherError::Feature { feature: 1, table: 1, source, .. } if matches!(**source, GatherError::IndexOutOfBounds { index: 9, .. }))
    );
    assert!(out.iter().all(|&v| v == 5.0), "nothing written");
    // A weighted feature without weights; weights of another count.
    let e = model.gather_reduce(&[t.view(), u.view()], &batch).unwrap_err();
    assert!(
        e.to_string()
            .contains("feature 1 is weighted, but the batch has no weights"),
        "{e}"
    );
    let e = model
        .gather_reduce(&[t.view(), u.view()], &batch.clone().weighted(&w[..3]))
        .unwrap_err();
    assert!(
        matches!(
            e,
            GatherError::Weights {
                len: 3,
                positions: 4,
                ..
            }
        ),
        "{e}"
    );
    // The tables: their count and shapes.
    let e = model.gather_reduce(&[t.view()], &batch).unwrap_err();
    assert!(
        e.to_string().contains("1 tables given, but the collection has 2"),
        "{e}"
    );
    let e = model.gather_reduce(&[u.view(), t.view()], &batch).unwrap_err();
    assert!(
        e.to_string()
            .contains("table 0 has shape (3, 1), but the collection declared (4, 2)"),
        "{e}"
    );
    // A batch of other features; lengths that do not sum; a batch size that does not divide.
    let one = Jagged::lengths(&values[..2], &[2_i64, 0], 2).unwrap();
    let e = model.gather_reduce(&[t.view(), u.view()], &one).unwrap_err();
    assert!(e.to_string().contains("the batch has 1 features"), "{e}");
    let e = Jagged::lengths(&values, &[2_i64, -1, 1, 1], 2).unwrap_err();
    assert!(
        matches!(
            e,
            GatherError::Segments {
                entry: 1,
                value: -1,
                ..
            }
        ),
        "{e}"
    );
    let e = Jagged::lengths(&values, &[2_i64, 0, 1], 3).unwrap_err();
    assert!(e.to_string().contains("sum to 3, but there are 4 values"), "{e}");
    let e = Jagged::lengths(&values, &[2_i64, 0, 1, 1], 3).unwrap_err();
    assert!(
        e.to_string().contains("the batch size 3 divides the 4 bags"),
        "{e}"
    );
    let e = Jagged::offsets(&values, &[0_i64, 2, 1, 3, 4], 2).unwrap_err();
    assert!(
        matches!(
            e,
            GatherError::Segments {
                entry: 2,
                value: 1,
                ..
            }
        ),
        "{e}"
    );
    // A feature of a table that is not there; a feature's pool with weights of its own.
    let bad = Collection::new().table(4, 2).feature(1, Pooling::Sum);
    let e = bad
        .gather_reduce(&[t.view()], &Jagged::lengths(&values[..1], &[1_i64], 1).unwrap())
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("feature 0 reads table 1, but there are 1 tables"),
        "{e}"
    );
    static W: [f32; 1] = [2.0];
    let own = Collection::new()
        .table(4, 2)
        .feature(0, Pooling::Sum.weighted(&W[..]));
    let e = own
        .gather_reduce(&[t.view()], &Jagged::lengths(&values[..1], &[1_i64], 1).unwrap())
        .unwrap_err();
    assert!(e.to_string().contains("feature 0's pool has weights"), "{e}");
    // A column block of a larger output works too (rows as single runs).
    let mut wide = Array2::from_elem((2, 5), 1.0f32);
    model
        .gather_reduce_into(
            &[t.view(), u.view()],
            &Jagged::lengths(&[0_i64, 3, 2, 1], &[2_i64, 0, 1, 1], 2)
                .unwrap()
                .weighted(&w),
            &mut wide.slice_mut(s![.., 1..4]),
        )
        .unwrap();
    assert_eq!(wide.column(0).to_vec(), [1.0, 1.0]);
}

/// A plan applies as the call does; its backward is each feature's plan's backward in
/// feature order (decision 51), and its touched rows are that backward's rows.
#[test]
fn a_collections_plan_and_backward() {
    use ndarray::{Array1, Axis};
    let mut g = Lcg(0x91A4);
    for round in 0..if cfg!(miri) { 1 } else { 25 } {
        let shapes = [(12, 1 + g.below(40)), (5, 1 + g.below(9))];
        let tables: Vec<Array2<f32>> = shapes
            .iter()
            .map(|&(n, d)| Array2::from_shape_fn((n, d), |_| g.below(401) as f32 / 8.0 - 25.0))
            .collect();
        let views: Vec<_> = tables.iter().map(|t| t.view()).collect();
        let mut collection = Collection::new()
            .table(shapes[0].0, shapes[0].1)
            .table(shapes[1].0, shapes[1].1);
        let mut model: Vec<Spec> = Vec::new();
        for _ in 0..1 + g.below(5) {
            let t = g.below(2);
            let pooling = [Pooling::Sum, Pooling::Mean, Pooling::SqrtN][g.below(3)];
            let spec = (t, pooling, (g.below(3) == 0).then_some(-1), None, g.below(2) == 0);
            collection = if spec.4 {
                collection.weighted_feature(t, pool_of(&spec, None))
            } else {
                collection.feature(t, pool_of(&spec, None))
            };
            model.push(spec);
        }
        let batch = 1 + g.below(6);
        let (mut lengths, mut values) = (Vec::new(), Vec::new());
        for spec in &model {
            for _ in 0..batch {
                let l = g.below(5);
                lengths.push(l as i64);
                let n = shapes[spec.0].0 as i64;
                values.extend((0..l).map(|_| g.below(2 * n as usize) as i64 - n));
            }
        }
        let weights: Vec<f32> = (0..values.len()).map(|_| g.below(9) as f32 / 4.0 - 1.0).collect();
        let jagged = Jagged::lengths(&values, &lengths, batch)
            .unwrap()
            .weighted(&weights);
        let plan = collection.plan(&jagged).unwrap();
        let call = collection.gather_reduce(&views, &jagged).unwrap();
        assert_eq!(
            plan.apply(&views).unwrap().mapv(f32::to_bits),
            call.mapv(f32::to_bits),
            "round {round}: apply"
        );
        let grad_out = Array2::from_shape_fn((batch, collection.width()), |_| g.below(33) as f32 / 4.0 - 4.0);
        // The reference: each feature's own plan's backward, in feature order.
        let mut want: Vec<Array2<f32>> = shapes.iter().map(|&s| Array2::from_elem(s, -0.0f32)).collect();
        let (mut at, mut col) = (0usize, 0usize);
        let mut touched: Vec<Vec<usize>> = vec![Vec::new(); 2];
        for (f, spec) in model.iter().enumerate() {
            let lens = &lengths[f * batch..(f + 1) * batch];
            let n = lens.iter().sum::<i64>() as usize;
            let ids = &values[at..at + n];
            let (rows, d) = shapes[spec.0];
            let single = match spec.2 {
                Some(k) => GatherReducePlan::new_skipping((rows, d), ids, k, Segments::lengths(lens), 0),
                None => GatherReducePlan::new((rows, d), ids, Segments::lengths(lens), 0),
            }
            .unwrap();
            let pool = pool_of(spec, spec.4.then(|| &weights[at..at + n]));
            single
                .backward_into(&grad_out.slice(s![.., col..col + d]), pool, &mut want[spec.0])
                .unwrap();
            touched[spec.0].extend(ids.iter().filter(|&&v| Some(v) != spec.2).map(|&v| {
                if v < 0 {
                    (v + rows as i64) as usize
                } else {
                    v as usize
                }
            }));
            at += n;
            col += d;
        }
        let mut got: Vec<Array2<f32>> = shapes.iter().map(|&s| Array2::from_elem(s, -0.0f32)).collect();
        let mut views_mut: Vec<_> = got.iter_mut().map(|t| t.view_mut()).collect();
        plan.backward_into(&grad_out, &mut views_mut).unwrap();
        for t in 0..2 {
            assert_eq!(
                got[t].mapv(f32::to_bits),
                want[t].mapv(f32::to_bits),
                "round {round}: table {t}"
            );
        }
        let per_table = plan.backward_rows(&grad_out).unwrap();
        for (t, (rows, grads)) in per_table.iter().enumerate() {
            touched[t].sort_unstable();
            touched[t].dedup();
            assert_eq!(
                rows,
                &Array1::from(touched[t].clone()),
                "round {round}: table {t}'s rows"
            );
            let dense = want[t].select(Axis(0), &touched[t]);
            assert_eq!(
                grads.mapv(f32::to_bits),
                dense.mapv(f32::to_bits),
                "round {round}: table {t}'s gradient rows"
            );
        }
    }
    // The backward's errors, before anything is written.
    let t = Array2::<f32>::zeros((4, 2));
    let model = Collection::new()
        .table(4, 2)
        .feature(0, Pooling::Sum)
        .feature(0, Pooling::Max);
    let plan = model
        .plan(&Jagged::lengths(&[1_i64, 2], &[1_i64, 1], 1).unwrap())
        .unwrap();
    let mut grad = Array2::from_elem((4, 2), 3.0f32);
    let e = plan
        .backward_into(&Array2::ones((1, 4)), &mut [grad.view_mut()])
        .unwrap_err();
    assert!(
        matches!(
            e,
            GatherError::Feature {
                feature: 1,
                table: 0,
                ..
            }
        ),
        "{e}"
    );
    let e = plan
        .backward_into(&Array2::ones((2, 4)), &mut [grad.view_mut()])
        .unwrap_err();
    assert!(matches!(e, GatherError::GradShape { .. }), "{e}");
    assert!(grad.iter().all(|&v| v == 3.0));
    let e = plan.apply(&[t.view(), t.view()]).unwrap_err();
    assert!(matches!(e, GatherError::Collection { .. }), "{e}");
}

/// Decision 51: a collection and its plan are values to share between threads (the plan
/// holds its batch: no lifetime).
#[test]
fn a_collection_and_its_plan_are_send_sync_and_clone() {
    fn shared<T: Send + Sync + Clone + 'static>(_: &T) {}
    let model = Collection::new().table(3, 1).feature(0, Pooling::Sum);
    let plan = {
        let (values, lengths) = (vec![0_i64, 2], vec![2_i64]);
        model
            .plan(&Jagged::lengths(&values, &lengths, 1).unwrap())
            .unwrap()
    };
    shared(&model);
    shared(&plan);
    assert_eq!(
        plan.apply(&[Array2::from_elem((3, 1), 1.5f32).view()]).unwrap()[[0, 0]],
        3.0
    );
}
