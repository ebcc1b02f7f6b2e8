//! Block and row scatters against plain loops, across chunk and thread boundaries.

use ndarray::{Array, Axis};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::{Add, Replace};

use crate::support::threads::{on_1_and_3, on_1_and_3_natively};

/// Blocks smaller than a cache line into a destination that is not cache-resident (S3's
/// case: one part, its indices checked first, the blocks pipelined): `Replace` keeps the
/// last duplicate and `Add` sums them in row-major order, for contiguous blocks (4, as
/// fixed-size arrays; 3) and reversed ones, the bits of a plain loop on 1 and 3 threads. A
/// bad index in the first or the last position leaves the destination unchanged, with
/// either reducer. (Under Miri the destination has more elements than there are updates,
/// so that it is scattered into in place, as natively, not through a checked copy; one
/// part on one thread, a part per thread on the other pool.)
#[test]
fn small_blocks_into_a_large_destination_match_a_plain_loop() {
    // Natively the destinations span 1.2 and 1.6 MB.
    let (h, w, n) = if cfg!(miri) {
        (6, 5, 24)
    } else {
        (400, 250, 300_000)
    };
    let cells = h * w;
    let at = |i: usize| (i * 7919 + i / 5) % cells;
    for width in [3, 4] {
        let upd = Array::from_shape_fn((n, width), |(i, j)| ((i * 31 + j) % 97) as f32 * 0.37 + 1.0);
        let points = Array::from_shape_fn((n, 2), |(i, c)| [at(i) / w, at(i) % w][c] as i64);
        let start = Array::from_shape_fn((h, w, width), |(r, c, j)| (r * 7 + c * 3 + j) as f32 * 0.5);
        // Under Miri each width one way: fixed-size blocks (4) reversed, others forwards.
        let ways = [false, true]
            .into_iter()
            .filter(|&r| !cfg!(miri) || r == (width == 4));
        for reversed in ways {
            let fresh = || {
                let mut t = start.clone();
                if reversed {
                    t.invert_axis(Axis(2));
                }
                t
            };
            for add in [false, true] {
                let got = on_1_and_3(|| {
                    let mut t = fresh();
                    if add {
                        t.scatter_nd(&points, &upd, 0, Add).unwrap();
                    } else {
                        t.scatter_nd(&points, &upd, 0, Replace).unwrap();
                    }
                    t.mapv(f32::to_bits)
                });
                let mut want = fresh();
                for i in 0..n {
                    for j in 0..width {
                        let x = &mut want[[at(i) / w, at(i) % w, j]];
                        *x = if add { *x + upd[[i, j]] } else { upd[[i, j]] };
                    }
                }
                assert_eq!(
                    got,
                    want.mapv(f32::to_bits),
                    "width {width}, reversed {reversed}, add {add}"
                );
            }
            for (at_bad, add) in [(n - 1, true), (n - 1, false), (0, false)] {
                let mut bad = points.clone();
                bad[[at_bad, 0]] = h as i64;
                let got = on_1_and_3(|| {
                    let mut t = fresh();
                    let e = if add {
                        t.scatter_nd(&bad, &upd, 0, Add).unwrap_err()
                    } else {
                        t.scatter_nd(&bad, &upd, 0, Replace).unwrap_err()
                    };
                    assert!(
                        matches!(e, GatherError::IndexOutOfBounds { index, ref position, axis: 0, axis_len, .. }
                            if index == h as i128 && axis_len == h && position == &vec![at_bad, 0]),
                        "{e:?}"
                    );
                    t.mapv(f32::to_bits)
                });
                assert_eq!(
                    got,
                    fresh().mapv(f32::to_bits),
                    "width {width}, reversed {reversed}, add {add}, bad at {at_bad}"
                );
            }
        }
    }
}

/// Blocks of every length the kernel combines as fixed-size arrays (1, 2, 4, 8, 16) and
/// of others (3, 5), located through one axis (`scatter` of rows) and through two
/// (`scatter_nd` of points), with duplicates: the bits of a plain loop, on 1 and 3
/// threads. (Natively the 16-wide destinations span 17.9 MB, more than the last-level
/// cache's 16 MiB that parts need, and their boundaries cut blocks.)
#[test]
fn block_scatters_of_every_length_match_a_plain_loop() {
    let (h, w, n) = if cfg!(miri) {
        (3, 2, 20)
    } else {
        (700, 400, 200_000)
    };
    let rows = h * w;
    let at = |i: usize| (i * 7919 + i / 3) % rows;
    // Under Miri: one element, an odd block, a fixed-size one and a cache line.
    let widths: &[usize] = if cfg!(miri) {
        &[1, 3, 4, 16]
    } else {
        &[1, 2, 3, 4, 5, 8, 16]
    };
    for &width in widths {
        let upd = Array::from_shape_fn((n, width), |(i, j)| ((i * 31 + j) % 97) as f32 * 0.37);
        let mut want = Array::<f32, _>::zeros((rows, width));
        for i in 0..n {
            for j in 0..width {
                want[[at(i), j]] += upd[[i, j]];
            }
        }
        let ids = Array::from_shape_fn(n, |i| at(i) as i64);
        let got = on_1_and_3(|| {
            let mut t = Array::<f32, _>::zeros((rows, width));
            t.scatter(&ids, &upd, 0, Add).unwrap();
            t.mapv(f32::to_bits)
        });
        assert_eq!(got, want.mapv(f32::to_bits), "rows of {width}");
        let points = Array::from_shape_fn((n, 2), |(i, c)| [at(i) / w, at(i) % w][c] as i64);
        let got = on_1_and_3(|| {
            let mut t = Array::<f32, _>::zeros((h, w, width));
            t.scatter_nd(&points, &upd, 0, Add).unwrap();
            t.mapv(f32::to_bits)
        });
        let want = want.to_shape((h, w, width)).unwrap().mapv(f32::to_bits);
        assert_eq!(got, want, "points of {width}");
    }
}

