//! The literal reference of `grid_sample` (`support/sample.rs`, issue 76) against
//! PyTorch's CPU kernel and autograd (`tests/fixtures/generate_sample.py`): every mode,
//! padding and `align_corners`, 2-D and 3-D, f32 and f64, with pixel centres, borders,
//! half-way ties, far points and NaN. The crate's interpolating gathers will be checked
//! against the same reference and fixtures.

use ndarray::{ArrayD, Dimension};
use ndarray_gather::sample::{
    GridSample, Interp, Padding as SPadding, RoiAlign, SampleElement, SampleExt, SamplePlan,
};
use num_traits::Float;

use proptest::prelude::*;

use crate::support::generate::config;
use crate::support::layouts::{Held, Layout};
use crate::support::sample::{Mode, Padding, grid_grad, grid_sample, roi_align as roi_align_reference};
use crate::support::threads::on_1_and_3;

/// Whether `got` and PyTorch's `want` agree: NaN where it is NaN, else within `tol` of it
/// (relative to its magnitude, at least one).
fn close(got: &ArrayD<f64>, want: &ArrayD<f64>, tol: f64) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!("shape {:?}, PyTorch's {:?}", got.shape(), want.shape()));
    }
    for ((i, &g), &w) in got.indexed_iter().zip(want.iter()) {
        let ok = if w.is_nan() {
            g.is_nan()
        } else {
            (g - w).abs() <= tol * w.abs().max(1.0)
        };
        if !ok {
            return Err(format!("at {:?}: {g}, PyTorch {w}", i.slice()));
        }
    }
    Ok(())
}

/// The fixtures of `tests/fixtures/generate_sample.py` (files: not under Miri).
#[cfg(not(miri))]
mod pytorch {
    use super::*;
    use crate::support::manifest::{Case, cases, read};

    /// A fixture file as `f64` (f32 files widened exactly).
    fn load(file: &str) -> ArrayD<f64> {
        read::<f64>(file)
            .or_else(|| read::<f32>(file).map(|a| a.mapv(f64::from)))
            .unwrap_or_else(|| panic!("{file}: not f32 or f64"))
    }

    #[test]
    fn the_reference_is_pytorchs_grid_sample() {
        let all = cases("SAMPLE_MANIFEST.txt");
        assert!(all.len() >= 30, "{} cases", all.len());
        let mut nan_cases = 0;
        for c in &all {
            let tol = if c.req("dtype") == "f64" { 1e-12 } else { 2e-5 };
            let (x, grid, r) = (load(c.req("x")), load(c.req("grid")), load(c.req("r")));
            nan_cases += usize::from(grid.iter().any(|v| v.is_nan()));
            let round: fn(f64) -> f64 = if c.req("dtype") == "f64" {
                |v| v
            } else {
                |v| v as f32 as f64
            };
            let how = reference_how(options(c));
            let (y, gx) = grid_sample(&x, &grid, &r, how, round);
            close(&y, &load(c.req("y")), tol).unwrap_or_else(|e| panic!("{}: the output {e}", c.name));
            close(&gx, &load(c.req("g_x")), tol)
                .unwrap_or_else(|e| panic!("{}: the input's gradient {e}", c.name));
            let got = grid_grad(&x, &grid, &r, how, round);
            let mut want = load(c.req("g_grid"));
            // (PyTorch's values at NaN points are its kernel's accidents: not compared.)
            want.zip_mut_with(&got, |w, g| {
                if g.is_nan() {
                    *w = f64::NAN
                }
            });
            close(&got, &want, tol).unwrap_or_else(|e| panic!("{}: the grid's gradient {e}", c.name));
        }
        assert!(nan_cases > 0, "no case has a NaN point");
    }

    /// Whether two arrays hold the same bits (NaN included).
    fn same_bits<A: Float>(a: &ArrayD<A>, b: &ArrayD<A>) -> bool {
        let bits = |v: &A| v.to_f64().unwrap().to_bits();
        a.shape() == b.shape() && a.iter().zip(b).all(|(x, y)| bits(x) == bits(y))
    }

