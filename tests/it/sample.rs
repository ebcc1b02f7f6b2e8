//! The literal reference of `grid_sample` (`support/sample.rs`, issue 76) against
//! PyTorch's CPU kernel and autograd (`tests/fixtures/generate_sample.py`): every mode,
//! padding and `align_corners`, 2-D and 3-D, f32 and f64, with pixel centres, borders,
//! half-way ties, far points and NaN. The crate's interpolating gathers will be checked
//! against the same reference and fixtures.

use ndarray::{ArrayD, Dimension};

use crate::support::manifest::{cases, read};
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
