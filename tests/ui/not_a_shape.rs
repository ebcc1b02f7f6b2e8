use ndarray_gather::prelude::*;

fn main() {
    let _ = GatherReducePlan::new(5_i32, &[1, 0], Segments::uniform(1), 0);
}