    /// A fixture case's options (PyTorch's and ONNX's names of the modes).
    fn options(c: &Case) -> GridSample {
        let interp = match c.req("mode") {
            "bilinear" | "linear" => Interp::Linear,
            "nearest" => Interp::Nearest,
            "bicubic" | "cubic" => Interp::Cubic,
            m => panic!("{}: mode {m}", c.name),
        };
        let padding = match c.req("padding") {
            "zeros" => SPadding::Zeros,
            "border" => SPadding::Border,
            "reflection" => SPadding::Reflection,
            p => panic!("{}: padding {p}", c.name),
        };
        GridSample::new(interp)
            .padding(padding)
            .align_corners(c.int("align_corners") == 1)
    }

    /// The crate's grid_sample, input gradient (a plan's `backward_into` on zeros) and grid
    /// gradient of one fixture case, widened to `f64`.
    fn crate_case<A: SampleElement + crate::support::npy::Npy>(
        c: &Case,
        opts: GridSample,
    ) -> [ArrayD<f64>; 3] {
        let get = |k: &str| read::<A>(c.req(k)).unwrap_or_else(|| panic!("{}: {k}", c.name));
        let (x, grid, r) = (get("x"), get("grid"), get("r"));
        let y = x.grid_sample(&grid, opts).unwrap();
        let plan = SamplePlan::grid(x.shape(), &grid, opts).unwrap();
        assert!(
            same_bits(&plan.apply(&x).unwrap(), &y),
            "{}: the plan's apply",
            c.name
        );
        let mut g_x = ArrayD::zeros(x.raw_dim());
        plan.backward_into(&r, &mut g_x).unwrap();
        let g_grid = x.grid_sample_backward_grid(&grid, &r, opts).unwrap();
        let wide = |a: ArrayD<A>| a.mapv(|v| v.to_f64().unwrap());
        [wide(y), wide(g_x), wide(g_grid)]
    }

