//! Quantized rows (decisions 45-47) against PyTorch's fixtures (`generate_quant.py`):
//! `quantize` byte for byte as torch's prepack ops, `dequantize` and `QTable::gather` bit
//! for bit as its unpack ops, and the pooled sum's order (decision 47) against torch's
//! quantized bag ops; errors naming their values.

use ndarray::{Array2, array};
use ndarray_gather::GatherError;
use ndarray_gather::quant::{QTable, Rowwise};

/// PyTorch's fixtures (files: not under Miri, whose isolation has no file system).
#[cfg(not(miri))]
mod fixtures {
    use ndarray::{Array1, Array2, ArrayD, Ix2};
    use ndarray_gather::quant::{QTable, Rowwise};

    use super::decode;
    use crate::support::manifest::{Case, cases as manifest, read};

    /// The case's data file `key` as an array of `T`, if it holds `T`.
    fn load_opt<T: crate::support::npy::Npy>(c: &Case, key: &str) -> Option<ArrayD<T>> {
        read(c.req(key))
    }

    /// The case's data file `key`, which holds `T`.
    fn load<T: crate::support::npy::Npy>(c: &Case, key: &str) -> ArrayD<T> {
        load_opt(c, key).unwrap_or_else(|| panic!("{}: {key} of another type", c.name))
    }

    fn layout(c: &Case) -> Rowwise {
        match c.req("layout") {
            "int8" => Rowwise::Int8,
            "int4" => Rowwise::Int4,
            "int2" => Rowwise::Int2,
            l => panic!("{}: layout {l}", c.name),
        }
    }

    fn two_d<T>(a: ArrayD<T>) -> Array2<T> {
        a.into_dimensionality::<Ix2>().expect("a 2-D fixture")
    }

    fn cases() -> Vec<Case> {
        manifest("QUANT_MANIFEST.txt")
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn quantize_and_dequantize_give_torchs_bytes_and_values() {
        let mut seen = 0;
        for c in cases().iter().filter(|c| c.op == "quantize") {
            let l = layout(c);
            let table: Array2<f32> = two_d(load(c, "table"));
            let bytes: Array2<u8> = two_d(load(c, "bytes"));
            let unpack: Array2<f32> = two_d(load(c, "unpack"));
            let q = l.quantize(&table).unwrap();
            assert_eq!(q.dim(), bytes.dim(), "{}", c.name);
            let first = q.indexed_iter().zip(bytes.iter()).find(|((_, a), b)| a != b);
            if let Some(((at, a), b)) = first {
                panic!("{}: byte {at:?} is {a}, torch's {b}", c.name);
            }
            let back = l.dequantize(&bytes).unwrap();
            let bits = |a: &Array2<f32>| a.mapv(f32::to_bits);
            assert_eq!(bits(&back), bits(&unpack), "{}: dequantize", c.name);
            // Any memory order of the bytes, and the table's gather of every row.
            let f = bytes.t().as_standard_layout().t().to_owned();
            let qt = QTable::new(&f, l).unwrap();
            assert_eq!(qt.dim(), table.dim(), "{}", c.name);
            let all: Vec<i64> = (0..table.nrows() as i64).rev().collect();
            let rows = qt.gather(&all).unwrap();
            let mut want = unpack.clone();
            want.invert_axis(ndarray::Axis(0));
            assert_eq!(bits(&rows), bits(&want), "{}: gather", c.name);
            seen += 1;
        }
        assert_eq!(seen, 17);
    }

    /// Decision 47's order, written out: each position adds `fma(w * scale, q, out + w *
    /// bias)` in increasing position order, from zero; torch's quantized bag sums to the bit.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_pooled_sum_in_decision_47s_order_is_torchs() {
        let mut seen = 0;
        for c in cases().iter().filter(|c| c.op == "bag_sum") {
            let l = layout(c);
            let bytes: Array2<u8> = two_d(load(c, "bytes"));
            let qt = QTable::new(&bytes, l).unwrap();
            let (n, d) = qt.dim();
            let idx: Vec<i64> = match load_opt::<i64>(c, "indices") {
                Some(a) => a.iter().copied().collect(),
                None => load::<i32>(c, "indices").iter().map(|&v| i64::from(v)).collect(),
            };
            let starts: Vec<i64> = load::<i64>(c, "offsets").iter().copied().collect();
            let weights: Option<Array1<f32>> = c
                .get("weights")
                .map(|_| load::<f32>(c, "weights").into_dimensionality().unwrap());
            let expect: Array2<f32> = two_d(load(c, "expect"));
            let mut out = Array2::<f32>::zeros((starts.len(), d));
            for (b, mut o) in out.outer_iter_mut().enumerate() {
                let end = starts.get(b + 1).map_or(idx.len(), |&e| e as usize);
                for p in starts[b] as usize..end {
                    let r = idx[p] as usize;
                    assert!(r < n);
                    let (scale, bias, q) = decode(l, bytes.row(r).to_slice().unwrap(), d);
                    let w = weights.as_ref().map_or(1.0, |w| w[p]);
                    for (j, o) in o.iter_mut().enumerate() {
                        *o = (w * scale).mul_add(f32::from(q[j]), *o + w * bias);
                    }
                }
            }
            let bits = |a: &Array2<f32>| a.mapv(f32::to_bits);
            assert_eq!(bits(&out), bits(&expect), "{}", c.name);
            seen += 1;
        }
        assert_eq!(seen, 9);
    }

