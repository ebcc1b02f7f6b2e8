//! Graph attention (decisions 55-56) against literal loops: the softmax per segment and
//! head (max subtracted, `f32::exp`, sums in position order), per-head weights in the
//! forward and the backward, `backward_weights` and `softmax_backward`, bit for bit; the
//! gradients against central differences in `f64`; 1 and 3 threads; errors write nothing;
//! and PyG's composition with PyTorch's autograd (`tests/fixtures/generate_attention.py`).

use ndarray::{Array1, Array2, Array3, Axis, array};
use ndarray_gather::GatherError;
use ndarray_gather::prelude::*;
use ndarray_gather::quant::{QTable, Rowwise};

/// A graph of `n` nodes and `e` edges: `src`, `dst` in no order, nodes 0 and 1 without
/// incoming edges, node `n - 1` hot (every eighth edge).
fn graph(n: usize, e: usize) -> (Vec<i64>, Vec<i64>) {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |m: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize % m
    };
    let src = (0..e).map(|_| next(n) as i64).collect();
    let dst = (0..e)
        .map(|p| if p % 8 == 0 { n - 1 } else { 2 + next(n - 2) } as i64)
        .collect();
    (src, dst)
}

/// Values that are not round: `f(i)` for a flat index.
fn values(len: usize, scale: f32) -> impl Fn(usize) -> f32 {
    move |i| (((i * 7919 + 13) % 997) as f32 / 997.0 - 0.5) * scale + (len % 3) as f32 * 0.0
}

/// Each segment's positions in position order.
fn members(dst: &[i64], n: usize) -> Vec<Vec<usize>> {
    let mut m = vec![Vec::new(); n];
    for (p, &d) in dst.iter().enumerate() {
        m[d as usize].push(p);
    }
    m
}

/// The literal softmax of decision 55.
fn softmax_loop(scores: &Array2<f32>, segs: &[Vec<usize>]) -> Array2<f32> {
    let mut out = Array2::zeros(scores.dim());
    for ps in segs {
        for h in 0..scores.ncols() {
            let mut m = f32::NEG_INFINITY;
            for &p in ps {
                let v = scores[[p, h]];
                if v > m || (v.is_nan() && !m.is_nan()) {
                    m = v;
                }
            }
            let mut sum = 0.0f32;
            for &p in ps {
                let a = if m == f32::NEG_INFINITY {
                    0.0
                } else {
                    (scores[[p, h]] - m).exp()
                };
                out[[p, h]] = a;
                sum += a;
            }
            for &p in ps {
                if m != f32::NEG_INFINITY {
                    out[[p, h]] /= sum;
                }
            }
        }
    }
    out
}

/// Whether `got` is within `n` ulps of `want`, element by element (NaN where NaN):
/// decision 55 allows any `exp` within 2 ulps of `f32::exp` (and Miri's `exp` is one).
fn near<D: ndarray::Dimension>(got: &ndarray::Array<f32, D>, want: &ndarray::Array<f32, D>, n: i64) -> bool {
    got.shape() == want.shape()
        && got.iter().zip(want).all(|(&g, &w)| {
            (g.is_nan() && w.is_nan()) || (g.to_bits() as i64 - w.to_bits() as i64).abs() <= n
        })
}

/// The ulps a softmax may differ from the literal loop's: none natively (`f32::exp` on both
/// sides); Miri's `exp` errs on purpose, a few ulps, which its sum and division compound.
fn exp_ulps() -> i64 {
    if cfg!(miri) { 64 } else { 0 }
}

fn bits<D: ndarray::Dimension>(a: &ndarray::Array<f32, D>) -> ndarray::Array<u32, D> {
    a.mapv(f32::to_bits)
}

/// A case: the graph's plan, scores [E, H], x [n, H, d], an upstream gradient [n, H, d].
struct Case {
    n: usize,
    src: Vec<i64>,
    dst: Vec<i64>,
    plan: GatherReducePlan,
    scores: Array2<f32>,
    x: Array3<f32>,
    r: Array3<f32>,
}

