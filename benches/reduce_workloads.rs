//! The gather-reduce workloads B1-B4, G1-G4, R1 of shared/BENCH-WORKLOADS.md, shared by
//! the criterion bench (`benches/reduce.rs`) and the peer comparison
//! (`examples/reduce_workloads.rs`).
//!
//! Each workload owns its data (plain `Array` allocations, as users make them) and offers
//! named variants: `alloc` (the crate's allocating call), `into` (its `_into` call into a
//! reused output), for G4 `plan_into` and `plan_build`, and the hand-written fused Rust
//! loops the issue measured: `hand1` (one thread) and `hand2` (two threads, each owning
//! half of the outputs).

#![allow(dead_code)]

use ndarray::{Array1, Array2, ArrayView2, ArrayViewMut2, Axis};
use ndarray_gather::optim::{Adam, Optimizer, RowwiseAdagrad, Sgd};
use ndarray_gather::prelude::*;
use std::hint::black_box;

pub const REDUCE_IDS: [&str; 24] = [
    "B1_bag_sum",
    "B2_bag_weighted",
    "B3_bag_mean",
    "B4_bag_max",
    "G1_graph_sum",
    "G2_graph_mean",
    "G3_graph_max_arg",
    "G4_graph_plan",
    "R1_segment_sum",
    "T1_bag_sum_backward",
    "T2_bag_mean_backward",
    "T3_graph_mean_backward",
    "B5_small_skewed_bags",
    "Q4_quantize",
    "Q1_int8_bags",
    "Q2_int4_bags",
    "Q3_half_bags",
    "K1_dlrm_batch",
    "K2_int8_dlrm",
    "O1_bag_step",
    "O2_dlrm_step",
    "O3_adam_step",
    "A1_attention_layer",
    "R2_narrow_ids",
];

/// Feature width of every workload (f32).
pub const WIDTH: usize = 64;

/// A named, timed call.
pub type Variant = (&'static str, Box<dyn FnMut()>);
/// A variant's call on one batch's ids and bags' starts.
type PerBatch = Box<dyn FnMut(&Array1<i64>, &Array1<i64>)>;

pub struct ReduceWorkload {
    pub id: &'static str,
    /// The output's bytes (the memcpy reference copies as many).
    pub out_bytes: usize,
    /// The bytes of the rows the call gathers (what a gather would materialize).
    pub gathered_bytes: usize,
    pub variants: Vec<Variant>,
}

#[path = "lcg.rs"]
mod lcg;
pub use lcg::uniform;

fn table(rows: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, WIDTH), |(r, c)| ((r * 7 + c) % 65521) as f32 * 0.5)
}

/// T1-T3: the backward of B1's and B3's bags and of G2's graph through a plan (built, and
/// its rows sorted, untimed): `rows` (`backward_rows`), `dense` (a reused gradient zeroed,
/// then `backward_into`), `dense_fresh` (a fresh zeroed gradient, then `backward_into`),
/// `dense_fresh_filled` (the same, its pages written once in order first);
/// `copy` / `copy_first` (a copy of the unsorted plan, without and with its first
/// `backward_rows`: the sort's cost).
fn backward(id: &'static str) -> ReduceWorkload {
    let mut variants: Vec<Variant> = Vec::new();
    let (plan, grad_out, rows, pooling) = if id == "T3_graph_mean_backward" {
        let nodes = 100_000;
        let src = Array1::from(uniform(1_000_000, nodes, 21));
        let dst = Array1::from(uniform(1_000_000, nodes, 22));
        let plan = GatherReducePlan::new([nodes, WIDTH], &src, Segments::ids(&dst, nodes), 0).unwrap();
        (plan, table(nodes), nodes, Pooling::Mean)
    } else {
        let (starts, n) = bags();
        let idx = Array1::from(uniform(n, 1_000_000, 12));
        let plan = GatherReducePlan::new([1_000_000, WIDTH], &idx, Segments::starts(&starts), 0).unwrap();
        let pooling = if id == "T1_bag_sum_backward" {
            Pooling::Sum
        } else {
            Pooling::Mean
        };
        (plan, table(starts.len()), 1_000_000, pooling)
    };
    let out_bytes = rows * WIDTH * 4;
    let gathered_bytes = plan.positions() * WIDTH * 4;
    {
        // A copy of the plan (unsorted), and a copy with its first backward: the sort by
        // row costs the difference less `rows`.
        let (p, g) = (plan.clone(), grad_out.clone());
        let q = p.clone();
        variants.push(("copy", Box::new(move || drop(black_box(q.clone())))));
        variants.push((
            "copy_first",
            Box::new(move || {
                let fresh = p.clone();
                black_box(fresh.backward_rows(&g, pooling).unwrap());
            }),
        ));
    }
    // The first backward sorts the plan's rows: untimed, as the plan's build.
    plan.backward_rows(&grad_out, pooling).unwrap();
    if id != "T3_graph_mean_backward" {
        let (p, g) = (plan.clone(), grad_out.clone());
        variants.push((
            "rows",
            Box::new(move || {
                black_box(p.backward_rows(&g, pooling).unwrap());
            }),
        ));
    }
    {
        let (p, g) = (plan.clone(), grad_out.clone());
        let mut grad = Array2::<f32>::zeros((rows, WIDTH));
        variants.push((
            "dense",
            Box::new(move || {
                grad.fill(0.0);
                p.backward_into(&g, pooling, &mut grad).unwrap();
            }),
        ));
    }
    {
        let (p, g) = (plan.clone(), grad_out.clone());
        variants.push((
            "dense_fresh_filled",
            Box::new(move || {
                let mut grad = Array2::<f32>::zeros((rows, WIDTH));
                grad.fill(0.0);
                p.backward_into(&g, pooling, &mut grad).unwrap();
                black_box(grad);
            }),
        ));
    }
    variants.push((
        "dense_fresh",
        Box::new(move || {
            let mut grad = Array2::<f32>::zeros((rows, WIDTH));
            plan.backward_into(&grad_out, pooling, &mut grad).unwrap();
            black_box(grad);
        }),
    ));
    ReduceWorkload {
        id,
        out_bytes,
        gathered_bytes,
        variants,
    }
}

