//! The naive gather-reduce, read from API.md's decisions 13-19 literally: each position's
//! segment found first, then every output element built by walking all positions in
//! increasing order and combining those of its segment, one at a time. No strides, no
//! planner, no threads. `Err` says which error the crate must return, and for what.

use ndarray::{ArrayD, ArrayViewD, Dimension, IxDyn};
use ndarray_gather::{GatherError, Pool, PoolElement, Pooling, Segments};

/// Segments as a test holds them (values as i64, whatever type the call uses).
#[derive(Clone, Debug, PartialEq)]
pub enum Seg {
    Indptr(Vec<i64>),
    Starts(Vec<i64>),
    Lengths(Vec<i64>),
    Uniform(usize),
    Ids(Vec<i64>, usize),
}

impl Seg {
    /// Segments of kind `kind % 5` over `values` (a fuzz target's choice; `Uniform` of
    /// `count` long, `Ids` of `count` segments).
    pub fn of_kind(kind: u8, values: Vec<i64>, count: usize) -> Seg {
        match kind % 5 {
            0 => Seg::Indptr(values),
            1 => Seg::Starts(values),
            2 => Seg::Lengths(values),
            3 => Seg::Uniform(count),
            _ => Seg::Ids(values, count),
        }
    }

    /// The segments as a call takes them, over the values (empty for `Uniform`).
    pub fn segments(&self) -> Segments<'_, i64> {
        match self {
            Seg::Indptr(v) => Segments::indptr(v),
            Seg::Starts(v) => Segments::starts(v),
            Seg::Lengths(v) => Segments::lengths(v),
            Seg::Uniform(l) => Segments::uniform(*l),
            Seg::Ids(v, n) => Segments::ids(v, *n),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Seg::Indptr(_) => "indptr",
            Seg::Starts(_) => "starts",
            Seg::Lengths(_) => "lengths",
            Seg::Uniform(_) => "uniform",
            Seg::Ids(..) => "ids",
        }
    }
}

/// A pooling with its options.
#[derive(Clone, Debug)]
pub struct Spec<A> {
    pub pooling: Pooling,
    pub weights: Option<Vec<A>>,
    pub skip: Option<i64>,
    pub fill: Option<A>,
    pub arg: bool,
}

/// What the crate must fail with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    Axis,
    /// The segments' kind, bad entry and its value.
    Segments(&'static str, usize, i128),
    Weights,
    Pooling,
    /// The first bad index's row-major position and value.
    Index(usize, i128),
}

impl Why {
    /// The crate error's kind and the values it names (`shape` the indices' shape).
    pub fn of(e: &GatherError, shape: &[usize]) -> Why {
        match e {
            GatherError::AxisOutOfBounds { .. } => Why::Axis,
            GatherError::Segments {
                kind, entry, value, ..
            } => Why::Segments(kind, *entry, *value),
            GatherError::Weights { .. } => Why::Weights,
            GatherError::Pooling { .. } => Why::Pooling,
            GatherError::IndexOutOfBounds { index, position, .. } => {
                let flat = position.iter().zip(shape).fold(0, |acc, (&c, &n)| acc * n + c);
                Why::Index(flat, *index)
            }
            e => panic!("no reference returns {e:?}"),
        }
    }
}

