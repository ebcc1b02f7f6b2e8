//! A plan's training step (decision 52) against a literal loop: `backward_rows`, then each
//! touched row updated once by the formula in its order, bit for bit; a hot row is one
//! update; 1 and 3 threads; errors change nothing.

use ndarray::{Array2, ShapeBuilder};
use ndarray_gather::GatherError;
use ndarray_gather::optim::{Adagrad, Adam, RowwiseAdagrad, Sgd};
use ndarray_gather::prelude::*;

/// A table, a plan of bags with a hot row (row 3 in half the positions), and a gradient.
fn case(n: usize, d: usize, bags: usize) -> (Array2<f32>, GatherReducePlan, Array2<f32>, Vec<i64>) {
    let t = Array2::from_shape_fn((n, d), |(r, c)| ((r * 13 + c * 5) % 23) as f32 / 4.0 - 2.5);
    let ids: Vec<i64> = (0..bags * 4)
        .map(|p| if p % 2 == 0 { 3 } else { (p * 7 % n) as i64 })
        .collect();
    let starts: Vec<i64> = (0..bags as i64).map(|b| b * 4).collect();
    let plan = GatherReducePlan::new((n, d), &ids, Segments::starts(&starts), 0).unwrap();
    let g = Array2::from_shape_fn((bags, d), |(b, c)| ((b * 3 + c) % 11) as f32 / 8.0 - 0.6);
    (t, plan, g, ids)
}

#[test]
fn a_step_is_backward_rows_then_one_update_per_row() {
    let (n, d, bags) = if cfg!(miri) { (6, 5, 3) } else { (40, 12, 30) };
    let (t, plan, g, _) = case(n, d, bags);
    let (rows, grads) = plan.backward_rows(&g, Pooling::Mean).unwrap();
    // Sgd.
    let mut got = t.clone();
    plan.step(&g, Pooling::Mean, &mut got, &mut Sgd::new(0.125))
        .unwrap();
    let mut want = t.clone();
    for (k, &r) in rows.iter().enumerate() {
        for c in 0..d {
            want[[r, c]] -= 0.125 * grads[[k, c]];
        }
    }
    assert_eq!(got.mapv(f32::to_bits), want.mapv(f32::to_bits), "sgd");
    // Row-wise Adagrad, plain, L2 and decoupled, two steps (the moments carry over).
    for decay in 0..3 {
        let make = || {
            let o = RowwiseAdagrad::new(n, 0.05).eps(1e-6);
            match decay {
                1 => o.weight_decay(0.01),
                2 => o.decoupled_weight_decay(0.01),
                _ => o,
            }
        };
        let (mut got, mut opt) = (t.clone(), make());
        let (mut want, mut m) = (t.clone(), vec![0.0f32; n]);
        for _ in 0..2 {
            plan.step(&g, Pooling::Mean, &mut got, &mut opt).unwrap();
            for (k, &r) in rows.iter().enumerate() {
                let gr = |w: f32, c: usize| {
                    if decay == 1 {
                        grads[[k, c]] + 0.01 * w
                    } else {
                        grads[[k, c]]
                    }
                };
                let mut sum = 0.0f32;
                for c in 0..d {
                    let x = gr(want[[r, c]], c);
                    sum += x * x;
                }
                m[r] += sum / d as f32;
                let mult = 0.05 / (m[r].sqrt() + 1e-6);
                for c in 0..d {
                    let x = gr(want[[r, c]], c);
                    if decay == 2 {
                        want[[r, c]] *= 1.0 - 0.05 * 0.01;
                    }
                    want[[r, c]] -= mult * x;
                }
            }
        }
        assert_eq!(
            got.mapv(f32::to_bits),
            want.mapv(f32::to_bits),
            "rowwise adagrad, decay {decay}"
        );
        assert_eq!(opt.state().to_vec(), m, "moments, decay {decay}");
    }
    // Adagrad and Adam, element-wise, two steps.
    let (mut got, mut opt) = (t.clone(), Adagrad::new((n, d), 0.1));
    let (mut want, mut s) = (t.clone(), Array2::<f32>::zeros((n, d)));
    let (mut got_a, mut adam) = (t.clone(), Adam::new((n, d), 0.01));
    let (mut want_a, mut m1, mut m2) = (
        t.clone(),
        Array2::<f32>::zeros((n, d)),
        Array2::<f32>::zeros((n, d)),
    );
    for step in 1..=2 {
        plan.step(&g, Pooling::Mean, &mut got, &mut opt).unwrap();
        plan.step(&g, Pooling::Mean, &mut got_a, &mut adam).unwrap();
        let (c1, c2) = (
            1.0 - f64::from(0.9f32).powi(step),
            1.0 - f64::from(0.999f32).powi(step),
        );
        let size = (f64::from(0.01f32) * c2.sqrt() / c1) as f32;
        for (k, &r) in rows.iter().enumerate() {
            for c in 0..d {
                let x = grads[[k, c]];
                s[[r, c]] += x * x;
                want[[r, c]] -= 0.1 * x / (s[[r, c]].sqrt() + 1e-10);
                m1[[r, c]] += (x - m1[[r, c]]) * (1.0 - 0.9f32);
                m2[[r, c]] += (x * x - m2[[r, c]]) * (1.0 - 0.999f32);
                want_a[[r, c]] -= size * (m1[[r, c]] / (m2[[r, c]].sqrt() + 1e-8));
            }
        }
    }
    assert_eq!(got.mapv(f32::to_bits), want.mapv(f32::to_bits), "adagrad");
    assert_eq!(got_a.mapv(f32::to_bits), want_a.mapv(f32::to_bits), "adam");
    assert_eq!(adam.state().0, 2);
}

