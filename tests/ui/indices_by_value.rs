use ndarray::array;
use ndarray_gather::prelude::*;

fn main() {
    let table = array![[1.0_f32], [2.0]];
    let ids: Vec<i64> = vec![1, 0];
    let _ = table.gather(ids, 0);
}