/// Each position's segment and the segment count, or the first bad entry.
pub fn segment_of(seg: &Seg, positions: usize) -> Result<(Vec<Option<usize>>, usize), Why> {
    let p = positions as i64;
    let bad = |e: usize, v: i64| Err(Why::Segments(seg.kind(), e, v as i128));
    let mut of = vec![None; positions];
    let ranges = |bounds: &[(i64, i64)], of: &mut Vec<Option<usize>>| {
        for (s, &(a, b)) in bounds.iter().enumerate() {
            for q in a..b {
                of[q as usize] = Some(s);
            }
        }
    };
    match seg {
        Seg::Indptr(o) => {
            if o.is_empty() {
                return bad(0, 0);
            }
            for (e, &v) in o.iter().enumerate() {
                let prev = if e == 0 { 0 } else { o[e - 1] };
                if (e == 0 && v != 0) || v < prev || v > p {
                    return bad(e, v);
                }
            }
            if *o.last().unwrap() != p {
                return bad(o.len() - 1, *o.last().unwrap());
            }
            let b: Vec<_> = o.windows(2).map(|w| (w[0], w[1])).collect();
            ranges(&b, &mut of);
            Ok((of, o.len() - 1))
        }
        Seg::Starts(o) => {
            for (e, &v) in o.iter().enumerate() {
                let prev = if e == 0 { 0 } else { o[e - 1] };
                if (e == 0 && v != 0) || v < prev || v > p {
                    return bad(e, v);
                }
            }
            let b: Vec<_> = (0..o.len())
                .map(|s| (o[s], if s + 1 < o.len() { o[s + 1] } else { p }))
                .collect();
            ranges(&b, &mut of);
            Ok((of, o.len()))
        }
        Seg::Lengths(l) => {
            let mut sum = 0;
            let mut b = vec![];
            for (e, &v) in l.iter().enumerate() {
                if v < 0 || sum + v > p {
                    return bad(e, v);
                }
                b.push((sum, sum + v));
                sum += v;
            }
            if sum != p {
                return if l.is_empty() {
                    bad(0, 0)
                } else {
                    bad(l.len() - 1, l[l.len() - 1])
                };
            }
            ranges(&b, &mut of);
            Ok((of, l.len()))
        }
        Seg::Uniform(len) => {
            if *len == 0 || !positions.is_multiple_of(*len) {
                return bad(0, *len as i64);
            }
            for (q, o) in of.iter_mut().enumerate() {
                *o = Some(q / len);
            }
            Ok((of, positions / len))
        }
        Seg::Ids(ids, n) => {
            if ids.len() != positions {
                return bad(ids.len(), ids.len() as i64);
            }
            for (e, &v) in ids.iter().enumerate() {
                if v < 0 || v >= *n as i64 {
                    return bad(e, v);
                }
                of[e] = Some(v as usize);
            }
            Ok((of, *n))
        }
    }
}

#[allow(clippy::eq_op)]
fn nan<A: PartialOrd>(a: &A) -> bool {
    a != a
}

fn integral<A: PoolElement>() -> bool {
    A::from_f64(0.5).is_none_or(|h| h == A::zero())
}

fn div<A: PoolElement + Copy>(a: A, d: Option<A>) -> A {
    match d {
        None => A::zero(),
        Some(d) if integral::<A>() && d == A::zero() => A::zero(),
        Some(d) if integral::<A>() => {
            let (x, y) = (a.to_i128().unwrap(), d.to_i128().unwrap());
            x.checked_div(y).and_then(A::from_i128).unwrap_or(a)
        }
        Some(d) => a / d,
    }
}

