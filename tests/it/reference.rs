//! Naive references, written from each operator's definition: one input coordinate per
//! output coordinate, no strides, no planner. `Err(())` wherever the operation is invalid.

use ndarray::{ArrayD, ArrayViewD, Dimension, IxDyn};

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

pub fn norm(v: i128, len: usize, mode: Mode) -> Result<usize, ()> {
    let n = len as i128;
    if n == 0 {
        return Err(());
    }
    match mode {
        Mode::Raise => {
            let v = if v < 0 { v + n } else { v };
            if (0..n).contains(&v) {
                Ok(v as usize)
            } else {
                Err(())
            }
        }
        Mode::Wrap => Ok(v.rem_euclid(n) as usize),
        Mode::Clip => Ok(v.clamp(0, n - 1) as usize),
    }
}

fn all_coords(shape: &[usize]) -> Vec<Vec<usize>> {
    ArrayD::<()>::from_elem(IxDyn(shape), ())
        .indexed_iter()
        .map(|(c, _)| c.slice().to_vec())
        .collect()
}

fn build<A: Clone>(shape: Vec<usize>, f: impl FnMut(&[usize]) -> Result<A, ()>) -> Result<ArrayD<A>, ()> {
    let data: Result<Vec<A>, ()> = all_coords(&shape).iter().map(|c| c.as_slice()).map(f).collect();
    Ok(ArrayD::from_shape_vec(IxDyn(&shape), data?).unwrap())
}

fn bcast(a: usize, b: usize) -> Result<usize, ()> {
    match (a, b) {
        _ if a == b => Ok(a),
        (1, _) => Ok(b),
        (_, 1) => Ok(a),
        _ => Err(()),
    }
}

/// The seed's gatherMultiaxis, with strict broadcasting.
pub fn multiaxis<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    axes: &[usize],
) -> Result<ArrayD<A>, ()> {
    let r = input.ndim();
    if indices.ndim() != r || axes.iter().any(|&a| a >= r) {
        return Err(());
    }
    for (i, a) in axes.iter().enumerate() {
        if axes[..i].contains(a) {
            return Err(());
        }
    }
    if r == 0 {
        return Ok(input.to_owned());
    }
    let k = axes.len().max(1);
    let mut logical = indices.shape().to_vec();
    if !logical[r - 1].is_multiple_of(k) {
        return Err(());
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
    build(out_shape, |o| {
        let mut ic: Vec<usize> = (0..r)
            .map(|d| if input.shape()[d] == 1 { 0 } else { o[d] })
            .collect();
        let mut xc: Vec<usize> = (0..r).map(|d| if logical[d] == 1 { 0 } else { o[d] }).collect();
        xc[r - 1] *= k;
        for &axis in axes {
            let v = int(indices[IxDyn(&xc)]);
            ic[axis] = norm(v, input.shape()[axis], Mode::Raise)?;
            xc[r - 1] += 1;
        }
        Ok(input[IxDyn(&ic)].clone())
    })
}

fn axis_of(axis: isize, r: usize) -> Result<usize, ()> {
    let a = if axis < 0 { axis + r as isize } else { axis };
    if (0..r as isize).contains(&a) {
        Ok(a as usize)
    } else {
        Err(())
    }
}

/// ONNX Gather / numpy.take(axis): out[pre, j.., post] = in[pre, indices[j..], post].
pub fn gather<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    axis: isize,
    mode: Mode,
) -> Result<ArrayD<A>, ()> {
    batched(input, indices, axis, 0, mode)
}

/// tf.gather with batch_dims.
pub fn batched<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    axis: isize,
    b: usize,
    mode: Mode,
) -> Result<ArrayD<A>, ()> {
    let (r, q) = (input.ndim(), indices.ndim());
    let a = axis_of(axis, r)?;
    if b > q || b > a || (0..b).any(|d| input.shape()[d] != indices.shape()[d]) {
        return Err(());
    }
    let shape: Vec<usize> = [
        &input.shape()[..a],
        &indices.shape()[b..],
        &input.shape()[a + 1..],
    ]
    .concat();
    build(shape, |o| {
        let pre = &o[..a];
        let jdx: Vec<usize> = [&pre[..b], &o[a..a + q - b]].concat();
        let i = norm(int(indices[IxDyn(&jdx)]), input.shape()[a], mode)?;
        let ic: Vec<usize> = [pre, &[i], &o[a + q - b..]].concat();
        Ok(input[IxDyn(&ic)].clone())
    })
}

/// ONNX GatherElements: out[p] = in[p with p[axis] = indices[p]].
pub fn elements<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    axis: isize,
) -> Result<ArrayD<A>, ()> {
    let r = input.ndim();
    if indices.ndim() != r {
        return Err(());
    }
    let a = axis_of(axis, r)?;
    if (0..r).any(|d| d != a && indices.shape()[d] > input.shape()[d]) {
        return Err(());
    }
    build(indices.shape().to_vec(), |o| {
        let mut ic = o.to_vec();
        ic[a] = norm(int(indices[IxDyn(o)]), input.shape()[a], Mode::Raise)?;
        Ok(input[IxDyn(&ic)].clone())
    })
}

/// numpy.take_along_axis: broadcast off the axis, then elementwise.
pub fn along_axis<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    axis: isize,
) -> Result<ArrayD<A>, ()> {
    let r = input.ndim();
    if indices.ndim() != r {
        return Err(());
    }
    let a = axis_of(axis, r)?;
    let shape: Result<Vec<usize>, ()> = (0..r)
        .map(|d| {
            if d == a {
                Ok(indices.shape()[d])
            } else {
                bcast(input.shape()[d], indices.shape()[d])
            }
        })
        .collect();
    let shape = shape?;
    build(shape, |o| {
        let xc: Vec<usize> = (0..r)
            .map(|d| if indices.shape()[d] == 1 { 0 } else { o[d] })
            .collect();
        let mut ic: Vec<usize> = (0..r)
            .map(|d| if input.shape()[d] == 1 { 0 } else { o[d] })
            .collect();
        ic[a] = norm(int(indices[IxDyn(&xc)]), input.shape()[a], Mode::Raise)?;
        Ok(input[IxDyn(&ic)].clone())
    })
}

/// ONNX GatherND with batch dims broadcasting (equal or 1).
pub fn nd<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    b: usize,
) -> Result<ArrayD<A>, ()> {
    let (r, q) = (input.ndim(), indices.ndim());
    if q == 0 || b >= q {
        return Err(());
    }
    let k = indices.shape()[q - 1];
    if b + k > r {
        return Err(());
    }
    let batch: Result<Vec<usize>, ()> = (0..b)
        .map(|d| bcast(input.shape()[d], indices.shape()[d]))
        .collect();
    let batch = batch?;
    let shape: Vec<usize> = [&batch[..], &indices.shape()[b..q - 1], &input.shape()[b + k..]].concat();
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
            ic.push(norm(int(indices[IxDyn(&xc)]), input.shape()[b + j], Mode::Raise)?);
        }
        ic.extend_from_slice(&o[q - 1..]);
        Ok(input[IxDyn(&ic)].clone())
    })
}

/// numpy.take with no axis: the input in row-major order, then a 1-D gather.
pub fn take_flat<A: Clone, I: TryInto<i128> + Copy>(
    input: &ArrayViewD<A>,
    indices: &ArrayViewD<I>,
    mode: Mode,
) -> Result<ArrayD<A>, ()> {
    let flat: Vec<A> = input.iter().cloned().collect();
    build(indices.shape().to_vec(), |o| {
        Ok(flat[norm(int(indices[IxDyn(o)]), flat.len(), mode)?].clone())
    })
}
