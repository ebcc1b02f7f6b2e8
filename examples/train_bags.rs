//! A small recommender's embedding table trained through plans: each step a new batch of
//! Zipf-skewed bags (a few hot ids in most bags), the forward (`apply`), a squared loss's
//! gradient, and `step`, which sums each touched row's gradient and updates the row once
//! with row-wise Adagrad (FBGEMM's `EXACT_ROWWISE_ADAGRAD`). The targets are bags of a
//! hidden table; the loss falls as the table learns them. Then the same with lazy Adam.
//!
//! `cargo run --release --example train_bags`

use ndarray::{Array1, Array2};
use ndarray_gather::optim::{Adam, Optimizer, RowwiseAdagrad};
use ndarray_gather::prelude::*;

const ROWS: usize = 20_000;
const D: usize = 16;
const BAGS: usize = 512;

/// A generator of the example's draws (fixed seed: the same run every time).
struct Lcg(u64);

impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A Zipf(1.1)-like id: rank `k` drawn with weight about `1 / k^1.1`, spread over the rows.
    fn id(&mut self) -> i64 {
        let rank = (self.unit().powf(-1.0 / 0.1) as usize).min(ROWS * 100);
        ((rank * 104_729 + 17) % ROWS) as i64
    }
}

/// A batch: ids and each bag's start (bags of 1-20 ids).
fn batch(g: &mut Lcg) -> (Array1<i64>, Array1<i64>) {
    let (mut ids, mut starts) = (Vec::new(), Vec::with_capacity(BAGS));
    for _ in 0..BAGS {
        starts.push(ids.len() as i64);
        let len = 1 + (g.unit() * 20.0) as usize;
        ids.extend((0..len).map(|_| g.id()));
    }
    (Array1::from(ids), Array1::from(starts))
}

/// Trains a fresh table for `steps` steps with `opt`, printing the loss now and then.
fn train(
    name: &str,
    hidden: &Array2<f32>,
    opt: &mut dyn Optimizer,
    steps: usize,
) -> Result<f32, GatherError> {
    let mut g = Lcg(11);
    let mut table = Array2::from_shape_fn((ROWS, D), |_| (g.unit() as f32 - 0.5) * 0.1);
    let mut last = 0.0;
    for step in 0..steps {
        let (ids, starts) = batch(&mut g);
        // A new batch: a new plan (its check and sort are part of the step, as in FBGEMM).
        let plan = GatherReducePlan::new(table.dim(), &ids, Segments::starts(&starts), 0)?;
        let target = plan.apply(hidden, Pooling::Mean)?;
        let out = plan.apply(&table, Pooling::Mean)?;
        let diff = &out - &target;
        last = diff.mapv(|v| v * v).sum() / BAGS as f32;
        plan.step(&(diff * (2.0 / BAGS as f32)), Pooling::Mean, &mut table, opt)?;
        if step % (steps / 5) == 0 || step == steps - 1 {
            println!("{name} step {step:4}: loss {last:.5}");
        }
    }
    Ok(last)
}

fn main() -> Result<(), GatherError> {
    let mut g = Lcg(5);
    let hidden = Array2::from_shape_fn((ROWS, D), |_| g.unit() as f32 * 2.0 - 1.0);
    let first = train(
        "row-wise Adagrad",
        &hidden,
        &mut RowwiseAdagrad::new(ROWS, 0.5),
        400,
    )?;
    let adam = train("Adam", &hidden, &mut Adam::new((ROWS, D), 0.05), 400)?;
    println!("final losses: row-wise Adagrad {first:.5}, Adam {adam:.5}");
    Ok(())
}
