//! The one gather every method lowers to: a [`Call`] holds the caller's arrays (as
//! [`Raw`] borrows), their lowered layouts and the axes; it plans, validates the indices
//! and runs the kernel.
//!
//! A call is generic over how the input is borrowed so that a scatter lowers its
//! destination (borrowed mutably) exactly as the matching gather lowers its input.

use std::marker::PhantomData;
use std::sync::Mutex;

use ndarray::{ArrayD, ArrayRef, Axis, Dimension, IxDyn, RawData, ShapeBuilder, ViewRepr};

use crate::error::{GatherError, internal};
use crate::index::{Clip, GatherIndex, IndexMode, Raise, Resolve, Wrap, resolve};
use crate::kernel::schedule::{self, Ranges};
use crate::kernel::walk::TINY;
use crate::kernel::{BadIndex, Operand, SCATTER_TINY, ScatterTask, Store, Task, scatter_tiny};
use crate::plan::{AxisTerm, Layout, Loop, Plan, checked_len, unravel};
use crate::reduce::Reducer;
use crate::small::Small;

/// A plan's indices are resolved on the pool's threads in ranges of about this many bytes.
const RESOLVE_BYTES: usize = 1 << 18;

/// The shape and strides of a view as a lowering sees it: the caller's, with unit axes
/// inserted. The lowerings build these instead of reshaping ndarray's dynamic-rank views
/// (W7's `gather` spent a fifth of its instructions inserting axes into views).
#[derive(Debug, Clone)]
pub(crate) struct Dims {
    pub shape: Small<usize>,
    pub strides: Small<isize>,
}

impl Dims {
    /// The layout of a view with this shape and strides, with `n` unit axes inserted
    /// before each dimension `at` of `units` (ascending, positions in `shape`). Inlined
    /// into the lowering, which moves the result into its call: a returned `Dims` was
    /// copied with 16-byte loads right after its 8-byte stores, and waited for them (W7's
    /// allocating call: 190-198 -> 183-187 ns, a `GatherPlan::gather` build: 269-280 ->
    /// 238-242 ns, alternating runs).
    #[inline(always)]
    pub fn with_units(shape: &[usize], strides: &[isize], units: &[(usize, usize)]) -> Dims {
        let rank = shape.len() + units.iter().map(|u| u.1).sum::<usize>();
        // Filled in place: unit axes are the ones left as they were made (W7's allocating
        // call: ~350 -> ~290 instructions for its two layouts).
        let mut d = Dims {
            shape: std::iter::repeat_n(1, rank).collect(),
            strides: std::iter::repeat_n(0, rank).collect(),
        };
        let (lens, steps): (&mut [usize], &mut [isize]) = (&mut d.shape, &mut d.strides);
        let (mut units, mut k) = (units.iter().peekable(), 0);
        for (dim, (&len, &stride)) in shape.iter().zip(strides).enumerate() {
            while let Some(&(_, n)) = units.next_if(|u| u.0 <= dim) {
                k += n;
            }
            if let (Some(l), Some(s)) = (lens.get_mut(k), steps.get_mut(k)) {
                (*l, *s) = (len, stride);
            }
            k += 1;
        }
        d
    }

    #[inline]
    fn layout(&self) -> Layout<'_> {
        Layout {
            shape: &self.shape,
            strides: &self.strides,
        }
    }
}

/// A caller's array as a call reads it: where its first element is, and its shape and
/// strides, borrowed from the array for `'s`. `S` says how the elements are borrowed:
/// `ViewRepr<&'a A>` (a gather's input, any indices) or `ViewRepr<&'a mut A>` (a
/// scatter's destination).
///
/// (Not ndarray's dynamic-rank views: making one took ~16 ns from an `ArrayD` and ~35 ns
/// from an `Array3`, and a tiny call made three.)
pub(crate) struct Raw<'s, S: RawData> {
    ptr: *mut S::Elem,
    shape: &'s [usize],
    strides: &'s [isize],
    borrow: PhantomData<S>,
}

// SAFETY: a `Raw` is a borrow of its array, shared or exclusive as `S` says; it is sent and
// shared as that borrow would be.
unsafe impl<S: RawData + Send> Send for Raw<'_, S> {}
// SAFETY: as above; `&Raw` gives no access that `&S`'s borrow would not.
unsafe impl<S: RawData + Sync> Sync for Raw<'_, S> {}

