use ndarray::Array2;
use ndarray_gather::bags::{Collection, Jagged};
use ndarray_gather::prelude::*;

fn main() {
    let model = Collection::new().table(4, 2).feature(0, Pooling::Sum);
    let plan = model.plan(&Jagged::lengths(&[3_i64], &[1_i64], 1).unwrap()).unwrap();
    let mut tables = vec![Array2::<f32>::ones((4, 2))];
    let _ = plan.step(&Array2::ones((1, 2)), &mut tables, &mut [0.1_f32]);
}