fn case(n: usize, e: usize, heads: usize, d: usize) -> Case {
    let (src, dst) = graph(n, e);
    let plan = GatherReducePlan::new([n, heads, d], &src, Segments::ids(&dst, n), 0).unwrap();
    let f = values(0, 6.0);
    let scores = Array2::from_shape_fn((e, heads), |(p, h)| f(p * heads + h));
    let x = Array3::from_shape_fn((n, heads, d), |(i, h, j)| f(3 + (i * heads + h) * d + j) / 3.0);
    let r = Array3::from_shape_fn((n, heads, d), |(i, h, j)| f(11 + (i * heads + h) * d + j));
    Case {
        n,
        src,
        dst,
        plan,
        scores,
        x,
        r,
    }
}

fn small() -> Case {
    if cfg!(miri) {
        case(6, 14, 2, 3)
    } else {
        case(40, 300, 4, 5)
    }
}

#[test]
fn softmax_is_the_literal_loop() {
    let c = small();
    let segs = members(&c.dst, c.n);
    let want = softmax_loop(&c.scores, &segs);
    let got = c.plan.softmax(&c.scores).unwrap();
    let ulps = exp_ulps();
    assert!(near(&got, &want, ulps), "{got} {want}");
    // Without a plan, by ids and by ranges (the same segments sorted).
    let free = c.scores.segment_softmax(Segments::ids(&c.dst, c.n)).unwrap();
    assert!(near(&free, &want, ulps));
    let order: Vec<usize> = segs.iter().flatten().copied().collect();
    let sorted = c.scores.select(Axis(0), &order);
    let lengths: Vec<usize> = segs.iter().map(Vec::len).collect();
    let by_ranges = sorted.segment_softmax(Segments::lengths(&lengths)).unwrap();
    assert!(near(&by_ranges, &want.select(Axis(0), &order), ulps));
    // One head as [P]: the column of [P, H].
    let one = c.plan.softmax(&c.scores.column(1).to_owned()).unwrap();
    assert!(near(&one, &want.column(1).to_owned(), ulps));
    // Each segment's coefficients sum to 1 within rounding; empty segments have none.
    for ps in segs.iter().filter(|ps| !ps.is_empty()) {
        let sum: f32 = ps.iter().map(|&p| got[[p, 0]]).sum();
        assert!((sum - 1.0).abs() < 1e-5, "{sum}");
    }
}

#[test]
fn softmax_edges_inf_nan_and_skipped_positions() {
    // Segment 0: all -inf; segment 1: a NaN; segment 2: +inf (inf - inf: NaN, as in PyG and
    // torch); segment 3 empty;
    // segment 4: large scores (exp would overflow without the max).
    let scores = array![
        [f32::NEG_INFINITY],
        [f32::NEG_INFINITY],
        [1.0],
        [f32::NAN],
        [f32::INFINITY],
        [2.0],
        [100.0],
        [99.0]
    ];
    let ids = [0, 0, 1, 1, 2, 2, 4, 4];
    let alpha = scores.segment_softmax(Segments::ids(&ids, 5)).unwrap();
    assert_eq!(&alpha.as_slice().unwrap()[..2], &[0.0, 0.0]);
    assert!(alpha[[2, 0]].is_nan() && alpha[[3, 0]].is_nan());
    assert!(alpha[[4, 0]].is_nan());
    assert!(alpha[[5, 0]].is_nan());
    let e = (-1.0f32).exp();
    let want = array![1.0 / (1.0 + e), e / (1.0 + e)];
    assert!(near(
        &alpha.column(0).slice(ndarray::s![6..]).to_owned(),
        &want,
        exp_ulps()
    ));
    // A skipped position belongs to no segment: zero, in every output.
    let plan = GatherReducePlan::new_skipping([3, 1, 2], &[0, -1, 2], -1, Segments::uniform(3), 0).unwrap();
    let s = array![[1.0f32], [5.0], [1.0]];
    let alpha = plan.softmax(&s).unwrap();
    assert_eq!(alpha, array![[0.5], [0.0], [0.5]]);
    let x = Array3::from_elem((3, 1, 2), 1.0f32);
    let gw = plan
        .backward_weights(&x, &Array3::from_elem((1, 1, 2), 2.0))
        .unwrap();
    assert_eq!(gw, array![[4.0], [0.0], [4.0]]);
    let gs = plan
        .softmax_backward(&alpha, &array![[1.0], [7.0], [3.0]])
        .unwrap();
    assert_eq!(gs, array![[-0.5], [0.0], [0.5]]);
}