#[test]
fn a_step_gives_the_same_bits_on_any_thread_count() {
    if cfg!(miri) {
        return;
    }
    let (t, plan, g, _) = case(50_000, 32, 20_000);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let (mut t, mut opt) = (t.clone(), RowwiseAdagrad::new(50_000, 0.05));
        pool.install(|| plan.step(&g, Pooling::Sum, &mut t, &mut opt))
            .unwrap();
        (t.mapv(f32::to_bits), opt.state().mapv(f32::to_bits))
    };
    assert_eq!(run(1), run(3));
}

#[test]
fn a_steps_errors_change_nothing() {
    let (t, plan, g, _) = case(8, 3, 4);
    let mut table = t.clone();
    let mut opt = RowwiseAdagrad::new(7, 0.1);
    let e = plan.step(&g, Pooling::Sum, &mut table, &mut opt).unwrap_err();
    assert!(matches!(e, GatherError::InputShape { .. }), "{e}");
    let mut opt = RowwiseAdagrad::new(8, 0.1);
    let e = plan.step(&g, Pooling::Max, &mut table, &mut opt).unwrap_err();
    assert!(matches!(e, GatherError::Pooling { .. }), "{e}");
    let e = plan
        .step(
            &g.slice(ndarray::s![..3, ..]).to_owned(),
            Pooling::Sum,
            &mut table,
            &mut opt,
        )
        .unwrap_err();
    assert!(matches!(e, GatherError::GradShape { .. }), "{e}");
    let mut wide = Array2::<f32>::zeros((8, 4));
    let e = plan
        .step(&g, Pooling::Sum, &mut wide, &mut Sgd::new(1.0))
        .unwrap_err();
    assert!(matches!(e, GatherError::InputShape { .. }), "{e}");
    assert_eq!(table, t);
    assert!(opt.state().iter().all(|&m| m == 0.0));
    // A table whose rows are not runs (column-major) steps as a standard one.
    let mut f = Array2::from_shape_vec((8, 3).f(), t.t().iter().copied().collect()).unwrap();
    let mut c = t.clone();
    plan.step(&g, Pooling::Sum, &mut f, &mut Sgd::new(0.5)).unwrap();
    plan.step(&g, Pooling::Sum, &mut c, &mut Sgd::new(0.5)).unwrap();
    assert_eq!(f, c);
}