/// 16384 bags of 1..=64 positions: their starts (torch's offsets) and the positions.
fn bags() -> (Vec<i64>, usize) {
    let lens: Vec<i64> = uniform(16384, 64, 11).into_iter().map(|l| l + 1).collect();
    let mut starts = Vec::with_capacity(lens.len());
    let mut at = 0;
    for l in lens {
        starts.push(at);
        at += l;
    }
    (starts, at as usize)
}

/// Rows `lo..hi` of `out`: bag sums of `table` rows by `idx`, bags from `starts`.
fn hand_bags(table: &ArrayView2<f32>, idx: &[i64], starts: &[i64], mut out: ArrayViewMut2<f32>, lo: usize) {
    let t = table.as_slice().unwrap();
    for (b, mut row) in out.outer_iter_mut().enumerate() {
        let b = lo + b;
        let end = starts.get(b + 1).map_or(idx.len(), |&e| e as usize);
        let acc = row.as_slice_mut().unwrap();
        acc.fill(0.0);
        for &i in &idx[starts[b] as usize..end] {
            let r = &t[i as usize * WIDTH..][..WIDTH];
            for (a, v) in acc.iter_mut().zip(r) {
                *a += v;
            }
        }
    }
}

/// Outputs `lo..hi` of a graph sum: `out[dst[e]] += x[src[e]]` for the edges whose `dst`
/// falls there (every edge read).
fn hand_graph(x: &[f32], src: &[i64], dst: &[i64], out: &mut [f32], lo: usize, hi: usize) {
    out.fill(0.0);
    for (&s, &d) in src.iter().zip(dst) {
        let d = d as usize;
        if d < lo || d >= hi {
            continue;
        }
        let (o, r) = (
            &mut out[(d - lo) * WIDTH..][..WIDTH],
            &x[s as usize * WIDTH..][..WIDTH],
        );
        for (a, v) in o.iter_mut().zip(r) {
            *a += v;
        }
    }
}

/// Outputs `lo..hi` of a CSR sum (rows `ptr`, columns `col`).
fn hand_csr(x: &[f32], ptr: &[usize], col: &[usize], out: &mut [f32], lo: usize) {
    for (n, o) in out.chunks_exact_mut(WIDTH).enumerate() {
        let n = lo + n;
        o.fill(0.0);
        for &c in &col[ptr[n]..ptr[n + 1]] {
            for (a, v) in o.iter_mut().zip(&x[c * WIDTH..][..WIDTH]) {
                *a += v;
            }
        }
    }
}

/// Runs `f(lo, hi, part)` on two threads over halves of `n` rows of `out`.
fn halves(out: &mut [f32], n: usize, f: impl Fn(usize, usize, &mut [f32]) + Sync) {
    let half = n / 2;
    let (a, b) = out.split_at_mut(half * WIDTH);
    std::thread::scope(|sc| {
        sc.spawn(|| f(0, half, a));
        f(half, n, b);
    });
}

