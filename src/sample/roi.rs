//! RoIAlign (decision 73): each box's bins as groups of sampling points, each point its 4
//! bilinear corners and weights (torchvision's and ONNX Runtime's arithmetic), folded on
//! lanes of a block of channels staged as rows (`kernel/reduce/planes.rs: roi_staged`);
//! its backward adds into the input's planes, box by box in order.

use std::sync::Mutex;

use ndarray::{Array, ArrayRef, ArrayViewMut3, Axis, Dimension, Ix2, IxDyn, s};

use super::SampleElement;
use super::shape::{each_block_mut, planes_or_copy, shape_err};
use crate::call::zeros;
use crate::error::{GatherError, internal};
use crate::index::GatherIndex;
use crate::indices::IndexArray;
use crate::kernel::BadIndex;
use crate::kernel::isa::Isa;
use crate::kernel::reduce::{ROI_LANES, RoiFold, RoiPoints, roi_backward, roi_staged};
use crate::kernel::schedule::run_jobs;
use crate::plan::policy::SAMPLE_STAGE_BYTES;

/// The options of [`roi_align`](super::SampleExt::roi_align): torchvision's
/// `roi_align(input, boxes, output_size, spatial_scale, sampling_ratio, aligned)` and ONNX
/// `RoiAlign` (decision 73).
///
/// Defaults are torchvision's: adaptive sampling (`ceil(roi / bin)` points a bin and axis),
/// `aligned(false)` (boxes at least one pixel), the average. ONNX `RoiAlign`'s
/// `coordinate_transformation_mode="half_pixel"` (opset 16's default) is `aligned(true)`,
/// `"output_half_pixel"` `aligned(false)`; its `mode="max"` is [`max`](Self::max).
///
/// ```
/// use ndarray::{Array4, array};
/// use ndarray_gather::sample::{RoiAlign, SampleExt};
///
/// let x = Array4::from_shape_fn((1, 1, 4, 4), |(_, _, i, j)| (4 * i + j) as f32);
/// // One box over the whole input (half-pixel coordinates), one bin of 2 x 2 points.
/// let opts = RoiAlign::new(1.0).sampling_ratio(2).aligned(true);
/// let r = x.roi_align(&array![[0.0_f32, 0.0, 4.0, 4.0]], &[0_i64], (1, 1), opts)?;
/// assert_eq!(r, array![[[[7.5_f32]]]]);
/// # Ok::<(), ndarray_gather::GatherError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[doc(alias = "roi_align")]
pub struct RoiAlign {
    scale: f64,
    ratio: i64,
    aligned: bool,
    max: bool,
}

/// One box: its batch item and its sampling points.
struct BoxPoints<A> {
    item: usize,
    points: RoiPoints<A>,
}

/// A point's 4 corners and weights (torchvision's `pre_calc_for_bilinear_interpolate`).
fn corners<A: SampleElement>(y: A, x: A, h: usize, w: usize) -> ([u32; 4], [A; 4]) {
    let (zero, one, minus) = (A::zero(), A::one(), -A::one());
    let (hf, wf) = (
        A::from(h).unwrap_or_else(A::nan),
        A::from(w).unwrap_or_else(A::nan),
    );
    // (NaN compares false everywhere: a NaN point is outside too.)
    if !(y >= minus && y <= hf && x >= minus && x <= wf) {
        return ([0; 4], [zero; 4]);
    }
    let (mut y, mut x) = (y.max(zero), x.max(zero));
    let axis = |v: &mut A, len: usize| -> (usize, usize) {
        let low = v.to_usize().unwrap_or(0);
        if low >= len - 1 {
            *v = A::from(len - 1).unwrap_or(zero);
            (len - 1, len - 1)
        } else {
            (low, low + 1)
        }
    };
    let ((y0, y1), (x0, x1)) = (axis(&mut y, h), axis(&mut x, w));
    let ly = y - A::from(y0).unwrap_or(zero);
    let lx = x - A::from(x0).unwrap_or(zero);
    let (hy, hx) = (one - ly, one - lx);
    let at = |r: usize, c: usize| (r * w + c) as u32;
    (
        [at(y0, x0), at(y0, x1), at(y1, x0), at(y1, x1)],
        [hy * hx, hy * lx, ly * hx, ly * lx],
    )
}