    /// Torch's quantized bag sums through `QTable::gather_reduce`, to the bit.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn quantized_bags_are_torchs() {
        let mut seen = 0;
        for c in cases().iter().filter(|c| c.op == "bag_sum") {
            let l = layout(c);
            let bytes: Array2<u8> = two_d(load(c, "bytes"));
            let qt = QTable::new(&bytes, l).unwrap();
            let starts: Vec<i64> = load::<i64>(c, "offsets").iter().copied().collect();
            let weights: Option<Array1<f32>> = c
                .get("weights")
                .map(|_| load::<f32>(c, "weights").into_dimensionality().unwrap());
            let expect: Array2<f32> = two_d(load(c, "expect"));
            let pool = |p: ndarray_gather::Pooling| match &weights {
                Some(w) => p.weighted(w),
                None => p.into(),
            };
            use ndarray_gather::{Pooling, Segments};
            let out = match load_opt::<i64>(c, "indices") {
                Some(i) => qt.gather_reduce(&i, Segments::starts(&starts), pool(Pooling::Sum)),
                None => qt.gather_reduce(
                    &load::<i32>(c, "indices"),
                    Segments::starts(&starts),
                    pool(Pooling::Sum),
                ),
            }
            .unwrap();
            let bits = |a: &Array2<f32>| a.mapv(f32::to_bits);
            assert_eq!(bits(&out), bits(&expect), "{}", c.name);
            seen += 1;
        }
        assert_eq!(seen, 9);
    }
}

/// A row's scale, bias and values, read from its bytes as decision 45 lays them out.
fn decode(l: Rowwise, row: &[u8], d: usize) -> (f32, f32, Vec<u8>) {
    let half = |b: &[u8]| half_to_f32(u16::from_le_bytes([b[0], b[1]]));
    match l {
        Rowwise::Int8 => (
            f32::from_le_bytes(row[d..d + 4].try_into().unwrap()),
            f32::from_le_bytes(row[d + 4..d + 8].try_into().unwrap()),
            row[..d].to_vec(),
        ),
        _ => {
            let bits = if l == Rowwise::Int4 { 4 } else { 2 };
            let per = 8 / bits;
            let packed = d / per;
            let q = (0..d)
                .map(|j| (row[j / per] >> ((j % per) * bits)) & ((1 << bits) - 1))
                .collect();
            (half(&row[packed..]), half(&row[packed + 2..]), q)
        }
    }
}

/// A half float's value, from its definition (a large range's scale overflows to the
/// infinity: the fixtures' `1e6` rows). Powers of two from their bits: exact, where
/// `powi` need not be (and is not under Miri).
fn half_to_f32(h: u16) -> f32 {
    let (sign, exp, man) = (h >> 15, i32::from((h >> 10) & 0x1f), f32::from(h & 0x3ff));
    let two = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    let v = match exp {
        0 => man * two(-24),
        31 if man == 0.0 => f32::INFINITY,
        31 => f32::NAN,
        _ => (1.0 + man / 1024.0) * two(exp - 15),
    };
    if sign == 1 { -v } else { v }
}