pub fn build_reduce(id: &str) -> ReduceWorkload {
    let mut variants: Vec<Variant> = Vec::new();
    let id: &'static str = REDUCE_IDS.iter().find(|i| **i == id).expect("a workload id");
    let out_bytes;
    let gathered_bytes;
    match &id[..1] {
        "T" => return backward(id),
        _ if id == "B5_small_skewed_bags" => return small_skewed(id),
        _ if id == "O2_dlrm_step" => return dlrm_step(id),
        _ if id == "A1_attention_layer" => return attention(id),
        _ if id == "R2_narrow_ids" => return narrow_ids(id),
        _ if id.starts_with('O') => return bag_step(id),
        _ if id == "Q4_quantize" => return quantize(id),
        _ if id.starts_with("Q1") || id.starts_with("Q2") => return quantized_bags(id),
        _ if id.starts_with("Q3") => return half_bags(id),
        _ if id.starts_with("K") => return dlrm(id),
        "B" => {
            let t = table(1_000_000);
            let (starts, n) = bags();
            let idx = Array1::from(uniform(n, 1_000_000, 12));
            let w = Array1::from_shape_fn(n, |p| 0.25 + (p % 7) as f32 * 0.125);
            let starts = Array1::from(starts);
            let bags = starts.len();
            out_bytes = bags * WIDTH * 4;
            gathered_bytes = n * WIDTH * 4;
            let pooling = match id {
                "B3_bag_mean" => Pooling::Mean,
                "B4_bag_max" => Pooling::Max,
                _ => Pooling::Sum,
            };
            let weighted = id == "B2_bag_weighted";
            fn pool(pooling: Pooling, weighted: bool, w: &Array1<f32>) -> Pool<'_, f32> {
                let p: Pool<'_, f32> = pooling.into();
                if weighted { p.weighted(w) } else { p }
            }
            {
                let (t, idx, starts, w) = (t.clone(), idx.clone(), starts.clone(), w.clone());
                variants.push((
                    "alloc",
                    Box::new(move || {
                        std::hint::black_box(
                            t.gather_reduce(&idx, Segments::starts(&starts), 0, pool(pooling, weighted, &w))
                                .unwrap(),
                        );
                    }),
                ));
            }
            // The table as a user allocates it, and in the crate's line-aligned allocation
            // (`zeros_aligned`), as PyTorch's allocator lays its tensors out.
            let mut ta: Array2<f32> = ndarray_gather::zeros_aligned(t.dim()).unwrap();
            ta.assign(&t);
            for (name, t) in [("into", t.clone()), ("into_aligned", ta)] {
                let (idx, starts, w) = (idx.clone(), starts.clone(), w.clone());
                let mut out = Array2::<f32>::zeros((bags, WIDTH));
                let call = move || {
                    let pool = pool(pooling, weighted, &w);
                    t.gather_reduce_into(&idx, Segments::starts(&starts), 0, pool, &mut out)
                        .unwrap()
                };
                variants.push((name, Box::new(call)));
            }
            if id == "B1_bag_sum" {
                let (t1, idx1, st1) = (t.clone(), idx.clone(), starts.clone());
                let mut out = Array2::<f32>::zeros((bags, WIDTH));
                variants.push((
                    "hand1",
                    Box::new(move || {
                        hand_bags(
                            &t1.view(),
                            idx1.as_slice().unwrap(),
                            st1.as_slice().unwrap(),
                            out.view_mut(),
                            0,
                        )
                    }),
                ));
                let mut out = Array2::<f32>::zeros((bags, WIDTH));
                variants.push((
                    "hand2",
                    Box::new(move || {
                        let (i, st) = (idx.as_slice().unwrap(), starts.as_slice().unwrap());
                        let half = bags / 2;
                        let (a, b) = out.view_mut().split_at(Axis(0), half);
                        let tv = t.view();
                        std::thread::scope(|sc| {
                            sc.spawn(|| hand_bags(&tv, i, st, a, 0));
                            hand_bags(&tv, i, st, b, half);
                        });
                    }),
                ));
            }
        }
        "G" => {
            let nodes = 100_000;
            let edges = 1_000_000;
            let x = table(nodes);
            let src = Array1::from(uniform(edges, nodes, 21));
            let dst = Array1::from(uniform(edges, nodes, 22));
            out_bytes = nodes * WIDTH * 4;
            gathered_bytes = edges * WIDTH * 4;
            let pooling = match id {
                "G2_graph_mean" => Pooling::Mean,
                "G3_graph_max_arg" => Pooling::Max,
                _ => Pooling::Sum,
            };
            match id {
                "G3_graph_max_arg" => {
                    let (x, src, dst) = (x.clone(), src.clone(), dst.clone());
                    variants.push((
                        "alloc",
                        Box::new(move || {
                            std::hint::black_box(
                                x.gather_reduce_arg(&src, Segments::ids(&dst, nodes), 0, Pooling::Max)
                                    .unwrap(),
                            );
                        }),
                    ));
                }
                "G4_graph_plan" => {
                    let plan = GatherReducePlan::new(x.shape(), &src, Segments::ids(&dst, nodes), 0).unwrap();
                    let (x1, src1, dst1) = (x.clone(), src.clone(), dst.clone());
                    variants.push((
                        "plan_build",
                        Box::new(move || {
                            std::hint::black_box(
                                GatherReducePlan::new(x1.shape(), &src1, Segments::ids(&dst1, nodes), 0)
                                    .unwrap(),
                            );
                        }),
                    ));
                    let x1 = x.clone();
                    let mut out = Array2::<f32>::zeros((nodes, WIDTH));
                    variants.push((
                        "plan_into",
                        Box::new(move || plan.apply_into(&x1, Pooling::Sum, &mut out).unwrap()),
                    ));
                    // The hand CSR loop over the same graph sorted once (untimed).
                    let mut order: Vec<usize> = (0..edges).collect();
                    order.sort_by_key(|&e| dst[e]);
                    let col: Vec<usize> = order.iter().map(|&e| src[e] as usize).collect();
                    let mut ptr = vec![0usize; nodes + 1];
                    for &d in dst.iter() {
                        ptr[d as usize + 1] += 1;
                    }
                    for n in 0..nodes {
                        ptr[n + 1] += ptr[n];
                    }
                    let (x1, ptr1, col1) = (x.clone(), ptr.clone(), col.clone());
                    let mut out1 = vec![0f32; nodes * WIDTH];
                    variants.push((
                        "hand1",
                        Box::new(move || hand_csr(x1.as_slice().unwrap(), &ptr1, &col1, &mut out1, 0)),
                    ));
                    let mut out2 = vec![0f32; nodes * WIDTH];
                    variants.push((
                        "hand2",
                        Box::new(move || {
                            let xs = x.as_slice().unwrap();
                            halves(&mut out2, nodes, |lo, _, o| hand_csr(xs, &ptr, &col, o, lo))
                        }),
                    ));
                    return ReduceWorkload {
                        id,
                        out_bytes,
                        gathered_bytes,
                        variants,
                    };
                }
                _ => {
                    let (x1, src1, dst1) = (x.clone(), src.clone(), dst.clone());
                    variants.push((
                        "alloc",
                        Box::new(move || {
                            std::hint::black_box(
                                x1.gather_reduce(&src1, Segments::ids(&dst1, nodes), 0, pooling)
                                    .unwrap(),
                            );
                        }),
                    ));
                    let (x1, src1, dst1) = (x.clone(), src.clone(), dst.clone());
                    let mut out = Array2::<f32>::zeros((nodes, WIDTH));
                    variants.push((
                        "into",
                        Box::new(move || {
                            x1.gather_reduce_into(&src1, Segments::ids(&dst1, nodes), 0, pooling, &mut out)
                                .unwrap()
                        }),
                    ));
                }
            }
            if id == "G1_graph_sum" {
                let (x1, src1, dst1) = (x.clone(), src.clone(), dst.clone());
                let mut out1 = vec![0f32; nodes * WIDTH];
                variants.push((
                    "hand1",
                    Box::new(move || {
                        hand_graph(
                            x1.as_slice().unwrap(),
                            src1.as_slice().unwrap(),
                            dst1.as_slice().unwrap(),
                            &mut out1,
                            0,
                            nodes,
                        )
                    }),
                ));
                let mut out2 = vec![0f32; nodes * WIDTH];
                variants.push((
                    "hand2",
                    Box::new(move || {
                        let (xs, ss, ds) = (
                            x.as_slice().unwrap(),
                            src.as_slice().unwrap(),
                            dst.as_slice().unwrap(),
                        );
                        halves(&mut out2, nodes, |lo, hi, o| hand_graph(xs, ss, ds, o, lo, hi))
                    }),
                ));
            }
        }
        _ => {
            let (starts, n) = bags();
            let data = table(n);
            let mut lengths: Vec<i64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
            lengths.push(n as i64 - starts[starts.len() - 1]);
            let lengths = Array1::from(lengths);
            let segs = lengths.len();
            out_bytes = segs * WIDTH * 4;
            gathered_bytes = n * WIDTH * 4;
            let (d1, l1) = (data.clone(), lengths.clone());
            variants.push((
                "alloc",
                Box::new(move || {
                    std::hint::black_box(
                        d1.segment_reduce(Segments::lengths(&l1), 0, Pooling::Sum)
                            .unwrap(),
                    );
                }),
            ));
            let mut out = Array2::<f32>::zeros((segs, WIDTH));
            variants.push((
                "into",
                Box::new(move || {
                    data.segment_reduce_into(Segments::lengths(&lengths), 0, Pooling::Sum, &mut out)
                        .unwrap()
                }),
            ));
        }
    }
    ReduceWorkload {
        id,
        out_bytes,
        gathered_bytes,
        variants,
    }
}

