use ndarray::Array2;
use ndarray_gather::prelude::*;

fn main() {
    let x = Array2::<f32>::ones((3, 2));
    let plan = GatherReducePlan::new(x.dim(), &[2, 0], Segments::uniform(1), 0).unwrap();
    let _ = plan.apply(x.view(), Pooling::Sum);
}