    #[test]
    fn grid_sample_is_pytorchs() {
        for c in &cases("SAMPLE_MANIFEST.txt") {
            let opts = options(c);
            let interp = opts.interp();
            let f64s = c.req("dtype") == "f64";
            let [y, g_x, g_grid] = if f64s {
                crate_case::<f64>(c, opts)
            } else {
                crate_case::<f32>(c, opts)
            };
            let want = load(c.req("y"));
            let same = |a: &ArrayD<f64>, b: &ArrayD<f64>| {
                let differ =
                    |(g, w): &(&f64, &f64)| g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan());
                a.iter().zip(b).filter(differ).count()
            };
            if interp == Interp::Cubic {
                // Bicubic sums its 16 taps in one pass, PyTorch by rows.
                let eps = if f64s {
                    f64::EPSILON
                } else {
                    f64::from(f32::EPSILON)
                };
                close(&y, &want, 64.0 * eps).unwrap_or_else(|e| panic!("{}: the output {e}", c.name));
            } else {
                // Linear and nearest: PyTorch's arithmetic in its order (its 2-D kernel's
                // fused multiply-adds, its 3-D kernel's plain ones): its bits.
                assert_eq!(same(&y, &want), 0, "{}: the output's bits", c.name);
            }
            if c.int("dims") == 3 {
                // The scalar 3-D kernel's input gradient, added in its order: the same bits.
                assert_eq!(same(&g_x, &load(c.req("g_x"))), 0, "{}: g_x", c.name);
            }
            let tol = if f64s { 1e-12 } else { 2e-5 };
            close(&g_x, &load(c.req("g_x")), tol)
                .unwrap_or_else(|e| panic!("{}: the input's gradient {e}", c.name));
            let mut want = load(c.req("g_grid"));
            want.zip_mut_with(&g_grid, |w, g| {
                if g.is_nan() {
                    *w = f64::NAN
                }
            });
            close(&g_grid, &want, tol).unwrap_or_else(|e| panic!("{}: the grid's gradient {e}", c.name));
        }
    }

    /// The crate's roi_align and its backward of one fixture case, widened to `f64`.
    fn roi_case<A: SampleElement + crate::support::npy::Npy>(c: &Case) -> (ArrayD<f64>, Option<ArrayD<f64>>) {
        let get = |k: &str| read::<A>(c.req(k)).unwrap_or_else(|| panic!("{}: {k}", c.name));
        let (x, boxes) = (get("x"), get("boxes"));
        let boxes = boxes.into_dimensionality::<ndarray::Ix2>().unwrap();
        let batch = read::<i64>(c.req("batch")).unwrap();
        let mut opts = RoiAlign::new(c.req("scale").parse().unwrap())
            .sampling_ratio(c.int("ratio") as i64)
            .aligned(c.int("aligned") == 1);
        if c.req("mode") == "max" {
            opts = opts.max();
        }
        let out = (c.int("ph") as usize, c.int("pw") as usize);
        let y = x.roi_align(&boxes, &batch, out, opts).unwrap();
        let wide = |a: ArrayD<A>| a.mapv(|v| v.to_f64().unwrap());
        let g_x = c.get("r").map(|_| {
            let mut g_x = ArrayD::zeros(x.raw_dim());
            opts.backward_into(&boxes, &batch, &get("r"), &mut g_x).unwrap();
            wide(g_x)
        });
        (wide(y), g_x)
    }

    /// `ROI_MANIFEST.txt`'s cases of `op`, at least `at_least` of them.
    fn roi_manifest(op: &str, at_least: usize) -> Vec<Case> {
        let all: Vec<Case> = cases("ROI_MANIFEST.txt")
            .into_iter()
            .filter(|c| c.op == op)
            .collect();
        assert!(all.len() >= at_least, "{} cases of {op}", all.len());
        all
    }

    #[test]
    fn roi_align_is_torchvisions_and_onnx_runtimes() {
        let all = roi_manifest("roi_align", 15);
        for c in &all {
            let f64s = c.req("dtype") == "f64";
            let (y, g_x) = if f64s {
                roi_case::<f64>(c)
            } else {
                roi_case::<f32>(c)
            };
            let want = load(c.req("y"));
            if c.req("source") == "torchvision" {
                // torchvision's arithmetic in its order: its bits.
                let same = |got: &ArrayD<f64>, want: &ArrayD<f64>, what: &str| {
                    assert_eq!(got.shape(), want.shape(), "{}: the {what}'s shape", c.name);
                    for (i, (g, w)) in got.iter().zip(want).enumerate() {
                        assert!(
                            g.to_bits() == w.to_bits(),
                            "{}: {what} {i}: {g}, torchvision {w}",
                            c.name
                        );
                    }
                };
                same(&y, &want, "output");
                same(&g_x.unwrap(), &load(c.req("g_x")), "input gradient");
            } else {
                // ONNX Runtime scales the boxes in f32: within its rounding.
                close(&y, &want, 1e-5).unwrap_or_else(|e| panic!("{}: the output {e}", c.name));
            }
        }
    }

    #[test]
    fn grid_sample_is_onnx_runtimes() {
        let all = roi_manifest("grid_sample", 20);
        for c in &all {
            let opts = options(c);
            let (x, grid) = (
                read::<f32>(c.req("x")).unwrap(),
                read::<f32>(c.req("grid")).unwrap(),
            );
            let y = x.grid_sample(&grid, opts).unwrap().mapv(f64::from);
            close(&y, &load(c.req("y")), 1e-5).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        }
    }
}

/// A grid coordinate: mostly inside, some on pixel centres and edges, some far, NaN.
fn coordinate() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => -1.3..1.3_f64,
        2 => (-4_i32..=4).prop_map(|k| f64::from(k) / 4.0),
        1 => prop_oneof![Just(1e30), Just(-1e30), Just(f64::NAN), Just(-0.0), Just(3.7)],
    ]
}

#[derive(Debug, Clone)]
struct SampleCase {
    x_shape: Vec<usize>,
    grid_shape: Vec<usize>,
    grid: Vec<f64>,
    opts: GridSample,
    layouts: [Layout; 3],
}