#[test]
fn errors_name_the_value_or_the_width() {
    let e = Rowwise::Int8
        .quantize(&array![[1.0, 2.0], [3.0, f32::NAN]])
        .unwrap_err();
    assert!(
        matches!(
            e,
            GatherError::NotFinite {
                row: 1,
                column: 1,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "Rowwise::quantize: the value at row 1, column 1 is NaN, which a quantized row cannot hold"
    );
    let e = Rowwise::Int4.quantize(&array![[f32::INFINITY, 2.0]]).unwrap_err();
    assert!(e.to_string().contains("row 0, column 0 is inf"), "{e}");
    let e = Rowwise::Int4.quantize(&array![[1.0, 2.0, 3.0]]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Rowwise::quantize: rows of 3 values do not fit the Int4 layout: Int4 packs 2 values to a byte, so a row's values must be a multiple of 2"
    );
    let e = Rowwise::Int2.quantize(&array![[1.0, 2.0]]).unwrap_err();
    assert!(
        matches!(
            e,
            GatherError::RowWidth {
                width: 2,
                layout: "Int2",
                ..
            }
        ),
        "{e}"
    );
    let e = QTable::new(&Array2::<u8>::zeros((2, 7)), Rowwise::Int8).unwrap_err();
    assert_eq!(
        e.to_string(),
        "QTable::new: rows of 7 bytes do not fit the Int8 layout: a row of Int8 holds its scale and bias in its last 8 bytes"
    );
    let e = Rowwise::Int2
        .dequantize(&Array2::<u8>::zeros((1, 3)))
        .unwrap_err();
    assert!(
        e.to_string().starts_with("Rowwise::dequantize: rows of 3 bytes"),
        "{e}"
    );
    // A bad index names itself; negative ones count from the end.
    let q = Rowwise::Int8.quantize(&array![[1.0, 2.0], [3.0, 4.0]]).unwrap();
    let qt = QTable::new(&q, Rowwise::Int8).unwrap();
    let e = qt.gather(&[0, 2]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("QTable::gather: index 2 at position [1]"),
        "{e}"
    );
    assert_eq!(qt.gather(&[-1]).unwrap(), qt.gather(&[1]).unwrap());
    // Garbage bytes (a NaN scale) give NaN, never a panic.
    let mut g = Array2::<u8>::from_elem((1, 10), 0xff);
    g[[0, 0]] = 3;
    assert!(Rowwise::Int8.dequantize(&g).unwrap().iter().all(|v| v.is_nan()));
    assert!(Rowwise::Int4.dequantize(&g).unwrap().iter().all(|v| v.is_nan()));
}

/// Rows of no values, and empty tables.
#[test]
fn empty_rows_and_tables() {
    let q = Rowwise::Int8.quantize(&Array2::<f32>::zeros((2, 0))).unwrap();
    assert_eq!(q.dim(), (2, 8));
    assert_eq!(Rowwise::Int8.dequantize(&q).unwrap().dim(), (2, 0));
    let q = Rowwise::Int4.quantize(&Array2::<f32>::zeros((0, 4))).unwrap();
    assert_eq!(q.dim(), (0, 6));
    assert_eq!(
        QTable::new(&q, Rowwise::Int4)
            .unwrap()
            .gather(&[0_i64; 0])
            .unwrap()
            .dim(),
        (0, 4)
    );
    // A zero-size output reads nothing, so any index is fine (decision 4, as the f32
    // gather); rows of values are read and checked.
    let none = Array2::<u8>::zeros((0, 8));
    let empty = QTable::new(&none, Rowwise::Int8).unwrap();
    assert_eq!(empty.gather(&[-1_i64, 5]).unwrap().dim(), (2, 0));
    let e = QTable::new(&q, Rowwise::Int4)
        .unwrap()
        .gather(&[0_i64])
        .unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { axis_len: 0, .. }),
        "{e}"
    );
}

