//! The one gather every method lowers to: a [`Call`] holds the (reshaped, broadcast)
//! views and the axes; it plans, validates the indices and runs the kernel.

use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, Axis, IxDyn};

use crate::error::GatherError;
use crate::index::{Clip, GatherIndex, IndexMode, Raise, Wrap, resolve};
use crate::kernel::{BadIndex, Store, Task};
use crate::plan::{Layout, Loop, Plan, unravel};
use crate::small::Small;

/// A lowered gather: `gather_multiaxis(input, indices, axes)` with an index mode.
pub(crate) struct Call<'a, A, I> {
    /// The public method's name, for messages.
    pub op: &'static str,
    pub input: ArrayViewD<'a, A>,
    pub indices: ArrayViewD<'a, I>,
    pub axes: Small<usize>,
    pub mode: IndexMode,
    /// The shape of the input the caller passed, for messages.
    pub user_input: Small<usize>,
    /// The shape of the indices the caller passed, in which error positions are reported.
    /// The lowerings only insert unit axes before the coordinates, which keeps row-major
    /// order, so a flat position means the same in both.
    pub user_indices: Small<usize>,
    /// Unit axes of the lowered output that the caller's output does not have, ascending.
    pub remove: Small<usize>,
}

impl<'a, A: Clone + Send + Sync, I: GatherIndex> Call<'a, A, I> {
    /// A call whose indices are the caller's own (positions are reported as they are).
    pub fn new(
        op: &'static str,
        input: ArrayViewD<'a, A>,
        indices: ArrayViewD<'a, I>,
        axes: &[usize],
    ) -> Self {
        Call {
            op,
            user_input: Small::from(input.shape()),
            user_indices: Small::from(indices.shape()),
            input,
            indices,
            axes: Small::from(axes),
            mode: IndexMode::Raise,
            remove: Small::new(),
        }
    }

    /// The caller's output shape: the lowered one without the `remove` axes.
    fn final_shape(&self, lowered: &[usize]) -> Small<usize> {
        let mut removed = self.remove.iter().peekable();
        lowered
            .iter()
            .enumerate()
            .filter(|&(d, _)| removed.next_if_eq(&&d).is_none())
            .map(|(_, &n)| n)
            .collect()
    }

    fn plan(&self) -> Result<Plan, GatherError> {
        self.plan_lowered().map_err(|e| match e {
            GatherError::EmptyAxis {
                op,
                axis,
                output_shape,
                ..
            } => GatherError::EmptyAxis {
                op,
                axis,
                input_shape: self.user_input.to_vec(),
                output_shape: self.final_shape(&output_shape).to_vec(),
            },
            e => e,
        })
    }

    fn plan_lowered(&self) -> Result<Plan, GatherError> {
        Plan::new(
            self.op,
            Layout {
                shape: self.input.shape(),
                strides: self.input.strides(),
            },
            Layout {
                shape: self.indices.shape(),
                strides: self.indices.strides(),
            },
            &self.axes,
            std::mem::size_of::<A>(),
        )
    }

    /// Gathers into a new array of the output shape.
    pub fn alloc(self) -> Result<ArrayD<A>, GatherError> {
        let plan = self.plan()?;
        // Indices are checked by the kernel as it reads them (a separate pass would read
        // them twice); if one is bad, the kernel drops what it wrote and we free the rest.
        let strides = c_strides(&plan.out_shape);
        let loops = plan.loops(&strides);
        let mut buf: Vec<A> = Vec::with_capacity(plan.out_len);
        advise_huge_pages(&mut buf);
        let res = self.execute(&plan, &loops, buf.as_mut_ptr(), Store::Init);
        if res.is_err() {
            return Err(self.index_error(&plan));
        }
        // SAFETY: the kernel returned Ok, so it initialized all `out_len` elements (every
        // output position is written exactly once).
        unsafe { buf.set_len(plan.out_len) };
        // The removed axes have length 1, so the caller's shape has the same row-major
        // layout as the lowered one.
        let shape = IxDyn(&self.final_shape(&plan.out_shape));
        ArrayD::from_shape_vec(shape, buf).map_err(|_| GatherError::SizeOverflow {
            op: self.op,
            shape: plan.out_shape.to_vec(),
        })
    }