fn sample_case() -> impl Strategy<Value = SampleCase> {
    let dims = prop_oneof![Just(2_usize), Just(3)];
    dims.prop_flat_map(|dims| {
        let sizes = proptest::collection::vec(1_usize..6, dims);
        let outs = proptest::collection::vec(1_usize..5, dims);
        let interp = if dims == 2 {
            prop_oneof![Just(Interp::Linear), Just(Interp::Nearest), Just(Interp::Cubic)].boxed()
        } else {
            prop_oneof![Just(Interp::Linear), Just(Interp::Nearest)].boxed()
        };
        let padding = prop_oneof![
            Just(SPadding::Zeros),
            Just(SPadding::Border),
            Just(SPadding::Reflection)
        ];
        let layout = || {
            prop_oneof![
                Just(Layout::C),
                Just(Layout::F),
                Just(Layout::Reversed),
                Just(Layout::Stepped),
                any::<u64>().prop_map(Layout::Permuted)
            ]
        };
        (
            1_usize..3,
            1_usize..5,
            sizes,
            outs,
            interp,
            padding,
            any::<bool>(),
            [layout(), layout(), layout()],
        )
            .prop_flat_map(move |(n, c, sizes, outs, interp, padding, align, layouts)| {
                let mut x_shape = vec![n, c];
                x_shape.extend(&sizes);
                let mut grid_shape = vec![n];
                grid_shape.extend(&outs);
                grid_shape.push(dims);
                let len: usize = grid_shape.iter().product();
                let opts = GridSample::new(interp).padding(padding).align_corners(align);
                proptest::collection::vec(coordinate(), len).prop_map(move |grid| SampleCase {
                    x_shape: x_shape.clone(),
                    grid_shape: grid_shape.clone(),
                    grid,
                    opts,
                    layouts,
                })
            })
    })
}

/// The literal reference's names for the crate's options.
fn reference_how(opts: GridSample) -> (Mode, Padding, bool) {
    let mode = match opts.interp() {
        Interp::Linear => Mode::Linear,
        Interp::Nearest => Mode::Nearest,
        Interp::Cubic => Mode::Cubic,
    };
    let padding = match opts.padding_mode() {
        SPadding::Zeros => Padding::Zeros,
        SPadding::Border => Padding::Border,
        SPadding::Reflection => Padding::Reflection,
    };
    (mode, padding, opts.corners_aligned())
}

