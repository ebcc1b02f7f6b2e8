//! Every instruction-set tier against the portable one, on every row source of a
//! `QTable` (decision 60), in one process.

use ndarray::{Array2, array};

use super::{QTable, Rowwise};
use crate::kernel::isa::tiers;
use crate::pool::{Pool, Pooling};
use crate::segments::Segments;

/// Every tier gives the portable tier's bits (decision 60), for every row format, every
/// pooling, weighted or not, with an argmax, a skip and a fill, on 1 and 3 threads, on
/// rows of whole register blocks, half and quarter blocks and a tail (widths 4, 16, 64
/// and 92).
#[test]
fn every_tier_gives_the_portable_tiers_bits() {
    let ids = [3_i64, 0, 7, 7, 1, 8, 2, 5, 4, 6, 0];
    let starts = [0_i64, 3, 3, 8];
    let weights: Vec<f32> = (0..ids.len()).map(|p| p as f32 * 0.375 - 1.5).collect();
    for d in [4, 16, 64, 92] {
        let t = Array2::from_shape_fn((9, d), |(r, c)| ((r * 31 + c * 7) % 23) as f32 * 0.625 - 6.0);
        let int8 = Rowwise::Int8.quantize(&t).unwrap();
        let int4 = Rowwise::Int4.quantize(&t).unwrap();
        let int2 = Rowwise::Int2.quantize(&t).unwrap();
        let halves = (
            t.mapv(::half::f16::from_f32_const),
            t.mapv(::half::bf16::from_f32_const),
        );
        let tables = [
            QTable::new(&int8, Rowwise::Int8).unwrap(),
            QTable::new(&int4, Rowwise::Int4).unwrap(),
            QTable::new(&int2, Rowwise::Int2).unwrap(),
            QTable::f16(&halves.0),
            QTable::bf16(&halves.1),
        ];
        for (k, q) in tables.iter().enumerate() {
            for pooling in Pooling::ALL {
                let weighted = matches!(pooling, Pooling::Sum | Pooling::Mean | Pooling::SqrtN);
                let run = || {
                    let pool = |w: bool| {
                        let p = Pool::from(pooling);
                        if w { p.weighted(&weights[..]) } else { p }
                    };
                    let plain = q
                        .gather_reduce(&ids, Segments::starts(&starts), pool(false))
                        .unwrap();
                    let heavy = weighted.then(|| {
                        q.gather_reduce(&ids, Segments::starts(&starts), pool(true))
                            .unwrap()
                    });
                    let arg = matches!(pooling, Pooling::Max | Pooling::Min).then(|| {
                        q.gather_reduce_arg(&ids, Segments::starts(&starts), pooling)
                            .unwrap()
                    });
                    let skipped = q
                        .gather_reduce(&ids, Segments::starts(&starts), pool(false).skip(7).fill(2.5))
                        .unwrap();
                    let bits = |a: Array2<f32>| a.mapv(f32::to_bits);
                    let arg = arg.map(|(m, a)| (bits(m), a));
                    (bits(plain), heavy.map(bits), arg, bits(skipped))
                };
                // (On one thread and on three: a segment is one thread's either way.)
                let on = |n: usize| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap();
                let results = tiers::each(|| (on(1).install(run), on(3).install(run)));
                let (_, base) = &results[0];
                for (isa, r) in &results[1..] {
                    assert_eq!(
                        r, base,
                        "table {k}, width {d}, {pooling:?}: {isa:?} against the portable tier"
                    );
                }
            }
        }
    }
    // (A check that the tiers ran: the portable tier sums an Int8 row as FBGEMM does.)
    let q = Rowwise::Int8.quantize(&array![[0.0f32, 255.0]]).unwrap();
    let qt = QTable::new(&q, Rowwise::Int8).unwrap();
    let got = tiers::each(|| {
        qt.gather_reduce(&[0_i64, 0], Segments::starts(&[0_i64]), Pooling::Sum)
            .unwrap()
    });
    assert!(got.iter().all(|(_, g)| g == array![[0.0f32, 510.0]]));
}
