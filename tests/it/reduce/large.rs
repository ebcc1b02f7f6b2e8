//! Gather-reduces large enough for the parallel walks and the per-call sort of ids (an
//! output of 1 MiB and more), on one thread and on three: the same bits, and the same as a
//! plain loop over the positions and as the plan.

use ndarray::{Array1, Array2, ArrayView2};
use ndarray_gather::prelude::*;

use crate::support::threads::on_1_and_3_natively as on_1_and_3;

/// A plain loop: positions in order, each combined into its segment's row (ids
/// segments, axis 0, f32), with the argmax; decisions 15-17 for Sum, Mean, Max, Min.
fn by_loop(
    x: &ArrayView2<f32>,
    idx: &[i64],
    ids: &[usize],
    n: usize,
    pooling: Pooling,
) -> (Array2<f32>, Array2<usize>) {
    let w = x.ncols();
    let mut out = Array2::<f32>::zeros((n, w));
    let mut arg = Array2::<usize>::from_elem((n, w), idx.len());
    let mut count = vec![0usize; n];
    for (p, (&i, &s)) in idx.iter().zip(ids).enumerate() {
        for c in 0..w {
            let v = x[[i as usize, c]];
            let o = &mut out[[s, c]];
            match pooling {
                Pooling::Sum | Pooling::Mean => *o = if count[s] == 0 { 0.0 + v } else { *o + v },
                Pooling::Max | Pooling::Min => {
                    let better = if pooling == Pooling::Max { v > *o } else { v < *o };
                    if count[s] == 0 || better || (v.is_nan() && !o.is_nan()) {
                        *o = v;
                        arg[[s, c]] = p;
                    }
                }
                _ => unreachable!(),
            }
        }
        count[s] += 1;
    }
    if pooling == Pooling::Mean {
        for (mut row, &c) in out.outer_iter_mut().zip(&count) {
            if c > 0 {
                row.mapv_inplace(|v| v / c as f32);
            }
        }
    }
    (out, arg)
}

/// Every pooling of the loop; under Miri (its threads are slow) `miri`'s alone.
fn poolings(miri: Pooling) -> Vec<Pooling> {
    if cfg!(miri) {
        vec![miri]
    } else {
        vec![Pooling::Sum, Pooling::Mean, Pooling::Max, Pooling::Min]
    }
}

fn values(n: usize, seed: u64) -> Vec<i64> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as i64
        })
        .collect()
}

/// A graph of `nodes` rows of `width` (outputs of `nodes * width * 4` bytes) and `edges`
/// edges; `width = 64` and 5000 nodes give an output of 1.28 MB: sorted by segment.
fn graph(nodes: usize, width: usize, edges: usize) -> (Array2<f32>, Vec<i64>, Vec<usize>) {
    let x = Array2::from_shape_fn((nodes, width), |(r, c)| {
        ((r * 31 + c * 7) % 97) as f32 * 0.25 - 10.0
    });
    let src: Vec<i64> = values(edges, 3).iter().map(|v| v % nodes as i64).collect();
    // A quarter of the nodes receive nothing (empty segments).
    let dst: Vec<usize> = values(edges, 5)
        .iter()
        .map(|v| (v % (nodes as i64 * 3 / 4)) as usize)
        .collect();
    (x, src, dst)
}

#[test]
fn large_graphs_give_the_loops_bits_on_any_thread_count() {
    let (nodes, width, edges) = if cfg!(miri) {
        (6, 3, 20)
    } else {
        (5000, 64, 40_000)
    };
    let (x, src, dst) = graph(nodes, width, edges);
    // (Under Miri: sorted ids with an argmax.)
    for pooling in poolings(Pooling::Max) {
        let (want, want_arg) = by_loop(&x.view(), &src, &dst, nodes, pooling);
        let got = on_1_and_3(|| {
            x.gather_reduce(&src, Segments::ids(&dst, nodes), 0, pooling)
                .unwrap()
        });
        assert_eq!(got, want, "{pooling}");
        let plan = GatherReducePlan::new(x.shape(), &src, Segments::ids(&dst, nodes), 0).unwrap();
        assert_eq!(
            on_1_and_3(|| plan.apply(&x, pooling).unwrap()),
            want,
            "plan {pooling}"
        );
        if matches!(pooling, Pooling::Max | Pooling::Min) {
            let (m, arg) = on_1_and_3(|| {
                x.gather_reduce_arg(&src, Segments::ids(&dst, nodes), 0, pooling)
                    .unwrap()
            });
            assert_eq!((m, arg), (want, want_arg.clone()), "arg {pooling}");
        }
    }
}