/// Blocks scattered in place into a destination with more elements than updates (its
/// indices checked first, then written by one part that owns every element): `Replace`
/// keeps the last duplicate in row-major order and `Add` sums them in that order, for
/// blocks of every length, located through one axis (`scatter`) and through two
/// (`scatter_nd`), with and without drop glue; the result of a plain loop, on 1 and 3
/// threads.
#[test]
fn block_scatters_in_place_match_a_plain_loop() {
    // Under Miri fewer updates and widths (still more than the 64 positions that a walk
    // visits lane by lane), blocks of 2 and 8 elements, on the global pool only (thread
    // pools are slow to build there, and these scatters are too small for parts).
    let (h, w, n, widths): (usize, usize, usize, &[usize]) = if cfg!(miri) {
        (8, 8, 40, &[2, 8])
    } else {
        (16, 8, 80, &[1, 2, 3, 4, 8, 16])
    };
    let rows = h * w;
    // Update `i` lands on row `at(i)`: every third row, each twice.
    let at = |i: usize| i % (n / 2) * 3;
    // The updates that land on each row, in row-major order.
    let mut landing = vec![Vec::new(); h * w];
    for i in 0..n {
        landing[at(i)].push(i);
    }
    let hits = |r: usize| landing[r].iter().copied();
    for &width in widths {
        let upd = Array::from_shape_fn((n, width), |(i, j)| (i * 31 + j) as f32 * 0.37);
        let ids = Array::from_shape_fn(n, |i| at(i) as i64);
        let points = Array::from_shape_fn((n, 2), |(i, c)| [at(i) / w, at(i) % w][c] as i64);
        let start = Array::from_shape_fn((rows, width), |(r, j)| (r * 3 + j) as f32);
        // Each reducer scatters twice: by rows, then by points.
        let twice = |t: &mut Array<f32, ndarray::Ix2>, add: bool| {
            let mut p = t.clone().into_shape_with_order((h, w, width)).unwrap();
            if add {
                t.scatter(&ids, &upd, 0, Add).unwrap();
                p.assign(&t.view().into_shape_with_order((h, w, width)).unwrap());
                p.scatter_nd(&points, &upd, 0, Add).unwrap();
            } else {
                t.scatter(&ids, &upd, 0, Replace).unwrap();
                p.assign(&t.view().into_shape_with_order((h, w, width)).unwrap());
                p.scatter_nd(&points, &upd, 0, Replace).unwrap();
            }
            *t = p.into_shape_with_order((rows, width)).unwrap();
        };
        let replaced = Array::from_shape_fn((rows, width), |(r, j)| {
            hits(r).next_back().map_or(start[[r, j]], |i| upd[[i, j]])
        });
        let added = Array::from_shape_fn((rows, width), |(r, j)| {
            let mut v = start[[r, j]];
            for i in hits(r).chain(hits(r)) {
                v += upd[[i, j]];
            }
            v
        });
        for (add, want) in [(false, &replaced), (true, &added)] {
            let got = on_1_and_3_natively(|| {
                let mut t = start.clone();
                twice(&mut t, add);
                t.mapv(f32::to_bits)
            });
            assert_eq!(got, want.mapv(f32::to_bits), "add {add}, blocks of {width}");
        }
        // With drop glue: the last duplicate's string (integers: formatting floats is
        // slow under Miri; there, blocks of 2 only).
        if cfg!(miri) && width != 2 {
            continue;
        }
        let strings = Array::from_shape_fn((n, width), |(i, j)| format!("u{}", i * 31 + j));
        let old = Array::from_shape_fn((rows, width), |(r, j)| format!("s{}", r * 3 + j));
        let got = on_1_and_3_natively(|| {
            let mut t = old.clone().into_shape_with_order((h, w, width)).unwrap();
            t.scatter_nd(&points, &strings, 0, Replace).unwrap();
            t.into_shape_with_order((rows, width)).unwrap()
        });
        let want = Array::from_shape_fn((rows, width), |(r, j)| {
            hits(r)
                .next_back()
                .map_or_else(|| old[[r, j]].clone(), |i| strings[[i, j]].clone())
        });
        assert_eq!(got, want, "strings, blocks of {width}");
    }
}