/// B5's batches: `count` batches of 4096 bags of 1-50 ids each, Zipf(1.1)-skewed over
/// `rows` (rank k drawn with weight 1 / k^1.1, ranks scattered over the rows by a fixed
/// permutation), each as (ids, starts).
pub fn skewed_batches(rows: usize, count: usize) -> Vec<(Array1<i64>, Array1<i64>)> {
    let mut cdf = Vec::with_capacity(rows);
    let mut acc = 0.0f64;
    for k in 1..=rows {
        acc += 1.0 / (k as f64).powf(1.1);
        cdf.push(acc);
    }
    let mut s = 0x5EED_u64;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    // Rank k is row (k * a + b) mod rows, a coprime to rows: hot rows spread out.
    let place = |k: usize| ((k as u64 * 104_729 + 17) % rows as u64) as i64;
    (0..count)
        .map(|_| {
            let (mut ids, mut starts) = (Vec::new(), Vec::with_capacity(4096));
            for _ in 0..4096 {
                starts.push(ids.len() as i64);
                let len = 1 + (next() * 50.0) as usize;
                for _ in 0..len {
                    let u = next() * acc;
                    ids.push(place(cdf.partition_point(|&c| c < u)));
                }
            }
            (Array1::from(ids), Array1::from(starts))
        })
        .collect()
}

/// B5 (a newcomer's small recommender): a [200_000, 32] table, a new batch of Zipf-skewed
/// bags every step (8 batches in turn). Variants: `plan_apply` (the forward a training
/// step needs: a new plan, then its apply), `plan` (the plan alone), `apply` (a kept
/// plan's apply), `alloc` (the method call), `step` (plan, apply, `backward_rows`, an SGD
/// update of the touched rows).
fn small_skewed(id: &'static str) -> ReduceWorkload {
    const ROWS: usize = 200_000;
    const D: usize = 32;
    let table = Array2::from_shape_fn((ROWS, D), |(r, c)| ((r * 7 + c) % 65521) as f32 * 0.5);
    let table = if std::env::var_os("B5_ALIGNED").is_some() {
        aligned(&table)
    } else {
        table
    };
    #[cfg(target_os = "linux")]
    let table = if std::env::var_os("B5_HUGE").is_some() {
        let mut v: Vec<f32> = Vec::with_capacity(ROWS * D);
        let base = v.as_mut_ptr() as usize;
        let skip = base.next_multiple_of(2 << 20) - base;
        // SAFETY: whole 2 MiB pages inside the allocation; advice changes no contents.
        unsafe {
            libc::madvise(
                (base + skip) as *mut _,
                (ROWS * D * 4 - skip) & !((2 << 20) - 1),
                libc::MADV_HUGEPAGE,
            )
        };
        v.extend(table.iter().copied());
        Array2::from_shape_vec((ROWS, D), v).unwrap()
    } else {
        table
    };
    let batches = std::rc::Rc::new(skewed_batches(ROWS, 8));
    let positions: usize = batches.iter().map(|b| b.0.len()).sum::<usize>() / 8;
    let mut variants: Vec<Variant> = Vec::new();
    // Each variant takes the next batch of the eight per call.
    let each = |name: &'static str, mut f: PerBatch| -> Variant {
        let (b, mut k) = (batches.clone(), 0usize);
        let call = move || {
            k = (k + 1) % b.len();
            f(&b[k].0, &b[k].1)
        };
        (name, Box::new(call))
    };
    let plan_of = |t: &Array2<f32>, ids: &Array1<i64>, starts: &Array1<i64>| {
        GatherReducePlan::new(t.dim(), ids, Segments::starts(starts), 0).unwrap()
    };
    let t = table.clone();
    variants.push(each(
        "plan_apply",
        Box::new(move |ids, starts| {
            black_box(plan_of(&t, ids, starts).apply(&t, Pooling::Sum).unwrap());
        }),
    ));
    let t = table.clone();
    variants.push(each(
        "plan",
        Box::new(move |ids, starts| {
            black_box(plan_of(&t, ids, starts));
        }),
    ));
    {
        let t = table.clone();
        let plans: Vec<GatherReducePlan> = batches
            .iter()
            .map(|(ids, starts)| plan_of(&t, ids, starts))
            .collect();
        let mut k = 0;
        variants.push((
            "apply",
            Box::new(move || {
                k = (k + 1) % plans.len();
                black_box(plans[k].apply(&t, Pooling::Sum).unwrap());
            }),
        ));
    }
    let t = table.clone();
    variants.push(each(
        "alloc",
        Box::new(move |ids, starts| {
            black_box(
                t.gather_reduce(ids, Segments::starts(starts), 0, Pooling::Sum)
                    .unwrap(),
            );
        }),
    ));
    // The floor: a plain loop over the bags, accumulating in a fixed-size row.
    let (t, mut out) = (table.clone(), Array2::<f32>::zeros((4096, D)));
    variants.push(each(
        "hand1",
        Box::new(move |ids, starts| {
            let (ts, ids, starts) = (
                t.as_slice().unwrap(),
                ids.as_slice().unwrap(),
                starts.as_slice().unwrap(),
            );
            for (bag, row) in out.outer_iter_mut().enumerate() {
                let end = starts.get(bag + 1).map_or(ids.len(), |&e| e as usize);
                let mut acc = [0.0f32; D];
                for &i in &ids[starts[bag] as usize..end] {
                    let r: &[f32; D] = ts[i as usize * D..][..D].try_into().unwrap();
                    for (a, v) in acc.iter_mut().zip(r) {
                        *a += v;
                    }
                }
                row.into_slice().unwrap().copy_from_slice(&acc);
            }
            black_box(&out);
        }),
    ));
    // A training step: the loss's gradient is the output itself, scaled (a squared
    // loss's); then `step`, or what a user wrote before it: `backward_rows` and a loop.
    let mut t = table.clone();
    variants.push(each(
        "step",
        Box::new(move |ids, starts| {
            let plan = plan_of(&t, ids, starts);
            let g = plan.apply(&t, Pooling::Sum).unwrap().mapv(|v| v * 1e-6);
            plan.step(&g, Pooling::Sum, &mut t, &mut Sgd::new(0.01)).unwrap();
        }),
    ));
    let mut t = table.clone();
    variants.push(each(
        "step_rows",
        Box::new(move |ids, starts| {
            let plan = plan_of(&t, ids, starts);
            let g = plan.apply(&t, Pooling::Sum).unwrap().mapv(|v| v * 1e-6);
            let (rows, grads) = plan.backward_rows(&g, Pooling::Sum).unwrap();
            for (k, &r) in rows.iter().enumerate() {
                t.row_mut(r).scaled_add(-0.01, &grads.row(k));
            }
        }),
    ));
    ReduceWorkload {
        id,
        out_bytes: 4096 * D * 4,
        gathered_bytes: positions * D * 4,
        variants,
    }
}

