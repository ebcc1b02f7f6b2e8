//! Scatter against a naive reference that applies the updates one at a time, in row-major
//! order, at the positions the matching gather's naive reference reads: the references
//! gather an array of *addresses* (each element its own row-major position), which says
//! where every update goes without using the crate.

use approx::assert_relative_eq;
use ndarray::{Array, ArrayD, ArrayViewD, Axis, IxDyn, array};
use ndarray_gather::prelude::*;
use ndarray_gather::reduce::{Add, Max, Min, Mul, Replace};
use proptest::prelude::*;

use crate::layouts::{Held, Layout};
use crate::props::{Problem, config, convert, problem};
use crate::reference::{self, Fail, Mode};
use crate::wrappers::{Case, Op, case};

/// `base` (row-major) with `updates[o]` combined into `base[addr[o]]` one at a time.
fn apply<A: Clone>(
    base: &[A],
    addr: &ArrayD<usize>,
    updates: &ArrayViewD<A>,
    f: impl Fn(&mut A, &A),
) -> Vec<A> {
    let mut out = base.to_vec();
    assert_eq!(addr.shape(), updates.shape());
    for (a, u) in addr.iter().zip(updates.iter()) {
        f(&mut out[*a], u);
    }
    out
}

/// Where the matching gather of `c` reads, by the naive references, for a `self` of
/// `c.input_shape`.
fn addresses(c: &Case, xv: &ArrayViewD<i64>) -> Option<Result<ArrayD<usize>, Fail>> {
    let n: usize = c.input_shape.iter().product();
    let addr = ArrayD::from_shape_vec(IxDyn(&c.input_shape), (0..n).collect()).unwrap();
    let av = addr.view();
    Some(match c.op {
        Op::Gather => reference::gather(&av, xv, c.axis, Mode::Raise),
        Op::Elements => reference::elements(&av, xv, c.axis),
        Op::AlongAxis => reference::along_axis(&av, xv, c.axis),
        Op::Nd => reference::nd(&av, xv, c.batch_dims),
        _ => return None,
    })
}

