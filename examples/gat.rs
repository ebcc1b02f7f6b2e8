//! A graph attention layer (GAT, PyG's `GATConv` without bias) trained through a plan:
//! a projection `h = x · W` into 4 heads of 4, each edge's score
//! `leaky_relu(⟨h[src], a_src⟩ + ⟨h[dst], a_dst⟩)` per head, the softmax over each node's
//! incoming edges (`plan.softmax`), and the weighted sum of the neighbours' heads
//! (`plan.apply` with `[E, H]` weights). The backward is the plan's: `backward_into` (to
//! `h`), `backward_weights` (to the coefficients), `softmax_backward` (to the scores). The
//! targets are a hidden teacher layer's outputs; the loss falls as the student learns them.
//!
//! `cargo run --release --example gat`

use ndarray::{Array1, Array2, Array3};
use ndarray_gather::prelude::*;

const NODES: usize = 300;
const EDGES: usize = 3000;
const FEATURES: usize = 8;
const HEADS: usize = 4;
const D: usize = 4;
const SLOPE: f32 = 0.2;

/// Deterministic draws (fixed seed).
struct Lcg(u64);

impl Lcg {
    fn unit(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
    fn normal(&mut self, scale: f32) -> f32 {
        (self.unit() + self.unit() + self.unit() - 1.5) * 2.0 * scale
    }
}

/// The layer's parameters: the projection and each head's attention vectors.
#[derive(Clone)]
struct Gat {
    w: Array2<f32>,
    a_src: Array2<f32>,
    a_dst: Array2<f32>,
}

/// What the forward keeps for the backward.
struct Forward {
    h: Array3<f32>,
    pre: Array2<f32>,
    alpha: Array2<f32>,
    out: Array3<f32>,
}

/// Each node's score part per head: `⟨h[i, k], a[k]⟩`.
fn dots(h: &Array3<f32>, a: &Array2<f32>) -> Array2<f32> {
    Array2::from_shape_fn((NODES, HEADS), |(i, k)| {
        h.slice(ndarray::s![i, k, ..]).dot(&a.row(k))
    })
}

impl Gat {
    fn new(rng: &mut Lcg, scale: f32) -> Gat {
        let mut draw = |r, c| Array2::from_shape_fn((r, c), |_| rng.normal(scale));
        Gat {
            w: draw(FEATURES, HEADS * D),
            a_src: draw(HEADS, D),
            a_dst: draw(HEADS, D),
        }
    }

    fn forward(
        &self,
        plan: &GatherReducePlan,
        x: &Array2<f32>,
        src: &Array1<i64>,
        dst: &Array1<i64>,
    ) -> Forward {
        let h = x.dot(&self.w).into_shape_with_order((NODES, HEADS, D)).unwrap();
        // Per edge: the source's and the destination's parts, gathered.
        let pre =
            dots(&h, &self.a_src).gather(src, 0).unwrap() + dots(&h, &self.a_dst).gather(dst, 0).unwrap();
        let scores = pre.mapv(|v| if v > 0.0 { v } else { SLOPE * v });
        let alpha = plan.softmax(&scores).unwrap();
        let out = plan.apply(&h, Pooling::Sum.weighted(&alpha)).unwrap();
        Forward { h, pre, alpha, out }
    }

    /// The gradient of `0.5 · |out - y|²` by every parameter.
    fn backward(
        &self,
        plan: &GatherReducePlan,
        x: &Array2<f32>,
        f: &Forward,
        y: &Array3<f32>,
        src: &Array1<i64>,
        dst: &Array1<i64>,
    ) -> Gat {
        let g_out = &f.out - y;
        // To h through the aggregation, and to the coefficients, then the scores.
        let mut g_h = Array3::zeros(f.h.dim());
        plan.backward_into(&g_out, Pooling::Sum.weighted(&f.alpha), &mut g_h)
            .unwrap();
        let g_alpha = plan.backward_weights(&f.h, &g_out).unwrap();
        let g_scores = plan.softmax_backward(&f.alpha, &g_alpha).unwrap();
        let g_pre = &g_scores * &f.pre.mapv(|v| if v > 0.0 { 1.0 } else { SLOPE });
        // Each node's parts summed over the edges it is the source (destination) of.
        let g_src = g_pre
            .segment_reduce(Segments::ids(src, NODES), 0, Pooling::Sum)
            .unwrap();
        let g_dst = g_pre
            .segment_reduce(Segments::ids(dst, NODES), 0, Pooling::Sum)
            .unwrap();
        let (mut g_a_src, mut g_a_dst) = (Array2::zeros((HEADS, D)), Array2::zeros((HEADS, D)));
        for i in 0..NODES {
            for k in 0..HEADS {
                for j in 0..D {
                    g_h[[i, k, j]] += g_src[[i, k]] * self.a_src[[k, j]] + g_dst[[i, k]] * self.a_dst[[k, j]];
                    g_a_src[[k, j]] += g_src[[i, k]] * f.h[[i, k, j]];
                    g_a_dst[[k, j]] += g_dst[[i, k]] * f.h[[i, k, j]];
                }
            }
        }
        let g_h = g_h.into_shape_with_order((NODES, HEADS * D)).unwrap();
        Gat {
            w: x.t().dot(&g_h),
            a_src: g_a_src,
            a_dst: g_a_dst,
        }
    }
}

fn main() -> Result<(), GatherError> {
    let mut rng = Lcg(20261129);
    let src: Array1<i64> = (0..EDGES)
        .map(|_| (rng.unit() * NODES as f32) as i64 % NODES as i64)
        .collect();
    let dst: Array1<i64> = (0..EDGES)
        .map(|_| (rng.unit() * NODES as f32) as i64 % NODES as i64)
        .collect();
    let x = Array2::from_shape_fn((NODES, FEATURES), |_| rng.normal(1.0));
    // The graph's plan, once: every epoch's softmax, aggregation and backward read it.
    let plan = GatherReducePlan::new([NODES, HEADS, D], &src, Segments::ids(&dst, NODES), 0)?;
    let teacher = Gat::new(&mut rng, 0.5);
    let y = teacher.forward(&plan, &x, &src, &dst).out;
    let mut gat = Gat::new(&mut rng, 0.5);
    // Plain gradient descent on the mean loss.
    let lr = 0.1 / NODES as f32;
    let loss = |out: &Array3<f32>| 0.5 * (out - &y).mapv(|v| v * v).sum() / NODES as f32;
    let first = loss(&gat.forward(&plan, &x, &src, &dst).out);
    for epoch in 0..=600 {
        let f = gat.forward(&plan, &x, &src, &dst);
        if epoch % 150 == 0 {
            println!("epoch {epoch:3}: loss {:.5}", loss(&f.out));
        }
        let g = gat.backward(&plan, &x, &f, &y, &src, &dst);
        gat.w.scaled_add(-lr, &g.w);
        gat.a_src.scaled_add(-lr, &g.a_src);
        gat.a_dst.scaled_add(-lr, &g.a_dst);
    }
    let last = loss(&gat.forward(&plan, &x, &src, &dst).out);
    assert!(last < first / 100.0, "the loss fell from {first} to {last} only");
    // Each node's coefficients per head sum to one.
    let alpha = gat.forward(&plan, &x, &src, &dst).alpha;
    let sums = alpha.segment_reduce(Segments::ids(&dst, NODES), 0, Pooling::Sum)?;
    assert!(sums.iter().all(|&s| s == 0.0 || (s - 1.0).abs() < 1e-5));
    Ok(())
}