/// The literal weighted gather-reduce of per-head weights: `Sum` or `Mean` (by `Σ w`).
fn weighted_loop(c: &Case, w: &Array2<f32>, mean: bool) -> Array3<f32> {
    let (_, heads, d) = c.x.dim();
    let mut out = Array3::zeros((c.n, heads, d));
    for (s, ps) in members(&c.dst, c.n).iter().enumerate() {
        for h in 0..heads {
            let mut ws = 0.0f32;
            for j in 0..d {
                let mut acc = 0.0f32;
                for &p in ps {
                    acc += w[[p, h]] * c.x[[c.src[p] as usize, h, j]];
                }
                out[[s, h, j]] = acc;
            }
            for &p in ps {
                ws += w[[p, h]];
            }
            if mean && !ps.is_empty() {
                for j in 0..d {
                    out[[s, h, j]] /= ws;
                }
            }
        }
    }
    out
}

#[test]
fn per_head_weights_are_the_literal_loop_forward_and_backward() {
    let c = small();
    let alpha = c.plan.softmax(&c.scores).unwrap();
    for (pooling, mean) in [(Pooling::Sum, false), (Pooling::Mean, true)] {
        let want = weighted_loop(&c, &alpha, mean);
        let got = c.plan.apply(&c.x, pooling.weighted(&alpha)).unwrap();
        assert_eq!(bits(&got), bits(&want), "{pooling}");
        let call =
            c.x.gather_reduce(&c.src, Segments::ids(&c.dst, c.n), 0, pooling.weighted(&alpha));
        assert_eq!(bits(&call.unwrap()), bits(&want), "{pooling} call");
    }
    // A transposed x and output: the heads' slices are strided.
    let xt = c.x.view().permuted_axes([0, 2, 1]).to_owned();
    let xt = xt.view().permuted_axes([0, 2, 1]);
    assert_eq!(
        bits(&c.plan.apply(&xt, Pooling::Sum.weighted(&alpha)).unwrap()),
        bits(&weighted_loop(&c, &alpha, false))
    );
    // Backward: grad_x[src[p], h] += alpha[p, h] · r[dst[p], h], in position order.
    let (_, heads, d) = c.x.dim();
    let mut want = Array3::<f32>::zeros(c.x.dim());
    for p in 0..c.src.len() {
        let (i, s) = (c.src[p] as usize, c.dst[p] as usize);
        for h in 0..heads {
            for j in 0..d {
                want[[i, h, j]] += alpha[[p, h]] * c.r[[s, h, j]];
            }
        }
    }
    let mut got = Array3::zeros(c.x.dim());
    c.plan
        .backward_into(&c.r, Pooling::Sum.weighted(&alpha), &mut got)
        .unwrap();
    assert_eq!(bits(&got), bits(&want));
    let (rows, grads) = c.plan.backward_rows(&c.r, Pooling::Sum.weighted(&alpha)).unwrap();
    for (k, &i) in rows.iter().enumerate() {
        assert_eq!(
            bits(&grads.index_axis(Axis(0), k).to_owned()),
            bits(&want.index_axis(Axis(0), i).to_owned())
        );
    }
}