/// The bits of an array's elements in logical order.
fn bits(a: &ArrayD<f64>) -> Vec<u64> {
    a.iter().map(|v| v.to_bits()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: config().cases.min(160), ..config() })]

    /// Any layout of x, grid and the gradients, on 1 and 3 threads, gives the same bits;
    /// the plan's apply and backward are the call's; all agree with the literal reference.
    #[test]
    #[cfg_attr(miri, ignore = "slow under Miri: small_samples_for_miri covers the unsafe code")]
    fn grid_sample_is_the_reference_in_any_layout(case in sample_case()) {
        let SampleCase { x_shape, grid_shape, grid, opts, layouts } = case;
        let x = Held::new(&x_shape, layouts[0], |i| ((i * 7919) % 23) as f64 / 4.0 - 2.5);
        let g = Held::new(&grid_shape, layouts[1], |i| grid[i]);
        let plan = SamplePlan::grid(&x_shape, &g.view(), opts).unwrap();
        let out_shape = plan.output_shape(x_shape[1]);
        let r = Held::new(&out_shape, layouts[2], |i| ((i * 104729) % 13) as f64 - 6.0);
        let run = || {
            let y = x.view().grid_sample(&g.view(), opts).unwrap();
            let mut g_x = Held::new(&x_shape, layouts[2], |_| 0.0);
            plan.backward_into(&r.view(), &mut g_x.view_mut()).unwrap();
            let g_grid = x.view().grid_sample_backward_grid(&g.view(), &r.view(), opts).unwrap();
            (bits(&y), bits(&g_x.view().to_owned()), bits(&g_grid))
        };
        let (y, g_x, g_grid) = on_1_and_3(run);
        // The same in standard layout, and through the plan.
        let (xs, gs, rs) = (x.view().to_owned(), g.view().to_owned(), r.view().to_owned());
        let y_std = xs.grid_sample(&gs, opts).unwrap();
        prop_assert_eq!(&bits(&y_std), &y);
        let mut y_into = Held::new(&out_shape, layouts[1], |_| 7.0);
        plan.apply_into(&xs, &mut y_into.view_mut()).unwrap();
        prop_assert_eq!(&bits(&y_into.view().to_owned()), &y);
        let mut g_std = ArrayD::zeros(xs.raw_dim());
        plan.backward_into(&rs, &mut g_std).unwrap();
        prop_assert_eq!(&bits(&g_std), &g_x);
        // The literal reference (f64: no rounding between steps to mimic).
        let how = reference_how(opts);
        let (ry, rgx) = grid_sample(&xs, &gs, &rs, how, |v| v);
        // Far points: PyTorch's 2-D reflection (`|x| - trunc(|x| / 2span)·2span`) loses
        // their fraction, which the reference's `fmod` keeps; not compared.
        let far = |v: f64| v.abs() > 100.0;
        let lossy = opts.padding_mode() == SPadding::Reflection && gs.iter().any(|v| far(*v));
        if !lossy {
            close(&y_std, &ry, 1e-12).map_err(|e| TestCaseError::fail(format!("output {e}")))?;
            close(&g_std, &rgx, 1e-12).map_err(|e| TestCaseError::fail(format!("input gradient {e}")))?;
        }
        let g_grid_std = xs.grid_sample_backward_grid(&gs, &rs, opts).unwrap();
        prop_assert_eq!(&bits(&g_grid_std), &g_grid);
        let mut rgg = grid_grad(&xs, &gs, &rs, how, |v| v);
        // Far points: the reference's weights there are not PyTorch's either; not compared.
        rgg.zip_mut_with(&gs, |w, p| if far(*p) { *w = f64::NAN });
        let mut got = g_grid_std.clone();
        got.zip_mut_with(&gs, |w, p| if far(*p) { *w = f64::NAN });
        // A point whose other coordinate is far: both NaN'd per coordinate pair.
        close(&got.mapv(|v| if v.is_nan() { f64::NAN } else { v }), &rgg, 1e-9).or_else(|e| {
            if gs.iter().any(|v| far(*v)) { Ok(()) } else { Err(e) }
        }).map_err(|e| TestCaseError::fail(format!("grid gradient {e}")))?;
    }
}

#[test]
fn grid_sample_names_bad_shapes() {
    use ndarray::{Array3, Array4, Array5};
    let x = Array4::<f32>::zeros((2, 3, 4, 5));
    let lin = GridSample::new(Interp::Linear);
    let msg = |e: ndarray_gather::GatherError| e.to_string();
    assert_eq!(
        msg(x.grid_sample(&Array4::zeros((2, 6, 7, 3)), lin).unwrap_err()),
        "grid_sample: grid of shape [2, 6, 7, 3], expected [2, Ho, Wo, 2] (x has shape [2, 3, 4, 5])"
    );
    assert_eq!(
        msg(Array3::<f32>::zeros((2, 3, 4))
            .grid_sample(&Array3::zeros((2, 3, 2)), lin)
            .unwrap_err()),
        "grid_sample: x of shape [2, 3, 4], expected [N, C, H, W] or [N, C, D, H, W]"
    );
    assert_eq!(
        msg(Array4::<f32>::zeros((2, 3, 0, 5))
            .grid_sample(&Array4::zeros((2, 1, 1, 2)), lin)
            .unwrap_err()),
        "grid_sample: x of shape [2, 3, 0, 5], expected non-empty spatial axes"
    );
    assert_eq!(
        msg(Array5::<f32>::zeros((1, 1, 2, 2, 2))
            .grid_sample(&Array5::zeros((1, 1, 1, 1, 3)), GridSample::new(Interp::Cubic))
            .unwrap_err()),
        "grid_sample: x of shape [1, 1, 2, 2, 2], expected [N, C, H, W]: cubic is 2-D"
    );
    let grid = Array4::<f32>::zeros((2, 6, 7, 2));
    let plan = SamplePlan::grid(x.dim(), &grid, lin).unwrap();
    assert_eq!(
        msg(plan.apply(&Array4::<f32>::zeros((2, 3, 4, 6))).unwrap_err()),
        "SamplePlan::apply: x of shape [2, 3, 4, 6], expected [2, C, 4, 5]"
    );
    let mut y = Array4::<f32>::from_elem((2, 3, 6, 6), 9.0);
    assert_eq!(
        msg(plan.apply_into(&x, &mut y).unwrap_err()),
        "SamplePlan::apply_into: y of shape [2, 3, 6, 6], expected [2, 3, 6, 7]"
    );
    assert!(y.iter().all(|&v| v == 9.0), "y changed on an error");
    let mut g_x = Array4::<f32>::zeros((2, 4, 4, 5));
    assert_eq!(
        msg(plan
            .backward_into(&Array4::zeros((2, 3, 6, 7)), &mut g_x)
            .unwrap_err()),
        "SamplePlan::backward_into: g_x of shape [2, 4, 4, 5], expected [2, 3, 4, 5]"
    );
    assert_eq!(
        msg(x
            .grid_sample_backward_grid(&grid, &Array4::zeros((2, 3, 6, 6)), lin)
            .unwrap_err()),
        "grid_sample_backward_grid: g_y of shape [2, 3, 6, 6], expected [2, 3, 6, 7], the output's shape"
    );
}

