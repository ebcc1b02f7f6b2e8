//! Naive references, written from each operator's definition: one input coordinate per
//! output coordinate, no strides, no planner. `Err(Fail)` wherever the operation is
//! invalid, saying which kind of error the crate must return.

use ndarray::{ArrayD, ArrayViewD, IxDyn};
use ndarray_gather::GatherError;

/// The kinds of invalid call, as the crate's error variants group them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fail {
    /// Input and indices ranks do not fit (`RankMismatch`).
    Rank,
    /// A bad axis argument (`AxisOutOfBounds`, `DuplicateAxis`).
    Axis,
    /// Shapes that do not broadcast or fold (`ShapeMismatch`, `CoordinateFold`).
    Shape,
    /// `batch_dims` does not fit (`BatchDims`).
    Batch,
    /// An index into an empty axis (`EmptyAxis`).
    Empty,
    /// An index out of range (`IndexOutOfBounds`).
    Index,
}

impl Fail {
    /// The kind of a crate error (panics on a variant no reference produces).
    pub fn of(e: &GatherError) -> Fail {
        use GatherError::*;
        match e {
            RankMismatch { .. } => Fail::Rank,
            AxisOutOfBounds { .. } | DuplicateAxis { .. } => Fail::Axis,
            ShapeMismatch { .. } | CoordinateFold { .. } => Fail::Shape,
            BatchDims { .. } => Fail::Batch,
            EmptyAxis { .. } => Fail::Empty,
            IndexOutOfBounds { .. } => Fail::Index,
            e => panic!("no reference returns {e:?}"),
        }
    }
}

/// Any index value as the integer it denotes.
pub fn int<I: TryInto<i128> + Copy>(v: I) -> i128 {
    v.try_into()
        .unwrap_or_else(|_| panic!("every index type fits in i128"))
}

/// numpy.take's index modes, applied to a true integer value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    Raise,
    Wrap,
    Clip,
}

pub fn norm(v: i128, len: usize, mode: Mode) -> Result<usize, Fail> {
    let n = len as i128;
    if n == 0 {
        return Err(Fail::Empty);
    }
    match mode {
        Mode::Raise => {
            let v = if v < 0 { v + n } else { v };
            if (0..n).contains(&v) {
                Ok(v as usize)
            } else {
                Err(Fail::Index)
            }
        }
        Mode::Wrap => Ok(v.rem_euclid(n) as usize),
        Mode::Clip => Ok(v.clamp(0, n - 1) as usize),
    }
}

/// An array of `shape` whose element at each coordinate (visited in row-major order, one
/// coordinate buffer counted up like an odometer) is `f` of it.
fn build<A: Clone>(
    shape: Vec<usize>,
    mut f: impl FnMut(&[usize]) -> Result<A, Fail>,
) -> Result<ArrayD<A>, Fail> {
    let n: usize = shape.iter().product();
    let mut data = Vec::with_capacity(n);
    let mut c = vec![0; shape.len()];
    for _ in 0..n {
        data.push(f(&c)?);
        for d in (0..c.len()).rev() {
            c[d] += 1;
            if c[d] < shape[d] {
                break;
            }
            c[d] = 0;
        }
    }
    Ok(ArrayD::from_shape_vec(IxDyn(&shape), data).unwrap())
}

fn bcast(a: usize, b: usize) -> Result<usize, Fail> {
    match (a, b) {
        _ if a == b => Ok(a),
        (1, _) => Ok(b),
        (_, 1) => Ok(a),
        _ => Err(Fail::Shape),
    }
}