#[test]
fn backward_weights_and_softmax_backward_are_the_literal_loops() {
    let c = small();
    let (e, heads, d) = (c.src.len(), c.x.dim().1, c.x.dim().2);
    let got = c.plan.backward_weights(&c.x, &c.r).unwrap();
    let mut want = Array2::<f32>::zeros((e, heads));
    for p in 0..e {
        for h in 0..heads {
            let mut acc = 0.0f32;
            for j in 0..d {
                acc += c.x[[c.src[p] as usize, h, j]] * c.r[[c.dst[p] as usize, h, j]];
            }
            want[[p, h]] = acc;
        }
    }
    assert_eq!(bits(&got), bits(&want));
    let alpha = c.plan.softmax(&c.scores).unwrap();
    let g = c.plan.softmax_backward(&alpha, &got).unwrap();
    let mut want_g = Array2::<f32>::zeros((e, heads));
    for ps in members(&c.dst, c.n) {
        for h in 0..heads {
            let mut dot = 0.0f32;
            for &p in &ps {
                dot += got[[p, h]] * alpha[[p, h]];
            }
            for &p in &ps {
                want_g[[p, h]] = alpha[[p, h]] * (got[[p, h]] - dot);
            }
        }
    }
    assert_eq!(bits(&g), bits(&want_g));
}

#[test]
fn heads_after_a_batch_dimension_axis_1() {
    // x [b, n, H, d] gathered along axis 1: every weight weighs its head in each batch row.
    let (b, n, heads, d) = (2, 5, 3, 2);
    let (src, dst) = ([4, 0, 2, 2, 1, 4], [1, 0, 1, 2, 2, 2]);
    let f = values(0, 4.0);
    let x = ndarray::Array4::from_shape_fn((b, n, heads, d), |(i, r, h, j)| {
        f(((i * n + r) * heads + h) * d + j)
    });
    let w = Array2::from_shape_fn((6, heads), |(p, h)| f(1000 + p * heads + h));
    let plan = GatherReducePlan::new(x.shape(), &src, Segments::ids(&dst, 3), 1).unwrap();
    let got = plan.apply(&x, Pooling::Mean.weighted(&w)).unwrap();
    let g = ndarray::Array4::from_shape_fn((b, 3, heads, d), |(i, s, h, j)| {
        f(77 + ((i * 3 + s) * heads + h) * d + j)
    });
    let mut grad = ndarray::Array4::<f32>::zeros(x.dim());
    plan.backward_into(&g, Pooling::Sum.weighted(&w), &mut grad)
        .unwrap();
    let gw = plan.backward_weights(&x, &g).unwrap();
    for i in 0..b {
        for s in 0..3 {
            for h in 0..heads {
                let ps: Vec<usize> = (0..6).filter(|&p| dst[p] == s).collect();
                let ws = ps.iter().fold(0.0f32, |a, &p| a + w[[p, h]]);
                for j in 0..d {
                    let sum = ps
                        .iter()
                        .fold(0.0f32, |a, &p| a + w[[p, h]] * x[[i, src[p], h, j]]);
                    assert_eq!(got[[i, s, h, j]].to_bits(), (sum / ws).to_bits());
                }
            }
        }
    }
    let mut want = ndarray::Array4::<f32>::zeros(x.dim());
    for p in 0..6 {
        for i in 0..b {
            for h in 0..heads {
                for j in 0..d {
                    want[[i, src[p], h, j]] += w[[p, h]] * g[[i, dst[p], h, j]];
                }
            }
        }
    }
    assert_eq!(bits(&grad), bits(&want));
    // backward_weights sums over the batch rows first, then each head's elements.
    for p in 0..6 {
        for h in 0..heads {
            let mut acc = 0.0f32;
            for i in 0..b {
                for j in 0..d {
                    acc += x[[i, src[p], h, j]] * g[[i, dst[p], h, j]];
                }
            }
            assert_eq!(gw[[p, h]].to_bits(), acc.to_bits(), "{p} {h}");
        }
    }
}

/// The layer's loss `Σ h · r`, `h` the plan's sum of x weighted by softmax(scores), in f64.
fn loss(plan: &GatherReducePlan, scores: &Array2<f64>, x: &Array3<f64>, r: &Array3<f64>) -> f64 {
    let alpha = plan.softmax(scores).unwrap();
    let h = plan.apply(x, Pooling::Sum.weighted(&alpha)).unwrap();
    (h * r).sum()
}

