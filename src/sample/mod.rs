//! Interpolating gathers (decisions 70-73): ONNX `GridSample` and PyTorch's
//! `F.grid_sample`, with their plan and both gradients.
//!
//! A bilinear sample is a gather of 4 neighbours pooled with weights (8 in 3-D, 16 for
//! bicubic): a [`SamplePlan`] is, per batch item, a [`GatherReducePlan`](crate::GatherReducePlan)
//! of the corners each output point reads, and their weights. Its forward is the weighted
//! sum, its input gradient that plan's adjoint (each input element's contributions in
//! output order: no atomics, the same bits on any thread count).
//!
//! ```
//! use ndarray::{Array4, array};
//! use ndarray_gather::sample::{GridSample, Interp, Padding, SampleExt, SamplePlan};
//!
//! // x [N, C, H, W] = [1, 1, 2, 2]; one output point half way between all four pixels.
//! let x = array![[[[1.0_f32, 2.0], [3.0, 4.0]]]];
//! let grid = Array4::<f32>::zeros((1, 1, 1, 2));
//! let opts = GridSample::new(Interp::Linear).padding(Padding::Border).align_corners(true);
//! assert_eq!(x.grid_sample(&grid, opts)?, array![[[[2.5_f32]]]]);
//!
//! // The same through a plan, and the input's gradient of `sum(y)`.
//! let plan = SamplePlan::grid(x.dim(), &grid, opts)?;
//! assert_eq!(plan.apply(&x)?, array![[[[2.5_f32]]]]);
//! let mut g_x = Array4::zeros(x.dim());
//! plan.backward_into(&Array4::ones((1, 1, 1, 1)), &mut g_x)?;
//! assert_eq!(g_x, array![[[[0.25_f32, 0.25], [0.25, 0.25]]]]);
//! # Ok::<(), ndarray_gather::GatherError>(())
//! ```

use std::fmt::Debug;

use ndarray::{Array, ArrayRef, Dimension, Ix2};
use num_traits::Float;

use crate::error::GatherError;
use crate::index::GatherIndex;
use crate::indices::IndexArray;
use crate::pool::PoolElement;

mod grad;
mod plan;
mod roi;
mod shape;
mod taps;
mod walk;

pub use plan::SamplePlan;
pub use roi::RoiAlign;

/// How a point between pixels reads them (ONNX `mode`, PyTorch's `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interp {
    /// Bilinear (trilinear in 3-D): ONNX `linear` (opset 20) / `bilinear` (16).
    Linear,
    /// The nearest pixel, halves rounded to even (`nearbyint`, as ONNX Runtime and PyTorch).
    Nearest,
    /// Bicubic convolution with A = -0.75 (2-D only): ONNX `cubic` / `bicubic`.
    Cubic,
}

/// What a point outside the input reads (ONNX `padding_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Padding {
    /// Zeros outside the input.
    Zeros,
    /// The border pixel (coordinates clipped into the input).
    Border,
    /// Coordinates reflected at the borders until they fall inside.
    Reflection,
}

/// The options of [`grid_sample`](SampleExt::grid_sample) and [`SamplePlan::grid`]:
/// PyTorch's `mode`, `padding_mode` and `align_corners` (default `Zeros`, `false`).
///
/// ```
/// use ndarray_gather::sample::{GridSample, Interp, Padding};
///
/// let opts = GridSample::new(Interp::Cubic).padding(Padding::Reflection).align_corners(true);
/// assert_eq!((opts.interp(), opts.padding_mode(), opts.corners_aligned()), (Interp::Cubic, Padding::Reflection, true));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[doc(alias = "grid_sample")]
pub struct GridSample {
    interp: Interp,
    padding: Padding,
    align_corners: bool,
}

impl GridSample {
    /// Sampling by `interp`, zeros outside, corners not aligned (PyTorch's defaults).
    pub fn new(interp: Interp) -> Self {
        GridSample {
            interp,
            padding: Padding::Zeros,
            align_corners: false,
        }
    }

    /// What a point outside reads.
    pub fn padding(self, padding: Padding) -> Self {
        GridSample { padding, ..self }
    }

    /// `true`: -1 and 1 are the centres of the corner pixels, `((c + 1) / 2) * (size - 1)`;
    /// `false`: their outer edges, `((c + 1) * size - 1) / 2`.
    pub fn align_corners(self, align_corners: bool) -> Self {
        GridSample {
            align_corners,
            ..self
        }
    }