/// The seed's gatherMultiaxis, with strict broadcasting.
pub fn multiaxis<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    axes: &[usize],
) -> Result<ArrayD<A>, Fail> {
    let r = input.ndim();
    if indices.ndim() != r {
        return Err(Fail::Rank);
    }
    for (i, a) in axes.iter().enumerate() {
        if *a >= r || axes[..i].contains(a) {
            return Err(Fail::Axis);
        }
    }
    if r == 0 {
        return Ok(input.to_owned());
    }
    let k = axes.len().max(1);
    let mut logical = indices.shape().to_vec();
    if !logical[r - 1].is_multiple_of(k) {
        return Err(Fail::Shape);
    }
    logical[r - 1] /= k;
    let mut out_shape = vec![0; r];
    for d in 0..r {
        out_shape[d] = if axes.contains(&d) {
            logical[d]
        } else {
            bcast(input.shape()[d], logical[d])?
        };
    }
    // No index into an empty gathered axis can be valid, whichever axis comes first.
    if out_shape.iter().product::<usize>() > 0 && axes.iter().any(|&a| input.shape()[a] == 0) {
        return Err(Fail::Empty);
    }
    // Both operands in row-major order, read through row-major offsets: indexing views
    // of any layout by `IxDyn` coordinates, element by element, took two-thirds of
    // orders::block_lanes_into_fortran_order's time under Miri.
    let (inp, idx) = (Flat::of(input), Flat::of(indices));
    let (mut ic, mut xc) = (vec![0; r], vec![0; r]);
    build(out_shape, |o| {
        for d in 0..r {
            ic[d] = if input.shape()[d] == 1 { 0 } else { o[d] };
            xc[d] = if logical[d] == 1 { 0 } else { o[d] };
        }
        xc[r - 1] *= k;
        for &axis in axes {
            let v = int(*idx.at(&xc));
            ic[axis] = norm(v, input.shape()[axis], Mode::Raise)?;
            xc[r - 1] += 1;
        }
        Ok(inp.at(&ic).clone())
    })
}

/// A view's elements in row-major order, read by coordinates.
struct Flat<A> {
    data: Vec<A>,
    strides: Vec<usize>,
}

impl<A: Clone> Flat<A> {
    fn of(v: &ArrayViewD<A>) -> Self {
        let mut strides = vec![1; v.ndim()];
        for d in (0..v.ndim().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * v.shape()[d + 1];
        }
        Flat {
            data: v.iter().cloned().collect(),
            strides,
        }
    }

    fn at(&self, c: &[usize]) -> &A {
        &self.data[c.iter().zip(&self.strides).map(|(i, s)| i * s).sum::<usize>()]
    }
}

fn axis_of(axis: isize, r: usize) -> Result<usize, Fail> {
    let a = if axis < 0 { axis + r as isize } else { axis };
    if (0..r as isize).contains(&a) {
        Ok(a as usize)
    } else {
        Err(Fail::Axis)
    }
}

/// ONNX Gather / numpy.take(axis): out[pre, j.., post] = in[pre, indices[j..], post].
pub fn gather<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    axis: isize,
    mode: Mode,
) -> Result<ArrayD<A>, Fail> {
    batched(input, indices, axis, 0, mode)
}

/// tf.gather with batch_dims.
pub fn batched<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    axis: isize,
    b: usize,
    mode: Mode,
) -> Result<ArrayD<A>, Fail> {
    let (r, q) = (input.ndim(), indices.ndim());
    let a = axis_of(axis, r)?;
    if b > q || b > a || (0..b).any(|d| input.shape()[d] != indices.shape()[d]) {
        return Err(Fail::Batch);
    }
    let shape: Vec<usize> = [
        &input.shape()[..a],
        &indices.shape()[b..],
        &input.shape()[a + 1..],
    ]
    .concat();
    let (inp, idx) = (Flat::of(input), Flat::of(indices));
    build(shape, |o| {
        let pre = &o[..a];
        let jdx: Vec<usize> = [&pre[..b], &o[a..a + q - b]].concat();
        let i = norm(int(*idx.at(&jdx)), input.shape()[a], mode)?;
        let ic: Vec<usize> = [pre, &[i], &o[a + q - b..]].concat();
        Ok(inp.at(&ic).clone())
    })
}