impl<'a, A> Raw<'a, ViewRepr<&'a A>> {
    /// A shared borrow of `a`.
    #[inline(always)]
    pub fn of<D: Dimension>(a: &'a ArrayRef<A, D>) -> Self {
        Raw {
            ptr: a.as_ptr().cast_mut(),
            shape: a.shape(),
            strides: a.strides(),
            borrow: PhantomData,
        }
    }

    /// `self` with its elements at `ptr`, which its layout never leaves: an array of
    /// no elements whose lowered layout (zero strides) stands at a real element.
    ///
    /// # Safety
    /// Either `self` has no elements and the call's lowered layout has only zero strides,
    /// or every offset of `self`'s layout from `ptr` is an element valid for reads for
    /// `'a`.
    #[inline]
    pub unsafe fn at(self, ptr: *const A) -> Self {
        Raw {
            ptr: ptr.cast_mut(),
            ..self
        }
    }

    /// The same borrow for a shorter `'b`. (`Raw` is invariant in `S`, through its
    /// pointer to `S::Elem`, so this does not happen by itself.)
    #[inline(always)]
    pub fn shorten<'b>(self) -> Raw<'b, ViewRepr<&'b A>>
    where
        'a: 'b,
    {
        Raw {
            ptr: self.ptr,
            shape: self.shape,
            strides: self.strides,
            borrow: PhantomData,
        }
    }

    /// The elements as a slice, in row-major order, when the layout is standard.
    pub fn as_slice(&self) -> Option<&'a [A]> {
        // SAFETY: a standard layout's elements are the `len` elements from `ptr` on.
        self.is_standard_layout()
            .then(|| unsafe { std::slice::from_raw_parts(self.ptr.cast_const(), self.len()) })
    }

    /// The elements in row-major order.
    pub fn iter(&self) -> impl Iterator<Item = &'a A> + '_ {
        let (shape, strides) = (self.shape, self.strides);
        let mut at: Small<usize> = shape.iter().map(|_| 0).collect();
        let mut offset = 0isize;
        (0..self.len()).map(move |k| {
            if k > 0 {
                // The next position: the last dimension that is not at its end steps on,
                // the ones after it start again.
                for d in (0..shape.len()).rev() {
                    at[d] += 1;
                    offset += strides[d];
                    if at[d] < shape[d] {
                        break;
                    }
                    offset -= strides[d] * shape[d] as isize;
                    at[d] = 0;
                }
            }
            // SAFETY: `at` is a position of the shape, so `offset` is an element's (the
            // borrow `Raw::of` made).
            unsafe { &*self.ptr.offset(offset) }
        })
    }
}

impl<'a> Raw<'a, ViewRepr<&'a ()>> {
    /// Elements of `()` at a dangling pointer, laid out by `shape` and `strides`.
    ///
    /// # Safety
    /// The product of `shape`'s non-zero lengths fits in `isize`, and so does every
    /// offset the layout forms (an element of `()` takes no memory, so every one of them
    /// lies at the dangling pointer).
    #[inline]
    pub unsafe fn at_dangling(shape: &'a [usize], strides: &'a [isize]) -> Self {
        Raw {
            ptr: std::ptr::NonNull::<()>::dangling().as_ptr(),
            shape,
            strides,
            borrow: PhantomData,
        }
    }
}

impl<'a, A> Raw<'a, ViewRepr<&'a mut A>> {
    /// An exclusive borrow of `a`'s elements (its shape and strides are read, shared).
    #[inline(always)]
    pub fn of_mut<D: Dimension>(a: &'a mut ArrayRef<A, D>) -> Self {
        let ptr = a.as_mut_ptr();
        let a: &'a ArrayRef<A, D> = a;
        Raw {
            ptr,
            shape: a.shape(),
            strides: a.strides(),
            borrow: PhantomData,
        }
    }

    /// The first element, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut A {
        self.ptr
    }
}

impl<S: RawData> Raw<'_, S> {
    #[inline]
    pub fn shape(&self) -> &[usize] {
        self.shape
    }

    #[inline]
    pub fn strides(&self) -> &[isize] {
        self.strides
    }

    #[inline]
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// The first element.
    #[inline]
    pub fn as_ptr(&self) -> *const S::Elem {
        self.ptr.cast_const()
    }

    /// Whether the elements lie in row-major order, one after the other (as ndarray
    /// decides it: dimensions of length 1 may have any stride; an empty array is).
    pub fn is_standard_layout(&self) -> bool {
        if self.shape.contains(&0) {
            return true;
        }
        let mut step = 1isize;
        for (&n, &s) in self.shape.iter().zip(self.strides).rev() {
            if n != 1 && s != step {
                return false;
            }
            step *= n as isize;
        }
        true
    }
}