    /// The interpolation.
    pub fn interp(&self) -> Interp {
        self.interp
    }

    /// The padding.
    pub fn padding_mode(&self) -> Padding {
        self.padding
    }

    /// Whether corners are aligned.
    pub fn corners_aligned(&self) -> bool {
        self.align_corners
    }
}

mod private {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The element types an interpolating gather takes: `f32` and `f64` (sealed).
pub trait SampleElement: PoolElement + Float + Debug + private::Sealed {
    /// The nearest integer, halves to even (C's `nearbyint`).
    #[doc(hidden)]
    fn nearbyint(self) -> Self;
}
impl SampleElement for f32 {
    fn nearbyint(self) -> Self {
        self.round_ties_even()
    }
}
impl SampleElement for f64 {
    fn nearbyint(self) -> Self {
        self.round_ties_even()
    }
}

/// The interpolating gathers on ndarray arrays: `x [N, C, H, W]` with a grid `[N, Ho, Wo, 2]`,
/// or `x [N, C, D, H, W]` with a grid `[N, Do, Ho, Wo, 3]`; any layout (a channels-last
/// view too: the channel stride is just a stride).
///
/// Results (decision 71): PyTorch 2.15's CPU bits for linear and nearest, 2-D and 3-D. Each
/// output element folds its corners' `weight · value` in PyTorch's corner order (the last
/// axis fastest) with PyTorch's weights and arithmetic: in 2-D its vectorized kernel's, as
/// its x86-64 wheel compiles it (the unnormalization `(c + 1)·(size / 2) - 0.5` and the
/// corner sum `fma(x₃, w₃, fma(x₂, w₂, fma(x₁, w₁, x₀·w₀)))` fused, the weights `(1 -
/// fx)(1 - fy)` and so on from `fx = x - floor(x)`, a reflection by `trunc`); in 3-D its
/// scalar kernel's (`0 + w₀·x₀ + …`, weights `(x₁ - x)(y₁ - y)(z₁ - z)`). A corner outside
/// adds nothing here, a `0 · w` there: only a zero's sign can differ. Every instruction-set
/// tier gives the same bits (decision 60; a fused multiply-add on each). Bicubic sums its
/// 16 taps in one pass with weights `wy · wx`, where PyTorch sums rows first: to rounding.
///
/// A NaN coordinate (any padding) gives NaN in 2-D linear and cubic, as PyTorch's 2-D
/// kernel does with zeros padding, and 0 for nearest and in 3-D (PyTorch 2.15's CPU kernel
/// crashes on a NaN with border or reflection padding, so there is no answer to copy).
pub trait SampleExt<A: SampleElement, D: Dimension>: crate::ext::private::Sealed<A, D> {
    /// `F.grid_sample(x, grid, mode, padding_mode, align_corners)`, ONNX `GridSample`: for
    /// each grid point, `x` read at `(x, y[, z])` in `[-1, 1]` (x indexes the last axis).
    /// The output is `[N, C, Ho, Wo]` (`[N, C, Do, Ho, Wo]`), in standard layout.
    ///
    /// It is [`SamplePlan::grid`] then [`apply`](SamplePlan::apply): a plan pays for itself
    /// from the second input on the same grid.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::sample::{GridSample, Interp, SampleExt};
    ///
    /// let x = array![[[[0.0_f64, 10.0, 20.0]]]]; // [1, 1, 1, 3]
    /// // x = -1, 0 and 1 with corners aligned: the first, middle and last pixel.
    /// let grid = array![[[[-1.0, 0.0], [0.0, 0.0], [1.0, 0.0]]]];
    /// let opts = GridSample::new(Interp::Nearest).align_corners(true);
    /// assert_eq!(x.grid_sample(&grid, opts)?, array![[[[0.0, 10.0, 20.0]]]]);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`SampleShape`](GatherError::SampleShape) for an `x` not of rank 4 or 5 or with an
    /// empty spatial axis, a grid whose batch, rank or last axis disagrees with `x`, or
    /// `Cubic` in 3-D; [`SizeOverflow`](GatherError::SizeOverflow) for an input of more
    /// than `u32::MAX` pixels per channel.
    #[doc(alias = "GridSample", alias = "grid_sampler")]
    fn grid_sample(&self, grid: &ArrayRef<A, D>, opts: GridSample) -> Result<Array<A, D>, GatherError> {
        const OP: &str = "grid_sample";
        let x = self.array_ref();
        SamplePlan::build(OP, x.shape(), grid, opts)?.run_fresh(OP, x)
    }