// (No new unsafe code: Miri skips its hundreds of forward passes.)
#[cfg(not(miri))]
#[test]
fn gradients_match_central_differences_in_f64() {
    let c = case(6, 14, 2, 3);
    let (scores, x, r) = (c.scores.mapv(f64::from), c.x.mapv(f64::from), c.r.mapv(f64::from));
    let alpha = c.plan.softmax(&scores).unwrap();
    let g_scores = c
        .plan
        .softmax_backward(&alpha, &c.plan.backward_weights(&x, &r).unwrap())
        .unwrap();
    let mut g_x = Array3::zeros(x.dim());
    c.plan
        .backward_into(&r, Pooling::Sum.weighted(&alpha), &mut g_x)
        .unwrap();
    // Each element of `at` moved by `±eps`, the loss's central difference against `got`.
    fn central<D: ndarray::Dimension>(
        what: &str,
        at: &ndarray::Array<f64, D>,
        got: &ndarray::Array<f64, D>,
        loss: impl Fn(&ndarray::Array<f64, D>) -> f64,
    ) {
        let eps = 1e-6;
        // (Both in standard layout: flat positions are the same elements.)
        for (i, &g) in got.iter().enumerate() {
            let (mut up, mut down) = (at.clone(), at.clone());
            up.as_slice_mut().expect("standard layout")[i] += eps;
            down.as_slice_mut().expect("standard layout")[i] -= eps;
            let num = (loss(&up) - loss(&down)) / (2.0 * eps);
            assert!(
                (num - g).abs() <= 1e-7 + 1e-6 * g.abs(),
                "{what}[{i}]: {num} vs {g}"
            );
        }
    }
    central("scores", &scores, &g_scores, |s| loss(&c.plan, s, &x, &r));
    central("x", &x, &g_x, |x| loss(&c.plan, &scores, x, &r));
}

#[cfg(not(miri))]
#[test]
fn the_same_bits_on_1_and_3_threads() {
    let c = case(3000, 60_000, 4, 8);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let alpha = c.plan.softmax(&c.scores).unwrap();
            let h = c.plan.apply(&c.x, Pooling::Sum.weighted(&alpha)).unwrap();
            let mut g_x = Array3::zeros(c.x.dim());
            c.plan
                .backward_into(&c.r, Pooling::Sum.weighted(&alpha), &mut g_x)
                .unwrap();
            let g_a = c.plan.backward_weights(&c.x, &c.r).unwrap();
            let g_s = c.plan.softmax_backward(&alpha, &g_a).unwrap();
            let free = c.scores.segment_softmax(Segments::ids(&c.dst, c.n)).unwrap();
            (
                bits(&alpha),
                bits(&h),
                bits(&g_x),
                bits(&g_a),
                bits(&g_s),
                bits(&free),
            )
        })
    };
    assert!(run(1) == run(3));
}