/// A large table quantizes in parallel ranges of rows: each row as it quantizes alone, in
/// any memory order, on one thread or three; the first value that is not finite in
/// row-major order is the one named, wherever the ranges fall.
#[test]
#[cfg_attr(miri, ignore)]
fn large_tables_quantize_row_by_row_on_any_thread_count() {
    let t = Array2::from_shape_fn((12_000, 48), |(r, c)| {
        ((r * 31 + c * 7) % 101) as f32 * 0.37 - 20.0
    });
    let f = t.t().as_standard_layout().t().to_owned();
    for l in [Rowwise::Int8, Rowwise::Int4, Rowwise::Int2] {
        let q = l.quantize(&t).unwrap();
        for r in [0, 1, 2999, 11_999] {
            let one = l.quantize(&t.slice(ndarray::s![r..r + 1, ..])).unwrap();
            assert_eq!(q.row(r), one.row(0), "{l:?} row {r}");
        }
        assert_eq!(l.quantize(&f).unwrap(), q, "{l:?} in Fortran order");
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        assert_eq!(
            pool.install(|| l.quantize(&t)).unwrap(),
            q,
            "{l:?} on three threads"
        );
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        assert_eq!(one.install(|| l.quantize(&t)).unwrap(), q, "{l:?} on one thread");
    }
    let mut bad = t.clone();
    bad[[11_990, 3]] = f32::INFINITY;
    bad[[6000, 40]] = f32::NAN;
    let e = Rowwise::Int8.quantize(&bad).unwrap_err();
    assert!(
        matches!(
            e,
            GatherError::NotFinite {
                row: 6000,
                column: 40,
                ..
            }
        ),
        "{e}"
    );
}