/// The gather-reduce of `x` along `axis` (`indices: None` for `segment_reduce`): the
/// output and, with `spec.arg`, the position each element came from.
pub fn gather_reduce<A: PoolElement + Copy + std::fmt::Debug>(
    x: &ArrayViewD<'_, A>,
    indices: Option<&ArrayViewD<'_, i64>>,
    seg: &Seg,
    axis: isize,
    spec: &Spec<A>,
) -> Result<(ArrayD<A>, ArrayD<usize>), Why> {
    let r = x.ndim() as isize;
    let axis = if axis < 0 { axis + r } else { axis };
    if axis < 0 || axis >= r {
        return Err(Why::Axis);
    }
    let axis = axis as usize;
    let len = x.shape()[axis];
    let idx: Vec<i64> = match indices {
        Some(i) => i.iter().copied().collect(),
        None => (0..len as i64).collect(),
    };
    let positions = idx.len();
    // Decision 20: segments, then the pool, then the indices.
    let (of, count) = segment_of(seg, positions)?;
    let extremum = matches!(spec.pooling, Pooling::Max | Pooling::Min);
    if let Some(w) = &spec.weights {
        if extremum || spec.pooling == Pooling::Prod {
            return Err(Why::Pooling);
        }
        if w.len() != positions {
            return Err(Why::Weights);
        }
    }
    if spec.arg && !extremum {
        return Err(Why::Pooling);
    }
    if indices.is_none() && spec.skip.is_some() {
        return Err(Why::Pooling);
    }
    let mut rows = vec![None; positions];
    for (q, &v) in idx.iter().enumerate() {
        if spec.skip == Some(v) {
            continue;
        }
        let n = len as i64;
        let row = if v < 0 { v + n } else { v };
        if row < 0 || row >= n {
            return Err(Why::Index(q, v as i128));
        }
        rows[q] = Some(row as usize);
    }
    let mut shape = x.shape().to_vec();
    shape[axis] = count;
    let mut out = ArrayD::from_elem(IxDyn(&shape), A::zero());
    let mut arg = ArrayD::from_elem(IxDyn(&shape), 0usize);
    for (c, o) in out.indexed_iter_mut() {
        let s = c[axis];
        let (mut acc, mut at, mut n) = (A::zero(), positions, 0usize);
        let (mut ws, mut w2) = (A::zero(), A::zero());
        for q in 0..positions {
            let (Some(r), true) = (rows[q], of[q] == Some(s)) else {
                continue;
            };
            let mut xc = c.slice().to_vec();
            xc[axis] = r;
            let v = x[IxDyn(&xc)];
            let w = spec.weights.as_ref().map(|w| w[q]);
            match spec.pooling {
                Pooling::Sum | Pooling::Mean | Pooling::SqrtN => {
                    let term = match w {
                        Some(w) => w * v,
                        None => v,
                    };
                    acc = if n == 0 { A::zero() + term } else { acc + term };
                    if let Some(w) = w {
                        ws += w;
                        w2 += w * w;
                    }
                }
                Pooling::Prod => acc = if n == 0 { v } else { acc * v },
                Pooling::Max | Pooling::Min => {
                    let better = if spec.pooling == Pooling::Max {
                        v > acc
                    } else {
                        v < acc
                    };
                    if n == 0 || better || (nan(&v) && !nan(&acc)) {
                        acc = v;
                        at = q;
                    }
                }
            }
            n += 1;
        }
        *o = if n == 0 {
            spec.fill.unwrap_or(A::zero())
        } else {
            match (spec.pooling, &spec.weights) {
                (Pooling::Mean, Some(_)) => div(acc, Some(ws)),
                (Pooling::Mean, None) => div(acc, A::from_usize(n)),
                (Pooling::SqrtN, Some(_)) => div(acc, A::from_f64(w2.to_f64().unwrap().sqrt())),
                (Pooling::SqrtN, None) => div(acc, A::from_f64((n as f64).sqrt())),
                _ => acc,
            }
        };
        arg[&c] = at;
    }
    Ok((out, arg))
}

/// Whether two arrays hold the same values bit for bit (as f64: a NaN equals a NaN, and
/// -0.0 differs from 0.0).
pub fn same_bits<A: PoolElement + Copy>(a: &ArrayD<A>, b: &ArrayD<A>) -> bool {
    let bits = |v: &A| {
        let f = v.to_f64().unwrap();
        if f.is_nan() { u64::MAX } else { f.to_bits() }
    };
    a.shape() == b.shape() && a.iter().zip(b).all(|(x, y)| bits(x) == bits(y))
}

/// `pooling`'s pool with the weights, skip and fill given.
pub fn pool_of<A: PoolElement>(
    pooling: Pooling,
    weights: Option<&[A]>,
    skip: Option<i64>,
    fill: Option<A>,
) -> Pool<'_, A> {
    let mut p: Pool<'_, A> = pooling.into();
    if let Some(w) = weights {
        p = p.weighted(w);
    }
    if let Some(s) = skip {
        p = p.skip(s);
    }
    if let Some(f) = fill {
        p = p.fill(f);
    }
    p
}