/// A copy of `t` whose rows start on a 64-byte line (an `Array`'s own allocation starts 16
/// bytes past one).
pub fn aligned(t: &Array2<f32>) -> Array2<f32> {
    let n = t.len();
    let buf = Array1::<f32>::zeros(n + 16);
    let skip = (64 - buf.as_ptr() as usize % 64) % 64 / 4;
    let mut a = buf
        .slice_move(ndarray::s![skip..skip + n])
        .into_shape_with_order(t.raw_dim())
        .unwrap();
    a.assign(t);
    assert_eq!(a.as_ptr() as usize % 64, 0);
    a
}

/// Q4: B1's table (1M x 64 `f32`) quantized, `int8` and `int4` (allocating, as torch's
/// prepack ops return a new tensor).
fn quantize(id: &'static str) -> ReduceWorkload {
    use ndarray_gather::quant::Rowwise;
    let t = table(1_000_000);
    let mut variants: Vec<Variant> = Vec::new();
    for (name, layout) in [("int8", Rowwise::Int8), ("int4", Rowwise::Int4)] {
        let t = t.clone();
        variants.push((
            name,
            Box::new(move || {
                black_box(layout.quantize(&t).unwrap());
            }),
        ));
    }
    ReduceWorkload {
        id,
        out_bytes: 1_000_000 * 72,
        gathered_bytes: 0,
        variants,
    }
}

/// Q1 / Q2: B1's bags over B1's table quantized to `Int8` / `Int4` rows
/// (`QTable::gather_reduce`, Sum, allocating); `f32` is B1's own call in the same process.
fn quantized_bags(id: &'static str) -> ReduceWorkload {
    use ndarray_gather::quant::{QTable, Rowwise};
    let layout = if id.starts_with("Q1") {
        Rowwise::Int8
    } else {
        Rowwise::Int4
    };
    let t = table(1_000_000);
    let q = layout.quantize(&t).unwrap();
    let (starts, n) = bags();
    let idx = Array1::from(uniform(n, 1_000_000, 12));
    let starts = Array1::from(starts);
    let mut variants: Vec<Variant> = Vec::new();
    {
        // A kept plan applied into a kept output (decision 48).
        let (q, idx, starts) = (q.clone(), idx.clone(), starts.clone());
        let plan = GatherReducePlan::new((1_000_000, WIDTH), &idx, Segments::starts(&starts), 0).unwrap();
        let mut out = Array2::<f32>::zeros((starts.len(), WIDTH));
        variants.push((
            "plan",
            Box::new(move || {
                let qt = QTable::new(&q, layout).unwrap();
                plan.apply_into(&qt, Pooling::Sum, &mut out).unwrap();
                black_box(&out);
            }),
        ));
    }
    {
        let (idx, starts) = (idx.clone(), starts.clone());
        variants.push((
            "alloc",
            Box::new(move || {
                let qt = QTable::new(&q, layout).unwrap();
                black_box(
                    qt.gather_reduce(&idx, Segments::starts(&starts), Pooling::Sum)
                        .unwrap(),
                );
            }),
        ));
    }
    variants.push(b1_variant(t, idx, starts));
    ReduceWorkload {
        id,
        out_bytes: 16384 * WIDTH * 4,
        gathered_bytes: n * layout.row_bytes(WIDTH),
        variants,
    }
}

