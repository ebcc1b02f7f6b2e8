//! From a grid point to the pixels it reads and their weights: PyTorch's coordinate
//! arithmetic (unnormalize, clip, reflect; the corner weights), in the element type, step
//! by step as PyTorch rounds it.

use super::{GridSample, Interp, Padding, SampleElement};

/// `v` as `A` (sizes and small constants: exact).
#[inline(always)]
pub(super) fn cast<A: SampleElement>(v: f64) -> A {
    A::from(v).unwrap_or_else(A::nan)
}

/// A grid coordinate in `[-1, 1]` as a pixel coordinate of an axis of `size`.
#[inline(always)]
pub(super) fn unnormalize<A: SampleElement>(c: A, size: usize, align: bool) -> A {
    let (one, two, s) = (A::one(), cast::<A>(2.0), cast::<A>(size as f64));
    if align {
        (c + one) / two * (s - one)
    } else {
        ((c + one) * s - one) / two
    }
}

/// The slope of [`unnormalize`] in `c`.
pub(super) fn unnormalize_slope<A: SampleElement>(size: usize, align: bool) -> A {
    let s = cast::<A>(size as f64);
    if align {
        (s - A::one()) / cast(2.0)
    } else {
        s / cast(2.0)
    }
}

/// `x` clipped into `[0, size - 1]` (a NaN stays NaN), and its slope (none at or beyond a
/// bound).
#[inline(always)]
fn clip<A: SampleElement>(x: A, size: usize) -> (A, A) {
    let high = cast::<A>(size as f64 - 1.0);
    if x > A::zero() && x < high {
        (x, A::one())
    } else if x >= high {
        (high, A::zero())
    } else if x <= A::zero() {
        (A::zero(), A::zero())
    } else {
        (x, A::zero())
    }
}

/// `x` reflected into `[twice_low / 2, twice_high / 2]`, and its slope (1 or -1).
#[inline(always)]
fn reflect<A: SampleElement>(x: A, twice_low: A, twice_high: A) -> (A, A) {
    if twice_low == twice_high {
        return (A::zero(), A::zero());
    }
    let two = cast::<A>(2.0);
    let (low, span) = (twice_low / two, (twice_high - twice_low) / two);
    let d = x - low;
    let sign = if d < A::zero() { -A::one() } else { A::one() };
    let d = d.abs();
    let (extra, flips) = (d % span, (d / span).floor());
    if flips % two == A::zero() {
        (extra + low, sign)
    } else {
        (span - extra + low, -sign)
    }
}

/// A pixel coordinate after the padding, and the padding's slope.
#[inline(always)]
pub(super) fn pad<A: SampleElement>(x: A, size: usize, padding: Padding, align: bool) -> (A, A) {
    let s = cast::<A>(size as f64);
    let two = cast::<A>(2.0);
    match padding {
        Padding::Zeros => (x, A::one()),
        Padding::Border => clip(x, size),
        Padding::Reflection => {
            let (r, slope) = if align {
                reflect(x, A::zero(), two * (s - A::one()))
            } else {
                reflect(x, -A::one(), two * s - A::one())
            };
            let (c, clip_slope) = clip(r, size);
            (c, slope * clip_slope)
        }
    }
}

/// PyTorch's vectorized 2-D kernel's pixel coordinate and padding (its nearest, linear
/// and cubic): `(c + 1)·(size / 2) - 0.5` as one fused multiply-add (its compiler
/// contracts it; aligned, `(c + 1)·((size - 1) / 2)`, the same value as [`unnormalize`]),
/// and a reflection by `|x - low| - trunc(|x - low| / 2span)·2span`, fused, folded once.
#[inline(always)]
pub(super) fn unnormalize_2d<A: SampleElement>(c: A, size: usize, align: bool) -> A {
    if align {
        unnormalize(c, size, align)
    } else {
        (c + A::one()).mul_add(cast::<A>(size as f64 / 2.0), cast(-0.5))
    }
}

/// [`pad`] as PyTorch's vectorized 2-D kernel computes it (see [`unnormalize_2d`]).
#[inline(always)]
pub(super) fn pad_2d<A: SampleElement>(x: A, size: usize, padding: Padding, align: bool) -> (A, A) {
    if padding != Padding::Reflection {
        return pad(x, size, padding, align);
    }
    let (low, twice_span) = if align {
        (A::zero(), cast::<A>(2.0 * (size as f64 - 1.0)))
    } else {
        (cast::<A>(-0.5), cast::<A>(2.0 * size as f64))
    };
    if align && size <= 1 {
        return (A::zero(), A::zero());
    }
    let d = x - low;
    let a = d.abs();
    let extra = (-(a / twice_span).trunc()).mul_add(twice_span, a);
    let flipped = twice_span - extra;
    let flip = extra > flipped;
    let r = if flip { flipped } else { extra } + low;
    let sign = if flip != (d < A::zero()) {
        -A::one()
    } else {
        A::one()
    };
    let (c, clip_slope) = clip(r, size);
    (c, sign * clip_slope)
}