/// One scatter case: `f64` elements, an order-sensitive `Add` (values with many
/// significant bits) or `Replace`; any layout of self, indices and updates.
fn check_case(c: &Case, add: bool, upd_layout: Layout) -> Result<(), TestCaseError> {
    let len = c.input_shape.iter().product::<usize>().max(1);
    let values: Vec<i64> = c.values.iter().map(|&v| convert(v, len.min(4))).collect();
    let indices = Held::new(&c.indices_shape, c.indices_layout, |i| values[i]);
    let xv = indices.view();
    let Some(expected_addr) = addresses(c, &xv) else {
        return Ok(());
    };
    let start = |i: usize| 1.0 + i as f64 / 3.0;
    let self_layout = match c.input_layout {
        Layout::Broadcast(_) => Layout::C,
        l => l,
    };
    let mut held = Held::new(&c.input_shape, self_layout, start);
    let mut dst = held.view_mut();
    let base: Vec<f64> = dst.iter().copied().collect();
    // Updates of the gather's output shape (or, on error, of some shape).
    // (for an index error, that of in-range indices; shape errors come first anyway)
    let zeros = ndarray::ArrayD::<i64>::zeros(IxDyn(&c.indices_shape));
    let out_shape = match (&expected_addr, addresses(c, &zeros.view())) {
        (Ok(a), _) => a.shape().to_vec(),
        (Err(_), Some(Ok(a))) => a.shape().to_vec(),
        _ => c.indices_shape.clone(),
    };
    let upd = Held::new(&out_shape, upd_layout, |i| {
        0.1 + i as f64 * 1.0e-3 + (i % 7) as f64 / 7.0
    });
    let uv = upd.view();
    let got = match (c.op, add) {
        (Op::Gather, true) => dst.scatter(&xv, &uv, c.axis, Add),
        (Op::Gather, false) => dst.scatter(&xv, &uv, c.axis, Replace),
        (Op::Elements, true) => dst.scatter_elements(&xv, &uv, c.axis, Add),
        (Op::Elements, false) => dst.scatter_elements(&xv, &uv, c.axis, Replace),
        (Op::AlongAxis, true) => {
            // take_along_axis is gather_multiaxis with axes [axis], counted from the end
            // when negative; an axis out of range stays out of range.
            let r = c.input_shape.len() as isize;
            let axis = if (-r..r).contains(&c.axis) {
                c.axis.rem_euclid(r)
            } else {
                r + 5
            };
            dst.scatter_multiaxis(&xv, &[axis as usize], &uv, Add)
        }
        (Op::AlongAxis, false) => dst.put_along_axis(&xv, &uv, c.axis),
        (Op::Nd, true) => dst.scatter_nd(&xv, &uv, c.batch_dims, Add),
        (Op::Nd, false) => dst.scatter_nd(&xv, &uv, c.batch_dims, Replace),
        _ => unreachable!(),
    };
    let after: Vec<u64> = dst.iter().map(|v| v.to_bits()).collect();
    match (&expected_addr, got) {
        (Ok(addr), Ok(())) => {
            let want = if add {
                apply(&base, addr, &uv, |x, u| *x += u)
            } else {
                apply(&base, addr, &uv, |x, u| *x = *u)
            };
            let want: Vec<u64> = want.iter().map(|v| v.to_bits()).collect();
            prop_assert_eq!(after, want, "{:?}", c);
        }
        (Err(e), Err(g)) => {
            // An axis-multiaxis call reports an out-of-range axis as the gather does.
            prop_assert_eq!(Fail::of(&g), *e, "{:?}: {}", c, g);
            prop_assert!(g.to_string().starts_with("scatter") || g.to_string().starts_with("put_along_axis"));
            let unchanged: Vec<u64> = base.iter().map(|v| v.to_bits()).collect();
            prop_assert_eq!(after, unchanged, "self changed on an error");
        }
        (e, g) => prop_assert!(false, "{:?}: reference {:?}, scatter {:?}", c, e, g),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// Every scatter against the one-at-a-time reference, bit for bit.
    #[test]
    fn every_scatter_matches_the_one_at_a_time_reference(
        c in case().prop_filter("a scatter exists", |c| matches!(c.op, Op::Gather | Op::Elements | Op::AlongAxis | Op::Nd)),
        add in any::<bool>(),
        upd_layout in crate::layouts::any_layout(),
    ) {
        check_case(&c, add, upd_layout)?;
    }

    /// `<gather(x), u> == <x, scatter_add(0, u)>`: scatter with `Add` is the adjoint of
    /// `gather_multiaxis`, for random shapes, axes and layouts.
    #[test]
    fn scatter_add_is_the_adjoint_of_gather(p in problem()) {
        adjoint(&p)?;
    }
}

fn adjoint(p: &Problem) -> Result<(), TestCaseError> {
    let indices = p.indices::<i64>();
    let x = Held::new(&p.input_shape, p.input_layout, |i| ((i * 7919) % 13) as f64 - 6.5);
    let Ok(gx) = x.view().gather_multiaxis(&indices.view(), &p.axes) else {
        return Ok(());
    };
    let u = Held::new(gx.shape(), p.out_layout, |i| {
        ((i * 104_729) % 11) as f64 * 0.25 - 1.0
    });
    let mut s = Held::new(&p.input_shape, Layout::Reversed, |_| 0.0);
    s.view_mut()
        .scatter_multiaxis(&indices.view(), &p.axes, &u.view(), Add)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let lhs: f64 = gx.iter().zip(u.view().iter()).map(|(a, b)| a * b).sum();
    let rhs: f64 = x.view().iter().zip(s.view().iter()).map(|(a, b)| a * b).sum();
    assert_relative_eq!(lhs, rhs, epsilon = 1e-9, max_relative = 1e-12);
    Ok(())
}

#[test]
fn scatter_after_gather_with_replace_restores_the_gathered_positions() {
    // The seed's worked example, run backwards: gather, then scatter the result into a
    // blank array; where indices repeat a position, both wrote the same value.
    let input = Array::from_shape_vec((4, 2, 1, 2), (0..16).map(|v| v as f64).collect()).unwrap();
    let idx = array![[[[0_i64, 1], [1, 0]], [[1, 1], [0, 0]], [[0, 0], [1, 1]]]];
    let g = input.gather_multiaxis(&idx, &[1]).unwrap();
    let mut back = Array::from_elem(input.raw_dim(), -1.0);
    back.scatter_multiaxis(&idx, &[1], &g, Replace).unwrap();
    for ((pos, &b), &a) in back.indexed_iter().zip(input.iter()) {
        assert!(b == -1.0 || b == a, "{pos:?}: {b} vs {a}");
    }
    assert!(back.iter().filter(|&&b| b != -1.0).count() >= 12);
}

#[test]
fn reducers_combine_duplicates_in_row_major_order() {
    let idx = array![1_i64, 1, 0, 1];
    let upd = array![2.0, -1.0, 5.0, 3.0];
    let run = |r: Reduction| {
        let mut a = array![1.0, 1.0];
        a.scatter(&idx, &upd, 0, r).unwrap();
        a
    };
    assert_eq!(run(Reduction::Replace), array![5.0, 3.0]); // the last one wins
    assert_eq!(run(Reduction::Add), array![6.0, 5.0]);
    assert_eq!(run(Reduction::Mul), array![5.0, -6.0]);
    assert_eq!(run(Reduction::Min), array![1.0, -1.0]);
    assert_eq!(run(Reduction::Max), array![5.0, 3.0]);
    for (s, r) in [
        ("none", Reduction::Replace),
        ("add", Reduction::Add),
        ("mul", Reduction::Mul),
        ("min", Reduction::Min),
        ("max", Reduction::Max),
    ] {
        assert_eq!(s.parse::<Reduction>(), Ok(r));
        assert_eq!(r.to_string(), s);
    }
    assert!(
        "sum"
            .parse::<Reduction>()
            .unwrap_err()
            .to_string()
            .contains("\"sum\"")
    );
    // Unit structs and closures agree with the run-time reductions.
    let mut a = array![1.0, 1.0];
    a.scatter(&idx, &upd, 0, Mul).unwrap();
    assert_eq!(a, run(Reduction::Mul));
    let mut a = array![1.0, 1.0];
    a.scatter(&idx, &upd, 0, |x: &mut f64, u: &f64| *x = *x * 10.0 + u)
        .unwrap();
    assert_eq!(a, array![15.0, ((10.0 + 2.0) * 10.0 - 1.0) * 10.0 + 3.0]);
}

#[test]
fn min_and_max_keep_ties_and_let_nan_win() {
    let mut a = array![0.0_f64, 1.0, 1.0];
    a.scatter(&array![0_i64, 1, 2], &array![-0.0, f64::NAN, 1.0], 0, Min)
        .unwrap();
    assert!(a[0].to_bits() == 0.0_f64.to_bits(), "a tie keeps the old value");
    assert!(a[1].is_nan());
    let mut a = array![-0.0_f64, 1.0];
    a.scatter(&array![0_i64, 1, 1], &array![0.0, f64::NAN, 7.0], 0, Max)
        .unwrap();
    assert!(a[0].to_bits() == (-0.0_f64).to_bits());
    assert!(a[1].is_nan(), "a NaN stays");
    let mut i = array![3, 3];
    i.scatter(&array![0_i64, 0, 1], &array![5, 2, 1], 0, Reduction::Min)
        .unwrap();
    assert_eq!(i, array![2, 1]);
}

#[test]
fn broadcast_self_and_broadcast_updates() {
    // self of size 1 on the second dimension, indices of 3: three updates per element.
    let mut a = array![[0.0], [0.0]];
    let idx = array![[1_i64, 0, 1]];
    a.scatter_multiaxis(&idx, &[0], &array![[1.0, 2.0, 4.0]], Add)
        .unwrap();
    assert_eq!(a, array![[2.0], [5.0]]);
    // A zero-stride scalar update: a histogram.
    let mut h = Array::<f64, _>::zeros(4);
    let ids = array![3_i64, 1, 3, 3, 0];
    let one = ndarray::arr0(1.0);
    h.scatter(&ids, &one.broadcast(5).unwrap(), 0, Add).unwrap();
    assert_eq!(h, array![1.0, 1.0, 0.0, 3.0]);
    // put_along_axis broadcasts its values (numpy).
    let mut m = array![[1, 2, 3], [4, 5, 6]];
    m.put_along_axis(&array![[0_i64], [2]], &ndarray::arr1(&[9]), 1)
        .unwrap();
    assert_eq!(m, array![[9, 2, 3], [4, 5, 9]]);
    // scatter_elements uses the leading block of larger updates (torch).
    let mut e = array![[0, 0, 0], [0, 0, 0]];
    e.scatter_elements(&array![[2_i64, 0]], &array![[1, 2, 3], [4, 5, 6]], 1, Replace)
        .unwrap();
    assert_eq!(e, array![[2, 0, 1], [0, 0, 0]]);
}

type Call = Box<dyn Fn(&mut ndarray::Array2<f64>) -> Result<(), GatherError>>;

/// Every error leaves `self` bit for bit unchanged, and names the scatter.
#[test]
fn every_error_leaves_self_unchanged() {
    let sentinel = Array::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f64 + 0.5);
    let mut last_bad = Array::from_shape_fn((3, 4), |(i, j)| ((i + j) % 3) as i64);
    last_bad[[2, 3]] = 3;
    let cases: Vec<(&str, Call)> = vec![
        (
            "scatter: axis",
            Box::new(|a| a.scatter(&array![0_i64], &array![[1.0, 1.0, 1.0, 1.0]], 2, Add)),
        ),
        (
            "scatter: index",
            Box::new(|a| a.scatter(&array![0_i64, 3], &Array::zeros((2, 4)), 0, Add)),
        ),
        (
            "scatter: updates",
            Box::new(|a| a.scatter(&array![0_i64, 1], &Array::zeros((2, 3)), 0, Add)),
        ),
        (
            "scatter_elements: last index",
            Box::new(move |a| a.scatter_elements(&last_bad, &Array::ones((3, 4)), 0, Add)),
        ),
        (
            "scatter_elements: small updates",
            Box::new(|a| a.scatter_elements(&array![[0_i64, 1]], &array![[1.0]], 1, Add)),
        ),
        (
            "scatter_elements: rank",
            Box::new(|a| a.scatter_elements(&array![0_i64], &array![1.0], 1, Add)),
        ),
        (
            "scatter_nd: batch",
            Box::new(|a| a.scatter_nd(&array![[0_i64, 1, 2]], &array![1.0], 0, Replace)),
        ),
        (
            "scatter_nd: index",
            Box::new(|a| a.scatter_nd(&array![[0_i64, 1], [2, -5]], &array![1.0, 2.0], 0, Replace)),
        ),
        (
            "scatter_multiaxis: fold",
            Box::new(|a| a.scatter_multiaxis(&array![[0_i64, 1, 2]], &[0, 1], &array![[1.0]], Add)),
        ),
        (
            "scatter_multiaxis: broadcast",
            Box::new(|a| {
                a.scatter_multiaxis(
                    &Array::zeros((2, 2)).mapv(|v: f64| v as i64),
                    &[0],
                    &Array::zeros((2, 2)),
                    Add,
                )
            }),
        ),
        // More updates than elements: these check their indices while scattering into a
        // copy of self (one pass), which is dropped at the bad one.
        (
            "scatter: many rows, last index",
            Box::new(|a| {
                let ids = Array::from_shape_fn(10, |i| if i == 9 { 3 } else { (i % 3) as i64 });
                a.scatter(&ids, &Array::ones((10, 4)), 0, Add)
            }),
        ),
        (
            "scatter_elements: many, last index",
            Box::new(|a| {
                let ids =
                    Array::from_shape_fn((3, 8), |(i, j)| if (i, j) == (2, 7) { 4 } else { j as i64 % 4 });
                a.scatter_elements(&ids, &Array::ones((3, 8)), 1, Add)
            }),
        ),
        (
            "scatter_nd: many, last index",
            Box::new(|a| {
                let ids =
                    Array::from_shape_fn((20, 2), |(i, k)| if i == 19 { 9 } else { ((i + k) % 3) as i64 });
                a.scatter_nd(&ids, &Array::ones(20), 0, Mul)
            }),
        ),
        (
            "put_along_axis: values",
            Box::new(|a| a.put_along_axis(&array![[0_i64], [1], [2]], &array![1.0, 2.0], 1)),
        ),
        (
            "put_along_axis: index",
            Box::new(|a| a.put_along_axis(&array![[0_i64], [1], [4]], &ndarray::arr0(1.0), 1)),
        ),
    ];
    for (name, call) in &cases {
        let mut a = sentinel.clone();
        let e = call(&mut a).expect_err(name);
        let method = name.split(':').next().unwrap();
        assert!(e.to_string().starts_with(&format!("{method}: ")), "{name}: {e}");
        assert_eq!(
            a.mapv(f64::to_bits),
            sentinel.mapv(f64::to_bits),
            "{name} changed self"
        );
        match *name {
            n if n.ends_with("index") => {
                assert!(matches!(e, GatherError::IndexOutOfBounds { .. }), "{n}: {e:?}")
            }
            n if n.contains("updates") || n.contains("values") => {
                assert!(matches!(e, GatherError::UpdatesShape { .. }), "{n}: {e:?}")
            }
            _ => {}
        }
    }
    let e = cases[3].1(&mut sentinel.clone()).unwrap_err();
    assert!(
        matches!(e, GatherError::IndexOutOfBounds { index: 3, ref position, axis: 0, axis_len: 3, .. } if position == &vec![2, 3]),
        "{e:?}"
    );
}