#[test]
fn errors_name_the_shapes_and_write_nothing() {
    let c = small();
    let (e, heads) = c.scores.dim();
    let msg = |r: Result<_, GatherError>| r.map(|_: ()| ()).unwrap_err().to_string();
    // Scores of another position count or rank.
    let bad = Array2::<f32>::zeros((e + 1, heads));
    let err = c.plan.softmax(&bad).unwrap_err();
    assert!(matches!(err, GatherError::Scores { what: "scores", .. }), "{err}");
    let err = c.plan.softmax(&Array3::<f32>::zeros((e, heads, 1))).unwrap_err();
    assert!(
        err.to_string().contains(&format!("expected [{e}] or [{e}, H]")),
        "{err}"
    );
    assert!(matches!(
        Array1::<f32>::zeros(3).segment_softmax(Segments::ids(&[0, 0], 1)),
        Err(GatherError::Segments { .. })
    ));
    let alpha = c.plan.softmax(&c.scores).unwrap();
    let err = c
        .plan
        .softmax_backward(&alpha, &Array2::zeros((e, heads + 1)))
        .unwrap_err();
    assert!(err.to_string().contains("g_alpha of shape"), "{err}");
    // x and grad_out of the wrong shapes.
    let err = c
        .plan
        .backward_weights(&Array3::<f32>::zeros((c.n + 1, heads, 5)), &c.r)
        .unwrap_err();
    assert!(matches!(err, GatherError::InputShape { .. }), "{err}");
    let err = c
        .plan
        .backward_weights(&c.x, &Array3::<f32>::zeros((c.n - 1, heads, 5)))
        .unwrap_err();
    assert!(matches!(err, GatherError::GradShape { .. }), "{err}");
    // Per-head weights of the wrong head count or position count: nothing written.
    let mut out = Array3::from_elem(c.x.dim(), 7.0f32);
    let w3 = Array2::<f32>::ones((e, heads + 1));
    let m = msg(c.plan.apply_into(&c.x, Pooling::Sum.weighted(&w3), &mut out));
    assert!(
        m.contains(&format!(
            "weigh {} heads, but the input's dimension 1 (after the axis) is {heads} long",
            heads + 1
        )),
        "{m}"
    );
    let m = msg(c.plan.apply_into(
        &c.x,
        Pooling::Sum.weighted(&Array2::<f32>::ones((e - 1, heads))),
        &mut out,
    ));
    assert!(m.contains(&format!("{} weights for {e} positions", e - 1)), "{m}");
    let mut grad = Array3::from_elem(c.x.dim(), 7.0f32);
    let m = msg(c.plan.backward_into(&c.r, Pooling::Mean.weighted(&w3), &mut grad));
    assert!(
        m.starts_with("GatherReducePlan::backward_into: weights of shape"),
        "{m}"
    );
    assert!(out.iter().chain(&grad).all(|&v| v == 7.0));
    // Calls that take [P] weights only: a fused step.
    let mut table = c.x.clone();
    let err = c
        .plan
        .step(
            &c.r,
            Pooling::Sum.weighted(&alpha),
            &mut table,
            &mut ndarray_gather::optim::Sgd::new(0.1),
        )
        .unwrap_err();
    assert!(err.to_string().contains("takes one weight per position"), "{err}");
    assert_eq!(table, c.x);
    // Quantized rows have no heads.
    let q = Rowwise::Int8.quantize(&Array2::<f32>::ones((4, 2))).unwrap();
    let qt = QTable::new(&q, Rowwise::Int8).unwrap();
    let plan = GatherReducePlan::new(qt.dim(), &[0, 3], Segments::uniform(2), 0).unwrap();
    let err = plan
        .apply(&qt, Pooling::Sum.weighted(&Array2::<f32>::ones((2, 2))))
        .unwrap_err();
    assert!(
        matches!(
            err,
            GatherError::TableKind {
                kind: "quantized",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "GatherReducePlan::apply: a quantized table takes one weight per position ([P]), not weights of shape [2, 2] (per-head weights need an f32 array)"
    );
    // Before anything is written: an `_into` leaves its output as it was.
    let mut out = Array2::<f32>::from_elem((2, 2), 7.0);
    let err = plan
        .apply_into(&qt, Pooling::Sum.weighted(&Array2::<f32>::ones((2, 2))), &mut out)
        .unwrap_err();
    assert!(matches!(err, GatherError::TableKind { .. }), "{err}");
    assert!(out.iter().all(|&v| v == 7.0));
    // [P, 1] weights are [P] weights.
    let w1 = alpha.column(0).to_owned();
    let as_col = c
        .plan
        .apply(&c.x, Pooling::Sum.weighted(&w1.view().insert_axis(Axis(1))))
        .unwrap();
    assert_eq!(
        bits(&as_col),
        bits(&c.plan.apply(&c.x, Pooling::Sum.weighted(&w1)).unwrap())
    );
}

#[cfg(not(miri))]
mod fixtures {
    //! PyG 2.8's `utils.softmax` + `scatter(sum)` and PyTorch 2.15's autograd of them, in
    //! `f32` (`tests/fixtures/generate_attention.py`). The crate's `exp` is `f32::exp` and
    //! its sums run in position order; PyTorch's `exp` (vectorized) and its scatter's and
    //! autograd's orders differ in the last bits. Measured, in ulps of each row's largest
    //! value: alpha 0.1-2, h 0-2, g_x 0-1; g_scores in ulps of the case's largest (it
    //! cancels where an alpha is near 1): 2-4. The bound is 8.

    use ndarray::{Array2, ArrayD, Axis};
    use ndarray_gather::prelude::*;

    use crate::support::manifest::{Case, cases, read};

    fn load(c: &Case, key: &str) -> ArrayD<f32> {
        read(c.req(key)).unwrap_or_else(|| panic!("{}: {key}", c.name))
    }

    fn ids(c: &Case, key: &str) -> Vec<i64> {
        let a: ArrayD<i64> = read(c.req(key)).unwrap_or_else(|| panic!("{}: {key}", c.name));
        a.iter().copied().collect()
    }

    /// The largest difference in ulps of each row's (first axis) largest value.
    fn ulps(got: &ArrayD<f32>, want: &ArrayD<f32>) -> f32 {
        assert_eq!(got.shape(), want.shape());
        let mut worst = 0.0f32;
        for (g, w) in got.outer_iter().zip(want.outer_iter()) {
            let top = w.iter().fold(f32::MIN_POSITIVE, |m, &v| m.max(v.abs()));
            let ulp = f32::from_bits(top.to_bits() + 1) - top;
            for (&g, &w) in g.iter().zip(&w) {
                worst = worst.max((g - w).abs() / ulp);
            }
        }
        worst
    }

    /// The largest difference in ulps of the largest value.
    fn ulps_all(got: &ArrayD<f32>, want: &ArrayD<f32>) -> f32 {
        let top = want.iter().fold(f32::MIN_POSITIVE, |m, &v| m.max(v.abs()));
        let ulp = f32::from_bits(top.to_bits() + 1) - top;
        got.iter()
            .zip(want)
            .fold(0.0f32, |m, (g, w)| m.max((g - w).abs() / ulp))
    }

    #[test]
    fn a_gat_layer_matches_pyg_and_autograd() {
        let all = cases("ATTENTION_MANIFEST.txt");
        assert_eq!(all.len(), 4);
        for c in &all {
            let n = c.int("n") as usize;
            let (src, dst, indptr) = (ids(c, "src"), ids(c, "dst"), ids(c, "indptr"));
            let (scores, x, r) = (load(c, "scores"), load(c, "x"), load(c, "r"));
            let segs = match c.req("segments") {
                "ids" => Segments::ids(&dst, n),
                _ => Segments::indptr(&indptr),
            };
            let plan = GatherReducePlan::new(x.shape(), &src, segs, 0).unwrap();
            // One head ([E] scores, x [n, d]): the row is its one head.
            let one = c.int("heads") == 0;
            fn heads(a: &ArrayD<f32>, one: bool) -> ndarray::ArrayViewD<'_, f32> {
                if one {
                    a.view().insert_axis(Axis(1))
                } else {
                    a.view()
                }
            }
            let alpha = plan.softmax(&scores).unwrap();
            let w: Array2<f32> = heads(&alpha, one).into_dimensionality().unwrap().to_owned();
            let h = plan.apply(&x, Pooling::Sum.weighted(&w)).unwrap();
            let g_w = plan.backward_weights(&heads(&x, one), &heads(&r, one)).unwrap();
            let g_w = if one {
                g_w.column(0).to_owned().into_dyn()
            } else {
                g_w.into_dyn()
            };
            let g_scores = plan.softmax_backward(&alpha, &g_w).unwrap();
            let mut g_x = ArrayD::zeros(x.shape());
            plan.backward_into(&r, Pooling::Sum.weighted(&w), &mut g_x)
                .unwrap();
            // g_scores = alpha · (g − Σ g · alpha) cancels where one alpha is near 1: its
            // elements are compared in ulps of the case's largest, the rest row by row.
            let report = [
                ("alpha", ulps(&alpha, &load(c, "alpha"))),
                ("h", ulps(&h, &load(c, "h"))),
                ("g_x", ulps(&g_x, &load(c, "g_x"))),
                ("g_scores", ulps_all(&g_scores, &load(c, "g_scores"))),
            ];
            for (what, u) in report {
                assert!(u <= 8.0, "{}: {what} {u} ulps", c.name);
            }
        }
    }
}