#[test]
fn grid_sample_never_panics_on_wild_points() {
    use ndarray::Array4;
    let x = Array4::<f32>::from_shape_fn((1, 2, 3, 4), |(_, c, i, j)| (c * 12 + i * 4 + j) as f32);
    let wild = [
        f32::NAN,
        f32::INFINITY,
        -f32::INFINITY,
        f32::MAX,
        -f32::MAX,
        1e-45,
        -0.0,
        0.5,
    ];
    let grid = Array4::from_shape_fn((1, 8, 8, 2), |(_, i, j, k)| wild[if k == 0 { i } else { j }]);
    for interp in [Interp::Linear, Interp::Nearest, Interp::Cubic] {
        for padding in [SPadding::Zeros, SPadding::Border, SPadding::Reflection] {
            for align in [false, true] {
                let opts = GridSample::new(interp).padding(padding).align_corners(align);
                let y = x.grid_sample(&grid, opts).unwrap();
                let g = x
                    .grid_sample_backward_grid(&grid, &y.mapv(|_| 1.0), opts)
                    .unwrap();
                // A finite point inside reads the input's values.
                assert!(y[[0, 1, 7, 7]].is_finite() && g.shape() == grid.shape());
                // NaN: NaN for linear and cubic, nothing for nearest.
                assert_eq!(y[[0, 0, 0, 7]].is_nan(), interp != Interp::Nearest, "{opts:?}");
            }
        }
    }
}

#[derive(Debug, Clone)]
struct RoiCase {
    x_shape: Vec<usize>,
    boxes: Vec<[f64; 4]>,
    batch: Vec<usize>,
    out: (usize, usize),
    scale: f64,
    ratio: i64,
    aligned: bool,
    max: bool,
    layouts: [Layout; 2],
}