/// Bicubic convolution's weights of the taps at -1, 0, 1, 2 for fraction `t` (A = -0.75),
/// as PyTorch writes them.
#[inline(always)]
pub(super) fn cubic_weights<A: SampleElement>(t: A) -> [A; 4] {
    let a = cast::<A>(-0.75);
    let (one, two, three) = (A::one(), cast::<A>(2.0), cast::<A>(3.0));
    let (five, eight, four) = (cast::<A>(5.0), cast::<A>(8.0), cast::<A>(4.0));
    let near = |x: A| ((a + two) * x - (a + three)) * x * x + one;
    let far = |x: A| ((a * x - five * a) * x + eight * a) * x - four * a;
    let u = one - t;
    [far(t + one), near(t), near(u), far(u + one)]
}

/// The slopes in `t` of [`cubic_weights`].
#[inline(always)]
pub(super) fn cubic_slopes<A: SampleElement>(t: A) -> [A; 4] {
    let a = cast::<A>(-0.75);
    let (one, two, three) = (A::one(), cast::<A>(2.0), cast::<A>(3.0));
    let (ten, eight) = (cast::<A>(10.0), cast::<A>(8.0));
    let near = |x: A| (three * (a + two) * x - two * (a + three)) * x;
    let far = |x: A| (three * a * x - ten * a) * x + eight * a;
    let u = one - t;
    [far(t + one), near(t), -near(u), -far(u + one)]
}

/// Where a tap at integer `i` lies on an axis of `size`, if inside.
#[inline(always)]
fn inside<A: SampleElement>(i: A, size: usize) -> Option<usize> {
    (i >= A::zero() && i < cast(size as f64)).then(|| i.to_usize().unwrap_or(0))
}

/// The spatial sizes of an input (`[H, W]` or `[D, H, W]`) and the sampling options: what
/// one point reads.
pub(super) struct Reader<'a> {
    pub sizes: &'a [usize],
    pub opts: GridSample,
}

impl Reader<'_> {
    /// Grid coordinate `c` as a pixel coordinate of spatial axis `d`: the 2-D kernel's
    /// arithmetic in 2-D, the scalar 3-D kernel's in 3-D.
    #[inline(always)]
    fn coord<A: SampleElement>(&self, c: A, d: usize) -> A {
        let (size, align) = (self.sizes[d], self.opts.align_corners);
        if self.sizes.len() == 2 {
            unnormalize_2d(c, size, align)
        } else {
            unnormalize(c, size, align)
        }
    }

    /// Pixel coordinate `x` of spatial axis `d` after the padding, and its slope.
    #[inline(always)]
    fn pad<A: SampleElement>(&self, x: A, d: usize) -> (A, A) {
        let (size, o) = (self.sizes[d], self.opts);
        if self.sizes.len() == 2 {
            pad_2d(x, size, o.padding, o.align_corners)
        } else {
            pad(x, size, o.padding, o.align_corners)
        }
    }

    /// Calls `tap(pixel, weight)` for each pixel the point (grid coordinates `(x, y[, z])`)
    /// reads, in PyTorch's order; a pixel is row-major over the spatial axes. `true`: the
    /// point reads nothing and its output is NaN.
    #[inline(always)]
    pub fn taps<A: SampleElement>(&self, point: &[A], mut tap: impl FnMut(usize, A)) -> bool {
        let (sizes, o) = (self.sizes, self.opts);
        let dims = sizes.len();
        // Per spatial axis d, its coordinate: x is the last axis.
        let coord = |d: usize| self.coord(point[dims - 1 - d], d);
        if point.iter().any(|c| c.is_nan()) {
            // PyTorch's 2-D kernel multiplies a masked 0 by a NaN weight; its nearest and
            // its scalar 3-D kernel read nothing.
            return o.interp != Interp::Nearest && dims == 2;
        }
        match (o.interp, dims) {
            (Interp::Nearest, _) => {
                let mut at = 0;
                for (d, &size) in sizes.iter().enumerate() {
                    let c = self.pad(coord(d), d).0;
                    match inside(c.nearbyint(), size) {
                        Some(i) => at = at * size + i,
                        None => return false,
                    }
                }
                tap(at, A::one());
            }
            (Interp::Linear, 2) => {
                let (y, x) = (self.pad(coord(0), 0).0, self.pad(coord(1), 1).0);
                let (y0, x0) = (y.floor(), x.floor());
                let (fy, fx) = (y - y0, x - x0);
                if fy.is_nan() || fx.is_nan() {
                    // PyTorch's vectorized kernel: a masked 0 times a NaN weight.
                    return true;
                }
                let (gy, gx) = (A::one() - fy, A::one() - fx);
                let (rows, cols) = ([(y0, gy), (y0 + A::one(), fy)], [(x0, gx), (x0 + A::one(), fx)]);
                for (yi, wy) in rows {
                    for (xi, wx) in cols {
                        if let (Some(r), Some(c)) = (inside(yi, sizes[0]), inside(xi, sizes[1])) {
                            tap(r * sizes[1] + c, wy * wx);
                        }
                    }
                }
            }
            (Interp::Linear, _) => {
                // PyTorch's scalar 3-D kernel: (x₁ - x)(y₁ - y)(z₁ - z) and so on; a NaN
                // reads nothing.
                let c: [A; 3] = std::array::from_fn(|d| self.pad(coord(d), d).0);
                if c.iter().any(|v| v.is_nan()) {
                    return false;
                }
                let lo = c.map(|v| v.floor());
                'corners: for corner in 0..8 {
                    let (mut at, mut w) = (0, A::one());
                    for d in [2, 1, 0] {
                        let high = (corner >> (2 - d)) & 1 == 1;
                        let i = if high { lo[d] + A::one() } else { lo[d] };
                        let f = if high {
                            c[d] - lo[d]
                        } else {
                            lo[d] + A::one() - c[d]
                        };
                        w = if d == 2 { f } else { w * f };
                        let Some(i) = inside(i, sizes[d]) else {
                            continue 'corners;
                        };
                        at += i * sizes[d + 1..].iter().product::<usize>();
                    }
                    tap(at, w);
                }
            }
            (Interp::Cubic, _) => {
                // Unpadded coordinates; each tap padded on its own (PyTorch's
                // `get_value_bounded`).
                let (y, x) = (coord(0), coord(1));
                let (y0, x0) = (y.floor(), x.floor());
                let (ty, tx) = (y - y0, x - x0);
                if ty.is_nan() || tx.is_nan() {
                    return true;
                }
                let (wy, wx) = (cubic_weights(ty), cubic_weights(tx));
                for (i, wyi) in wy.into_iter().enumerate() {
                    let yi = self.pad(y0 + cast((i as f64) - 1.0), 0).0;
                    for (j, wxj) in wx.into_iter().enumerate() {
                        let xi = self.pad(x0 + cast((j as f64) - 1.0), 1).0;
                        if let (Some(r), Some(c)) = (inside(yi, sizes[0]), inside(xi, sizes[1])) {
                            tap(r * sizes[1] + c, wyi * wxj);
                        }
                    }
                }
            }
        }
        false
    }
}