/// A lowered gather: `gather_multiaxis(input, indices, axes)` with an index mode, where
/// `input` and `indices` have the lowered layouts `inp` and `idx`.
pub(crate) struct Call<'a, S: RawData, I> {
    /// The public method's name, for messages.
    op: &'static str,
    /// The caller's input (flattened by `take`; `gather_elements` reads a leading block
    /// of it, its lowered layout).
    input: Raw<'a, S>,
    /// The caller's indices: the lowerings only insert unit axes before the coordinates,
    /// which keeps row-major order, so a flat position means the same in `idx`.
    indices: Raw<'a, ViewRepr<&'a I>>,
    /// The lowered layouts, where they are not the arrays' own.
    inp: Option<Dims>,
    idx: Option<Dims>,
    axes: Small<usize>,
    mode: IndexMode,
    /// The input shape the caller passed, in which errors are reported, where it is not
    /// `input`'s.
    caller_input: Option<Small<usize>>,
    /// Unit axes of the lowered output that the caller's output does not have, ascending.
    remove: Small<usize>,
}

impl<'a, S: RawData, I: GatherIndex> Call<'a, S, I> {
    /// `gather_multiaxis` on the caller's own arrays.
    pub fn multiaxis(
        op: &'static str,
        input: Raw<'a, S>,
        indices: Raw<'a, ViewRepr<&'a I>>,
        axes: &[usize],
    ) -> Self {
        Self::lowered(
            op,
            None,
            (input, indices),
            (None, None),
            axes,
            IndexMode::Raise,
            &[],
        )
    }

    /// A lowering of the caller's arrays `input` and `indices` (`caller_input` is the
    /// input's shape as the caller passed it, if not `input`'s) to the layouts `inp` and
    /// `idx` (if not the arrays' own), made by inserting unit axes before the coordinates;
    /// `remove` are the unit axes of the lowered output that the caller's output does not
    /// have, ascending.
    ///
    /// Inlined, as the functions that make its arguments are: an argument written in
    /// 8-byte stores and moved on at once was read back in 16-byte loads, which stall on
    /// store forwarding (with ndarray's views as arguments, four times per tiny call: W7
    /// `_into` 89-92 -> 84-85 ns, allocating 184-201 -> 168-174 ns, S4 88-95 -> 78 ns,
    /// alternating runs on an AMD EPYC VM).
    #[inline(always)]
    pub fn lowered(
        op: &'static str,
        caller_input: Option<Small<usize>>,
        (input, indices): (Raw<'a, S>, Raw<'a, ViewRepr<&'a I>>),
        (inp, idx): (Option<Dims>, Option<Dims>),
        axes: &[usize],
        mode: IndexMode,
        remove: &[usize],
    ) -> Self {
        debug_assert!(remove.is_sorted(), "{op}: remove axes {remove:?} must ascend");
        // (The lowered input may be a leading block of the caller's; the lowered indices
        // of indices without elements stand at one element.)
        debug_assert!(
            inp.as_ref()
                .is_none_or(|d| d.shape.iter().product::<usize>() <= input.len())
        );
        debug_assert!(
            idx.as_ref()
                .is_none_or(|d| indices.len() == 0 || d.shape.iter().product::<usize>() == indices.len())
        );
        Call {
            op,
            input,
            indices,
            inp,
            idx,
            axes: Small::from(axes),
            mode,
            caller_input,
            remove: Small::from(remove),
        }
    }

    /// The lowered input's layout.
    #[inline]
    fn inp(&self) -> Layout<'_> {
        match &self.inp {
            Some(d) => d.layout(),
            None => Layout {
                shape: self.input.shape(),
                strides: self.input.strides(),
            },
        }
    }

