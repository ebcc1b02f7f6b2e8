//! The literal reference of `grid_sample` (`support/sample.rs`, issue 76) against
//! PyTorch's CPU kernel and autograd (`tests/fixtures/generate_sample.py`): every mode,
//! padding and `align_corners`, 2-D and 3-D, f32 and f64, with pixel centres, borders,
//! half-way ties, far points and NaN. The crate's interpolating gathers will be checked
//! against the same reference and fixtures.

use ndarray::{ArrayD, Dimension};
use ndarray_gather::sample::{GridSample, Interp, Padding as SPadding, SampleElement, SampleExt, SamplePlan};
use num_traits::Float;

use crate::support::manifest::{Case, cases, read};
use crate::support::sample::{Mode, Padding, grid_grad, grid_sample};

/// A fixture file as `f64` (f32 files widened exactly).
fn load(file: &str) -> ArrayD<f64> {
    read::<f64>(file)
        .or_else(|| read::<f32>(file).map(|a| a.mapv(f64::from)))
        .unwrap_or_else(|| panic!("{file}: not f32 or f64"))
}

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

#[test]
fn the_reference_is_pytorchs_grid_sample() {
    let all = cases("SAMPLE_MANIFEST.txt");
    assert!(all.len() >= 30, "{} cases", all.len());
    let mut nan_cases = 0;
    for c in &all {
        let mode = match c.req("mode") {
            "bilinear" => Mode::Linear,
            "nearest" => Mode::Nearest,
            "bicubic" => Mode::Cubic,
            m => panic!("{}: mode {m}", c.name),
        };
        let padding = match c.req("padding") {
            "zeros" => Padding::Zeros,
            "border" => Padding::Border,
            "reflection" => Padding::Reflection,
            p => panic!("{}: padding {p}", c.name),
        };
        let tol = if c.req("dtype") == "f64" { 1e-12 } else { 2e-5 };
        let (x, grid, r) = (load(c.req("x")), load(c.req("grid")), load(c.req("r")));
        nan_cases += usize::from(grid.iter().any(|v| v.is_nan()));
        let round: fn(f64) -> f64 = if c.req("dtype") == "f64" {
            |v| v
        } else {
            |v| v as f32 as f64
        };
        let how = (mode, padding, c.int("align_corners") == 1);
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

/// The crate's grid_sample, input gradient (a plan's `backward_into` on zeros) and grid
/// gradient of one fixture case, widened to `f64`.
fn crate_case<A: SampleElement + crate::support::npy::Npy>(c: &Case, opts: GridSample) -> [ArrayD<f64>; 3] {
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
        let interp = match c.req("mode") {
            "bilinear" => Interp::Linear,
            "nearest" => Interp::Nearest,
            _ => Interp::Cubic,
        };
        let padding = match c.req("padding") {
            "zeros" => SPadding::Zeros,
            "border" => SPadding::Border,
            _ => SPadding::Reflection,
        };
        let opts = GridSample::new(interp)
            .padding(padding)
            .align_corners(c.int("align_corners") == 1);
        let f64s = c.req("dtype") == "f64";
        let [y, g_x, g_grid] = if f64s {
            crate_case::<f64>(c, opts)
        } else {
            crate_case::<f32>(c, opts)
        };
        let want = load(c.req("y"));
        // Bilinear and nearest: PyTorch's wheel fuses the weighted sum into FMAs (found by
        // replaying its arithmetic), the crate multiplies and adds: a few units of the
        // terms' last place. Bicubic sums its taps in one pass, PyTorch by rows.
        let eps = if f64s {
            f64::EPSILON
        } else {
            f64::from(f32::EPSILON)
        };
        let tol = if interp == Interp::Cubic {
            64.0 * eps
        } else {
            8.0 * eps
        };
        close(&y, &want, tol).unwrap_or_else(|e| panic!("{}: the output {e}", c.name));
        if interp == Interp::Nearest {
            // A nearest sample copies one value: the same bits.
            assert!(
                y.iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan()),
                "{}",
                c.name
            );
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
