//! The kernel: executes a [`Plan`](crate::plan::Plan) by walking output lanes, as the
//! planner's strategy ([`Strategy`](crate::plan::Strategy)) says. It only moves elements
//! and decides nothing: every size and threshold it uses is in
//! [`plan::policy`](crate::plan::policy). Its rooms:
//!
//! - `gather/`: the gather kernel, [`Task`]: one lane at a time (`lane`), rows of block
//!   lanes as a prefetching pipeline (`blocks`), the one-axis element loop and its CPU
//!   variants (`elements`), rows of lanes staged through a buffer (`stage`);
//! - `scatter/`: the scatter kernel, [`ScatterTask`]: the index check (`check`), the
//!   histogram's count and replay (`histogram`), tiny scatters (`tiny`), the combining
//!   pipeline (`apply`) and which positions land in a thread's span (`span`);
//! - shared by both: [`schedule`] (numbered jobs on the calling thread and the rayon pool,
//!   panics and failures collected), [`walk`] (the odometer over a range of positions),
//!   `bounds` (the bounds invariant and the index lookup), `prefetch` (prefetch hints),
//!   `store` (stores and the guard for uninitialized output) and `stream` (block copies
//!   with streaming stores, for outputs too large for the caches).
//!
//! The innermost loop of the plan is the *lane*. When the indices do not advance along it
//! (a block gather: ONNX Gather's trailing dimensions, GatherND's slices), the gathered
//! offset is resolved once per lane and the lane is a run copy, a `clone_from_slice` when
//! both sides are contiguous (a fixed-size array copy for blocks of 1-16 elements).
//! Otherwise every element resolves its own indices; with one gathered axis and a
//! contiguous lane that loop is branch-free and vectorizes.
//!
//! Work is split into ranges of flat output positions (in the loops' row-major order).
//! Small gathers run on the calling thread; large ones run on the calling thread *and* the
//! rayon pool.
//!
//! # Safety, in one place
//! [`Task::new`] is the only way to build a task. It takes the plan's loops and the very
//! views the plan was made from, and its contract (checked with `debug_assert!` where the
//! views allow) is what every `unsafe` block below relies on: every offset the loops and
//! the axis terms can form, with every resolved index below its axis length, is an
//! element of the input (and of the indices); the output has the loops' shape.

mod bounds;
mod gather;
pub(crate) mod isa;
mod prefetch;
pub(crate) mod reduce;
mod scatter;
pub(crate) mod schedule;
mod store;
pub(crate) mod stream;
pub(crate) mod walk;

pub(crate) use self::bounds::{debug_check_reach, locate};
pub(crate) use self::gather::Task;
pub(crate) use self::scatter::{ScatterTask, scatter_tiny};

/// An index was out of range; the caller rescans the indices to say which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadIndex;

/// How the kernel stores an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Store {
    /// `out` holds initialized elements: assign, dropping the old value.
    Assign,
    /// `out` is uninitialized, C-contiguous storage of exactly the output's length: write
    /// without dropping. If the gather stops (a bad index or a panic), every element
    /// written so far is dropped again, and the caller abandons the storage.
    Init,
}

/// An array operand as the kernel sees it: its first element, and its shape and strides,
/// which bound the offsets the kernel may form from it.
#[derive(Clone, Copy)]
pub(crate) struct Operand<'v, T> {
    pub ptr: *const T,
    pub shape: &'v [usize],
    pub strides: &'v [isize],
}

impl<'v, T> Operand<'v, T> {
    /// The operand of an array or view.
    pub fn of<D: ndarray::Dimension>(a: &'v ndarray::ArrayRef<T, D>) -> Self {
        Operand {
            ptr: a.as_ptr(),
            shape: a.shape(),
            strides: a.strides(),
        }
    }

    /// The operand at `ptr` with `layout`.
    #[inline]
    pub fn new(layout: crate::plan::Layout<'v>, ptr: *const T) -> Self {
        Operand {
            ptr,
            shape: layout.shape,
            strides: layout.strides,
        }
    }

    fn extent(&self) -> (&'v [usize], &'v [isize]) {
        (self.shape, self.strides)
    }
}