/// ONNX GatherElements: out[p] = in[p with p[axis] = indices[p]].
pub fn elements<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    axis: isize,
) -> Result<ArrayD<A>, Fail> {
    let r = input.ndim();
    if indices.ndim() != r {
        return Err(Fail::Rank);
    }
    let a = axis_of(axis, r)?;
    if (0..r).any(|d| d != a && indices.shape()[d] > input.shape()[d]) {
        return Err(Fail::Shape);
    }
    let (inp, idx) = (Flat::of(input), Flat::of(indices));
    build(indices.shape().to_vec(), |o| {
        let mut ic = o.to_vec();
        ic[a] = norm(int(*idx.at(o)), input.shape()[a], Mode::Raise)?;
        Ok(inp.at(&ic).clone())
    })
}

/// numpy.take_along_axis: broadcast off the axis, then elementwise.
pub fn along_axis<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    axis: isize,
) -> Result<ArrayD<A>, Fail> {
    let r = input.ndim();
    if indices.ndim() != r {
        return Err(Fail::Rank);
    }
    let a = axis_of(axis, r)?;
    let shape: Result<Vec<usize>, Fail> = (0..r)
        .map(|d| {
            if d == a {
                Ok(indices.shape()[d])
            } else {
                bcast(input.shape()[d], indices.shape()[d])
            }
        })
        .collect();
    let shape = shape?;
    let (inp, idx) = (Flat::of(input), Flat::of(indices));
    build(shape, |o| {
        let xc: Vec<usize> = (0..r)
            .map(|d| if indices.shape()[d] == 1 { 0 } else { o[d] })
            .collect();
        let mut ic: Vec<usize> = (0..r)
            .map(|d| if input.shape()[d] == 1 { 0 } else { o[d] })
            .collect();
        ic[a] = norm(int(*idx.at(&xc)), input.shape()[a], Mode::Raise)?;
        Ok(inp.at(&ic).clone())
    })
}

/// ONNX GatherND with batch dims broadcasting (equal or 1).
pub fn nd<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    b: usize,
) -> Result<ArrayD<A>, Fail> {
    let (r, q) = (input.ndim(), indices.ndim());
    if q == 0 {
        return Err(Fail::Rank);
    }
    let k = indices.shape()[q - 1];
    if b >= q || b + k > r {
        return Err(Fail::Batch);
    }
    let batch: Result<Vec<usize>, Fail> = (0..b)
        .map(|d| bcast(input.shape()[d], indices.shape()[d]).map_err(|_| Fail::Batch))
        .collect();
    let batch = batch?;
    let shape: Vec<usize> = [&batch[..], &indices.shape()[b..q - 1], &input.shape()[b + k..]].concat();
    if shape.iter().product::<usize>() > 0 && (b..b + k).any(|d| input.shape()[d] == 0) {
        return Err(Fail::Empty);
    }
    let (inp, idx) = (Flat::of(input), Flat::of(indices));
    build(shape, |o| {
        let bi: Vec<usize> = (0..b)
            .map(|d| if input.shape()[d] == 1 { 0 } else { o[d] })
            .collect();
        let bx: Vec<usize> = (0..b)
            .map(|d| if indices.shape()[d] == 1 { 0 } else { o[d] })
            .collect();
        let mut ic = bi;
        for j in 0..k {
            let xc: Vec<usize> = [&bx[..], &o[b..q - 1], &[j]].concat();
            ic.push(norm(int(*idx.at(&xc)), input.shape()[b + j], Mode::Raise)?);
        }
        ic.extend_from_slice(&o[q - 1..]);
        Ok(inp.at(&ic).clone())
    })
}

/// numpy.take with no axis: the input in row-major order, then a 1-D gather.
pub fn take_flat<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    mode: Mode,
) -> Result<ArrayD<A>, Fail> {
    let flat: Vec<A> = input.iter().cloned().collect();
    build(indices.shape().to_vec(), |o| {
        Ok(flat[norm(int(indices[IxDyn(o)]), flat.len(), mode)?].clone())
    })
}