#[cfg(feature = "rayon")]
fn both<T: PartialEq + std::fmt::Debug + Send>(f: impl Fn() -> T + Sync) -> T {
    let serial = crate::parallel::pool(1).install(&f);
    let parallel = crate::parallel::pool(3).install(&f);
    assert_eq!(serial, parallel);
    serial
}

#[cfg(not(feature = "rayon"))]
fn both<T>(f: impl Fn() -> T) -> T {
    f()
}

/// [`both`] natively; under Miri one run on the global pool (thread pools are slow to
/// build there).
fn both_natively<T: PartialEq + std::fmt::Debug + Send>(f: impl Fn() -> T + Sync) -> T {
    if cfg!(miri) { f() } else { both(f) }
}

/// A destination whose parts do not start on its own elements (a column of a wider
/// array: on 3 threads its parts start at odd offsets, in the other column) while another
/// thread writes the other column: the scatter must touch its own elements only (Miri's
/// race detector sees any read of the other column), on 1 and 3 threads.
#[test]
fn a_strided_destination_touches_only_its_own_elements() {
    // Natively the column spans 2.4 MB, enough for several parts.
    let (rows, n) = if cfg!(miri) { (10, 40) } else { (150_001, 400_000) };
    let ids = Array::from_shape_fn(n, |i| ((i * 7) % rows) as i64);
    let upd = Array::from_shape_fn(n, |i| (i % 5) as f64);
    let got = both(|| {
        let mut a = Array::<f64, _>::zeros((rows, 2));
        let (mut c0, mut c1) = a.multi_slice_mut((ndarray::s![.., 0], ndarray::s![.., 1]));
        std::thread::scope(|s| {
            s.spawn(|| c1.fill(-1.0));
            c0.scatter(&ids, &upd, 0, Add).unwrap();
        });
        a.mapv(f64::to_bits)
    });
    let mut want = Array::<f64, _>::zeros((rows, 2));
    want.column_mut(1).fill(-1.0);
    for (&i, &u) in ids.iter().zip(&upd) {
        want[[i as usize, 0]] += u;
    }
    assert_eq!(got, want.mapv(f64::to_bits));
}