impl RoiAlign {
    /// Boxes in input coordinates times `spatial_scale` (a feature map's stride: `1 / 16`).
    pub fn new(spatial_scale: f64) -> Self {
        RoiAlign {
            scale: spatial_scale,
            ratio: 0,
            aligned: false,
            max: false,
        }
    }

    /// Sampling points per bin along each axis; `<= 0`: adaptive, `ceil(roi / bin)`.
    pub fn sampling_ratio(self, ratio: i64) -> Self {
        RoiAlign { ratio, ..self }
    }

    /// `true`: pixel centres at half-integers (boxes shifted by half a pixel, any size);
    /// `false`: boxes at least one pixel wide and high.
    pub fn aligned(self, aligned: bool) -> Self {
        RoiAlign { aligned, ..self }
    }

    /// ONNX `RoiAlign`'s `mode="max"` as ONNX Runtime computes it: the largest
    /// `weight · value` of any corner of any sampling point in the bin (a point outside
    /// the input gives 0), not the largest interpolated value. No backward.
    pub fn max(self) -> Self {
        RoiAlign { max: true, ..self }
    }

    /// One box's points, or `None` if they do not fit in memory.
    fn points<A: SampleElement>(
        &self,
        item: usize,
        b: [A; 4],
        (ph, pw): (usize, usize),
        (h, w): (usize, usize),
    ) -> Option<BoxPoints<A>> {
        let offset = if self.aligned { 0.5 } else { 0.0 };
        // torchvision scales in double, then rounds to the element type.
        let at = |v: A| A::from(v.to_f64().unwrap_or(f64::NAN) * self.scale - offset).unwrap_or_else(A::nan);
        let (x1, y1, x2, y2) = (at(b[0]), at(b[1]), at(b[2]), at(b[3]));
        let (mut rw, mut rh) = (x2 - x1, y2 - y1);
        if !self.aligned {
            rw = rw.max(A::one());
            rh = rh.max(A::one());
        }
        let (phf, pwf) = (A::from(ph)?, A::from(pw)?);
        let (bin_h, bin_w) = (rh / phf, rw / pwf);
        // Points per bin along an axis; `None`: more than memory holds. (A NaN box: none.)
        let grid = |roi: A, bins: A| -> Option<usize> {
            let g = (roi / bins).ceil();
            match self.ratio {
                r if r > 0 => usize::try_from(r).ok(),
                _ if g.is_nan() || g <= A::zero() => Some(0),
                _ => g.to_usize(),
            }
        };
        let (gh, gw) = (grid(rh, phf)?, grid(rw, pwf)?);
        let per_bin = gh.checked_mul(gw)?;
        let n = per_bin.checked_mul(ph)?.checked_mul(pw)?;
        let (mut rows, mut weights) = (Vec::new(), Vec::new());
        rows.try_reserve_exact(n).ok()?;
        weights.try_reserve_exact(n).ok()?;
        let (ghf, gwf) = (A::from(gh)?, A::from(gw)?);
        let half = A::from(0.5)?;
        for i in 0..ph {
            for j in 0..pw {
                for iy in 0..gh {
                    let y = y1 + A::from(i)? * bin_h + (A::from(iy)? + half) * bin_h / ghf;
                    for ix in 0..gw {
                        let x = x1 + A::from(j)? * bin_w + (A::from(ix)? + half) * bin_w / gwf;
                        let (r, wt) = corners(y, x, h, w);
                        rows.push(r);
                        weights.push(wt);
                    }
                }
            }
        }
        let points = RoiPoints::new(rows, weights, per_bin, A::from(per_bin.max(1))?, h * w)?;
        Some(BoxPoints { item, points })
    }

