//! The structured input shared by every fuzz target: shapes, layouts, parameters and index
//! values of any size, decoded with `arbitrary`. Each target calls one method and, when it
//! succeeds, checks the result against the naive reference of the test suite; when the
//! reference succeeds, the method must too.

#![allow(dead_code)]

use arbitrary::Arbitrary;
use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, ShapeBuilder, Slice};
use ndarray_gather::prelude::*;

#[path = "../../tests/it/support/reference.rs"]
pub mod reference;

#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Layout {
    C,
    F,
    Reversed,
    Stepped,
    Broadcast(u8),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum IndexType {
    I32,
    I64,
    Isize,
    U32,
    U64,
    Usize,
}

#[derive(Debug, Arbitrary)]
pub struct Input {
    pub input_shape: Vec<u8>,
    pub indices_shape: Vec<u8>,
    pub input_layout: Layout,
    pub indices_layout: Layout,
    pub index_type: IndexType,
    pub axis: i8,
    pub axes: Vec<u8>,
    pub batch_dims: u8,
    pub mode: u8,
    pub values: Vec<i64>,
    pub flat: bool,
}

/// Sizes 0..=4 (so that shapes stay small), rank at most 6.
fn dims(raw: &[u8]) -> Vec<usize> {
    raw.iter().take(6).map(|&d| (d % 5) as usize).collect()
}

/// A view of `shape` in `layout` over freshly built storage holding `f(row-major position)`.
pub struct Held<T> {
    base: ArrayD<T>,
    layout: Layout,
    shape: Vec<usize>,
}

impl<T: Clone> Held<T> {
    pub fn new(shape: &[usize], layout: Layout, f: impl Fn(usize) -> T) -> Self {
        let base_shape: Vec<usize> = match layout {
            Layout::F => shape.iter().rev().copied().collect(),
            Layout::Stepped => shape.iter().map(|&s| 2 * s).collect(),
            Layout::Broadcast(mask) => shape
                .iter()
                .enumerate()
                .map(|(d, &s)| if mask >> (d % 8) & 1 == 1 { 1.min(s) } else { s })
                .collect(),
            _ => shape.to_vec(),
        };
        let n: usize = base_shape.iter().product();
        let base = ArrayD::from_shape_vec(IxDyn(&base_shape), (0..n).map(&f).collect()).unwrap();
        Held {
            base,
            layout,
            shape: shape.to_vec(),
        }
    }

    pub fn view(&self) -> ArrayViewD<'_, T> {
        match self.layout {
            Layout::Broadcast(_) => self.base.broadcast(IxDyn(&self.shape)).unwrap(),
            layout => arrange(self.base.view(), layout),
        }
    }

    /// A writable view in the layout (a broadcast one is not writable: made `C`).
    pub fn view_mut(&mut self) -> ndarray::ArrayViewMutD<'_, T> {
        arrange(self.base.view_mut(), self.layout)
    }
}

/// `v` (the base array's view) shown in `layout` (`Broadcast` left as it is).
fn arrange<S: ndarray::RawData>(
    mut v: ndarray::ArrayBase<S, IxDyn>,
    layout: Layout,
) -> ndarray::ArrayBase<S, IxDyn> {
    match layout {
        Layout::C | Layout::Broadcast(_) => v,
        Layout::F => v.reversed_axes(),
        Layout::Reversed => {
            for d in 0..v.ndim() {
                v.invert_axis(Axis(d));
            }
            v
        }
        Layout::Stepped => {
            for d in 0..v.ndim() {
                v.slice_axis_inplace(Axis(d), Slice::new(0, None, 2));
            }
            v
        }
    }
}

pub enum Op {
    Multiaxis,
    Gather,
    Elements,
    Nd,
    Batched,
    Take,
    AlongAxis,
}

