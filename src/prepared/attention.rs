//! A [`GatherReducePlan`]'s graph attention (decisions 55-56): the softmax of each
//! segment's scores per head, its backward, and the gradient of per-head weights, read
//! through the plan's CSR in position order (no per-edge message array).

use ndarray::{Array, Array2, ArrayRef, Dimension};
use num_traits::Float;

use super::GatherReducePlan;
use crate::call::attention;
use crate::call::zeros;
use crate::error::{GatherError, internal};
use crate::kernel::reduce::{Entries, RowBlocks, dot_rows};
use crate::plan::reduce::jobs;

impl GatherReducePlan {
    /// The softmax of each segment's scores, per head (decision 55; a GAT's attention
    /// coefficients): `scores` of shape `[P]` or `[P, H]` (one row per position, in
    /// position order), and the coefficients in an array of its shape. For each segment
    /// and head: the max of its kept positions' scores subtracted, `exp` (the element
    /// type's, `f32::exp`), the sum in position order, each divided by it. A segment whose
    /// scores are all `-inf` gives zeros; a NaN makes its segment NaN; positions that no
    /// segment keeps (skipped) get zero. PyG's `utils.softmax(scores, dst)` (without its
    /// `1e-16`), DGL's `edge_softmax`; the same bits on any thread count.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// // Edges src -> dst of 3 nodes; node 1 has two incoming edges.
    /// let (src, dst) = ([0, 2, 1], [1, 1, 0]);
    /// let plan = GatherReducePlan::new([3, 4], &src, Segments::ids(&dst, 3), 0)?;
    /// let alpha = plan.softmax(&array![0.0_f32, 0.0, 7.0])?;
    /// assert_eq!(alpha, array![0.5, 0.5, 1.0]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`Scores`](GatherError::Scores) for scores not of shape `[P]` or `[P, H]`.
    #[doc(alias = "edge_softmax", alias = "utils.softmax")]
    pub fn softmax<A: Float + Send + Sync, D: Dimension>(
        &self,
        scores: &ArrayRef<A, D>,
    ) -> Result<Array<A, D>, GatherError> {
        let op = "GatherReducePlan::softmax";
        attention::softmax(op, &self.csr, self.segments(), scores, self.positions)
    }

    /// The gradient of the scores from the gradient `g_alpha` of [`softmax`](Self::softmax)'s
    /// coefficients `alpha` (decision 56): `alpha · (g − Σ g · alpha)` per segment and head,
    /// the sum over the segment's positions in position order; skipped positions zero. The
    /// same bits on any thread count.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherReducePlan::new([2], &[0, 1], Segments::uniform(2), 0)?;
    /// let alpha = plan.softmax(&array![0.0_f64, 0.0])?; // [0.5, 0.5]
    /// let g = plan.softmax_backward(&alpha, &array![1.0, 3.0])?;
    /// assert_eq!(g, array![-0.5, 0.5]); // 0.5 · (1 - 2), 0.5 · (3 - 2)
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`Scores`](GatherError::Scores) for an `alpha` not of shape `[P]` or `[P, H]`, or a
    /// `g_alpha` of another shape than `alpha`.
    pub fn softmax_backward<A: Float + Send + Sync, D: Dimension>(
        &self,
        alpha: &ArrayRef<A, D>,
        g_alpha: &ArrayRef<A, D>,
    ) -> Result<Array<A, D>, GatherError> {
        let op = "GatherReducePlan::softmax_backward";
        attention::softmax_backward(op, &self.csr, self.segments(), alpha, g_alpha, self.positions)
    }

    /// The gradient of per-head weights (decision 56; an SDDMM): for each kept position
    /// `p` of segment `s` reading row `r`, and each head `h`, `Σ x[r, h, ·] · grad_out[s,
    /// h, ·]`, the products summed in the row's order (with dimensions before the axis,
    /// over them first: outermost in order). The heads are the first dimension after the
    /// axis (`x` of `[n, H, d]`; an `x` of `[n, d]` is `d` heads of one element: insert an
    /// axis of length 1, `x.view().insert_axis(Axis(1))`, for `[P]` weights' gradient);
    /// skipped positions get zero. The result is `[P, H]`; `x` has the plan's input shape
    /// and `grad_out` the forward's output shape, their rows the same (arrays not in
    /// standard layout are read through a copy in it). The same bits on any thread count.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// // 2 nodes of 2 heads x 1 element; segment 0 reads rows 1 and 0.
    /// let plan = GatherReducePlan::new([2, 2, 1], &[1, 0], Segments::uniform(2), 0)?;
    /// let x = array![[[1.0], [2.0]], [[3.0], [4.0]]];
    /// let grad_h = array![[[10.0], [100.0]]];
    /// assert_eq!(plan.backward_weights(&x, &grad_h)?, array![[30.0, 400.0], [10.0, 200.0]]);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`GradShape`](GatherError::GradShape) for a `grad_out` not shaped as the forward's
    /// output, [`InputShape`](GatherError::InputShape) for an `x` of another shape than the
    /// plan's input with `grad_out`'s rows.
    #[doc(alias = "sddmm", alias = "u_dot_v")]
    pub fn backward_weights<A: Float + Send + Sync, D: Dimension>(
        &self,
        x: &ArrayRef<A, D>,
        grad_out: &ArrayRef<A, D>,
    ) -> Result<Array2<A>, GatherError> {
        const OP: &str = "GatherReducePlan::backward_weights";
        self.check_grads(OP, grad_out, Some(x))?;
        let axis = self.axis;
        let shape = x.shape();
        let heads = shape.get(axis + 1).copied().unwrap_or(1);
        let mut out = zeros(OP, ndarray::Ix2(self.positions, heads))?;
        let (xs, gs) = (x.as_standard_layout(), grad_out.as_standard_layout());
        let (Some(xv), Some(gv), Some(o)) = (xs.as_slice(), gs.as_slice(), out.as_slice_mut()) else {
            return Err(internal(OP, "arrays in standard layout that are not slices"));
        };
        let (outer, len) = (shape[..axis].iter().product(), shape[axis + 1..].iter().product());
        let rows = |v, rows| RowBlocks { v, outer, rows, len };
        let bytes = self.csr.len().saturating_mul(len * outer * size_of::<A>());
        let jobs = jobs(bytes, self.segments());
        let (x, g) = (rows(xv, shape[axis]), rows(gv, self.segments()));
        dot_rows(&self.csr, x, g, o, heads, jobs)
            .map_err(|_| internal(OP, "a walk failed after the checks passed"))?;
        Ok(out)
    }
}