    /// Checks the boxes and their batch indices against an input of shape `x` and turns
    /// each box into its bins' sampling points.
    fn boxes<A: SampleElement, I: GatherIndex, E: Dimension>(
        &self,
        op: &'static str,
        x: &[usize],
        boxes: &ArrayRef<A, Ix2>,
        batch_idx: impl IndexArray<I, E>,
        out: (usize, usize),
    ) -> Result<Vec<BoxPoints<A>>, GatherError> {
        if x.len() != 4 || x[2] == 0 || x[3] == 0 {
            return Err(shape_err(
                op,
                "x",
                x,
                "[N, C, H, W] with non-empty H and W".into(),
            ));
        }
        let k = boxes.nrows();
        if boxes.ncols() != 4 {
            return Err(shape_err(
                op,
                "boxes",
                boxes.shape(),
                format!("[{k}, 4] (x1, y1, x2, y2)"),
            ));
        }
        if x[2].checked_mul(x[3]).is_none_or(|p| p > u32::MAX as usize) {
            return Err(GatherError::SizeOverflow {
                op,
                shape: x.to_vec(),
            });
        }
        let batch: Vec<usize> = batch_idx.with_ref(op, |ids| {
            if ids.len() != k {
                return Err(shape_err(
                    op,
                    "batch_idx",
                    ids.shape(),
                    format!("[{k}], one per box"),
                ));
            }
            ids.iter()
                .enumerate()
                .map(|(b, &i)| {
                    // (A negative index counts from the end, as everywhere in the crate.)
                    i.resolve_raise(x[0])
                        .ok_or_else(|| GatherError::IndexOutOfBounds {
                            op,
                            index: i.to_i128(),
                            position: vec![b],
                            axis: 0,
                            axis_len: x[0],
                        })
                })
                .collect()
        })?;
        boxes
            .outer_iter()
            .zip(batch)
            .map(|(b, item)| {
                self.points(item, [b[0], b[1], b[2], b[3]], out, (x[2], x[3]))
                    .ok_or_else(|| GatherError::SizeOverflow {
                        op,
                        shape: vec![out.0, out.1, x[2], x[3]],
                    })
            })
            .collect()
    }

    /// The forward of [`roi_align`](super::SampleExt::roi_align).
    pub(super) fn forward<A: SampleElement, I: GatherIndex, E: Dimension, D: Dimension>(
        &self,
        op: &'static str,
        x: &ArrayRef<A, D>,
        boxes: &ArrayRef<A, Ix2>,
        batch_idx: impl IndexArray<I, E>,
        out: (usize, usize),
    ) -> Result<Array<A, D>, GatherError> {
        let boxes = self.boxes(op, x.shape(), boxes, batch_idx, out)?;
        let (n, c) = (x.shape()[0], x.shape()[1]);
        let bins = out.0 * out.1;
        let mut y = zeros(op, IxDyn(&[boxes.len(), c, out.0, out.1]))?;
        if !y.is_empty() {
            let x = x.view().into_dyn();
            let planes = (0..n)
                .map(|i| planes_or_copy(op, x.index_axis(Axis(0), i)))
                .collect::<Result<Vec<_>, _>>()?;
            let fold = if self.max { RoiFold::Max } else { RoiFold::Mean };
            // Each item's boxes (their places in the output).
            let mut by_item: Vec<Vec<(usize, &RoiPoints<A>)>> = vec![Vec::new(); n];
            for (k, b) in boxes.iter().enumerate() {
                by_item[b.item].push((k, &b.points));
            }
            // A block of 64 bytes of channels per job, every item in turn: its planes
            // staged as rows once (in the caches), then every box of the item reads them.
            let cb = (SAMPLE_STAGE_BYTES / size_of::<A>()).clamp(1, ROI_LANES);
            let mut by_bin = y
                .view_mut()
                .into_shape_with_order((boxes.len(), c, bins))
                .map_err(|_| internal(op, "a fresh output"))?;
            let jobs: Vec<Mutex<ArrayViewMut3<'_, A>>> =
                by_bin.axis_chunks_iter_mut(Axis(1), cb).map(Mutex::new).collect();
            let (isa, buffers) = (Isa::detect(), Mutex::new(Vec::<Vec<A>>::new()));
            let outcome = run_jobs(jobs.len(), false, |j| {
                let mut out = jobs[j].lock().map_err(|_| BadIndex)?;
                let c0 = j * cb;
                let mut rows = buffers.lock().map_err(|_| BadIndex)?.pop().unwrap_or_default();
                for (planes, boxes) in planes.iter().zip(&by_item) {
                    let block = planes.slice(s![c0..c0 + out.shape()[1], ..]);
                    rows.resize(block.len(), A::zero());
                    roi_staged(isa, fold, block, &mut rows, boxes, out.view_mut())?;
                }
                buffers.lock().map_err(|_| BadIndex)?.push(rows);
                Ok(())
            });
            if outcome.failed() {
                return Err(internal(op, "a box's job failed"));
            }
        }
        y.into_dimensionality()
            .map_err(|_| internal(op, "the output's rank"))
    }