    /// Gathers into `out`, which must have the output shape. Every error but a bad index
    /// is found before the first write; after a bad index, `out` holds valid elements
    /// (old ones or input elements) in unspecified places.
    pub fn into(self, out: ArrayViewMutD<'_, A>) -> Result<(), GatherError> {
        let plan = self.plan()?;
        let expected = self.final_shape(&plan.out_shape);
        if out.shape() != &*expected {
            return Err(GatherError::OutputShape {
                op: self.op,
                expected: expected.to_vec(),
                found: out.shape().to_vec(),
            });
        }
        let mut out = out;
        for &ax in &self.remove {
            out = out.insert_axis(Axis(ax));
        }
        let loops = plan.loops(out.strides());
        self.execute(&plan, &loops, out.as_mut_ptr(), Store::Assign)
            .map_err(|BadIndex| self.index_error(&plan))
    }

    fn execute(&self, plan: &Plan, loops: &[Loop], out: *mut A, store: Store) -> Result<(), BadIndex> {
        let Some((lane, outer)) = loops.split_last() else {
            return Err(BadIndex); // `Plan::loops` is never empty
        };
        let task = Task {
            outer,
            lane: *lane,
            axes: &plan.axes,
            inp: self.input.as_ptr(),
            idx: self.indices.as_ptr(),
            out,
            store,
        };
        // SAFETY: the plan was built from these very views: positional strides are zero
        // on broadcast and gathered dimensions and every positional coordinate is below
        // the input's (or indices') own size there; gathered coordinates are resolved to
        // `0..len` of their axis; `comp` offsets stay within the last indices dimension.
        // `out` has the plan's output shape (checked by `into`, allocated by `alloc` with
        // C strides), is an exclusive borrow or fresh storage, and so aliases nothing.
        unsafe {
            match self.mode {
                IndexMode::Raise => task.run::<Raise>(),
                IndexMode::Wrap => task.run::<Wrap>(),
                IndexMode::Clip => task.run::<Clip>(),
            }
        }
    }

    /// The error for the first (row-major) out-of-range index.
    fn index_error(&self, plan: &Plan) -> GatherError {
        let k = plan.axes.len().max(1);
        let last = self.indices.shape().last().copied().unwrap_or(1).max(1);
        for (flat, v) in self.indices.iter().enumerate() {
            let Some(term) = plan.axes.get((flat % last) % k) else {
                break;
            };
            if resolve(*v, term.len, self.mode).is_none() {
                return GatherError::IndexOutOfBounds {
                    op: self.op,
                    index: v.to_i128(),
                    position: unravel(flat, &self.user_indices),
                    axis: term.axis,
                    axis_len: term.len,
                };
            }
        }
        unreachable_index_error(self.op)
    }
}

/// Only reached if the kernel and the scan disagree, which would be a bug in this crate.
#[cold]
fn unreachable_index_error(op: &'static str) -> GatherError {
    debug_assert!(
        false,
        "{op}: the kernel reported a bad index the scan did not find"
    );
    GatherError::IndexOutOfBounds {
        op,
        index: 0,
        position: Vec::new(),
        axis: 0,
        axis_len: 0,
    }
}

/// Asks Linux to back a large fresh output with transparent huge pages, as NumPy does for
/// arrays of 4 MiB and more: a 32 MiB output then costs 16 page faults instead of 8192,
/// which otherwise take longer than the gather itself.
#[cfg(all(target_os = "linux", not(miri)))]
fn advise_huge_pages<A>(buf: &mut Vec<A>) {
    use std::ffi::{c_int, c_void};
    const HUGE_PAGE: usize = 2 << 20;
    const MADV_HUGEPAGE: c_int = 14;
    unsafe extern "C" {
        fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
    }
    let bytes = buf.capacity() * std::mem::size_of::<A>();
    if bytes < 4 << 20 {
        return;
    }
    let base = buf.as_mut_ptr().cast::<u8>();
    let skip = (base as usize).next_multiple_of(HUGE_PAGE) - base as usize;
    let len = (bytes.saturating_sub(skip)) & !(HUGE_PAGE - 1);
    if len > 0 {
        // SAFETY: `base + skip .. + len` lies inside the buffer's allocation and starts on a
        // page boundary (a multiple of 2 MiB); MADV_HUGEPAGE only changes how the kernel
        // backs those pages, never their contents or mapping. Failure is harmless and ignored.
        unsafe { madvise(base.add(skip).cast(), len, MADV_HUGEPAGE) };
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn advise_huge_pages<A>(_: &mut Vec<A>) {}

/// Row-major strides of `shape`, in elements.
fn c_strides(shape: &[usize]) -> Small<isize> {
    let mut strides: Small<isize> = shape.iter().map(|_| 0).collect();
    let mut acc = 1isize;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.wrapping_mul(n as isize);
    }
    strides
}