/// Every pooling, weights, skip, fill, segment kind, layout and row width (register
/// blocks and tails), any memory order of the bytes, one thread or three: against a
/// literal loop over the positions for the sums (decision 47's order), and against the
/// `f32` call on the dequantized table for the poolings that see `fma(scale, q, bias)`.
#[test]
fn every_pooling_of_quantized_rows_matches_a_literal_loop() {
    use ndarray_gather::prelude::*;
    let mut state = 0x51ED_u64;
    let mut next = move |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    // (Under Miri: one width with a block and a tail, two of the four option sets.)
    let widths: &[usize] = if cfg!(miri) {
        &[20]
    } else {
        &[4, 8, 20, 48, 64, 100]
    };
    let options: &[(bool, bool)] = if cfg!(miri) {
        &[(false, false), (true, true)]
    } else {
        &[(false, false), (false, true), (true, false), (true, true)]
    };
    for &d in widths {
        for l in [Rowwise::Int8, Rowwise::Int4, Rowwise::Int2] {
            let n = 9;
            let t = Array2::from_shape_fn((n, d), |_| next(2001) as f32 / 100.0 - 10.0);
            let q = l.quantize(&t).unwrap();
            let f = q.t().as_standard_layout().t().to_owned();
            let qt = QTable::new(&q, l).unwrap();
            let deq = l.dequantize(&q).unwrap();
            let positions = 14;
            let idx: Vec<i64> = (0..positions)
                .map(|_| next(2 * n as u64) as i64 - n as i64)
                .collect();
            let w: Vec<f32> = (0..positions).map(|_| next(400) as f32 / 100.0 - 1.0).collect();
            let starts = [0_i64, 3, 3, 9, 13];
            let ids: Vec<i64> = (0..positions).map(|_| next(4) as i64).collect();
            let skip = idx[1];
            let resolved = |v: i64| {
                if v < 0 {
                    (v + n as i64) as usize
                } else {
                    v as usize
                }
            };
            // Each segment's kept positions, in order: by starts, and by ids.
            let by_starts = |s: usize| {
                let end = starts.get(s + 1).map_or(positions, |&e| e as usize);
                (starts[s] as usize..end).collect::<Vec<_>>()
            };
            let by_ids = |s: usize| (0..positions).filter(|&p| ids[p] == s as i64).collect::<Vec<_>>();
            for (kind, segs, members) in [
                (
                    "starts",
                    Segments::starts(&starts),
                    &by_starts as &dyn Fn(usize) -> Vec<usize>,
                ),
                ("ids", Segments::ids(&ids, 5), &by_ids),
            ] {
                for &(weighted, skipping) in options {
                    let pool = |p: Pooling| {
                        let mut p: Pool<'_, f32> = p.into();
                        if weighted {
                            p = p.weighted(&w);
                        }
                        if skipping {
                            p = p.skip(skip);
                        }
                        p.fill(-7.5)
                    };
                    let what = format!("{l:?} d {d} {kind} weighted {weighted} skip {skipping}");
                    // The sums, written out.
                    for pooling in [Pooling::Sum, Pooling::Mean, Pooling::SqrtN] {
                        let got = qt.gather_reduce(&idx, segs, pool(pooling)).unwrap();
                        let fq = QTable::new(&f, l)
                            .unwrap()
                            .gather_reduce(&idx, segs, pool(pooling))
                            .unwrap();
                        assert_eq!(
                            got.mapv(f32::to_bits),
                            fq.mapv(f32::to_bits),
                            "{what} {pooling}: F order"
                        );
                        for s in 0..5 {
                            let kept: Vec<usize> = members(s)
                                .into_iter()
                                .filter(|&p| !(skipping && idx[p] == skip))
                                .collect();
                            let mut acc = vec![0.0f32; d];
                            let (mut sw, mut sw2) = (0.0f32, 0.0f32);
                            for &p in &kept {
                                let wp = if weighted { w[p] } else { 1.0 };
                                let row = q.row(resolved(idx[p]));
                                let (scale, bias, qs) = decode(l, row.as_slice().unwrap(), d);
                                for j in 0..d {
                                    acc[j] = (wp * scale).mul_add(f32::from(qs[j]), acc[j] + wp * bias);
                                }
                                sw += wp;
                                sw2 += wp * wp;
                            }
                            let div = match (pooling, weighted) {
                                (Pooling::Mean, true) => sw,
                                (Pooling::Mean, false) => kept.len() as f32,
                                (Pooling::SqrtN, true) => (sw2 as f64).sqrt() as f32,
                                (Pooling::SqrtN, false) => (kept.len() as f64).sqrt() as f32,
                                _ => 1.0,
                            };
                            for j in 0..d {
                                let want = if kept.is_empty() {
                                    -7.5
                                } else if pooling == Pooling::Sum {
                                    acc[j]
                                } else {
                                    acc[j] / div
                                };
                                assert_eq!(
                                    got[[s, j]].to_bits(),
                                    want.to_bits(),
                                    "{what} {pooling} [{s}, {j}]"
                                );
                            }
                        }
                    }
                    // The others: each value `fma(scale, q, bias)`, the f32 kernel's way.
                    if !weighted {
                        for pooling in [Pooling::Max, Pooling::Min, Pooling::Prod] {
                            let got = qt.gather_reduce(&idx, segs, pool(pooling)).unwrap();
                            let want = deq.gather_reduce(&idx, segs, 0, pool(pooling)).unwrap();
                            assert_eq!(
                                got.mapv(f32::to_bits),
                                want.mapv(f32::to_bits),
                                "{what} {pooling}"
                            );
                        }
                    }
                }
            }
            // One thread and three: the same bits (a table large enough to split).
            if !cfg!(miri) && d == 64 {
                let big = l
                    .quantize(&Array2::from_shape_fn((3000, d), |(r, c)| {
                        ((r * 13 + c) % 97) as f32 - 40.0
                    }))
                    .unwrap();
                let qb = QTable::new(&big, l).unwrap();
                let idx: Vec<i64> = (0..40_000).map(|_| next(3000) as i64).collect();
                let starts: Vec<i64> = (0..4000).map(|b| b * 10).collect();
                let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
                let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
                for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
                    let a = one
                        .install(|| qb.gather_reduce(&idx, Segments::starts(&starts), pooling))
                        .unwrap();
                    let b = three
                        .install(|| qb.gather_reduce(&idx, Segments::starts(&starts), pooling))
                        .unwrap();
                    assert_eq!(
                        a.mapv(f32::to_bits),
                        b.mapv(f32::to_bits),
                        "{l:?} {pooling}: threads"
                    );
                }
            }
        }
    }
}