fn roi_case() -> impl Strategy<Value = RoiCase> {
    let layout = || {
        prop_oneof![
            Just(Layout::C),
            Just(Layout::F),
            Just(Layout::Reversed),
            Just(Layout::Stepped),
            any::<u64>().prop_map(Layout::Permuted)
        ]
    };
    (1_usize..3, 1_usize..4, 1_usize..7, 1_usize..7, 0_usize..6, 1_usize..4, 1_usize..4)
        .prop_flat_map(move |(n, c, h, w, k, ph, pw)| {
            let coord = || prop_oneof![8 => -3.0..9.0_f64, 1 => (-2_i32..10).prop_map(f64::from), 1 => Just(f64::NAN)];
            let boxes = proptest::collection::vec([coord(), coord(), coord(), coord()], k);
            let batch = proptest::collection::vec(0..n, k);
            let scale = prop_oneof![Just(1.0), Just(0.5), Just(2.0)];
            (boxes, batch, scale, -1_i64..4, any::<bool>(), any::<bool>(), [layout(), layout()]).prop_map(
                move |(boxes, batch, scale, ratio, aligned, max, layouts)| RoiCase {
                    x_shape: vec![n, c, h, w],
                    boxes,
                    batch,
                    out: (ph, pw),
                    scale,
                    ratio,
                    aligned,
                    max,
                    layouts,
                },
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: config().cases.min(160), ..config() })]

    /// roi_align in any layout, on 1 and 3 threads, gives the same bits; it agrees with the
    /// literal reference, and its backward is its adjoint: `<roi(x), g> = <x, back(g)>`.
    #[test]
    #[cfg_attr(miri, ignore = "slow under Miri: small_samples_for_miri covers the unsafe code")]
    fn roi_align_is_the_reference_in_any_layout(case in roi_case()) {
        let RoiCase { x_shape, boxes, batch, out, scale, ratio, aligned, max, layouts } = case;
        let x = Held::new(&x_shape, layouts[0], |i| ((i * 7919) % 23) as f64 / 4.0 - 2.5);
        let b = ndarray::Array2::from_shape_fn((boxes.len(), 4), |(k, j)| boxes[k][j]);
        let mut opts = RoiAlign::new(scale).sampling_ratio(ratio).aligned(aligned);
        if max {
            opts = opts.max();
        }
        let y = on_1_and_3(|| bits(&x.view().roi_align(&b, &batch, out, opts).unwrap()));
        let xs = x.view().to_owned();
        let ys = xs.roi_align(&b, &batch, out, opts).unwrap();
        prop_assert_eq!(&bits(&ys), &y);
        let want = roi_align_reference(&xs, &boxes, &batch, out, scale, ratio, aligned, max);
        close(&ys, &want, 1e-12).map_err(|e| TestCaseError::fail(format!("output {e}")))?;
        if max {
            prop_assert!(opts.backward_into(&b, &batch, &ys, &mut xs.clone()).is_err());
            return Ok(());
        }
        let g = ys.mapv(|v| (v * 3.0).sin());
        let back = || {
            let mut g_x = Held::new(&x_shape, layouts[1], |_| 0.0);
            opts.backward_into(&b, &batch, &g, &mut g_x.view_mut()).unwrap();
            bits(&g_x.view().to_owned())
        };
        let g_x = on_1_and_3(back);
        let mut g_std = ArrayD::zeros(xs.raw_dim());
        opts.backward_into(&b, &batch, &g, &mut g_std).unwrap();
        prop_assert_eq!(&bits(&g_std), &g_x);
        let lhs: f64 = ys.iter().zip(&g).map(|(a, b)| a * b).sum();
        let rhs: f64 = xs.iter().zip(&g_std).map(|(a, b)| a * b).sum();
        prop_assert!((lhs - rhs).abs() <= 1e-9 * (1.0 + lhs.abs()), "adjoint: {} against {}", lhs, rhs);
    }
}

#[test]
fn roi_align_names_bad_arguments() {
    use ndarray::{Array2, Array3, Array4};
    let x = Array4::<f32>::zeros((2, 3, 4, 5));
    let opts = RoiAlign::new(1.0);
    let boxes = Array2::<f32>::zeros((2, 4));
    let msg = |e: ndarray_gather::GatherError| e.to_string();
    assert_eq!(
        msg(x.roi_align(&boxes, &[0_i64, 2], (2, 2), opts).unwrap_err()),
        "roi_align: index 2 at position [1] of the indices is out of bounds for axis 0 of length 2 (valid: -2..=1)"
    );
    assert_eq!(
        msg(x.roi_align(&boxes, &[0_i64], (2, 2), opts).unwrap_err()),
        "roi_align: batch_idx of shape [1], expected [2], one per box"
    );
    assert_eq!(
        msg(x
            .roi_align(&Array2::<f32>::zeros((2, 5)), &[0_i64, 1], (2, 2), opts)
            .unwrap_err()),
        "roi_align: boxes of shape [2, 5], expected [2, 4] (x1, y1, x2, y2)"
    );
    assert_eq!(
        msg(Array3::<f32>::zeros((2, 3, 4))
            .roi_align(&boxes, &[0_i64, 1], (2, 2), opts)
            .unwrap_err()),
        "roi_align: x of shape [2, 3, 4], expected [N, C, H, W] with non-empty H and W"
    );
    let mut g_x = Array4::<f32>::from_elem((2, 3, 4, 5), 1.0);
    assert_eq!(
        msg(opts
            .backward_into(&boxes, &[0_i64, 1], &Array4::zeros((2, 4, 2, 2)), &mut g_x)
            .unwrap_err()),
        "RoiAlign::backward_into: g_out of shape [2, 4, 2, 2], expected [2, 3, ph, pw] (g_x has shape [2, 3, 4, 5])"
    );
    assert!(
        opts.max()
            .backward_into(&boxes, &[0_i64, 1], &Array4::zeros((2, 3, 2, 2)), &mut g_x)
            .is_err()
    );
    assert!(g_x.iter().all(|&v| v == 1.0), "g_x changed on an error");
    // A huge box with adaptive sampling: an error, not an allocation failure.
    let huge = ndarray::array![[0.0_f32, 0.0, 1e30, 1e30]];
    assert!(matches!(
        x.roi_align(&huge, &[0_i64], (1, 1), opts).unwrap_err(),
        ndarray_gather::GatherError::SizeOverflow { .. }
    ));
}