    /// The lowered indices' layout.
    #[inline]
    fn idx(&self) -> Layout<'_> {
        match &self.idx {
            Some(d) => d.layout(),
            None => Layout {
                shape: self.indices.shape(),
                strides: self.indices.strides(),
            },
        }
    }

    /// An empty plan for [`Call::plan`], named for this call's method.
    #[inline]
    pub fn empty_plan(&self) -> Plan {
        Plan::empty(self.op)
    }

    /// The caller's output shape: the lowered one without the `remove` axes.
    pub fn final_shape(&self, lowered: &[usize]) -> Small<usize> {
        self.final_dims(lowered).collect()
    }

    /// Whether `shape` is [`Call::final_shape`] of `lowered` (compared in place: W7's call
    /// spent a tenth of its instructions copying and comparing shapes).
    #[inline]
    pub fn is_final_shape(&self, lowered: &[usize], shape: &[usize]) -> bool {
        shape.len() + self.remove.len() == lowered.len()
            && self.final_dims(lowered).zip(shape).all(|(n, &m)| n == m)
    }

    /// The lengths of [`Call::final_shape`].
    #[inline]
    fn final_dims<'s>(&'s self, lowered: &'s [usize]) -> impl Iterator<Item = usize> + 's {
        let mut removed = self.remove.iter().peekable();
        lowered
            .iter()
            .enumerate()
            .filter(move |&(d, _)| removed.next_if_eq(&&d).is_none())
            .map(|(_, &n)| n)
    }

    /// The strides of a view of the caller's output shape with the removed unit axes put
    /// back (as stride 0).
    fn lower_output(&self, strides: &[isize]) -> Small<isize> {
        if self.remove.is_empty() {
            return Small::from(strides);
        }
        self.output_strides(strides).collect()
    }

    /// [`Call::lower_output`]'s strides, one by one.
    #[inline]
    fn output_strides<'s>(&'s self, strides: &'s [isize]) -> impl Iterator<Item = isize> + 's {
        let mut given = strides.iter();
        let mut removed = self.remove.iter().peekable();
        (0..strides.len() + self.remove.len()).map(move |d| match removed.next_if_eq(&&d) {
            Some(_) => 0,
            None => given.next().copied().unwrap_or(0),
        })
    }

    /// Validates the call (every error but an out-of-range index) and describes it in
    /// `plan`, an empty one ([`Plan::build`]).
    #[inline(always)]
    pub fn plan(&self, plan: &mut Plan, elem_size: usize) -> Result<(), GatherError> {
        let built = plan.build(self.inp(), self.idx(), &self.axes, elem_size);
        built.map_err(|e| match e {
            GatherError::EmptyAxis {
                op,
                axis,
                output_shape,
                ..
            } => GatherError::EmptyAxis {
                op,
                axis,
                input_shape: match &self.caller_input {
                    Some(shape) => shape.to_vec(),
                    None => self.input.shape().to_vec(),
                },
                output_shape: self.final_shape(&output_shape).to_vec(),
            },
            e => e,
        })
    }

    /// The error for the first (row-major) out-of-range index, if any. Only the indices of
    /// a non-empty output are read.
    pub fn first_bad_index(&self, plan: &Plan) -> Option<GatherError> {
        self.resolve_each(plan, |_| ()).err()
    }

    /// Resolves every index value in row-major order, passing each position to `each`,
    /// or returns the error for the first out-of-range one. Stops early, with `Ok`, when
    /// the plan has no axes (the values are never read).
    pub fn resolve_each(&self, plan: &Plan, each: impl FnMut(usize)) -> Result<(), GatherError> {
        if plan.axes.is_empty() {
            return Ok(());
        }
        // Without an iterator over dynamic-rank positions where the layout allows.
        match self.indices.as_slice() {
            Some(values) => self.scan(plan, values.iter(), each),
            None => self.scan(plan, self.indices.iter(), each),
        }
    }

    /// Whether the caller's indices are in standard layout, so that the plan's index
    /// offsets are row-major positions: where [`Call::resolve_all`] puts each value.
    pub fn indices_in_standard_layout(&self) -> bool {
        self.indices.is_standard_layout()
    }

    /// Every index value resolved, in row-major order, each converted by `convert`; or the
    /// error for the first out-of-range one. Empty when the plan has no axes.
    pub fn resolve_all<P: Copy + Send>(
        &self,
        plan: &Plan,
        convert: impl Fn(usize) -> P + Sync,
    ) -> Result<Vec<P>, GatherError> {
        match (self.indices.as_slice(), &plan.axes[..], self.mode) {
            // One gathered axis, contiguous indices: a branch-free loop that vectorizes,
            // over ranges of the indices on the pool's threads when they are large (W3's
            // plan: 2.35 -> 1.55 ms, 4M indices).
            (Some(indices), [term], IndexMode::Raise) => {
                // Index `v` resolved and converted; `good` cleared if it was out of range.
                let resolve = |v: I, good: &mut bool| {
                    let (i, ok) = Raise::resolve_or_zero(v, term.len);
                    *good &= ok;
                    convert(i)
                };
                if !schedule::worth_parallel(size_of_val(indices)) {
                    let mut good = true;
                    let values: Vec<P> = indices.iter().map(|&v| resolve(v, &mut good)).collect();
                    return if good {
                        Ok(values)
                    } else {
                        Err(self.index_error(plan))
                    };
                }
                // Position 0 converts to zero bits: allocated zeroed, not written twice.
                let mut values = vec![convert(0); indices.len()];
                let ranges = Ranges::new(indices.len(), size_of_val(indices), RESOLVE_BYTES);
                let parts: Vec<Mutex<&mut [P]>> = values.chunks_mut(ranges.per).map(Mutex::new).collect();
                let outcome = schedule::run_jobs(ranges.count, false, |c| {
                    let mut good = true;
                    // Each part is locked once, by its own job: never poisoned.
                    let mut to = parts[c].lock().map_err(|_| BadIndex)?;
                    for (p, &v) in to.iter_mut().zip(&indices[ranges.get(c)]) {
                        *p = resolve(v, &mut good);
                    }
                    if good { Ok(()) } else { Err(BadIndex) }
                });
                drop(parts);
                match outcome.finish() {
                    Ok(()) => Ok(values),
                    Err(BadIndex) => Err(self.index_error(plan)),
                }
            }
            _ => {
                let mut values = Vec::with_capacity(self.indices.len());
                self.resolve_each(plan, |i| values.push(convert(i)))?;
                Ok(values)
            }
        }
    }

    /// [`Call::resolve_each`] over the index values in row-major order.
    fn scan<'v>(
        &self,
        plan: &Plan,
        values: impl Iterator<Item = &'v I>,
        mut each: impl FnMut(usize),
    ) -> Result<(), GatherError>
    where
        I: 'v,
    {
        let last = self.idx().shape.last().copied().unwrap_or(1).max(1);
        // `col` runs along the last dimension, whose values cycle through the axis terms.
        let (mut col, mut j) = (0, 0);
        for (flat, v) in values.enumerate() {
            let term = &plan.axes[j];
            let Some(i) = resolve(*v, term.len, self.mode) else {
                return Err(GatherError::IndexOutOfBounds {
                    op: self.op,
                    index: v.to_i128(),
                    position: unravel(flat, self.indices.shape()).to_vec(),
                    axis: term.axis,
                    axis_len: term.len,
                });
            };
            each(i);
            (col, j) = (col + 1, j + 1);
            if j == plan.axes.len() {
                j = 0;
            }
            if col == last {
                (col, j) = (0, 0);
            }
        }
        Ok(())
    }

    /// The error for the bad index the kernel reported.
    fn index_error(&self, plan: &Plan) -> GatherError {
        self.first_bad_index(plan)
            .unwrap_or_else(|| internal(self.op, "a bad index the scan did not find"))
    }
}