/// Large enough for the parallel path (under Miri too, where the threshold is tiny): the
/// same bits on 1 and 3 threads, and those of a plain sequential loop.
#[test]
fn parallel_scatters_give_the_sequential_bits() {
    let n = if cfg!(miri) { 300 } else { 600_000 };
    let bins = if cfg!(miri) { 7 } else { 1000 };
    let ids = Array::from_shape_fn(n, |i| ((i * 7919 + i / 3) % bins) as i64);
    let upd = Array::from_shape_fn(n, |i| 1.0 / (1.0 + (i % 97) as f64));
    // Histogram-style: heavy duplicates into a small self.
    let got = both(|| {
        let mut h = Array::<f64, _>::zeros(bins);
        h.scatter(&ids, &upd, 0, Add).unwrap();
        h.mapv(f64::to_bits)
    });
    let mut want = vec![0.0_f64; bins];
    for (&i, &u) in ids.iter().zip(upd.iter()) {
        want[i as usize] += u;
    }
    assert_eq!(got.to_vec(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    // Rows (embedding gradient) into a reversed destination, and elements along axis 1.
    // (Natively, destinations of 1 MiB and more are split between threads.)
    let rows = if cfg!(miri) { 6 } else { 40_000 };
    let width = 16;
    let r_ids = Array::from_shape_fn(rows, |i| ((i * 31) % (rows / 2)) as i64);
    let r_upd = Array::from_shape_fn((rows, width), |(i, j)| (i * width + j) as f32 * 0.37);
    let got = both(|| {
        let mut t = Array::<f32, _>::zeros((rows / 2, width));
        t.invert_axis(Axis(0));
        t.scatter(&r_ids, &r_upd, 0, Add).unwrap();
        let mut e = Array::<f32, _>::ones((rows, width));
        let e_idx = Array::from_shape_fn((rows, width), |(i, j)| ((i + 3 * j) % width) as i64);
        e.scatter_elements(&e_idx, &r_upd, 1, Max).unwrap();
        (t.mapv(f32::to_bits), e.mapv(f32::to_bits))
    });
    let mut want = Array::<f32, _>::zeros((rows / 2, width));
    for (i, &r) in r_ids.iter().enumerate() {
        for j in 0..width {
            want[[r as usize, j]] += r_upd[[i, j]];
        }
    }
    assert_eq!(got.0, want.mapv(f32::to_bits));
    let mut want = Array::<f32, _>::ones((rows, width));
    for ((i, j), &u) in r_upd.indexed_iter() {
        let c = (i + 3 * j) % width;
        if u > want[[i, c]] {
            want[[i, c]] = u;
        }
    }
    assert_eq!(got.1, want.mapv(f32::to_bits));
}

/// Blocks smaller than a cache line into a destination that is not cache-resident (S3's
/// case: one part, its indices checked first, the blocks pipelined): `Replace` keeps the
/// last duplicate and `Add` sums them in row-major order, for contiguous blocks (4, as
/// fixed-size arrays; 3) and reversed ones, the bits of a plain loop on 1 and 3 threads. A
/// bad index in the first or the last position leaves the destination unchanged, with
/// either reducer. (Under Miri the destination has more elements than there are updates,
/// so that it is scattered into in place, as natively, not through a checked copy; one
/// part on one thread, three on three.)
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
        for reversed in [false, true] {
            let fresh = || {
                let mut t = start.clone();
                if reversed {
                    t.invert_axis(Axis(2));
                }
                t
            };
            for add in [false, true] {
                let got = both(|| {
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
                let got = both(|| {
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
/// threads. (Natively the 16-wide destinations span 4.5 MB, enough for parts, whose
/// boundaries cut blocks.)
#[test]
fn block_scatters_of_every_length_match_a_plain_loop() {
    let (h, w, n) = if cfg!(miri) {
        (3, 2, 20)
    } else {
        (350, 200, 200_000)
    };
    let rows = h * w;
    let at = |i: usize| (i * 7919 + i / 3) % rows;
    for width in [1, 2, 3, 4, 5, 8, 16] {
        let upd = Array::from_shape_fn((n, width), |(i, j)| ((i * 31 + j) % 97) as f32 * 0.37);
        let mut want = Array::<f32, _>::zeros((rows, width));
        for i in 0..n {
            for j in 0..width {
                want[[at(i), j]] += upd[[i, j]];
            }
        }
        let ids = Array::from_shape_fn(n, |i| at(i) as i64);
        let got = both(|| {
            let mut t = Array::<f32, _>::zeros((rows, width));
            t.scatter(&ids, &upd, 0, Add).unwrap();
            t.mapv(f32::to_bits)
        });
        assert_eq!(got, want.mapv(f32::to_bits), "rows of {width}");
        let points = Array::from_shape_fn((n, 2), |(i, c)| [at(i) / w, at(i) % w][c] as i64);
        let got = both(|| {
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
            let got = both_natively(|| {
                let mut t = start.clone();
                twice(&mut t, add);
                t.mapv(f32::to_bits)
            });
            assert_eq!(got, want.mapv(f32::to_bits), "add {add}, blocks of {width}");
        }
        // With drop glue: the last duplicate's string (integers: formatting floats is
        // slow under Miri).
        let strings = Array::from_shape_fn((n, width), |(i, j)| format!("u{}", i * 31 + j));
        let old = Array::from_shape_fn((rows, width), |(r, j)| format!("s{}", r * 3 + j));
        let got = both_natively(|| {
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
    // Natively 2000 rows: 2.4 MB of updates, past the 2 MiB from which a scatter splits
    // between threads (with 1000 rows the threads' loop went untested natively).
    let (width, large) = if cfg!(miri) { (21, 12) } else { (300, 2000) };
    for rows in [3, large] {
        let ids = Array::from_shape_fn((rows, width), |(i, j)| ((i * 7 + j * j * 13) % width) as i64);
        let upd = Array::from_shape_fn((rows, width), |(i, j)| (i * width + j) as f32 * 0.37);
        let start = Array::from_shape_fn((rows, width), |(i, j)| (i + 2 * j) as f32);
        for reversed in [false, true] {
            // Column `c` of the destination as scattered is column `col(c)` of `start`.
            let col = |c: usize| if reversed { width - 1 - c } else { c };
            for add in [false, true] {
                let got = both_natively(|| {
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

/// Scatters of one broadcast value (histograms) into a small destination with more
/// positions than elements run as counts and replays: the bits of a plain loop that
/// applies the updates one at a time, on 1 and 3 threads, through one axis (elements, with
/// negative indices, into a reversed destination; rows) and two (`scatter_nd`), with a
/// reducer that is neither commutative nor associative, with drop glue; a bad index
/// anywhere leaves the destination unchanged; a panicking reducer leaves valid values.
#[test]
fn one_value_scatters_give_the_sequential_bits() {
    let (bins, n) = if cfg!(miri) { (10, 100) } else { (1000, 300_000) };
    let ids = Array::from_shape_fn(n, |i| ((i * 7919 + i / 3) % (2 * bins)) as i64 - bins as i64);
    let bin = |i: usize| ids[i].rem_euclid(bins as i64) as usize;
    let tenth = ndarray::arr0(0.1_f32);
    let tenths = tenth.broadcast(n).unwrap();
    let affine = |x: &mut f64, u: &f64| *x = *x * 0.75 + *u;
    let two = ndarray::arr0(2.0_f64);
    let points = Array::from_shape_fn((n, 2), |(i, c)| [bin(i) / 10, bin(i) % 10][c] as i64);
    let got = both_natively(|| {
        let mut h = Array::from_shape_fn(bins, |b| b as f32);
        h.invert_axis(Axis(0));
        h.scatter(&ids, &tenths, 0, Add).unwrap();
        let mut a = Array::from_shape_fn(bins, |b| b as f64);
        a.scatter(&ids, &two.broadcast(n).unwrap(), 0, affine).unwrap();
        let mut rows = Array::from_shape_fn((bins, 3), |(b, j)| (b + j) as f64);
        rows.scatter(&ids, &two.broadcast((n, 3)).unwrap(), 0, affine)
            .unwrap();
        let mut grid = Array::from_shape_fn((bins / 10, 10), |(r, c)| (r + c) as f64);
        grid.scatter_nd(&points, &two.broadcast(n).unwrap(), 0, affine)
            .unwrap();
        (
            h.mapv(f32::to_bits),
            a.mapv(f64::to_bits),
            rows.mapv(f64::to_bits),
            grid.mapv(f64::to_bits),
        )
    });
    let mut h = Array::from_shape_fn(bins, |b| (bins - 1 - b) as f32);
    let mut a = Array::from_shape_fn(bins, |b| b as f64);
    let mut rows = Array::from_shape_fn((bins, 3), |(b, j)| (b + j) as f64);
    for i in 0..n {
        h[bin(i)] += 0.1;
        affine(&mut a[bin(i)], &2.0);
        for j in 0..3 {
            affine(&mut rows[[bin(i), j]], &2.0);
        }
    }
    assert_eq!(got.0, h.mapv(f32::to_bits), "histogram");
    assert_eq!(got.1, a.mapv(f64::to_bits), "elements");
    assert_eq!(got.2, rows.mapv(f64::to_bits), "rows");
    let mut want = Array::from_shape_fn((bins / 10, 10), |(r, c)| (r + c) as f64);
    for i in 0..n {
        affine(&mut want[[bin(i) / 10, bin(i) % 10]], &2.0);
    }
    assert_eq!(got.3, want.mapv(f64::to_bits), "points");
    // Drop glue: the value replaces every element hit.
    let u = ndarray::arr0(String::from("u"));
    let got = both_natively(|| {
        let mut t = Array::from_shape_fn(bins + 5, |b| format!("s{b}"));
        t.scatter(&ids, &u.broadcast(n).unwrap(), 0, Replace).unwrap();
        t
    });
    let mut want = Array::from_shape_fn(bins + 5, |b| format!("s{b}"));
    for &i in &ids {
        want[i.rem_euclid(bins as i64 + 5) as usize] = String::from("u");
    }
    assert_eq!(got, want, "strings");
    // A bad index, last: named exactly, nothing written (1 and 3 threads).
    let mut bad = ids.clone();
    bad[n - 1] = bins as i64;
    let start = Array::from_shape_fn(bins, |b| b as f32);
    let (err, after) = both_natively(|| {
        let mut h = start.clone();
        let err = h.scatter(&bad, &tenths, 0, Add).unwrap_err();
        (err, h.mapv(f32::to_bits))
    });
    assert!(
        matches!(err, GatherError::IndexOutOfBounds { op: "scatter", index, ref position, axis: 0, axis_len }
            if index == bins as i128 && position == &[n - 1] && axis_len == bins),
        "{err}"
    );
    assert_eq!(after, start.mapv(f32::to_bits));
    // A reducer that panics in the replay leaves every element valid (dropping `t` checks
    // for double drops).
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = AtomicUsize::new(0);
    let panicky = |x: &mut String, u: &String| {
        assert!(calls.fetch_add(1, Ordering::SeqCst) != n / 2, "reducer panics");
        x.push_str(u);
    };
    let mut t = Array::from_elem(bins, String::from("x"));
    let r = catch_unwind(AssertUnwindSafe(|| {
        t.scatter(&ids, &u.broadcast(n).unwrap(), 0, panicky)
    }));
    assert!(r.is_err());
    assert!(
        t.iter()
            .all(|s| s.starts_with('x') && s[1..].chars().all(|c| c == 'u'))
    );
}

/// A reducer that panics midway leaves every element valid, drops nothing twice and
/// leaks nothing, serially and in parallel.
#[test]
fn a_panicking_reducer_leaves_valid_values() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = AtomicUsize::new(0);
    // Fewer updates than elements scatter in place, more into a copy.
    for (n, threads) in [40, if cfg!(miri) { 100 } else { 400_000 }]
        .into_iter()
        .flat_map(|n| [(n, 1), (n, 3)])
    {
        let mut a: ArrayD<String> = ArrayD::from_elem(IxDyn(&[64]), String::from("x"));
        let ids = Array::from_shape_fn(n, |i| (i % 64) as i64);
        let upd = Array::from_shape_fn(n, |i| format!("{i}"));
        calls.store(0, Ordering::SeqCst);
        let reducer = |x: &mut String, u: &String| {
            if calls.fetch_add(1, Ordering::SeqCst) == n / 2 {
                panic!("reducer panics");
            }
            x.clone_from(u);
        };
        let run =
            |a: &mut ArrayD<String>| catch_unwind(AssertUnwindSafe(|| a.scatter(&ids, &upd, 0, reducer)));
        #[cfg(feature = "rayon")]
        let r = crate::parallel::pool(threads).install(|| run(&mut a));
        #[cfg(not(feature = "rayon"))]
        let r = {
            let _ = threads;
            run(&mut a)
        };
        assert!(r.is_err(), "{threads} threads: no panic");
        // Every element is the old string or some update (dropping `a` then checks for
        // double drops, and Miri for leaks).
        assert!(
            a.iter()
                .all(|s| s == "x" || s.parse::<usize>().is_ok_and(|v| v < n))
        );
    }
}

#[test]
fn empty_scatters_read_no_index() {
    let mut a = array![[1.0, 2.0]];
    // A zero-size update set: no index is read, so an out-of-range one is fine (as for
    // the gathers).
    a.scatter(
        &Array::<i64, _>::from_elem((0, 3), 99),
        &Array::zeros((0, 3, 2)),
        0,
        Add,
    )
    .unwrap();
    assert_eq!(a, array![[1.0, 2.0]]);
}
