//! A literal reference of `grid_sample` (issue 76, decision 70): PyTorch's formulas written
//! out in `f64`, one output element at a time, as the list of (input element, weight) it
//! reads. The forward is their weighted sum; the input's gradient scatters the output's
//! gradient through the same list. No crate code: the crate's interpolating gathers are to
//! be checked against this and `tests/fixtures/SAMPLE_MANIFEST.txt`.

use ndarray::{ArrayD, IxDyn};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Linear,
    Nearest,
    Cubic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// Rounds every intermediate to the fixture's precision (`f32`: each operation as `f32`
/// arithmetic gives it; one rounding of the exact `f64` result is the same), so that ties
/// and floors fall where PyTorch's fall.
pub type Round = fn(f64) -> f64;

/// `coord` in `[-1, 1]` to a pixel coordinate of an axis of `size`, each step rounded.
pub fn unnormalize(coord: f64, size: usize, align: bool, p: Round) -> f64 {
    let s = size as f64;
    if align {
        p(p(p(coord + 1.0) / 2.0) * (s - 1.0))
    } else {
        p(p(p(p(coord + 1.0) * s) - 1.0) / 2.0)
    }
}

/// `x` into `[0, size - 1]`.
fn clip(x: f64, size: usize) -> f64 {
    (size as f64 - 1.0).min(x.max(0.0))
}

/// `x` reflected into `[twice_low / 2, twice_high / 2]`.
fn reflect(x: f64, twice_low: f64, twice_high: f64, p: Round) -> f64 {
    if twice_low == twice_high {
        return 0.0;
    }
    let (low, span) = (twice_low / 2.0, (twice_high - twice_low) / 2.0);
    let x = p(p(x - low).abs());
    let (extra, flips) = (x % span, p(x / span).floor());
    if flips % 2.0 == 0.0 {
        p(extra + low)
    } else {
        p(p(span - extra) + low)
    }
}

/// A pixel coordinate after the padding's rule.
pub fn pad(x: f64, size: usize, padding: Padding, align: bool, p: Round) -> f64 {
    let s = size as f64;
    match padding {
        Padding::Zeros => x,
        Padding::Border => clip(x, size),
        Padding::Reflection if align => clip(reflect(x, 0.0, 2.0 * (s - 1.0), p), size),
        Padding::Reflection => clip(reflect(x, -1.0, 2.0 * s - 1.0, p), size),
    }
}