impl<'a, A: Clone + Send + Sync, I: GatherIndex> Call<'a, ViewRepr<&'a A>, I> {
    /// Gathers into a new array of the output shape.
    pub fn alloc(&self) -> Result<ArrayD<A>, GatherError> {
        let mut plan = self.empty_plan();
        self.plan(&mut plan, size_of::<A>())?;
        // Indices are checked by the kernel as it reads them (a separate pass would read
        // them twice); if one is bad, the kernel drops what it wrote and we free the rest.
        let merged;
        let loops: &[Loop] = if plan.out_len <= TINY {
            plan.set_c_out_strides();
            &plan.dims
        } else {
            merged = fresh_loops::<A>(plan.c_loops(), &plan.axes);
            &merged
        };
        // The removed axes have length 1, so the caller's shape has the same row-major
        // layout as the lowered one.
        let shape = self.final_shape(&plan.out_shape);
        // SAFETY: `fresh` passes C-contiguous uninitialized storage of `out_len` elements,
        // walked with C strides; the kernel initializes every element when it returns Ok.
        unsafe {
            fresh(self.op, plan.out_len, &shape, |out| {
                self.execute(&plan, loops, out, Store::Init)
            })
        }
    }

    /// Gathers into `out`, which must have the output shape. Every error but a bad index
    /// is found before the first write; after a bad index, `out` holds valid elements
    /// (old ones or input elements) in unspecified places.
    ///
    /// (`out` is read in place, not made a dynamic-rank view, which ndarray writes in
    /// 8-byte stores that the next move reads back in 16-byte loads: W7's `_into` 84 ->
    /// 80-81 ns, alternating runs.)
    pub fn gather_into<D: Dimension>(&self, out: &mut ArrayRef<A, D>) -> Result<(), GatherError> {
        let mut plan = self.empty_plan();
        self.plan(&mut plan, size_of::<A>())?;
        if !self.is_final_shape(&plan.out_shape, out.shape()) {
            return Err(GatherError::OutputShape {
                op: self.op,
                expected: self.final_shape(&plan.out_shape).to_vec(),
                found: out.shape().to_vec(),
            });
        }
        let out_ptr = out.as_mut_ptr();
        if plan.out_len <= TINY {
            plan.set_out_strides(self.output_strides(out.strides()));
            // SAFETY: `out` has the plan's output shape (checked above) and is an
            // exclusive borrow, so it aliases nothing.
            return unsafe { self.execute(&plan, &plan.dims, out_ptr, Store::Assign) };
        }
        let loops = plan.loops_any_order(&self.lower_output(out.strides()));
        // SAFETY: as above.
        unsafe { self.execute(&plan, &loops, out_ptr, Store::Assign) }
    }

    /// Runs the gather of `plan` (made from this call's layouts) over `loops` into `out`;
    /// an out-of-range index becomes its error.
    ///
    /// # Safety
    /// `out` is valid for the contract of [`Task::new`] with these loops and `store`.
    unsafe fn execute(
        &self,
        plan: &Plan,
        loops: &[Loop],
        out: *mut A,
        store: Store,
    ) -> Result<(), GatherError> {
        let input = Operand::new(self.inp(), self.input.as_ptr());
        let indices = Operand::new(self.idx(), self.indices.as_ptr());
        // SAFETY: the plan was made from these layouts of these arrays; `out` by this
        // function's contract.
        let task = unsafe { Task::new(loops, &plan.axes, input, indices, out, store) };
        let ran = match self.mode {
            IndexMode::Raise => task.run::<Raise>(),
            IndexMode::Wrap => task.run::<Wrap>(),
            IndexMode::Clip => task.run::<Clip>(),
        };
        ran.map_err(|BadIndex| self.index_error(plan))
    }
}