/// Q3: B1's bags over B1's table as `half::f16` (and `bf16`) rows, beside the `f32` B1.
fn half_bags(id: &'static str) -> ReduceWorkload {
    use ndarray_gather::quant::QTable;
    let t = table(1_000_000);
    let h = t.mapv(half::f16::from_f32);
    let b = t.mapv(half::bf16::from_f32);
    // The same rows from the first byte of a cache line (PERFORMANCE.md, "The table's layout").
    let mut ha: Array2<half::f16> = ndarray_gather::zeros_aligned(h.dim()).unwrap();
    ha.assign(&h);
    let (starts, n) = bags();
    let idx = Array1::from(uniform(n, 1_000_000, 12));
    let starts = Array1::from(starts);
    let variants = vec![
        half_variant("f16", h, &idx, &starts, |h| QTable::f16(h)),
        half_variant("f16_aligned", ha, &idx, &starts, |h| QTable::f16(h)),
        half_variant("bf16", b, &idx, &starts, |h| QTable::bf16(h)),
        b1_variant(t, idx, starts),
    ];
    ReduceWorkload {
        id,
        out_bytes: 16384 * WIDTH * 4,
        gathered_bytes: n * WIDTH * 2,
        variants,
    }
}

/// B1's own `f32` call (`f32`), beside a quantized or half table's in the same process.
fn b1_variant(t: Array2<f32>, idx: Array1<i64>, starts: Array1<i64>) -> Variant {
    let call = move || {
        black_box(
            t.gather_reduce(&idx, Segments::starts(&starts), 0, Pooling::Sum)
                .unwrap(),
        );
    };
    ("f32", Box::new(call))
}

/// A Q3 variant: the bags over `rows` as the half table `table` makes of them.
fn half_variant<H: 'static>(
    name: &'static str,
    rows: Array2<H>,
    idx: &Array1<i64>,
    starts: &Array1<i64>,
    table: for<'a> fn(&'a Array2<H>) -> ndarray_gather::quant::QTable<'a>,
) -> Variant {
    let (idx, starts) = (idx.clone(), starts.clone());
    let call = move || {
        let bags = table(&rows).gather_reduce(&idx, Segments::starts(&starts), Pooling::Sum);
        black_box(bags.unwrap());
    };
    (name, Box::new(call))
}

/// K1 / K2: a DLRM batch (BENCH-WORKLOADS.md): 26 tables of 64 values, 6 of 1M rows and 20
/// of 20k-200k (seed-fixed), one feature per table, Sum, B = 4096, 1-20 ids per (feature,
/// sample); K2 on Int8 rows. Variants: `collection` (one call), `calls` (26
/// `gather_reduce_into` calls into the output's column views: the hand-written form).
fn dlrm(id: &'static str) -> ReduceWorkload {
    use ndarray::s;
    use ndarray_gather::bags::{Collection, Jagged, Table};
    use ndarray_gather::quant::{QTable, Rowwise};
    let (sizes, values, lengths, batch) = dlrm_batch();
    let positions = values.len();
    let f32s: Vec<Array2<f32>> = sizes.iter().map(|&n| table(n)).collect();
    let int8 = id.starts_with("K2");
    let q: Vec<Array2<u8>> = if int8 {
        f32s.iter().map(|t| Rowwise::Int8.quantize(t).unwrap()).collect()
    } else {
        Vec::new()
    };
    let f32s = if int8 { Vec::new() } else { f32s };
    let model = sizes.iter().enumerate().fold(Collection::new(), |c, (t, &n)| {
        c.table(n, WIDTH).feature(t, Pooling::Sum)
    });
    // (The tables, leaked: the variants' closures outlive this function.)
    let f32s: &'static [Array2<f32>] = Box::leak(f32s.into_boxed_slice());
    let q: &'static [Array2<u8>] = Box::leak(q.into_boxed_slice());
    let tables: Vec<Table<'static>> = if int8 {
        q.iter()
            .map(|b| Table::from(QTable::new(b, Rowwise::Int8).unwrap()))
            .collect()
    } else {
        f32s.iter().map(|t| Table::from(t.view())).collect()
    };
    let values: &'static [i64] = Box::leak(values.into_boxed_slice());
    let lengths: &'static [i64] = Box::leak(lengths.into_boxed_slice());
    let mut variants: Vec<Variant> = Vec::new();
    {
        let (model, tables) = (model.clone(), tables.clone());
        let mut out = Array2::<f32>::zeros((batch, 26 * WIDTH));
        variants.push((
            "collection",
            Box::new(move || {
                let jagged = Jagged::lengths(values, lengths, batch).unwrap();
                model.gather_reduce_into(&tables, &jagged, &mut out).unwrap();
                black_box(&out);
            }),
        ));
    }
    {
        // The batch's plan, kept (its build untimed), applied into a kept output.
        let jagged = Jagged::lengths(values, lengths, batch).unwrap();
        let plan = model.plan(&jagged).unwrap();
        let tables = tables.clone();
        let mut out = Array2::<f32>::zeros((batch, 26 * WIDTH));
        variants.push((
            "plan",
            Box::new(move || {
                plan.apply_into(&tables, &mut out).unwrap();
                black_box(&out);
            }),
        ));
    }
    let mut out = Array2::<f32>::zeros((batch, 26 * WIDTH));
    variants.push((
        "calls",
        Box::new(move || {
            let mut at = 0;
            for (f, t) in tables.iter().enumerate() {
                let lens = &lengths[f * batch..(f + 1) * batch];
                let n = lens.iter().sum::<i64>() as usize;
                let ids = &values[at..at + n];
                let mut cols = out.slice_mut(s![.., f * WIDTH..(f + 1) * WIDTH]);
                match t {
                    Table::F32(x) => x
                        .gather_reduce_into(ids, Segments::lengths(lens), 0, Pooling::Sum, &mut cols)
                        .unwrap(),
                    Table::Quantized(q) => {
                        let r = q
                            .gather_reduce(ids, Segments::lengths(lens), Pooling::Sum)
                            .unwrap();
                        cols.assign(&r);
                    }
                }
                at += n;
            }
            black_box(&out);
        }),
    ));
    ReduceWorkload {
        id,
        out_bytes: batch * 26 * WIDTH * 4,
        gathered_bytes: positions * if int8 { 72 } else { 256 },
        variants,
    }
}

