//! Decision 67: a step's optimizers as a user holds them (`Vec<Box<dyn Optimizer>>`, a
//! `Vec` of one kind, a slice of `&mut dyn Optimizer`, of `&mut` one kind) and its tables
//! owned or viewed all compile and run.

use ndarray::Array2;
use ndarray_gather::bags::{Collection, Jagged};
use ndarray_gather::optim::{Adam, Optimizer, RowwiseAdagrad, Sgd};
use ndarray_gather::prelude::*;

fn main() -> Result<(), GatherError> {
    let model = Collection::new().table(4, 2).table(3, 2).feature(0, Pooling::Sum).feature(1, Pooling::Mean);
    let batch = Jagged::lengths(&[3_i64, 1, 2], &[2_i64, 1], 1)?;
    let plan = model.plan(&batch)?;
    let mut tables: Vec<Array2<f32>> = vec![Array2::ones((4, 2)), Array2::ones((3, 2))];
    let g = plan.apply(&tables)?;

    let mut boxed: Vec<Box<dyn Optimizer>> = vec![Box::new(Sgd::new(0.1)), Box::new(Adam::new((3, 2), 0.1))];
    plan.step(&g, &mut tables, &mut boxed)?;

    let mut same: Vec<RowwiseAdagrad> = vec![RowwiseAdagrad::new(4, 0.1), RowwiseAdagrad::new(3, 0.1)];
    plan.step(&g, &mut tables, &mut same)?;

    let (mut sgd, mut adam) = (Sgd::new(0.1), Adam::new((3, 2), 0.1));
    let (t0, t1) = tables.split_at_mut(1);
    plan.step(&g, &mut [t0[0].view_mut(), t1[0].view_mut()], &mut [&mut sgd as &mut dyn Optimizer, &mut adam])?;

    let mut refs: Vec<&mut RowwiseAdagrad> = same.iter_mut().collect();
    plan.step(&g, &mut [&mut t0[0], &mut t1[0]], &mut refs)?;

    // A single plan takes a boxed optimizer as it takes its own.
    let single = GatherReducePlan::new((4, 2), &[3, 1], Segments::uniform(2), 0)?;
    single.step(&Array2::ones((1, 2)), Pooling::Sum, &mut tables[0], &mut boxed[0])?;
    Ok(())
}