/// How a scatter's `updates` must fit the matching gather's output shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Exactly that shape.
    Exact,
    /// The same rank and at least that size on every dimension: the leading block is used
    /// (torch's `scatter_`).
    Leading,
    /// Broadcast to that shape (numpy's `put_along_axis`).
    Broadcast,
}

impl<'a, A: Clone + Send + Sync, I: GatherIndex> Call<'a, ViewRepr<&'a mut A>, I> {
    /// Scatters `updates` into the input through `reducer`: every error (shapes, axes,
    /// indices) is found before the first write.
    pub fn scatter<E: Dimension, R: Reducer<A>>(
        &mut self,
        updates: &ArrayRef<A, E>,
        fit: Fit,
        reducer: R,
    ) -> Result<(), GatherError> {
        let mut plan = self.empty_plan();
        self.plan(&mut plan, size_of::<A>())?;
        // Updates of the very shape fit every way, read in place; others through a
        // view that fits them.
        let (view, fitted);
        let updates = if self.is_final_shape(&plan.out_shape, updates.shape()) {
            Raw::of(updates)
        } else {
            let expected = self.final_shape(&plan.out_shape);
            view = updates.view().into_dyn();
            let fits = match fit {
                Fit::Exact => None,
                Fit::Leading => (view.ndim() == expected.len()
                    && view.shape().iter().zip(&*expected).all(|(u, e)| u >= e))
                .then(|| {
                    let mut v = view.view();
                    for (d, &n) in expected.iter().enumerate() {
                        v.slice_axis_inplace(Axis(d), ndarray::Slice::from(..n));
                    }
                    v
                }),
                Fit::Broadcast => view.broadcast(IxDyn(&expected)),
            };
            fitted = fits.ok_or_else(|| GatherError::UpdatesShape {
                op: self.op,
                expected: expected.to_vec(),
                found: view.shape().to_vec(),
            })?;
            Raw::of(&*fitted)
        };
        if plan.out_len == 0 {
            return Ok(());
        }
        let dst = self.input.as_mut_ptr().cast_const();
        let dst = Operand::new(self.inp(), dst);
        let indices = Operand::new(self.idx(), self.indices.as_ptr());
        // SAFETY: (both arms) the plan was made from these layouts of these arrays;
        // `updates` has the caller's output shape (fitted above), so with the removed unit
        // axes put back the plan's; the destination is an exclusive borrow, so nothing
        // else reads or writes it, and `dst` comes from `as_mut_ptr`.
        let done = unsafe {
            if plan.out_len <= SCATTER_TINY {
                plan.set_out_strides(self.output_strides(updates.strides()));
                scatter_tiny(&plan.dims, &plan.axes, dst, updates.as_ptr(), indices, reducer)
            } else {
                let loops = plan.loops(&self.lower_output(updates.strides()));
                ScatterTask::new(&loops, &plan.axes, dst, updates.as_ptr(), indices).scatter(reducer)
            }
        };
        done.map_err(|BadIndex| self.index_error(&plan))
    }
}