/// The call's errors name the values and write nothing (there is no output to write).
#[test]
fn quantized_pooling_errors() {
    use ndarray_gather::prelude::*;
    let q = Rowwise::Int4.quantize(&array![[1.0, 2.0], [3.0, 4.0]]).unwrap();
    let qt = QTable::new(&q, Rowwise::Int4).unwrap();
    let e = qt
        .gather_reduce(&[0, 2], Segments::starts(&[0]), Pooling::Sum)
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("QTable::gather_reduce: index 2 at position [1]"),
        "{e}"
    );
    let e = qt
        .gather_reduce(&[0, 1], Segments::starts(&[0, 3]), Pooling::Sum)
        .unwrap_err();
    assert!(matches!(e, GatherError::Segments { .. }), "{e}");
    let e = qt
        .gather_reduce(&[0, 1], Segments::uniform(1), Pooling::Sum.weighted(&[1.0]))
        .unwrap_err();
    assert!(
        matches!(
            e,
            GatherError::Weights {
                len: 1,
                positions: 2,
                ..
            }
        ),
        "{e}"
    );
    let e = qt
        .gather_reduce(&[0, 1], Segments::uniform(1), Pooling::Max.weighted(&[1.0, 2.0]))
        .unwrap_err();
    assert!(matches!(e, GatherError::Pooling { .. }), "{e}");
    // A garbage scale (NaN) gives NaN, never a panic; a skipped index out of range is fine.
    let mut g = Array2::<u8>::from_elem((2, 10), 0xff);
    g[[0, 0]] = 1;
    let qt = QTable::new(&g, Rowwise::Int8).unwrap();
    let out = qt
        .gather_reduce(&[0, 1, 99], Segments::starts(&[0]), Pooling::Sum.skip(99))
        .unwrap();
    assert!(out.iter().all(|v| v.is_nan()));
}

/// The smallest value is the first smallest, as `std::min_element` finds it: between
/// `0.0` and `-0.0` the first in the row is the bias, its sign bit kept (rows of 8 and more
/// run in vector lanes, whose order is not the row's).
#[test]
fn a_zero_bias_keeps_the_first_zeros_sign() {
    for (first, second) in [(0.0f32, -0.0f32), (-0.0, 0.0)] {
        for d in [3, 8, 9, 24] {
            let row: Vec<f32> = (0..d)
                .map(|j| {
                    if j == d - 2 {
                        first
                    } else if j == d - 1 {
                        second
                    } else {
                        j as f32 + 1.0
                    }
                })
                .collect();
            let q = Rowwise::Int8
                .quantize(&Array2::from_shape_vec((1, d), row).unwrap())
                .unwrap();
            let bias = f32::from_le_bytes(q.row(0).as_slice().unwrap()[d + 4..d + 8].try_into().unwrap());
            assert_eq!(bias.to_bits(), first.to_bits(), "d {d}: {first} then {second}");
        }
    }
}