/// O1 / O3: a training step on B1's table, a new batch each step (one of 8 of B1's bags):
/// `step` (the plan built, applied, then `step`), `kept` (`step` alone, on kept plans
/// sorted untimed) and `hand` (the plan, apply, `backward_rows`, then a hand update loop).
/// O1 updates with row-wise Adagrad, O3 with Adam.
fn bag_step(id: &'static str) -> ReduceWorkload {
    let adam = id.starts_with("O3");
    let t = table(1_000_000);
    let (starts, n) = bags();
    let batches: Vec<Array1<i64>> = (0..8)
        .map(|k| Array1::from(uniform(n, 1_000_000, 300 + k)))
        .collect();
    let grad = table(starts.len()).mapv(|v| v * 1e-3 - 0.5);
    let shared = std::rc::Rc::new((batches, starts, grad));
    let opt = move || -> Box<dyn Optimizer> {
        if adam {
            Box::new(Adam::new((1_000_000, WIDTH), 0.01))
        } else {
            Box::new(RowwiseAdagrad::new(1_000_000, 0.01))
        }
    };
    let mut variants: Vec<Variant> = Vec::new();
    {
        let (mut t, b, mut o, mut k) = (t.clone(), shared.clone(), opt(), 0);
        variants.push((
            "step",
            Box::new(move || {
                let (batches, starts, g) = &*b;
                k = (k + 1) % batches.len();
                let plan = GatherReducePlan::new(t.dim(), &batches[k], Segments::starts(starts), 0).unwrap();
                black_box(plan.apply(&t, Pooling::Sum).unwrap());
                plan.step(g, Pooling::Sum, &mut t, &mut *o).unwrap();
            }),
        ));
    }
    {
        let (mut t, b, mut o, mut k) = (t.clone(), shared.clone(), opt(), 0);
        let plans: Vec<GatherReducePlan> =
            b.0.iter()
                .map(|ids| {
                    let p = GatherReducePlan::new(t.dim(), ids, Segments::starts(&b.1), 0).unwrap();
                    p.backward_rows(&b.2, Pooling::Sum).unwrap();
                    p
                })
                .collect();
        variants.push((
            "kept",
            Box::new(move || {
                k = (k + 1) % plans.len();
                plans[k].step(&b.2, Pooling::Sum, &mut t, &mut *o).unwrap();
            }),
        ));
    }
    if !adam {
        let (mut t, b, mut m, mut k) = (t.clone(), shared.clone(), vec![0.0f32; 1_000_000], 0);
        variants.push((
            "hand",
            Box::new(move || {
                let (batches, starts, g) = &*b;
                k = (k + 1) % batches.len();
                let plan = GatherReducePlan::new(t.dim(), &batches[k], Segments::starts(starts), 0).unwrap();
                black_box(plan.apply(&t, Pooling::Sum).unwrap());
                let (rows, grads) = plan.backward_rows(g, Pooling::Sum).unwrap();
                for (k, &r) in rows.iter().enumerate() {
                    let g = grads.row(k);
                    m[r] += g.iter().fold(0.0f32, |s, &x| s + x * x) / WIDTH as f32;
                    let mult = 0.01 / (m[r].sqrt() + 1e-8);
                    t.row_mut(r).scaled_add(-mult, &g);
                }
            }),
        ));
    }
    ReduceWorkload {
        id,
        out_bytes: shared.1.len() * WIDTH * 4,
        gathered_bytes: n * WIDTH * 4,
        variants,
    }
}

/// O2: K1's 26 tables and batch, a step each call: the kept plan's `apply`, then its
/// `step` with row-wise Adagrad on every table.
fn dlrm_step(id: &'static str) -> ReduceWorkload {
    use ndarray_gather::bags::{Collection, Jagged};
    let (sizes, values, lengths, batch) = dlrm_batch();
    let positions = values.len();
    let mut tables: Vec<Array2<f32>> = sizes.iter().map(|&n| table(n)).collect();
    let model = sizes.iter().enumerate().fold(Collection::new(), |c, (t, &n)| {
        c.table(n, WIDTH).feature(t, Pooling::Sum)
    });
    let plan = model
        .plan(&Jagged::lengths(&values, &lengths, batch).unwrap())
        .unwrap();
    let mut opts: Vec<RowwiseAdagrad> = sizes.iter().map(|&n| RowwiseAdagrad::new(n, 0.01)).collect();
    let grad = Array2::from_shape_fn((batch, 26 * WIDTH), |(b, c)| ((b * 7 + c) % 13) as f32 * 1e-3);
    let variants: Vec<Variant> = vec![(
        "step",
        Box::new(move || {
            let views: Vec<_> = tables.iter().map(|t| t.view()).collect();
            black_box(plan.apply(&views).unwrap());
            let mut views: Vec<_> = tables.iter_mut().map(|t| t.view_mut()).collect();
            let mut o: Vec<&mut dyn Optimizer> = opts.iter_mut().map(|o| o as &mut dyn Optimizer).collect();
            plan.step(&grad, &mut views, &mut o).unwrap();
        }),
    )];
    ReduceWorkload {
        id,
        out_bytes: batch * 26 * WIDTH * 4,
        gathered_bytes: positions * WIDTH * 4,
        variants,
    }
}

/// K1's table sizes, its batch's ids and lengths (feature-major) and its batch size.
pub fn dlrm_batch() -> (Vec<usize>, Vec<i64>, Vec<i64>, usize) {
    let sizes: Vec<usize> = (0..26)
        .map(|t| {
            if t < 6 {
                1_000_000
            } else {
                20_000 + uniform(1, 180_001, 100 + t as u64)[0] as usize
            }
        })
        .collect();
    let batch = 4096;
    let lengths: Vec<i64> = uniform(26 * batch, 20, 31).into_iter().map(|l| l + 1).collect();
    let mut values = Vec::new();
    for (f, &n) in sizes.iter().enumerate() {
        let count: i64 = lengths[f * batch..(f + 1) * batch].iter().sum();
        values.extend(uniform(count as usize, n, 200 + f as u64));
    }
    (sizes, values, lengths, batch)
}