impl Reader<'_> {
    /// For the grid's gradient (linear and cubic): calls `tap(pixel, slopes)` for each pixel
    /// the point reads, `slopes[d]` its weight's slope along spatial axis `d`, and returns
    /// per spatial axis what multiplies them (the padding's slope times the
    /// unnormalization's); `None` at a NaN point.
    pub fn slopes<A: SampleElement>(
        &self,
        point: &[A],
        mut tap: impl FnMut(usize, [A; 3]),
    ) -> Option<[A; 3]> {
        let (sizes, o) = (self.sizes, self.opts);
        let dims = sizes.len();
        if point.iter().any(|c| c.is_nan()) {
            return None;
        }
        let raw: [A; 3] = std::array::from_fn(|d| {
            if d < dims {
                self.coord(point[dims - 1 - d], d)
            } else {
                A::zero()
            }
        });
        let mut scale: [A; 3] = std::array::from_fn(|d| {
            if d < dims {
                unnormalize_slope(sizes[d], o.align_corners)
            } else {
                A::zero()
            }
        });
        if o.interp == Interp::Cubic {
            // Each tap padded on its own: the padding adds no slope.
            let (y0, x0) = (raw[0].floor(), raw[1].floor());
            let (ty, tx) = (raw[0] - y0, raw[1] - x0);
            let (wy, wx, dy, dx) = (
                cubic_weights(ty),
                cubic_weights(tx),
                cubic_slopes(ty),
                cubic_slopes(tx),
            );
            for i in 0..4 {
                let yi = self.pad(y0 + cast((i as f64) - 1.0), 0).0;
                for j in 0..4 {
                    let xi = self.pad(x0 + cast((j as f64) - 1.0), 1).0;
                    if let (Some(r), Some(c)) = (inside(yi, sizes[0]), inside(xi, sizes[1])) {
                        tap(r * sizes[1] + c, [dy[i] * wx[j], wy[i] * dx[j], A::zero()]);
                    }
                }
            }
            return Some(scale);
        }
        let mut c = [A::zero(); 3];
        for d in 0..dims {
            let (v, slope) = self.pad(raw[d], d);
            c[d] = v;
            scale[d] = slope * scale[d];
        }
        let lo = c.map(|v| v.floor());
        'corners: for corner in 0..1usize << dims {
            let (mut at, mut f, mut sign) = (0, [A::one(); 3], [A::one(); 3]);
            for d in 0..dims {
                let high = (corner >> (dims - 1 - d)) & 1 == 1;
                let i = if high { lo[d] + A::one() } else { lo[d] };
                let Some(i) = inside(i, sizes[d]) else {
                    continue 'corners;
                };
                at = at * sizes[d] + i;
                (f[d], sign[d]) = if high {
                    (c[d] - lo[d], A::one())
                } else {
                    (lo[d] + A::one() - c[d], -A::one())
                };
            }
            let slopes = std::array::from_fn(|d| {
                if d >= dims {
                    return A::zero();
                }
                (0..dims).filter(|&e| e != d).fold(sign[d], |acc, e| acc * f[e])
            });
            tap(at, slopes);
        }
        Some(scale)
    }
}