fn mode(m: u8) -> (IndexMode, reference::Mode) {
    match m % 3 {
        0 => (IndexMode::Raise, reference::Mode::Raise),
        1 => (IndexMode::Wrap, reference::Mode::Wrap),
        _ => (IndexMode::Clip, reference::Mode::Clip),
    }
}

/// The input's shape, indices shape and indices (in its layout), or `None` when the
/// indices would be too many to check quickly.
fn shapes_and_indices<I: Copy>(
    input: &Input,
    convert: impl Fn(i64) -> I,
) -> Option<(Vec<usize>, Vec<usize>, Held<I>)> {
    let in_shape = dims(&input.input_shape);
    let idx_shape = dims(&input.indices_shape);
    let count: usize = idx_shape.iter().product::<usize>().max(1);
    // An output is at most (indices) x (input) elements: keep every run fast. Lengths 0
    // count as 1: indices of `gather_nd` without coordinates (last length 0) still make
    // an output as large as the other lengths say.
    let bound: usize = idx_shape.iter().map(|&n| n.max(1)).product();
    if bound > 4096 || bound * in_shape.iter().product::<usize>() > 1 << 18 {
        return None;
    }
    let values: Vec<I> = (0..count)
        .map(|i| {
            convert(
                input
                    .values
                    .get(i % input.values.len().max(1))
                    .copied()
                    .unwrap_or(0),
            )
        })
        .collect();
    let i = Held::new(&idx_shape, input.indices_layout, |p| values[p % values.len()]);
    Some((in_shape, idx_shape, i))
}

fn check<I>(op: &Op, input: &Input, planned: bool, convert: impl Fn(i64) -> I)
where
    I: GatherIndex + TryInto<i128>,
{
    let Some((in_shape, _, i)) = shapes_and_indices(input, &convert) else {
        return;
    };
    let x = Held::new(&in_shape, input.input_layout, |i| i as u32);
    let (xv, iv) = (x.view(), i.view());
    let axis = input.axis as isize;
    let b = (input.batch_dims % 4) as usize;
    let (m, rm) = mode(input.mode);
    let axes: Vec<usize> = input.axes.iter().take(4).map(|&a| (a % 7) as usize).collect();
    let (got, expected) = match op {
        Op::Multiaxis => (
            xv.gather_multiaxis(&iv, &axes).map(|a| a.into_dyn()),
            reference::multiaxis(&xv, &iv, &axes),
        ),
        Op::Gather => (
            xv.gather(&iv, axis),
            reference::gather(&xv, &iv, axis, reference::Mode::Raise),
        ),
        Op::Elements => (xv.gather_elements(&iv, axis), reference::elements(&xv, &iv, axis)),
        Op::Nd => (xv.gather_nd(&iv, b), reference::nd(&xv, &iv, b)),
        Op::Batched => (
            xv.gather_batched(&iv, axis, b),
            reference::batched(&xv, &iv, axis, b, reference::Mode::Raise),
        ),
        Op::Take if input.flat => (xv.take(&iv, None, m), reference::take_flat(&xv, &iv, rm)),
        Op::Take => (xv.take(&iv, Some(axis), m), reference::gather(&xv, &iv, axis, rm)),
        Op::AlongAxis => (
            xv.take_along_axis(&iv, axis),
            reference::along_axis(&xv, &iv, axis),
        ),
    };
    if planned {
        let shape = xv.shape();
        let plan = match op {
            Op::Multiaxis => GatherPlan::multiaxis(shape, &iv, &axes),
            Op::Gather => GatherPlan::gather(shape, &iv, axis),
            Op::Elements => GatherPlan::gather_elements(shape, &iv, axis),
            Op::Nd => GatherPlan::gather_nd(shape, &iv, b),
            Op::Batched => GatherPlan::gather_batched(shape, &iv, axis, b),
            Op::Take if input.flat => GatherPlan::take(shape, &iv, None, m),
            Op::Take => GatherPlan::take(shape, &iv, Some(axis), m),
            Op::AlongAxis => GatherPlan::take_along_axis(shape, &iv, axis),
        };
        match (plan, &got) {
            (Err(p), Err(g)) => {
                // The method's error, named after the constructor (`GatherPlan::gather: ...`).
                let (ps, gs) = (p.to_string(), g.to_string());
                assert_eq!(
                    std::mem::discriminant(&p),
                    std::mem::discriminant(g),
                    "{ps} / {gs}"
                );
                assert!(ps.starts_with("GatherPlan::"), "{ps}");
                assert_eq!(ps.split_once(": ").map(|x| x.1), gs.split_once(": ").map(|x| x.1));
            }
            (Ok(plan), Ok(g)) => {
                assert_eq!(&plan.apply(&xv).unwrap(), g, "apply differs from the method");
                let c = xv.to_owned();
                assert_eq!(&plan.apply(&c).unwrap(), g, "apply on a C-order copy differs");
                let mut out = ArrayD::from_elem(g.raw_dim(), 7u32);
                plan.apply_into(&xv, &mut out).unwrap();
                assert_eq!(&out, g, "apply_into differs from the method");
            }
            (p, g) => panic!("plan {p:?}, method {g:?}"),
        }
    }
    match (got, expected) {
        (Ok(g), Ok(e)) => assert_eq!(g, e, "result differs from the reference"),
        (Err(g), Err(e)) => assert_eq!(
            reference::Fail::of(&g),
            e,
            "another error than the reference's: {g}"
        ),
        (Ok(g), Err(e)) => panic!("accepted what the reference rejects ({e:?}): {g:?}"),
        (Err(e), Ok(_)) => {
            // Multiaxis rank 0 with axes: both reject; anything else is a disagreement.
            panic!("rejected what the reference accepts: {e}")
        }
    }
    // `_into` agrees with the allocating call, into a C-order and a Fortran-order output
    // (the latter walked in its own order: tiles or groups of whole lanes, staged).
    if let Op::Multiaxis = op
        && let Ok(e) = reference::multiaxis(&xv, &iv, &axes)
    {
        let mut out = ArrayD::from_elem(e.raw_dim(), 7u32);
        xv.gather_multiaxis_into(&iv, &axes, &mut out).unwrap();
        assert_eq!(out, e);
        let mut f = ArrayD::from_elem(e.raw_dim().f(), 7u32);
        xv.gather_multiaxis_into(&iv, &axes, &mut f).unwrap();
        assert_eq!(f, e, "into a Fortran-order output");
    }
}