/// Decision 48: a plan applies to a `QTable` as to its `f32` table, into fresh arrays or a
/// caller's of any layout and contents, with or without the argmax (which equals the
/// dequantized table's, bit for bit).
#[test]
fn plans_and_argmax_apply_to_quantized_rows() {
    use ndarray::ShapeBuilder;
    use ndarray_gather::prelude::*;
    let widths: &[usize] = if cfg!(miri) { &[20] } else { &[3, 20, 64] };
    // (Under Miri: the 2-bit rows, whose small blocks unpack value by value.)
    let layouts: &[Rowwise] = if cfg!(miri) {
        &[Rowwise::Int2]
    } else {
        &[Rowwise::Int8, Rowwise::Int4, Rowwise::Int2]
    };
    for &d in widths {
        for &l in layouts {
            let d = if l == Rowwise::Int8 { d } else { d.div_ceil(4) * 4 };
            let t = Array2::from_shape_fn((7, d), |(r, c)| ((r * 31 + c * 7) % 23) as f32 - 11.0);
            let q = l.quantize(&t).unwrap();
            let qt = QTable::new(&q, l).unwrap();
            let deq = l.dequantize(&q).unwrap();
            let idx = [3_i64, -1, 0, 3, 5, 2, 6, -7];
            let what = format!("{l:?} d {d}");
            for segs in [
                Segments::starts(&[0, 2, 2, 5]),
                Segments::ids(&[1, 0, 3, 1, 1, 0, 3, 3], 4),
            ] {
                let plan = GatherReducePlan::new_skipping(qt.dim(), &idx, 5, segs, 0).unwrap();
                for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max, Pooling::Prod] {
                    let want = qt.gather_reduce(&idx, segs, pooling.skip(5)).unwrap();
                    let got = plan.apply(&qt, pooling).unwrap();
                    assert_eq!(
                        got.mapv(f32::to_bits),
                        want.mapv(f32::to_bits),
                        "{what} {pooling}"
                    );
                    // A caller's output holding other values, in either memory order.
                    for fortran in [false, true] {
                        let mut out = Array2::from_elem((4, d).set_f(fortran), 99.0f32);
                        plan.apply_into(&qt, pooling, &mut out).unwrap();
                        assert_eq!(
                            out.mapv(f32::to_bits),
                            want.mapv(f32::to_bits),
                            "{what} {pooling} into"
                        );
                    }
                }
                for pooling in [Pooling::Max, Pooling::Min] {
                    let (m, a) = qt.gather_reduce_arg(&idx, segs, pooling.skip(5)).unwrap();
                    let (dm, da) = deq.gather_reduce_arg(&idx, segs, 0, pooling.skip(5)).unwrap();
                    assert_eq!(
                        (m.mapv(f32::to_bits), &a),
                        (dm.mapv(f32::to_bits), &da),
                        "{what} {pooling} arg"
                    );
                    let (pm, pa) = plan.apply_arg(&qt, pooling).unwrap();
                    assert_eq!(
                        (pm.mapv(f32::to_bits), &pa),
                        (dm.mapv(f32::to_bits), &da),
                        "{what} {pooling} plan arg"
                    );
                    let mut out = Array2::from_elem((4, d).f(), 1.5f32);
                    let mut arg = Array2::from_elem((4, d), 9usize);
                    plan.apply_arg_into(&qt, pooling, &mut out, &mut arg).unwrap();
                    assert_eq!(
                        (out.mapv(f32::to_bits), arg),
                        (dm.mapv(f32::to_bits), da),
                        "{what} {pooling} arg into"
                    );
                }
            }
        }
    }
    // The plan's checks: the table's row count, the output's shape, the argmax's pooling.
    let q = Rowwise::Int8.quantize(&Array2::<f32>::zeros((4, 2))).unwrap();
    let qt = QTable::new(&q, Rowwise::Int8).unwrap();
    let plan = GatherReducePlan::new([5], &[0, 4], Segments::uniform(1), 0).unwrap();
    let e = plan.apply(&qt, Pooling::Sum).unwrap_err();
    assert!(matches!(e, GatherError::InputShape { .. }), "{e}");
    let plan = GatherReducePlan::new([4], &[0, 3], Segments::uniform(1), 0).unwrap();
    let mut out = Array2::from_elem((2, 3), 5.0f32);
    let e = plan.apply_into(&qt, Pooling::Sum, &mut out).unwrap_err();
    assert!(matches!(e, GatherError::OutputShape { .. }), "{e}");
    assert!(out.iter().all(|&v| v == 5.0));
    let e = qt
        .gather_reduce_arg(&[0], Segments::uniform(1), Pooling::Sum)
        .unwrap_err();
    assert!(matches!(e, GatherError::Pooling { .. }), "{e}");
}