    /// Adds the input's gradient of `Σ roi_align(x, boxes, batch_idx) · g_out` into `g_x`
    /// (`[N, C, H, W]`; the output size from `g_out`'s `[K, C, ph, pw]`), as torchvision's
    /// backward: each box in order, each bin, each sampling point's 4 corners
    /// `g · w / count`; deterministic (a channel plane per job).
    ///
    /// ```
    /// use ndarray::{Array4, array};
    /// use ndarray_gather::sample::RoiAlign;
    ///
    /// let opts = RoiAlign::new(1.0).sampling_ratio(1).aligned(true);
    /// let mut g_x = Array4::<f64>::zeros((1, 1, 2, 2));
    /// // One bin whose one point lies half way between the 4 pixels.
    /// opts.backward_into(&array![[0.0, 0.0, 2.0, 2.0]], &[0_i64], &Array4::ones((1, 1, 1, 1)), &mut g_x)?;
    /// assert_eq!(g_x, array![[[[0.25, 0.25], [0.25, 0.25]]]]);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As `roi_align`'s; [`SampleShape`](GatherError::SampleShape) for a `g_out` not
    /// `[K, C, ph, pw]` with `g_x`'s channels; [`Pooling`](GatherError::Pooling) for `max`
    /// (no backward). On `Err`, `g_x` is unchanged.
    #[doc(alias = "roi_align_backward")]
    pub fn backward_into<A: SampleElement, I: GatherIndex, E: Dimension, D: Dimension>(
        &self,
        boxes: &ArrayRef<A, Ix2>,
        batch_idx: impl IndexArray<I, E>,
        g_out: &ArrayRef<A, D>,
        g_x: &mut ArrayRef<A, D>,
    ) -> Result<(), GatherError> {
        const OP: &str = "RoiAlign::backward_into";
        if self.max {
            return Err(GatherError::Pooling {
                op: OP,
                pooling: crate::Pooling::Max,
                detail: "has no backward (ONNX defines none)".into(),
            });
        }
        let (g, x) = (g_out.shape().to_vec(), g_x.shape().to_vec());
        if g.len() != 4 {
            return Err(shape_err(OP, "g_out", &g, "[K, C, ph, pw]".into()));
        }
        let boxes = self.boxes(OP, &x, boxes, batch_idx, (g[2], g[3]))?;
        if g[0] != boxes.len() || g[1] != x[1] {
            let want = format!("[{}, {}, ph, pw] (g_x has shape {x:?})", boxes.len(), x[1]);
            return Err(shape_err(OP, "g_out", &g, want));
        }
        let bins = g[2] * g[3];
        if g_out.is_empty() || g_x.is_empty() {
            return Ok(());
        }
        let g_out = g_out.view().into_dyn();
        let g_out = g_out.as_standard_layout();
        let g_out = g_out
            .view()
            .into_shape_with_order((g[0], g[1], bins))
            .map_err(|_| internal(OP, "a standard g_out"))?;
        let mut g_x = g_x.view_mut().into_dyn();
        for (item, gxn) in g_x.outer_iter_mut().enumerate() {
            let mine: Vec<usize> = (0..boxes.len()).filter(|&k| boxes[k].item == item).collect();
            each_block_mut(OP, gxn, 1, |ch, mut plane| {
                for &k in &mine {
                    roi_backward(
                        &boxes[k].points,
                        g_out.slice(ndarray::s![k, ch, ..]),
                        plane.row_mut(0),
                    );
                }
                Ok(())
            })?;
        }
        Ok(())
    }
}