/// Narrow rows by ids into an output that stays in the caches (walked by ids, each span
/// of segments its thread's, its positions sorted by span first) gathering enough bytes to
/// run in several spans: the loop's bits on one thread and three, for random rows and for
/// `segment_reduce`'s own rows in order.
#[test]
fn narrow_rows_by_ids_in_spans_give_the_loops_bits() {
    let (nodes, width, edges) = if cfg!(miri) {
        (7, 4, 24)
    } else {
        (20_000, 4, 200_000)
    };
    let (x, src, dst) = graph(nodes, width, edges);
    let v = Array2::from_shape_fn((edges, width), |(e, c)| {
        ((e * 7 + c * 3) % 97) as f32 / 16.0 - 3.0
    });
    let every: Vec<i64> = (0..edges as i64).collect();
    for pooling in poolings(Pooling::Sum) {
        let (want, _) = by_loop(&x.view(), &src, &dst, nodes, pooling);
        let got = on_1_and_3(|| {
            x.gather_reduce(&src, Segments::ids(&dst, nodes), 0, pooling)
                .unwrap()
        });
        assert_eq!(got, want, "{pooling}");
        let (want, _) = by_loop(&v.view(), &every, &dst, nodes, pooling);
        let got = on_1_and_3(|| v.segment_reduce(Segments::ids(&dst, nodes), 0, pooling).unwrap());
        assert_eq!(got, want, "segment_reduce {pooling}");
    }
}

#[test]
fn large_bags_give_the_loops_bits_on_any_thread_count() {
    let (rows, width, bags) = if cfg!(miri) { (7, 2, 4) } else { (20_000, 48, 3000) };
    let table = Array2::from_shape_fn((rows, width), |(r, c)| ((r * 13 + c) % 101) as f32 - 50.0);
    let lens: Vec<i64> = values(bags, 7).iter().map(|v| v % 40).collect();
    let mut starts = vec![];
    let mut at = 0;
    for l in &lens {
        starts.push(at);
        at += l;
    }
    let idx: Vec<i64> = values(at as usize, 9)
        .iter()
        .map(|v| v % rows as i64 - rows as i64 / 2)
        .collect();
    let ids = Segments::starts(&starts).to_ids(idx.len()).unwrap();
    let resolved: Vec<i64> = idx
        .iter()
        .map(|&i| if i < 0 { i + rows as i64 } else { i })
        .collect();
    // (Under Miri: sorted segments with a divisor.)
    for pooling in poolings(Pooling::Mean) {
        let (want, want_arg) = by_loop(&table.view(), &resolved, ids.as_slice().unwrap(), bags, pooling);
        let got = on_1_and_3(|| {
            table
                .gather_reduce(&idx, Segments::starts(&starts), 0, pooling)
                .unwrap()
        });
        assert_eq!(got, want, "{pooling}");
        if !cfg!(miri) {
            let got = on_1_and_3(|| {
                table
                    .gather_reduce(&idx, Segments::lengths(&lens), 0, pooling)
                    .unwrap()
            });
            assert_eq!(got, want, "lengths {pooling}");
        }
        if matches!(pooling, Pooling::Max | Pooling::Min) {
            let got = on_1_and_3(|| {
                table
                    .gather_reduce_arg(&idx, Segments::starts(&starts), 0, pooling)
                    .unwrap()
            });
            assert_eq!(got, (want, want_arg), "arg {pooling}");
        }
    }
    // A transposed input (rows that are not runs) gives the same bits.
    let t = table.t().to_owned();
    let tt = t.t();
    let got = on_1_and_3(|| {
        tt.gather_reduce(&idx, Segments::starts(&starts), 0, Pooling::Sum)
            .unwrap()
    });
    assert_eq!(
        got,
        table
            .gather_reduce(&idx, Segments::starts(&starts), 0, Pooling::Sum)
            .unwrap()
    );
}