/// The planes walk's unchecked reads and the roi walk, small enough for Miri: NCHW and
/// channels-last agree, and both gradients land where the reference puts them.
#[test]
fn small_samples_for_miri() {
    use ndarray::{Array4, array};
    let x = Array4::from_shape_fn((1, 2, 3, 4), |(_, c, i, j)| (c * 12 + i * 4 + j) as f64);
    let grid = array![[[[-0.9, -0.2], [0.3, 0.8]], [[1.4, 0.0], [f64::NAN, 0.1]]]];
    for interp in [Interp::Linear, Interp::Nearest, Interp::Cubic] {
        let opts = GridSample::new(interp).padding(SPadding::Reflection);
        let y = x.grid_sample(&grid, opts).unwrap();
        let last = x
            .view()
            .permuted_axes([0, 2, 3, 1])
            .as_standard_layout()
            .into_owned();
        let y_last = last
            .view()
            .permuted_axes([0, 3, 1, 2])
            .grid_sample(&grid, opts)
            .unwrap();
        assert_eq!(bits(&y.clone().into_dyn()), bits(&y_last.into_dyn()));
        let plan = SamplePlan::grid(x.dim(), &grid, opts).unwrap();
        let mut g_x = Array4::zeros(x.dim());
        plan.backward_into(&y.mapv(|_| 1.0), &mut g_x).unwrap();
        let (xs, gs) = (x.clone().into_dyn(), grid.clone().into_dyn());
        let (ry, rgx) = grid_sample(&xs, &gs, &y.mapv(|_| 1.0).into_dyn(), reference_how(opts), |v| v);
        close(&y.into_dyn(), &ry, 1e-12).unwrap();
        close(&g_x.into_dyn(), &rgx, 1e-12).unwrap();
    }
    let boxes = array![[0.2, 0.4, 3.1, 2.5], [-1.0, -1.0, 1.0, 1.0]];
    let opts = RoiAlign::new(1.0).sampling_ratio(0).aligned(true);
    let r = x.roi_align(&boxes, &[0_i64, 0], (2, 2), opts).unwrap();
    let want = roi_align_reference(
        &x.clone().into_dyn(),
        &[[0.2, 0.4, 3.1, 2.5], [-1.0, -1.0, 1.0, 1.0]],
        &[0, 0],
        (2, 2),
        1.0,
        0,
        true,
        false,
    );
    close(&r.clone().into_dyn(), &want, 1e-12).unwrap();
    let mut g_x = Array4::zeros(x.dim());
    opts.backward_into(&boxes, &[0_i64, 0], &r, &mut g_x).unwrap();
    let (lhs, rhs): (f64, f64) = (
        r.iter().map(|v| v * v).sum(),
        x.iter().zip(&g_x).map(|(a, b)| a * b).sum(),
    );
    assert!((lhs - rhs).abs() < 1e-9 * lhs.abs().max(1.0), "{lhs} {rhs}");
}
