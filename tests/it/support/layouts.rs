//! Arrays of a given logical shape in every memory layout a caller may pass.

use ndarray::{ArrayBase, ArrayD, ArrayViewD, ArrayViewMutD, Axis, IxDyn, Slice};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Row-major, contiguous.
    C,
    /// Column-major, contiguous.
    F,
    /// Every axis reversed (negative strides).
    Reversed,
    /// Every axis of a twice-as-large array stepped by 2.
    Stepped,
    /// Axes permuted (a transposed view of a row-major array).
    Permuted(u64),
    /// Dimensions above 1 broadcast from size 1 where the mask bit is set (zero strides).
    Broadcast(u64),
}

pub fn any_layout() -> impl Strategy<Value = Layout> {
    prop_oneof![
        Just(Layout::C),
        Just(Layout::F),
        Just(Layout::Reversed),
        Just(Layout::Stepped),
        any::<u64>().prop_map(Layout::Permuted),
        any::<u64>().prop_map(Layout::Broadcast),
    ]
}

pub const ALL: [Layout; 6] = [
    Layout::C,
    Layout::F,
    Layout::Reversed,
    Layout::Stepped,
    Layout::Permuted(7),
    Layout::Broadcast(0b1011),
];

/// Storage for an array of `shape` in `layout`; `view()` shows it with that shape.
pub struct Held<T> {
    base: ArrayD<T>,
    layout: Layout,
    shape: Vec<usize>,
    perm: Vec<usize>,
}

fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    let mut s = seed | 1;
    for i in (1..n).rev() {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        p.swap(i, (s >> 33) as usize % (i + 1));
    }
    p
}

impl<T: Clone> Held<T> {
    /// An array of `shape` in `layout` whose element at logical position `c` is
    /// `f(row-major flat position of c in shape)` (for Broadcast, of the source position).
    pub fn new(shape: &[usize], layout: Layout, f: impl Fn(usize) -> T) -> Self {
        let n = shape.len();
        let perm = match layout {
            Layout::Permuted(seed) => permutation(n, seed),
            _ => (0..n).collect(),
        };
        let base_shape: Vec<usize> = match layout {
            Layout::F => shape.iter().rev().copied().collect(),
            Layout::Stepped => shape.iter().map(|&s| 2 * s).collect(),
            Layout::Permuted(_) => perm.iter().map(|&p| shape[p]).collect(),
            Layout::Broadcast(mask) => shape
                .iter()
                .enumerate()
                .map(|(d, &s)| if mask >> d & 1 == 1 && s > 1 { 1 } else { s })
                .collect(),
            _ => shape.to_vec(),
        };
        // (`f` is not called for an empty array: its caller may have no values.)
        let base = match base_shape.iter().product::<usize>() {
            0 => ArrayD::from_shape_vec(IxDyn(&base_shape), Vec::new()).expect("empty"),
            _ => ArrayD::from_elem(IxDyn(&base_shape), f(0)),
        };
        let mut h = Held {
            base,
            layout,
            shape: shape.to_vec(),
            perm,
        };
        // Position `k` of a view's own row-major order is the logical position whose flat
        // index is `k`; a broadcast base is row-major with unit axes, which add nothing to
        // its source positions. (Filled by iterators, not element by element through
        // `IxDyn` coordinates: under Miri that fill was most of `plans::tiny_plans`.)
        let mut target = match layout {
            Layout::Broadcast(_) => h.base.view_mut(),
            _ => h.view_mut(),
        };
        for (k, x) in target.iter_mut().enumerate() {
            *x = f(k);
        }
        h
    }

    pub fn view(&self) -> ArrayViewD<'_, T> {
        match self.layout {
            Layout::Broadcast(_) => self.base.broadcast(IxDyn(&self.shape)).expect("broadcastable"),
            _ => self.arrange(self.base.view()),
        }
    }

    /// A mutable view (every layout but `Broadcast`, which cannot be written).
    pub fn view_mut(&mut self) -> ArrayViewMutD<'_, T> {
        assert!(
            !matches!(self.layout, Layout::Broadcast(_)),
            "a broadcast view is read-only"
        );
        let (perm, layout) = (self.perm.clone(), self.layout);
        arrange(self.base.view_mut(), layout, &perm)
    }

    fn arrange<'a>(&self, v: ArrayViewD<'a, T>) -> ArrayViewD<'a, T> {
        arrange(v, self.layout, &self.perm)
    }
}

fn arrange<S: ndarray::RawData>(
    mut v: ArrayBase<S, IxDyn>,
    layout: Layout,
    perm: &[usize],
) -> ArrayBase<S, IxDyn> {
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
        Layout::Permuted(_) => {
            // base axis i holds logical axis perm[i]; undo it.
            let mut inv = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inv[p] = i;
            }
            v.permuted_axes(IxDyn(&inv))
        }
    }
}