/// Rows of `half::f16` / `bf16` pool as the `f32` table of their values, bit for bit:
/// every pooling, weights, skip, fill, argmax, plans, any memory order, 1 and 3 threads.
#[test]
fn half_rows_pool_as_their_f32_table() {
    use half::{bf16, f16};
    use ndarray::{ShapeBuilder, s};
    use ndarray_gather::prelude::*;
    let widths: &[usize] = if cfg!(miri) { &[20] } else { &[1, 3, 20, 64, 100] };
    for &d in widths {
        // Values across the halves' range: subnormals, large, negative, an infinity.
        let t = Array2::from_shape_fn((9, d), |(r, c)| match (r * 7 + c * 3) % 11 {
            0 => 3.0e-6,
            1 => -60000.0,
            2 if r == 4 => f32::INFINITY,
            k => (k as f32 - 5.5) * 1.25 + r as f32 / 8.0,
        });
        let h: Array2<f16> = t.mapv(f16::from_f32_const);
        let b: Array2<bf16> = t.mapv(bf16::from_f32_const);
        let (th, tb) = (h.mapv(f16::to_f32_const), b.mapv(bf16::to_f32_const));
        let hf = Array2::from_shape_vec((9, d).f(), h.t().iter().copied().collect()).unwrap();
        let wide = Array2::from_shape_fn((9, 2 * d), |(r, c)| h[[r, c / 2]]);
        let strided = wide.slice(s![.., ..;2]);
        let idx = [3_i64, -1, 0, 3, 5, 2, 6, -7, 4];
        let w = [0.5f32, -1.0, 2.0, 0.25, 1.0, 3.0, -0.5, 1.5, 2.5];
        // (Under Miri: rows read in place and copied first, two poolings, one segment kind.)
        let all_segs = [
            Segments::starts(&[0, 2, 2, 5]),
            Segments::ids(&[1, 0, 3, 1, 1, 0, 3, 3, 0], 4),
        ];
        let all_pools = Pooling::ALL;
        let (segs_run, pools_run) = if cfg!(miri) {
            (&all_segs[..1], &[Pooling::Sum, Pooling::Max][..])
        } else {
            (&all_segs[..], &all_pools[..])
        };
        for &segs in segs_run {
            let tables = [
                ("f16", QTable::f16(&h), &th),
                ("f16 strided", QTable::f16(strided), &th),
                ("f16 F order", QTable::f16(&hf), &th),
                ("bf16", QTable::bf16(&b), &tb),
            ];
            for (what, qt, f) in tables.into_iter().take(if cfg!(miri) { 2 } else { 4 }) {
                let plan = GatherReducePlan::new(qt.dim(), &idx, segs, 0).unwrap();
                for &pooling in pools_run {
                    let mut pools: Vec<Pool<'_, f32>> =
                        vec![pooling.into(), Pool::from(pooling).skip(5).fill(-2.0)];
                    if matches!(pooling, Pooling::Sum | Pooling::Mean | Pooling::SqrtN) {
                        pools.push(Pool::from(pooling).weighted(&w));
                    }
                    // (The second skips: the plan was made without.)
                    for (k, pool) in pools.into_iter().enumerate() {
                        let want = f
                            .gather_reduce(&idx, segs, 0, pool.clone())
                            .unwrap()
                            .mapv(f32::to_bits);
                        let got = qt.gather_reduce(&idx, segs, pool.clone()).unwrap();
                        assert_eq!(got.mapv(f32::to_bits), want, "{what} d {d} {pooling}");
                        if k != 1 {
                            let mut out = Array2::from_elem((4, d).f(), 7.0f32);
                            plan.apply_into(&qt, pool, &mut out).unwrap();
                            assert_eq!(out.mapv(f32::to_bits), want, "{what} d {d} {pooling} plan");
                        }
                    }
                }
                let (m, a) = qt.gather_reduce_arg(&idx, segs, Pooling::Max).unwrap();
                let (fm, fa) = f.gather_reduce_arg(&idx, segs, 0, Pooling::Max).unwrap();
                assert_eq!(
                    (m.mapv(f32::to_bits), a),
                    (fm.mapv(f32::to_bits), fa),
                    "{what} d {d} arg"
                );
                assert_eq!(
                    qt.gather(&idx[..4]).unwrap(),
                    f.gather(&idx[..4], 0).unwrap(),
                    "{what} gather"
                );
            }
        }
    }
    if cfg!(miri) {
        return;
    }
    // One thread and three: the same bits on a table large enough to split.
    let t = Array2::from_shape_fn((3000, 64), |(r, c)| ((r * 13 + c) % 97) as f32 / 8.0 - 6.0);
    let h = t.mapv(f16::from_f32_const);
    let idx: Vec<i64> = (0..40_000).map(|p| (p * 7919 % 3000) as i64).collect();
    let starts: Vec<i64> = (0..4000).map(|b| b * 10).collect();
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| QTable::f16(&h).gather_reduce(&idx, Segments::starts(&starts), Pooling::Mean))
            .unwrap()
    };
    assert_eq!(run(1).mapv(f32::to_bits), run(3).mapv(f32::to_bits));
    assert_eq!(
        run(1).mapv(f32::to_bits),
        h.mapv(f16::to_f32_const)
            .gather_reduce(&idx, Segments::starts(&starts), 0, Pooling::Mean)
            .unwrap()
            .mapv(f32::to_bits)
    );
}