/// The loops for a gather of `A`s into fresh C-contiguous storage, from its row-major
/// `loops`: in [`strips`](crate::plan::strips) when `A` has no drop glue (the kernel may
/// then fill fresh storage in any order: only elements with drop glue are counted as
/// written, in row-major order, to be dropped again after a failure).
pub(crate) fn fresh_loops<A>(loops: Small<Loop>, axes: &[AxisTerm]) -> Small<Loop> {
    if std::mem::needs_drop::<A>() {
        loops
    } else {
        crate::plan::strips(loops, axes)
    }
}

/// A new array of `shape` (of `len` elements), filled by `fill` through a pointer to
/// uninitialized C-contiguous storage for `len` elements.
///
/// # Safety
/// When `fill` returns `Ok`, it has initialized all `len` elements; when it returns `Err`,
/// it has left none initialized (or dropped them again).
pub(crate) unsafe fn fresh<A>(
    op: &'static str,
    len: usize,
    shape: &[usize],
    fill: impl FnOnce(*mut A) -> Result<(), GatherError>,
) -> Result<ArrayD<A>, GatherError> {
    if checked_len(shape, size_of::<A>()) != Some(len) {
        return Err(internal(op, "the output's length is not its shape's"));
    }
    // C-order strides, given rather than derived by ndarray (~260 -> ~140 instructions of
    // W7's allocating call). Made before the gather, so that ndarray moves them long
    // after they were written: moved at once, the 16-byte loads of the move waited for
    // the 8-byte stores that wrote them (W7's allocating call: 172-176 -> 159-168 ns,
    // alternating runs).
    let dims = IxDyn(shape).strides(default_strides(shape));
    let mut buf: Vec<A> = Vec::with_capacity(len);
    fault_in_huge_pages(&mut buf);
    fill(buf.as_mut_ptr())?;
    // SAFETY: `fill` returned Ok, so it initialized all `len` elements.
    unsafe { buf.set_len(len) };
    // SAFETY: `buf` holds exactly the `len` elements of `shape` (of at most isize::MAX
    // bytes), laid out in C order from the first by these strides (ndarray's own
    // `from_shape_vec` without the general checks: ~140 of a tiny allocating gather's
    // ~3200 instructions).
    Ok(unsafe { ArrayD::from_shape_vec_unchecked(dims, buf) })
}

/// ndarray's C-order strides for an array of `shape`: all zero for an empty array, as
/// ndarray makes them.
pub(crate) fn default_strides(shape: &[usize]) -> IxDyn {
    // Computed on the stack and copied once: `IxDyn`'s every element access branches on
    // where its items are (W7's allocating call: ~118 -> ~85 instructions here).
    let mut strides = [0usize; 8];
    let Some(s) = strides.get_mut(..shape.len()) else {
        let mut strides = IxDyn::zeros(shape.len());
        c_order(shape, strides.slice_mut());
        return strides;
    };
    c_order(shape, s);
    IxDyn(s)
}

/// ndarray's C-order strides for `shape`, signed (all zero for an empty array).
pub(crate) fn c_strides(shape: &[usize]) -> Small<isize> {
    let mut strides: Small<usize> = shape.iter().map(|_| 0).collect();
    c_order(shape, &mut strides);
    strides.iter().map(|&s| s as isize).collect()
}

/// Writes ndarray's C-order strides for `shape` into `strides` (of the same length).
fn c_order(shape: &[usize], strides: &mut [usize]) {
    if shape.iter().all(|&n| n > 0) {
        let mut acc = 1;
        for (s, &n) in strides.iter_mut().zip(shape).rev() {
            *s = acc;
            acc *= n;
        }
    }
}

