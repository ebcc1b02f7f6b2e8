use ndarray::array;
use ndarray_gather::prelude::*;

fn main() {
    let table = array![[1.0_f32], [2.0]];
    let w = array![0.5_f64, 2.0];
    let _ = table.gather_reduce(&[0, 1], Segments::uniform(2), 0, Pooling::Sum.weighted(&w));
}