#[test]
fn weighted_sums_on_any_thread_count_match_the_loop() {
    let (nodes, width, edges) = if cfg!(miri) {
        (5, 2, 12)
    } else {
        (6000, 64, 30_000)
    };
    let (x, src, dst) = graph(nodes, width, edges);
    let w = Array1::from_shape_fn(edges, |e| (e % 5) as f32 * 0.5 - 1.0);
    let got = on_1_and_3(|| {
        x.gather_reduce(&src, Segments::ids(&dst, nodes), 0, Pooling::Sum.weighted(&w))
            .unwrap()
    });
    let mut want = Array2::<f32>::zeros((nodes, width));
    let mut seen = vec![false; nodes];
    for (e, (&s, &d)) in src.iter().zip(&dst).enumerate() {
        for c in 0..width {
            let t = w[e] * x[[s as usize, c]];
            want[[d, c]] = if seen[d] { want[[d, c]] + t } else { 0.0 + t };
        }
        seen[d] = true;
    }
    assert_eq!(got, want);
}

/// The backward of a graph plan large enough to run in parallel chunks of rows: the same
/// bits on one thread and three, and the literal loop's (decision 34: `grad[src[e]] +=
/// g[dst[e]] / count[dst[e]]` for Mean, in edge order; through the argmax for Max).
#[test]
fn large_backwards_give_the_loops_bits_on_any_thread_count() {
    let (nodes, width, edges) = if cfg!(miri) {
        (6, 3, 20)
    } else {
        (5000, 64, 40_000)
    };
    let (x, src, dst) = graph(nodes, width, edges);
    let plan = GatherReducePlan::new(x.shape(), &src, Segments::ids(&dst, nodes), 0).unwrap();
    let g = Array2::from_shape_fn((nodes, width), |(r, c)| {
        ((r * 5 + c * 3) % 11) as f32 * 0.75 - 4.0
    });
    let mut count = vec![0usize; nodes];
    for &d in &dst {
        count[d] += 1;
    }
    let by_loop = |mut want: Array2<f32>| {
        for (&s, &d) in src.iter().zip(&dst) {
            let c = 1.0 / count[d] as f32;
            for k in 0..width {
                want[[s as usize, k]] += c * g[[d, k]];
            }
        }
        want
    };
    let got = on_1_and_3(|| {
        let mut grad = Array2::<f32>::ones((nodes, width));
        plan.backward_into(&g, Pooling::Mean, &mut grad).unwrap();
        grad
    });
    assert_eq!(got, by_loop(Array2::ones((nodes, width))));
    let (rows, grads) = on_1_and_3(|| plan.backward_rows(&g, Pooling::Mean).unwrap());
    let want = by_loop(Array2::zeros((nodes, width)));
    let mut touched: Vec<usize> = src.iter().map(|&s| s as usize).collect();
    touched.sort();
    touched.dedup();
    assert_eq!(rows.to_vec(), touched);
    for (k, &r) in rows.iter().enumerate() {
        assert_eq!(grads.row(k), want.row(r), "row {r}");
    }
    let (_, arg) = plan.apply_arg(&x, Pooling::Max).unwrap();
    let mut want = Array2::<f32>::zeros((nodes, width));
    for (e, (&s, &d)) in src.iter().zip(&dst).enumerate() {
        for k in 0..width {
            if arg[[d, k]] == e {
                want[[s as usize, k]] += g[[d, k]];
            }
        }
    }
    let got = on_1_and_3(|| {
        let mut grad = Array2::<f32>::zeros((nodes, width));
        plan.backward_arg_into(&g, &arg, &mut grad).unwrap();
        grad
    });
    assert_eq!(got, want);
}