/// A1: a GAT layer's message passing on G1's graph (its plan built and its rows sorted,
/// untimed): 4 heads of 16 (x [100k, 4, 16]), scores [1M, 4]. `layer`: `softmax`, the
/// weighted sum into a reused output, and the backward: a reused gradient of x zeroed,
/// `backward_into`, `backward_weights`, `softmax_backward`; and each piece alone.
fn attention(id: &'static str) -> ReduceWorkload {
    let (nodes, edges, heads, d) = (100_000, 1_000_000, 4, 16);
    let src = Array1::from(uniform(edges, nodes, 21));
    let dst = Array1::from(uniform(edges, nodes, 22));
    let plan = GatherReducePlan::new([nodes, heads, d], &src, Segments::ids(&dst, nodes), 0).unwrap();
    let x = table(nodes).into_shape_with_order((nodes, heads, d)).unwrap();
    let grad_h = x.mapv(|v| (v * 0.001).sin());
    let scores = Array2::from_shape_fn((edges, heads), |(e, h)| {
        ((e * 31 + h * 7) % 1000) as f32 / 250.0 - 2.0
    });
    let alpha = plan.softmax(&scores).unwrap();
    let mut out = ndarray::Array3::<f32>::zeros((nodes, heads, d));
    let mut grad_x = ndarray::Array3::<f32>::zeros((nodes, heads, d));
    // The first backward sorts the plan's rows: untimed, as the plan's build.
    plan.backward_into(&grad_h, Pooling::Sum.weighted(&alpha), &mut grad_x)
        .unwrap();
    let g_alpha = plan.backward_weights(&x, &grad_h).unwrap();
    let mut variants: Vec<Variant> = Vec::new();
    {
        let (p, x, g, s) = (plan.clone(), x.clone(), grad_h.clone(), scores.clone());
        let (mut out, mut grad_x) = (out.clone(), grad_x.clone());
        variants.push((
            "layer",
            Box::new(move || {
                let alpha = p.softmax(&s).unwrap();
                p.apply_into(&x, Pooling::Sum.weighted(&alpha), &mut out).unwrap();
                grad_x.fill(0.0);
                p.backward_into(&g, Pooling::Sum.weighted(&alpha), &mut grad_x)
                    .unwrap();
                let g_alpha = p.backward_weights(&x, &g).unwrap();
                black_box(p.softmax_backward(&alpha, &g_alpha).unwrap());
            }),
        ));
    }
    let (p, s) = (plan.clone(), scores.clone());
    variants.push((
        "softmax",
        Box::new(move || drop(black_box(p.softmax(&s).unwrap()))),
    ));
    let (p, x1, a) = (plan.clone(), x.clone(), alpha.clone());
    variants.push((
        "apply",
        Box::new(move || p.apply_into(&x1, Pooling::Sum.weighted(&a), &mut out).unwrap()),
    ));
    let (p, g, a) = (plan.clone(), grad_h.clone(), alpha.clone());
    variants.push((
        "backward_x",
        Box::new(move || {
            grad_x.fill(0.0);
            p.backward_into(&g, Pooling::Sum.weighted(&a), &mut grad_x)
                .unwrap()
        }),
    ));
    let (p, x1, g) = (plan.clone(), x.clone(), grad_h.clone());
    variants.push((
        "backward_weights",
        Box::new(move || drop(black_box(p.backward_weights(&x1, &g).unwrap()))),
    ));
    variants.push((
        "softmax_backward",
        Box::new(move || drop(black_box(plan.softmax_backward(&alpha, &g_alpha).unwrap()))),
    ));
    ReduceWorkload {
        id,
        out_bytes: nodes * heads * d * 4,
        gathered_bytes: edges * heads * d * 4,
        variants,
    }
}

/// R2: `segment_reduce` of `[200_000, 4]` values by 20_000 uniform ids (a GAT layer's
/// per-node score gradients, 4 heads), beside the crate's `scatter(.., Add)` of the same
/// values into zeros (the same sums from zero).
fn narrow_ids(id: &'static str) -> ReduceWorkload {
    const N: usize = 200_000;
    const H: usize = 4;
    const S: usize = 20_000;
    let v = Array2::from_shape_fn((N, H), |(p, h)| ((p * 7 + h * 3) % 97) as f32 / 16.0 - 3.0);
    let dst = Array1::from(uniform(N, S, 21));
    let mut variants: Vec<Variant> = Vec::new();
    {
        let (v, dst) = (v.clone(), dst.clone());
        variants.push((
            "alloc",
            Box::new(move || {
                black_box(v.segment_reduce(Segments::ids(&dst, S), 0, Pooling::Sum).unwrap());
            }),
        ));
    }
    {
        let (v, dst, mut out) = (v.clone(), dst.clone(), Array2::<f32>::zeros((S, H)));
        variants.push((
            "into",
            Box::new(move || {
                v.segment_reduce_into(Segments::ids(&dst, S), 0, Pooling::Sum, &mut out)
                    .unwrap();
                black_box(&out);
            }),
        ));
    }
    {
        let mut out = Array2::<f32>::zeros((S, H));
        variants.push((
            "scatter",
            Box::new(move || {
                out.fill(0.0);
                out.scatter(&dst, &v, 0, ndarray_gather::reduce::Add).unwrap();
                black_box(&out);
            }),
        ));
    }
    ReduceWorkload {
        id,
        out_bytes: S * H * 4,
        gathered_bytes: N * H * 4,
        variants,
    }
}