    /// The gradient of `Σ grid_sample(x, grid) · g_y` with respect to the grid, as
    /// PyTorch's autograd gives it (zero for `Nearest`; a clipped coordinate has no slope;
    /// NaN at a NaN point): `[N, Ho, Wo, 2]` (`[.., 3]`), in standard layout.
    ///
    /// ```
    /// use ndarray::{Array4, array};
    /// use ndarray_gather::sample::{GridSample, Interp, SampleExt};
    ///
    /// // A ramp along x: 0, 1, 2; its slope in pixels is 1, in grid units (W - 1) / 2 = 1.
    /// let x = array![[[[0.0_f64, 1.0, 2.0]]]];
    /// let grid = array![[[[0.25, 0.0]]]];
    /// let g = x.grid_sample_backward_grid(&grid, &Array4::ones((1, 1, 1, 1)), GridSample::new(Interp::Linear).align_corners(true))?;
    /// assert_eq!(g, array![[[[1.0, 0.0]]]]);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`grid_sample`](Self::grid_sample)'s, and `SampleShape` for a `g_y` not shaped
    /// as its output.
    fn grid_sample_backward_grid(
        &self,
        grid: &ArrayRef<A, D>,
        g_y: &ArrayRef<A, D>,
        opts: GridSample,
    ) -> Result<Array<A, D>, GatherError> {
        grad::grid_grad("grid_sample_backward_grid", self.array_ref(), grid, g_y, opts)
    }

    /// torchvision's `roi_align(x, boxes, output_size, spatial_scale, sampling_ratio,
    /// aligned)` and ONNX `RoiAlign` (decision 73): for `x [N, C, H, W]` and `K` boxes
    /// `[K, 4]` of `(x1, y1, x2, y2)` with their batch items `batch_idx` (`K` ids, ONNX's
    /// `batch_indices`; torchvision's `[K, 5]` rois are `batch_idx = rois[:, 0]` and
    /// `boxes = rois[:, 1..]`), each box's `output_size` bins pooled from their sampling
    /// points' bilinear values: `[K, C, ph, pw]`, standard layout.
    ///
    /// Each bin is torchvision's arithmetic in its order (the box scaled in `f64`, each
    /// point's 4 corners summed, the points summed, divided by their count), so the
    /// results are torchvision's bits; ONNX Runtime's within its float rounding (it scales
    /// in `f32`). A NaN box reads nothing.
    ///
    /// ```
    /// use ndarray::{Array4, array};
    /// use ndarray_gather::sample::{RoiAlign, SampleExt};
    ///
    /// let x = Array4::from_shape_fn((2, 1, 3, 3), |(n, _, i, j)| (100 * n + 3 * i + j) as f64);
    /// // A box on item 1: two bins of one point each.
    /// let opts = RoiAlign::new(1.0).sampling_ratio(1).aligned(true);
    /// let r = x.roi_align(&array![[0.5, 0.5, 2.5, 1.5]], &[1_i64], (1, 2), opts)?;
    /// assert_eq!(r, array![[[[102.0, 103.0]]]]);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`SampleShape`](GatherError::SampleShape) for an `x` not `[N, C, H, W]` with a
    /// non-empty image, boxes not `[K, 4]` or `batch_idx` not `K` long;
    /// [`IndexOutOfBounds`](GatherError::IndexOutOfBounds) naming a batch index outside
    /// `0..N`; [`SizeOverflow`](GatherError::SizeOverflow) for sampling points that do
    /// not fit in memory (a huge box with adaptive sampling).
    #[doc(alias = "RoiAlign")]
    fn roi_align<I: GatherIndex, E: Dimension>(
        &self,
        boxes: &ArrayRef<A, Ix2>,
        batch_idx: impl IndexArray<I, E>,
        output_size: (usize, usize),
        opts: RoiAlign,
    ) -> Result<Array<A, D>, GatherError> {
        opts.forward("roi_align", self.array_ref(), boxes, batch_idx, output_size)
    }
}

impl<A: SampleElement, D: Dimension> SampleExt<A, D> for ArrayRef<A, D> {}
impl<A: SampleElement, S: ndarray::Data<Elem = A>, D: Dimension> SampleExt<A, D>
    for ndarray::ArrayBase<S, D>
{
}