/// The cubic convolution's four weights at fraction `t` (A = -0.75).
fn cubic_weights(t: f64) -> [f64; 4] {
    let a = -0.75;
    let near = |x: f64| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// The slopes of [`cubic_weights`] in `t`.
fn cubic_slopes(t: f64) -> [f64; 4] {
    let a = -0.75;
    let near = |x: f64| (3.0 * (a + 2.0) * x - 2.0 * (a + 3.0)) * x;
    let far = |x: f64| (3.0 * a * x - 10.0 * a) * x + 8.0 * a;
    [far(t + 1.0), near(t), -near(1.0 - t), -far(2.0 - t)]
}

/// What one output point reads: per spatial input position (row-major over the spatial
/// axes), its weight; `None`: the output is NaN (a NaN coordinate under linear or cubic).
pub fn taps(
    point: &[f64],
    sizes: &[usize],
    (mode, padding, align): (Mode, Padding, bool),
    p: Round,
) -> Option<Vec<(usize, f64)>> {
    // The grid's last axis is (x, y[, z]): x indexes the last spatial axis.
    let dims = sizes.len();
    let coord = |d: usize| unnormalize(point[dims - 1 - d], sizes[d], align, p);
    // A NaN coordinate: PyTorch's 2-D kernel (vectorized) gives NaN for linear and cubic
    // (a masked corner's 0 times a NaN weight) and 0 for nearest; its 3-D kernel (scalar)
    // reads no corner, so 0.
    if point.iter().any(|c| c.is_nan()) {
        return if mode == Mode::Nearest || dims == 3 {
            Some(Vec::new())
        } else {
            None
        };
    }
    let flat = |idx: &[i64]| -> Option<usize> {
        let mut at = 0usize;
        for (d, &i) in idx.iter().enumerate() {
            if i < 0 || i >= sizes[d] as i64 {
                return None;
            }
            at = at * sizes[d] + i as usize;
        }
        Some(at)
    };
    let mut out = Vec::new();
    match mode {
        Mode::Nearest => {
            let idx: Vec<i64> = (0..dims)
                .map(|d| pad(coord(d), sizes[d], padding, align, p).round_ties_even() as i64)
                .collect();
            out.extend(flat(&idx).map(|at| (at, 1.0)));
        }
        Mode::Linear => {
            let c: Vec<f64> = (0..dims)
                .map(|d| pad(coord(d), sizes[d], padding, align, p))
                .collect();
            // Corners in PyTorch's order: the last axis fastest within each.
            for corner in 0..1usize << dims {
                let mut idx = Vec::with_capacity(dims);
                let mut w = 1.0;
                for (d, &cd) in c.iter().enumerate() {
                    let low = cd.floor();
                    let high = (corner >> (dims - 1 - d)) & 1 == 1;
                    idx.push((low as i64).saturating_add(i64::from(high)));
                    w *= if high { cd - low } else { low + 1.0 - cd };
                }
                if let Some(at) = flat(&idx) {
                    out.push((at, w));
                }
            }
        }
        Mode::Cubic => {
            assert_eq!(dims, 2, "cubic is 2-D");
            let (iy, ix) = (coord(0), coord(1));
            let (y0, x0) = (iy.floor(), ix.floor());
            let (wy, wx) = (cubic_weights(iy - y0), cubic_weights(ix - x0));
            for (i, wyi) in wy.iter().enumerate() {
                for (j, wxj) in wx.iter().enumerate() {
                    // Each tap is padded on its own (PyTorch's `get_value_bounded`).
                    let y = pad(y0 - 1.0 + i as f64, sizes[0], padding, align, p);
                    let x = pad(x0 - 1.0 + j as f64, sizes[1], padding, align, p);
                    if let Some(at) = flat(&[y as i64, x as i64]) {
                        out.push((at, wyi * wxj));
                    }
                }
            }
        }
    }
    Some(out)
}

/// `grid_sample(x, grid)` and, for an upstream gradient `r` of the output's shape, the
/// input's gradient: x `[N, C, *sizes]`, grid `[N, *out, dims]`; `how`: the mode,
/// padding and `align_corners`; `p`: the fixture's precision.
pub fn grid_sample(
    x: &ArrayD<f64>,
    grid: &ArrayD<f64>,
    r: &ArrayD<f64>,
    how: (Mode, Padding, bool),
    p: Round,
) -> (ArrayD<f64>, ArrayD<f64>) {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let sizes = &x.shape()[2..];
    let dims = sizes.len();
    let out_sizes = &grid.shape()[1..grid.ndim() - 1];
    let points: usize = out_sizes.iter().product();
    let spatial: usize = sizes.iter().product();
    let mut shape = vec![n, c];
    shape.extend_from_slice(out_sizes);
    let mut y = ArrayD::zeros(IxDyn(&shape));
    let mut gx = ArrayD::zeros(x.raw_dim());
    let (xs, gs) = (x.as_standard_layout(), grid.as_standard_layout());
    let (xs, gs) = (xs.as_slice().unwrap(), gs.as_slice().unwrap());
    let rs = r.as_standard_layout();
    let rs = rs.as_slice().unwrap();
    {
        let (ys, gxs) = (y.as_slice_mut().unwrap(), gx.as_slice_mut().unwrap());
        for b in 0..n {
            for pt in 0..points {
                let point = &gs[(b * points + pt) * dims..][..dims];
                let t = taps(point, sizes, how, p);
                for ch in 0..c {
                    let base = (b * c + ch) * spatial;
                    let o = (b * c + ch) * points + pt;
                    match &t {
                        None => ys[o] = f64::NAN,
                        Some(t) => {
                            ys[o] = t.iter().map(|&(at, w)| xs[base + at] * w).sum();
                            for &(at, w) in t {
                                gxs[base + at] += w * rs[o];
                            }
                        }
                    }
                }
            }
        }
    }
    (y, gx)
}

/// The derivative of [`pad`] at `x` (PyTorch's `*_set_grad`: a clipped coordinate,
/// exactly at a bound too, has none; a reflected one flips its sign).
fn pad_slope(x: f64, size: usize, padding: Padding, align: bool, p: Round) -> f64 {
    let s = size as f64;
    let clip_slope = |v: f64| if v <= 0.0 || v >= s - 1.0 { 0.0 } else { 1.0 };
    let reflected = |twice_low: f64, twice_high: f64| -> (f64, f64) {
        if twice_low == twice_high {
            return (0.0, 0.0);
        }
        let (low, span) = (twice_low / 2.0, (twice_high - twice_low) / 2.0);
        let v = p(x - low);
        let (sign, v) = if v < 0.0 { (-1.0, -v) } else { (1.0, v) };
        let (extra, flips) = (v % span, p(v / span).floor());
        if flips % 2.0 == 0.0 {
            (p(extra + low), sign)
        } else {
            (p(p(span - extra) + low), -sign)
        }
    };
    match padding {
        Padding::Zeros => 1.0,
        Padding::Border => clip_slope(x),
        Padding::Reflection => {
            let (v, slope) = if align {
                reflected(0.0, 2.0 * (s - 1.0))
            } else {
                reflected(-1.0, 2.0 * s - 1.0)
            };
            slope * clip_slope(v)
        }
    }
}

/// The grid's gradient of `loss = Σ grid_sample(x, grid) · r` (zero for nearest),
/// PyTorch's autograd: each coordinate's slope of the corners' (taps') weights, summed over
/// the channels, times the unnormalization's slope and (linear) the padding's.
/// NaN points are NaN (PyTorch's own values there are not compared).
pub fn grid_grad(
    x: &ArrayD<f64>,
    grid: &ArrayD<f64>,
    r: &ArrayD<f64>,
    (mode, padding, align): (Mode, Padding, bool),
    p: Round,
) -> ArrayD<f64> {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let sizes = &x.shape()[2..];
    let dims = sizes.len();
    let points: usize = grid.shape()[1..grid.ndim() - 1].iter().product();
    let spatial: usize = sizes.iter().product();
    let mut g = ArrayD::zeros(grid.raw_dim());
    if mode == Mode::Nearest {
        return g;
    }
    let (xs, gs, rs) = (
        x.as_standard_layout(),
        grid.as_standard_layout(),
        r.as_standard_layout(),
    );
    let (xs, gs, rs) = (
        xs.as_slice().unwrap(),
        gs.as_slice().unwrap(),
        rs.as_slice().unwrap(),
    );
    let out = g.as_slice_mut().unwrap();
    for b in 0..n {
        for pt in 0..points {
            let at = (b * points + pt) * dims;
            let point = &gs[at..at + dims];
            if point.iter().any(|v| v.is_nan()) {
                out[at..at + dims].fill(f64::NAN);
                continue;
            }
            // Per spatial axis d: the coordinate, before and after padding.
            let raw: Vec<f64> = (0..dims)
                .map(|d| unnormalize(point[dims - 1 - d], sizes[d], align, p))
                .collect();
            let unnorm = |d: usize| {
                let s = sizes[d] as f64;
                if align { (s - 1.0) / 2.0 } else { s / 2.0 }
            };
            if mode == Mode::Cubic {
                // The taps' weights and their slopes in each fraction; each tap padded on
                // its own, so the padding adds no slope.
                let (y0, x0) = (raw[0].floor(), raw[1].floor());
                let (ty, tx) = (raw[0] - y0, raw[1] - x0);
                let (wy, wx) = (cubic_weights(ty), cubic_weights(tx));
                let (dy, dx) = (cubic_slopes(ty), cubic_slopes(tx));
                let (mut gy, mut gx) = (0.0, 0.0);
                for i in 0..4 {
                    for j in 0..4 {
                        let y = pad(y0 - 1.0 + i as f64, sizes[0], padding, align, p) as i64;
                        let x = pad(x0 - 1.0 + j as f64, sizes[1], padding, align, p) as i64;
                        if y < 0 || x < 0 || y >= sizes[0] as i64 || x >= sizes[1] as i64 {
                            continue;
                        }
                        let flat = y as usize * sizes[1] + x as usize;
                        let dot: f64 = (0..c)
                            .map(|ch| xs[(b * c + ch) * spatial + flat] * rs[(b * c + ch) * points + pt])
                            .sum();
                        gy += dot * dy[i] * wx[j];
                        gx += dot * wy[i] * dx[j];
                    }
                }
                (out[at + 1], out[at]) = (gy * unnorm(0), gx * unnorm(1));
                continue;
            }
            let cd: Vec<f64> = (0..dims)
                .map(|d| pad(raw[d], sizes[d], padding, align, p))
                .collect();
            let mut slope = vec![0.0; dims];
            for corner in 0..1usize << dims {
                let (mut flat, mut inside) = (0usize, true);
                let mut f = vec![0.0; dims];
                let mut sign = vec![0.0; dims];
                for d in 0..dims {
                    let low = cd[d].floor();
                    let high = (corner >> (dims - 1 - d)) & 1 == 1;
                    let i = (low as i64).saturating_add(i64::from(high));
                    inside &= i >= 0 && i < sizes[d] as i64;
                    flat = flat * sizes[d] + i.clamp(0, sizes[d] as i64 - 1) as usize;
                    (f[d], sign[d]) = if high {
                        (cd[d] - low, 1.0)
                    } else {
                        (low + 1.0 - cd[d], -1.0)
                    };
                }
                if !inside {
                    continue;
                }
                // The channels' sum of x at the corner times the output's gradient.
                let dot: f64 = (0..c)
                    .map(|ch| xs[(b * c + ch) * spatial + flat] * rs[(b * c + ch) * points + pt])
                    .sum();
                for d in 0..dims {
                    let others: f64 = (0..dims).filter(|&e| e != d).map(|e| f[e]).product();
                    slope[d] += sign[d] * others * dot;
                }
            }
            for d in 0..dims {
                out[at + dims - 1 - d] =
                    slope[d] * pad_slope(raw[d], sizes[d], padding, align, p) * unnorm(d);
            }
        }
    }
    g
}

/// A literal RoIAlign (torchvision's formulas, f64): `x [N, C, H, W]`, boxes `(x1, y1, x2,
/// y2)` with their items; per box, per bin, the mean (or ONNX Runtime's max of `w·v`) of
/// its points' bilinear corners.
#[allow(clippy::too_many_arguments)]
pub fn roi_align(
    x: &ArrayD<f64>,
    boxes: &[[f64; 4]],
    batch: &[usize],
    (ph, pw): (usize, usize),
    scale: f64,
    ratio: i64,
    aligned: bool,
    max: bool,
) -> ArrayD<f64> {
    let (c, h, w) = (x.shape()[1], x.shape()[2], x.shape()[3]);
    let mut out = ArrayD::zeros(IxDyn(&[boxes.len(), c, ph, pw]));
    let corners = |y: f64, xx: f64| -> Option<[(usize, usize, f64); 4]> {
        if !(y >= -1.0 && y <= h as f64 && xx >= -1.0 && xx <= w as f64) {
            return None;
        }
        let (mut y, mut xx) = (y.max(0.0), xx.max(0.0));
        let (mut y0, mut x0) = (y as usize, xx as usize);
        let y1 = if y0 >= h - 1 {
            y0 = h - 1;
            y = y0 as f64;
            y0
        } else {
            y0 + 1
        };
        let x1 = if x0 >= w - 1 {
            x0 = w - 1;
            xx = x0 as f64;
            x0
        } else {
            x0 + 1
        };
        let (ly, lx) = (y - y0 as f64, xx - x0 as f64);
        let (hy, hx) = (1.0 - ly, 1.0 - lx);
        Some([
            (y0, x0, hy * hx),
            (y0, x1, hy * lx),
            (y1, x0, ly * hx),
            (y1, x1, ly * lx),
        ])
    };
    for (k, b) in boxes.iter().enumerate() {
        let off = if aligned { 0.5 } else { 0.0 };
        let [sx, sy, ex, ey] = b.map(|v| v * scale - off);
        let (mut rw, mut rh) = (ex - sx, ey - sy);
        if !aligned {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / ph as f64, rw / pw as f64);
        let grid = |roi: f64, bins: usize| {
            if ratio > 0 {
                ratio as usize
            } else {
                (roi / bins as f64).ceil() as usize
            }
        };
        let (gh, gw) = (grid(rh, ph), grid(rw, pw));
        let count = (gh * gw).max(1) as f64;
        for ch in 0..c {
            for i in 0..ph {
                for j in 0..pw {
                    let (mut acc, mut best): (f64, Option<f64>) = (0.0, None);
                    for iy in 0..gh {
                        let y = sy + i as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                        for ix in 0..gw {
                            let xx = sx + j as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                            let terms: Vec<f64> = match corners(y, xx) {
                                Some(cs) => cs
                                    .iter()
                                    .map(|&(r, q, wt)| wt * x[[batch[k], ch, r, q]])
                                    .collect(),
                                None => vec![0.0],
                            };
                            acc += terms.iter().sum::<f64>();
                            let m = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                            best = Some(best.map_or(m, |a| a.max(m)));
                        }
                    }
                    out[[k, ch, i, j]] = if max { best.unwrap_or(0.0) } else { acc / count };
                }
            }
        }
    }
    out
}