pub fn run(op: Op, input: &Input) {
    dispatch(op, input, false);
}

/// Also builds the method's [`GatherPlan`], which must fail as the method does or gather
/// the same elements.
pub fn run_planned(op: Op, input: &Input) {
    dispatch(op, input, true);
}

fn dispatch(op: Op, input: &Input, planned: bool) {
    match input.index_type {
        IndexType::I32 => check(&op, input, planned, |v| v as i32),
        IndexType::I64 => check(&op, input, planned, |v| v),
        IndexType::Isize => check(&op, input, planned, |v| v as isize),
        IndexType::U32 => check(&op, input, planned, |v| v as u32),
        IndexType::U64 => check(&op, input, planned, |v| v as u64),
        IndexType::Usize => check(&op, input, planned, |v| v as usize),
    }
}

/// A scatter with `Add` (`Replace` for `put_along_axis`) into a C-order `self`, indices
/// and updates in the input's layouts, against a one-at-a-time loop over the addresses the
/// matching reference gather reads from an array of addresses; an error must match the
/// reference's and leave `self` unchanged.
fn check_scatter<I>(op: &Op, input: &Input, convert: impl Fn(i64) -> I)
where
    I: GatherIndex + TryInto<i128>,
{
    let Some((in_shape, idx_shape, i)) = shapes_and_indices(input, &convert) else {
        return;
    };
    let iv = i.view();
    let n: usize = in_shape.iter().product();
    let addresses = ArrayD::from_shape_vec(IxDyn(&in_shape), (0..n as i64).collect()).unwrap();
    let av = addresses.view();
    let axis = input.axis as isize;
    let axes: Vec<usize> = input.axes.iter().take(4).map(|&a| (a % 7) as usize).collect();
    let b = (input.batch_dims % 4) as usize;
    let gather = |iv: &ArrayViewD<I>| match op {
        Op::Multiaxis => reference::multiaxis(&av, iv, &axes),
        Op::Gather => reference::gather(&av, iv, axis, reference::Mode::Raise),
        Op::Elements => reference::elements(&av, iv, axis),
        Op::Nd => reference::nd(&av, iv, b),
        _ => reference::along_axis(&av, iv, axis),
    };
    if matches!(op, Op::Batched | Op::Take) {
        return;
    }
    let targets = gather(&iv);
    // Updates of the gather's output shape, in the input's layout. Where an index is out of
    // range, the shape is that of the same gather with every index 0.
    let zeros = Held::new(&idx_shape, input.indices_layout, |_| convert(0));
    let upd_shape = match (&targets, &gather(&zeros.view())) {
        (Ok(t), _) | (Err(_), Ok(t)) => t.shape().to_vec(),
        (Err(_), Err(_)) => idx_shape.clone(),
    };
    // A stepped layout doubles every length of the storage behind the updates: up to 11
    // dimensions (`gather_nd` without coordinates) made 2048x the output's 2^18 elements.
    let stored = upd_shape.iter().product::<usize>() << upd_shape.len().min(32);
    if matches!(input.input_layout, Layout::Stepped) && stored > 1 << 22 {
        return;
    }

    let u = Held::new(&upd_shape, input.input_layout, |p| (p % 7) as i64 + 1);
    let uv = u.view();
    let dest0 = ArrayD::from_shape_vec(IxDyn(&in_shape), (0..n as i64).map(|p| p * 3).collect()).unwrap();
    let mut got = dest0.clone();
    let result = match op {
        Op::Multiaxis => got.scatter_multiaxis(&iv, &axes, &uv, reduce::Add),
        Op::Gather => got.scatter(&iv, &uv, axis, reduce::Add),
        Op::Elements => got.scatter_elements(&iv, &uv, axis, reduce::Add),
        Op::Nd => got.scatter_nd(&iv, &uv, b, reduce::Add),
        Op::AlongAxis => got.put_along_axis(&iv, &uv, axis),
        Op::Batched | Op::Take => return,
    };
    match (result, targets) {
        (Ok(()), Ok(t)) => {
            let mut expected = dest0;
            let flat = expected.as_slice_mut().unwrap();
            for (&a, &v) in t.iter().zip(uv.iter()) {
                match op {
                    Op::AlongAxis => flat[a as usize] = v,
                    _ => flat[a as usize] += v,
                }
            }
            assert_eq!(got, expected, "the scatter differs from one update at a time");
        }
        (Err(e), Err(f)) => {
            assert_eq!(
                reference::Fail::of(&e),
                f,
                "another error than the reference's: {e}"
            );
            assert_eq!(got, dest0, "an error changed self: {e}");
        }
        (Ok(()), Err(f)) => panic!("accepted what the reference rejects: {f:?}"),
        (Err(e), Ok(_)) => panic!("rejected what the reference accepts: {e}"),
    }
}

pub fn run_scatter(op: Op, input: &Input) {
    match input.index_type {
        IndexType::I32 => check_scatter(&op, input, |v| v as i32),
        IndexType::I64 => check_scatter(&op, input, |v| v),
        IndexType::Isize => check_scatter(&op, input, |v| v as isize),
        IndexType::U32 => check_scatter(&op, input, |v| v as u32),
        IndexType::U64 => check_scatter(&op, input, |v| v as u64),
        IndexType::Usize => check_scatter(&op, input, |v| v as usize),
    }
}
