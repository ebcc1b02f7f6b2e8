//! The user program of `benches/build_time.sh`: one f32 `gather_reduce`, and with feature
//! `quant` one `QTable::gather_reduce` too.

use ndarray::Array2;
use ndarray_gather::prelude::*;
#[cfg(feature = "quant")]
use ndarray_gather::quant::{QTable, Rowwise};

fn main() -> Result<(), GatherError> {
    let t = Array2::from_shape_fn((1000, 64), |(i, j)| (i * 64 + j) as f32);
    let idx: Vec<i64> = (0..512).map(|k| (k * 7 % 1000) as i64).collect();
    let offsets: Vec<i64> = (0..64).map(|k| k * 8).collect();
    let b = t.gather_reduce(&idx, Segments::starts(&offsets), 0, Pooling::Sum)?;
    println!("{}", b.sum());
    #[cfg(feature = "quant")]
    {
        let q = Rowwise::Int8.quantize(&t)?;
        let qt = QTable::new(&q, Rowwise::Int8)?;
        let b = qt.gather_reduce(&idx, Segments::starts(&offsets), Pooling::Sum)?;
        println!("{}", b.sum());
    }
    Ok(())
}