/// Asks Linux to back a large fresh output with transparent huge pages, as NumPy does for
/// arrays of 4 MiB and more (a 32 MiB output then costs 16 page faults instead of 8192,
/// which otherwise take longer than the gather itself), and to fault them in now, from
/// this one thread (`MADV_POPULATE_WRITE`, Linux 5.14).
///
/// The kernel zeroes every fresh page as it maps it. Faulted by the gather's threads, two
/// threads writing near each other fault the same huge page, and both zero it before one
/// of them maps it; populated by one call, each page is zeroed once (alternating runs: W1
/// allocating 4.4-4.8 -> 3.1-3.6 ms, W8 4.9-5.9 -> 3.5-4.3 ms; two threads populating
/// one half each were as slow as not populating).
#[cfg(all(target_os = "linux", not(miri)))]
fn fault_in_huge_pages<A>(buf: &mut Vec<A>) {
    const HUGE_PAGE: usize = 2 << 20;
    let bytes = buf.capacity() * size_of::<A>();
    if bytes < 4 << 20 {
        return;
    }
    let base = buf.as_mut_ptr().cast::<u8>();
    let skip = (base as usize).next_multiple_of(HUGE_PAGE) - base as usize;
    let len = (bytes.saturating_sub(skip)) & !(HUGE_PAGE - 1);
    if len > 0 {
        // SAFETY: `base + skip .. + len` lies inside the buffer's allocation and starts on a
        // page boundary (a multiple of 2 MiB). MADV_HUGEPAGE only changes how the kernel
        // backs those pages; MADV_POPULATE_WRITE faults them in as a write to each would,
        // and the buffer is ours and uninitialized, so neither changes anything the program
        // can observe but time. Failure (an older kernel, no memory to spare) is harmless
        // and ignored: the pages then fault as they are written.
        unsafe {
            let start = base.add(skip).cast();
            libc::madvise(start, len, libc::MADV_HUGEPAGE);
            libc::madvise(start, len, libc::MADV_POPULATE_WRITE);
        }
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn fault_in_huge_pages<A>(_: &mut Vec<A>) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_arrays_read_as_ndarray_reads_them() {
        use ndarray::{Array3, ArrayViewD, s};
        let a = Array3::from_shape_fn((3, 4, 5), |(i, j, k)| (i * 100 + j * 10 + k) as i32);
        let b = a.broadcast((2, 3, 4, 5)).expect("broadcast");
        let empty = a.slice(s![.., 1..1, ..]);
        let layouts: Vec<ArrayViewD<'_, i32>> = vec![
            a.view().into_dyn(),
            a.t().into_dyn(),
            a.slice(s![..;-1, 1..;2, ..]).into_dyn(),
            a.slice(s![.., 2..3, ..;3]).into_dyn(),
            a.slice(s![1, .., 4]).into_dyn(),
            b.into_dyn(),
            empty.into_dyn(),
            a.slice(s![1..2, .., ..]).into_dyn(),
        ];
        for v in &layouts {
            let raw = Raw::of(&**v);
            assert_eq!(
                (raw.shape(), raw.strides(), raw.len()),
                (v.shape(), v.strides(), v.len())
            );
            assert_eq!(
                raw.is_standard_layout(),
                v.is_standard_layout(),
                "{:?}",
                v.strides()
            );
            assert_eq!(raw.as_slice(), v.as_slice(), "{:?}", v.strides());
            assert!(raw.iter().eq(v.iter()), "{:?}", v.strides());
        }
    }

    #[test]
    fn unit_axes_go_before_their_dimensions() {
        let d = Dims::with_units(&[4, 3], &[3, 1], &[(0, 1), (1, 2), (2, 1)]);
        assert_eq!(
            (&*d.shape, &*d.strides),
            (&[1, 4, 1, 1, 3, 1][..], &[0, 3, 0, 0, 1, 0][..])
        );
        let none = Dims::with_units(&[5], &[-2], &[(1, 0)]);
        assert_eq!((&*none.shape, &*none.strides), (&[5][..], &[-2][..]));
        // Past six dimensions the arrays spill to the heap, in the same order.
        let many = Dims::with_units(&[2, 3], &[3, 1], &[(1, 5)]);
        assert_eq!(&*many.shape, &[2, 1, 1, 1, 1, 1, 3]);
    }
}