/// Elements scattered along the last axis (`scatter_elements`, S2's GatherElements
/// backward): every lane writes one contiguous row at random, in chunks that each ask for
/// a share of the next lane's row. Rows longer than a chunk with a remainder (300
/// natively against chunks of 128; 21 against 8 under Miri), into a destination large
/// enough to be split between threads and into a small one (scattered into a copy by one
/// part), forwards and reversed along the axis: `Add` sums duplicates in row-major order
/// and `Replace` keeps the last, the bits of a plain loop on 1 and 3 threads.
#[test]
fn rows_of_elements_match_a_plain_loop() {
    // Natively 2000 rows: 2.4 MB of updates, past the 2 MiB from which a scatter runs
    // on the pool (its check pass; the destination, under 16 MiB, is one part; under
    // Miri, parts).
    let (width, large) = if cfg!(miri) { (21, 12) } else { (300, 2000) };
    for rows in [3, large] {
        let ids = Array::from_shape_fn((rows, width), |(i, j)| ((i * 7 + j * j * 13) % width) as i64);
        let upd = Array::from_shape_fn((rows, width), |(i, j)| (i * width + j) as f32 * 0.37);
        let start = Array::from_shape_fn((rows, width), |(i, j)| (i + 2 * j) as f32);
        for reversed in [false, true] {
            // Column `c` of the destination as scattered is column `col(c)` of `start`.
            let col = |c: usize| if reversed { width - 1 - c } else { c };
            for add in [false, true] {
                let got = on_1_and_3_natively(|| {
                    let mut t = start.clone();
                    if reversed {
                        t.invert_axis(Axis(1));
                    }
                    if add {
                        t.scatter_elements(&ids, &upd, 1, Add).unwrap();
                    } else {
                        t.scatter_elements(&ids, &upd, 1, Replace).unwrap();
                    }
                    if reversed {
                        t.invert_axis(Axis(1));
                    }
                    t.mapv(f32::to_bits)
                });
                let mut want = start.clone();
                for ((i, j), &u) in upd.indexed_iter() {
                    let d = &mut want[[i, col(ids[[i, j]] as usize)]];
                    *d = if add { *d + u } else { u };
                }
                assert_eq!(
                    got,
                    want.mapv(f32::to_bits),
                    "{rows} rows, reversed {reversed}, add {add}"
                );
            }
        }
    }
}

/// Long rows (S1's embedding gradients) into a destination large enough for parts, each
/// part combining the rows in its span of the destination, in row-major order: the bits
/// of a plain loop on 1 and 3 threads, for contiguous rows and reversed ones; a bad index
/// in the last position leaves the destination unchanged.
#[test]
fn long_rows_scattered_in_parts_match_a_plain_loop() {
    // Natively 14000 rows of 300 `f32`: 16.8 MB, above the size for parts.
    let (rows, width, n) = if cfg!(miri) {
        (6, 40, 9)
    } else {
        (14_000, 300, 20_000)
    };
    let at = |i: usize| (i * 7919 + i / 3) % rows;
    let upd = Array::from_shape_fn((n, width), |(i, j)| ((i * 31 + j) % 97) as f32 * 0.37);
    let start = Array::from_shape_fn((rows, width), |(r, j)| ((r * 7 + j) % 13) as f32 * 0.5);
    let ids = Array::from_shape_fn(n, |i| at(i) as i64);
    for reversed in [false, true] {
        let fresh = || {
            let mut t = start.clone();
            if reversed {
                t.invert_axis(Axis(1));
            }
            t
        };
        let mut want = fresh();
        for i in 0..n {
            for j in 0..width {
                want[[at(i), j]] += upd[[i, j]];
            }
        }
        let got = on_1_and_3(|| {
            let mut t = fresh();
            t.scatter(&ids, &upd, 0, Add).unwrap();
            t.mapv(f32::to_bits)
        });
        assert_eq!(got, want.mapv(f32::to_bits), "reversed {reversed}");
        let mut bad = ids.clone();
        bad[n - 1] = rows as i64;
        let mut t = fresh();
        let e = t.scatter(&bad, &upd, 0, Add).unwrap_err();
        assert!(
            matches!(e, GatherError::IndexOutOfBounds { index, ref position, .. }
                if index == rows as i128 && position == &[n - 1]),
            "{e}"
        );
        assert_eq!(
            t.mapv(f32::to_bits),
            fresh().mapv(f32::to_bits),
            "reversed {reversed}: changed on Err"
        );
    }
}
