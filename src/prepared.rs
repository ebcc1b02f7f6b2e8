//! Prepared gathers: indices checked and resolved once for an input shape, then applied to
//! any number of inputs of that shape.
//!
//! A plan is built by lowering the gather over a stand-in input of the plan's shape (a view
//! of zero-sized elements, so it costs nothing), which yields exactly the method's checks
//! and errors. The indices are then resolved: for a tiny output, into the input offset of
//! each output element; else into positions, stored in the narrowest type that holds them,
//! with the dimensions along which they repeat kept once. `apply` lowers the real input
//! the same way, with the positions as indices.

use ndarray::{ArrayD, ArrayRef, ArrayViewD, Axis, Dimension, IxDyn, ShapeBuilder, Slice};

use crate::axis::{AxisArg, TakeAxis};
use crate::core::{Call, default_strides, fresh};
use crate::error::{GatherError, internal};
use crate::index::{GatherIndex, IndexMode, Raise};
use crate::kernel::walk::{self, each_lane, split_innermost};
use crate::kernel::{BadIndex, Operand, Store, Task};
use crate::lower::{self, Lowering};
use crate::plan::{AxisTerm, Loop, Plan, checked_len, unravel};
use crate::small::Small;

/// A gather whose indices were checked and resolved once, for inputs of one shape: the
/// constant-index gather of an ONNX graph, a fixed sampling grid over every frame, the
/// same token ids over every layer's table, a small lookup in a hot loop.
///
/// Each constructor mirrors one method of [`GatherExt`](crate::GatherExt), with the
/// input's *shape* in place of the input, and returns exactly the error that method would
/// return for an input of that shape (out-of-range indices included). Then
/// [`apply`](GatherPlan::apply) and [`apply_into`](GatherPlan::apply_into) gather from any
/// input of that shape (any element type, any memory layout) without reading, checking or
/// converting an index again. It is the Simd library's `SynetGatherElements`
/// (`Init` / `SetIndex` once, `Forward` many times), for every gather.
///
/// # What a plan holds
/// The shapes, and one resolved position per index value: negative indices (and `take`'s
/// `wrap` / `clip` modes) already applied, as `u16`, `u32` or `usize`, the narrowest that
/// holds every gathered axis's length, so at most the indices' own bytes for 32- and
/// 64-bit indices. Where the positions repeat along a dimension (a broadcast that was
/// materialized, the same indices for every batch), that dimension is stored once and
/// read with a zero stride. Where a single gathered axis's positions run up by one in
/// aligned groups of 8 or more (a range, shuffled patches), inputs in standard layout
/// are copied a run at a time, as blocks. A plan of at most 64 output elements (with
/// indices in standard layout) keeps instead the input offset of each output element
/// (`u32`, at most 256 bytes), so that a small lookup is one plain loop, and building it
/// costs about one gather call. A plan has no lifetime and no type parameter: it is
/// `Clone + Debug + Send + Sync`, and one plan can serve many threads.
///
/// A plan is also how to gather into an existing output with any of the wrappers:
/// [`apply_into`](GatherPlan::apply_into).
///
/// # Examples
/// ```
/// use ndarray::{Array2, array};
/// use ndarray_gather::prelude::*;
///
/// let ids = array![2_i64, -1, 0];
/// let plan = GatherPlan::gather(&[4, 2], &ids, 0)?; // indices checked here, once
/// assert_eq!(plan.output_shape(), &[3, 2]);
/// let table = array![[0.0, 0.1], [1.0, 1.1], [2.0, 2.1], [3.0, 3.1]];
/// assert_eq!(plan.apply(&table)?, table.gather(&ids, 0)?);
/// // Any input of the same shape, any element type, into a reused output.
/// let mut out = Array2::zeros((3, 2));
/// plan.apply_into(&array![[0, 1], [10, 11], [20, 21], [30, 31]], &mut out)?;
/// assert_eq!(out, array![[20, 21], [30, 31], [0, 1]]);
/// // An input of another shape is refused.
/// assert!(matches!(plan.apply(&Array2::<f64>::zeros((5, 2))), Err(GatherError::InputShape { .. })));
/// # Ok::<(), GatherError>(())
/// ```
#[derive(Debug, Clone)]
pub struct GatherPlan {
    input_shape: Small<usize>,
    output_shape: Small<usize>,
    how: How,
}

/// How a plan gathers.
#[derive(Debug, Clone)]
enum How {
    /// A tiny output (at most [`TINY`] elements): a small lookup in a hot loop as a plain
    /// loop over input offsets, for inputs and outputs of any layout.
    Tiny(Tiny),
    /// Any other: the positions, and the gather lowered for standard-layout inputs (boxed:
    /// a plan moves as a few words more than its shapes).
    Lowered(Box<Lowered>),
}

/// A tiny plan's gather.
#[derive(Debug, Clone)]
struct Tiny {
    /// The input offset of each output element (row-major), in a standard-layout input.
    offsets: Box<[u32]>,
    /// The output shape and its C-order strides, as ndarray's allocating constructors take
    /// them (building them from `output_shape` was ~200 of `apply`'s ~800 instructions).
    dim: IxDyn,
    strides: IxDyn,
}

/// A plan's gather through the core, with the resolved positions as indices.
#[derive(Debug, Clone)]
struct Lowered {
    lowering: Lowering,
    /// The caller's indices shape, to which the stored positions broadcast.
    indices_shape: Vec<usize>,
    positions: Positions,
    /// The gather lowered for inputs in standard layout (any input of that shape whose
    /// memory is C-contiguous) into C-order outputs: loops ready for the kernel.
    standard: Standard,
}

/// The largest output, in elements, whose input offsets a plan keeps ([`How::Tiny`]: at
/// most 256 bytes).
const TINY: usize = 64;

/// The lowered loops and axis terms of a plan's gather for a standard-layout input.
#[derive(Debug, Clone)]
struct Standard {
    loops: Small<Loop>,
    axes: Small<AxisTerm>,
}

/// Resolved positions, of the indices' rank, with size 1 where they repeat, in the
/// narrowest type that holds every gathered axis's positions.
#[derive(Debug, Clone)]
enum Positions {
    U16(ArrayD<u16>),
    U32(ArrayD<u32>),
    Wide(ArrayD<usize>),
}

/// `$body` with `$p` bound to the stored positions, whatever their type.
macro_rules! with_positions {
    ($positions:expr, $p:ident => $body:expr) => {
        match $positions {
            Positions::U16($p) => $body,
            Positions::U32($p) => $body,
            Positions::Wide($p) => $body,
        }
    };
}

/// A type resolved positions are stored in.
trait Position: GatherIndex + PartialEq {
    /// `i`, which the caller knows fits.
    fn from_position(i: usize) -> Self;
    /// The position.
    fn position(self) -> usize;
}

impl Position for u16 {
    fn from_position(i: usize) -> Self {
        i as u16
    }
    fn position(self) -> usize {
        self as usize
    }
}

impl Position for u32 {
    fn from_position(i: usize) -> Self {
        i as u32
    }
    fn position(self) -> usize {
        self as usize
    }
}

impl Position for usize {
    fn from_position(i: usize) -> Self {
        i
    }
    fn position(self) -> usize {
        self
    }
}

impl GatherPlan {
    /// The plan of [`gather_multiaxis`](crate::GatherExt::gather_multiaxis) for inputs of
    /// shape `input_shape`.
    ///
    /// # Errors
    /// Exactly those of `input.gather_multiaxis(indices, axes)` for an input of that
    /// shape, and [`SizeOverflow`](GatherError::SizeOverflow) for a shape no input can
    /// have.
    ///
    /// # Examples
    /// A fixed `(x, y)` grid over many `[N, H, W, C]` batches:
    /// ```
    /// use ndarray::{Array, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let points = array![[[[2_i64, 1]], [[0, 0]]]]; // [1, 2, 1, 2]: two (x, y) pairs
    /// let plan = GatherPlan::multiaxis(&[1, 2, 3, 2], &points, &[2, 1])?;
    /// let img = Array::from_shape_fn((1, 2, 3, 2), |(_, y, x, c)| 100 * y + 10 * x + c);
    /// assert_eq!(plan.apply(&img)?, array![[[[120, 121]], [[0, 1]]]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn multiaxis<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: &ArrayRef<I, E>,
        axes: &[usize],
    ) -> Result<GatherPlan, GatherError> {
        let lowering = Lowering::Multiaxis(Small::from(axes));
        Self::new(
            "gather_multiaxis",
            lowering,
            input_shape,
            indices,
            IndexMode::Raise,
        )
    }

    /// The plan of [`gather`](crate::GatherExt::gather) (ONNX Gather, numpy.take with an
    /// axis) for inputs of shape `input_shape`.
    ///
    /// # Errors
    /// Exactly those of `input.gather(indices, axis)` for an input of that shape.
    ///
    /// # Examples
    /// The same token ids over every layer's table:
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather(&[1000, 4], &array![[7_i64, 7], [999, 0]], 0)?;
    /// for layer in 0..3 {
    ///     let table = Array2::from_shape_fn((1000, 4), |(i, j)| (layer * 10_000 + i * 4 + j) as f32);
    ///     let rows = plan.apply(&table)?; // [2, 2, 4]
    ///     assert_eq!(rows[[1, 0, 3]], table[[999, 3]]);
    /// }
    /// assert!(GatherPlan::gather(&[1000, 4], &array![1000_i64], 0).is_err());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: &ArrayRef<I, E>,
        axis: impl AxisArg,
    ) -> Result<GatherPlan, GatherError> {
        let lowering = Lowering::Batched {
            axis: axis.signed(),
            batch_dims: 0,
        };
        Self::new("gather", lowering, input_shape, indices, IndexMode::Raise)
    }

    /// The plan of [`gather_elements`](crate::GatherExt::gather_elements) (ONNX
    /// GatherElements, torch.gather) for inputs of shape `input_shape`: ONNX Runtime's and
    /// Simd's constant-index GatherElements.
    ///
    /// # Errors
    /// Exactly those of `input.gather_elements(indices, axis)` for an input of that shape.
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather_elements(&[2, 3], &array![[2_i32, 0], [-1, 1]], 1)?;
    /// assert_eq!(plan.apply(&array![[1, 2, 3], [4, 5, 6]])?, array![[3, 1], [6, 5]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather_elements<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: &ArrayRef<I, E>,
        axis: impl AxisArg,
    ) -> Result<GatherPlan, GatherError> {
        let lowering = Lowering::Elements(axis.signed());
        Self::new(
            "gather_elements",
            lowering,
            input_shape,
            indices,
            IndexMode::Raise,
        )
    }

    /// The plan of [`gather_nd`](crate::GatherExt::gather_nd) (ONNX GatherND,
    /// tf.gather_nd) for inputs of shape `input_shape`.
    ///
    /// # Errors
    /// Exactly those of `input.gather_nd(indices, batch_dims)` for an input of that shape.
    ///
    /// # Examples
    /// A fixed sampling pattern over many frames:
    /// ```
    /// use ndarray::{Array, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let pattern = array![[0_i64, 1], [2, 2]]; // two (row, col) points
    /// let plan = GatherPlan::gather_nd(&[3, 3], &pattern, 0)?;
    /// for t in 0..2 {
    ///     let frame = Array::from_shape_fn((3, 3), |(r, c)| 100 * t + 10 * r + c);
    ///     assert_eq!(plan.apply(&frame)?, array![100 * t + 1, 100 * t + 22].into_dyn());
    /// }
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather_nd<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: &ArrayRef<I, E>,
        batch_dims: usize,
    ) -> Result<GatherPlan, GatherError> {
        Self::new(
            "gather_nd",
            Lowering::Nd(batch_dims),
            input_shape,
            indices,
            IndexMode::Raise,
        )
    }

    /// The plan of [`gather_batched`](crate::GatherExt::gather_batched) (tf.gather with
    /// `batch_dims`) for inputs of shape `input_shape`.
    ///
    /// # Errors
    /// Exactly those of `input.gather_batched(indices, axis, batch_dims)` for an input of
    /// that shape.
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather_batched(&[2, 3], &array![[2_i64], [0]], 1, 1)?;
    /// assert_eq!(plan.apply(&array![[1, 2, 3], [4, 5, 6]])?, array![[3], [4]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn gather_batched<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: &ArrayRef<I, E>,
        axis: impl AxisArg,
        batch_dims: usize,
    ) -> Result<GatherPlan, GatherError> {
        let lowering = Lowering::Batched {
            axis: axis.signed(),
            batch_dims,
        };
        Self::new("gather_batched", lowering, input_shape, indices, IndexMode::Raise)
    }

    /// The plan of [`take`](crate::GatherExt::take) (numpy.take, torch.take) for inputs of
    /// shape `input_shape`; the `mode` is applied once, here.
    ///
    /// # Errors
    /// Exactly those of `input.take(indices, axis, mode)` for an input of that shape.
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::take(&[2, 2], &array![-1_i64, 4], None, IndexMode::Wrap)?;
    /// assert_eq!(plan.apply(&array![[1, 2], [3, 4]])?, array![4, 1].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn take<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: &ArrayRef<I, E>,
        axis: impl TakeAxis,
        mode: IndexMode,
    ) -> Result<GatherPlan, GatherError> {
        let lowering = match axis.take_axis() {
            Some(axis) => Lowering::Batched {
                axis: axis.signed(),
                batch_dims: 0,
            },
            None => Lowering::Flat,
        };
        Self::new("take", lowering, input_shape, indices, mode)
    }

    /// The plan of [`take_along_axis`](crate::GatherExt::take_along_axis)
    /// (numpy.take_along_axis, torch.take_along_dim) for inputs of shape `input_shape`.
    ///
    /// # Errors
    /// Exactly those of `input.take_along_axis(indices, axis)` for an input of that shape.
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// // The indices broadcast over the rows; the plan stores them once.
    /// let plan = GatherPlan::take_along_axis(&[2, 3], &array![[2_u32, 0]], 1)?;
    /// assert_eq!(plan.apply(&array![[1, 2, 3], [4, 5, 6]])?, array![[3, 1], [6, 4]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn take_along_axis<I: GatherIndex, E: Dimension>(
        input_shape: &[usize],
        indices: &ArrayRef<I, E>,
        axis: impl AxisArg,
    ) -> Result<GatherPlan, GatherError> {
        let lowering = Lowering::AlongAxis(axis.signed());
        Self::new(
            "take_along_axis",
            lowering,
            input_shape,
            indices,
            IndexMode::Raise,
        )
    }

    /// The shape of the inputs this plan gathers from.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather(&[5, 2], &array![1_i64], 0)?;
    /// assert_eq!(plan.input_shape(), &[5, 2]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn input_shape(&self) -> &[usize] {
        &self.input_shape
    }

    /// The shape of the outputs this plan produces.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather(&[5, 2], &array![[1_i64, 2, 3]], 0)?;
    /// assert_eq!(plan.output_shape(), &[1, 3, 2]);
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn output_shape(&self) -> &[usize] {
        &self.output_shape
    }

    /// Gathers from `input` (of the plan's input shape, any layout) into a new array,
    /// equal element for element to the result of the method the plan mirrors.
    ///
    /// # Errors
    /// [`InputShape`](GatherError::InputShape) if `input` does not have the plan's input
    /// shape; [`SizeOverflow`](GatherError::SizeOverflow) if the output, in elements of
    /// type `A`, cannot be allocated. Indices are never read, so never wrong.
    ///
    /// # Examples
    /// ```
    /// use ndarray::{Array2, ShapeBuilder, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather_elements(&[2, 2], &array![[1_i64, 1], [0, 1]], 0)?;
    /// // A Fortran-order input gives the same result as a C-order one.
    /// let f = Array2::from_shape_vec((2, 2).f(), vec![1, 3, 2, 4]).unwrap();
    /// assert_eq!(plan.apply(&f)?, array![[3, 4], [1, 4]].into_dyn());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn apply<A: Clone + Send + Sync, D: Dimension>(
        &self,
        input: &ArrayRef<A, D>,
    ) -> Result<ArrayD<A>, GatherError> {
        const OP: &str = "GatherPlan::apply";
        self.check_input(OP, input)?;
        let lowered = match &self.how {
            How::Tiny(tiny) => return tiny.apply(OP, input),
            How::Lowered(lowered) => lowered,
        };
        if input.is_standard_layout() {
            let len =
                checked_len(&self.output_shape, size_of::<A>()).ok_or_else(|| GatherError::SizeOverflow {
                    op: OP,
                    shape: self.output_shape.to_vec(),
                })?;
            // SAFETY: `fresh` passes C-contiguous uninitialized storage for the output's
            // `len` elements; the kernel initializes each of them when it returns Ok.
            return unsafe {
                fresh(OP, len, &self.output_shape, |out| {
                    lowered.run_standard(OP, input, out, Store::Init)
                })
            };
        }
        with_positions!(&lowered.positions, p => lowered.call(OP, input, p, |call| call.alloc()))
    }

    /// Gathers from `input` into `out`, which must have exactly the plan's output shape
    /// (any memory order). No allocation for inputs of rank up to 4.
    ///
    /// With a plan, every wrapper method gathers into an existing output: this is the
    /// `_into` of `gather`, `gather_elements`, `gather_nd`, `take`, ...
    ///
    /// # Errors
    /// [`InputShape`](GatherError::InputShape) if `input` does not have the plan's input
    /// shape, [`OutputShape`](GatherError::OutputShape) if `out` does not have its output
    /// shape; either way `out` is untouched.
    ///
    /// # Examples
    /// ```
    /// use ndarray::{Array3, array};
    /// use ndarray_gather::prelude::*;
    ///
    /// let plan = GatherPlan::gather(&[3, 2], &array![[2_i64, 0]], 0)?;
    /// let mut out = Array3::zeros((1, 2, 2));
    /// plan.apply_into(&array![[1, 2], [3, 4], [5, 6]], &mut out)?;
    /// assert_eq!(out, array![[[5, 6], [1, 2]]]);
    /// assert!(plan.apply_into(&array![[1, 2], [3, 4], [5, 6]], &mut Array3::zeros((2, 2, 1))).is_err());
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn apply_into<A: Clone + Send + Sync, D: Dimension, D2: Dimension>(
        &self,
        input: &ArrayRef<A, D>,
        out: &mut ArrayRef<A, D2>,
    ) -> Result<(), GatherError> {
        const OP: &str = "GatherPlan::apply_into";
        self.check_input(OP, input)?;
        if !same(out.shape(), &self.output_shape) {
            return Err(GatherError::OutputShape {
                op: OP,
                expected: self.output_shape.to_vec(),
                found: out.shape().to_vec(),
            });
        }
        let lowered = match &self.how {
            How::Tiny(tiny) => return tiny.apply_into(OP, input, out),
            How::Lowered(lowered) => lowered,
        };
        if input.is_standard_layout() && out.is_standard_layout() {
            // SAFETY: `out` has the output shape in C order, as the loops were made for,
            // and is an exclusive borrow, so it aliases nothing.
            return unsafe { lowered.run_standard(OP, input, out.as_mut_ptr(), Store::Assign) };
        }
        with_positions!(&lowered.positions, p => lowered.call(OP, input, p, |call| call.gather_into(out)))
    }

    /// Lowers the gather over a stand-in input of the shape, checks and resolves the
    /// indices: into input offsets for a tiny output, else into positions, with which the
    /// gather is lowered once more for standard-layout inputs.
    fn new<I: GatherIndex, E: Dimension>(
        op: &'static str,
        lowering: Lowering,
        input_shape: &[usize],
        indices: &ArrayRef<I, E>,
        mode: IndexMode,
    ) -> Result<GatherPlan, GatherError> {
        // Zero-sized elements stand in for the input: any shape in C order without
        // memory, made without ndarray (whose view took a tenth of W7's plan build).
        let stand_in = (input_shape, indices);
        let (output_shape, found) = lower::with_stand_in(op, &lowering, stand_in, mode, |call| {
            let mut plan = call.empty_plan();
            call.plan(&mut plan, 1)?;
            let output_shape = call.final_shape(&plan.out_shape);
            if let Some(tiny) = Tiny::of(call, &mut plan, &output_shape)? {
                return Ok((output_shape, Found::Tiny(tiny)));
            }
            let longest = plan.axes.iter().map(|t| t.len).max().unwrap_or(0);
            let shape = indices.shape();
            let positions = if longest <= 1 << 16 {
                Positions::U16(resolved(op, call, &plan, shape)?)
            } else if longest <= 1 << 32 {
                Positions::U32(resolved(op, call, &plan, shape)?)
            } else {
                Positions::Wide(resolved(op, call, &plan, shape)?)
            };
            Ok((output_shape, Found::Positions(positions)))
        })?;
        let how = match found {
            Found::Tiny(tiny) => How::Tiny(tiny),
            Found::Positions(positions) => {
                let indices_shape = indices.shape().to_vec();
                // The same gather over the stand-in, with the positions as indices.
                let standard = with_positions!(&positions, p => {
                    let p_full = broadcast_positions(op, &indices_shape, p)?;
                    let standard = lower::with_stand_in(op, &lowering, (input_shape, &p_full), IndexMode::Raise, standard)?;
                    fold_runs(standard, p)
                });
                How::Lowered(Box::new(Lowered {
                    lowering,
                    indices_shape,
                    positions,
                    standard,
                }))
            }
        };
        Ok(GatherPlan {
            input_shape: Small::from(input_shape),
            output_shape,
            how,
        })
    }

    /// Whether `input` has the plan's shape.
    #[inline(always)]
    fn check_input<A, D: Dimension>(
        &self,
        op: &'static str,
        input: &ArrayRef<A, D>,
    ) -> Result<(), GatherError> {
        if same(input.shape(), &self.input_shape) {
            Ok(())
        } else {
            Err(GatherError::InputShape {
                op,
                expected: self.input_shape.to_vec(),
                found: input.shape().to_vec(),
            })
        }
    }
}

/// What a plan's first lowering found.
enum Found {
    Tiny(Tiny),
    Positions(Positions),
}

impl Tiny {
    /// The tiny gather of `call` (over a C-order stand-in input), planned in `plan`, with
    /// the caller's output `shape`: for an output of at most [`TINY`] elements, indices in
    /// standard layout (so that the plan's index offsets are row-major positions) and
    /// input offsets below 2<sup>32</sup>. Checks the indices as the method does.
    fn of<I: GatherIndex>(
        call: &Call<'_, ndarray::ViewRepr<&()>, I>,
        plan: &mut Plan,
        shape: &[usize],
    ) -> Result<Option<Tiny>, GatherError> {
        if plan.out_len > TINY || !call.indices_in_standard_layout() {
            return Ok(None);
        }
        // An empty output never reads its indices, so never fails on them.
        let positions = if plan.out_len > 0 {
            call.resolve_all(plan, |i| i)?
        } else {
            Vec::new()
        };
        plan.set_c_out_strides();
        let Some(offsets) = input_offsets(&plan.dims, &plan.axes, &positions)
            .filter(|o| o.len() == shape.iter().product::<usize>())
        else {
            return Ok(None);
        };
        Ok(Some(Tiny {
            offsets,
            dim: IxDyn(shape),
            strides: default_strides(shape),
        }))
    }

    /// [`GatherPlan::apply`] (`op`) for an input of the plan's shape.
    fn apply<A: Clone, D: Dimension>(
        &self,
        op: &'static str,
        input: &ArrayRef<A, D>,
    ) -> Result<ArrayD<A>, GatherError> {
        let values: Vec<A> = match standard_slice(input) {
            Some(src) => self.offsets.iter().map(|&o| src[o as usize].clone()).collect(),
            None => {
                let input = input.view().into_dyn();
                let found = self.offsets.iter().map(|&o| row_major(&input, o).cloned());
                found.collect::<Option<_>>().ok_or_else(|| outside(op))?
            }
        };
        let shape = self.dim.clone().strides(self.strides.clone());
        // SAFETY: there is one offset per element of `dim` (checked in `Tiny::of`), so
        // `values` is a C-order array of that shape, with ndarray's own strides for it.
        Ok(unsafe { ArrayD::from_shape_vec_unchecked(shape, values) })
    }

    /// [`GatherPlan::apply_into`] (`op`) for an input and an output of the plan's shapes.
    fn apply_into<A: Clone, D: Dimension, D2: Dimension>(
        &self,
        op: &'static str,
        input: &ArrayRef<A, D>,
        out: &mut ArrayRef<A, D2>,
    ) -> Result<(), GatherError> {
        if let Some(src) = standard_slice(input) {
            if let Some(dst) = standard_slice_mut(out) {
                for (d, &o) in dst.iter_mut().zip(&self.offsets) {
                    d.clone_from(&src[o as usize]);
                }
            } else {
                for (d, &o) in out.iter_mut().zip(&self.offsets) {
                    d.clone_from(&src[o as usize]);
                }
            }
            return Ok(());
        }
        let input = input.view().into_dyn();
        for (d, &o) in out.iter_mut().zip(&self.offsets) {
            d.clone_from(row_major(&input, o).ok_or_else(|| outside(op))?);
        }
        Ok(())
    }
}

/// The element at row-major position `o` of `input`, in any layout.
fn row_major<'a, A>(input: &'a ArrayViewD<'_, A>, o: u32) -> Option<&'a A> {
    input.get(&*unravel(o as usize, input.shape()))
}

/// The error for a tiny plan's offset outside an input of its shape: a broken plan, which
/// [`Tiny::of`] never makes (every offset is an element of a C-order input of that shape).
fn outside(op: &'static str) -> GatherError {
    internal(op, "a tiny plan's offset is outside the input")
}

impl Lowered {
    /// Runs the gather for a standard-layout `input` of the plan's shape into `out`.
    ///
    /// # Safety
    /// `out` is C-contiguous storage of the output shape, valid for `store` as
    /// [`Task::new`] requires, aliasing neither `input` nor the plan.
    unsafe fn run_standard<A: Clone + Send + Sync, D: Dimension>(
        &self,
        op: &'static str,
        input: &ArrayRef<A, D>,
        out: *mut A,
        store: Store,
    ) -> Result<(), GatherError> {
        let Standard { loops, axes } = &self.standard;
        let loops = &crate::core::fresh_loops::<A>(loops.clone(), axes);
        let input = Operand::of(input);
        // SAFETY: the loops and terms were planned over a C-order stand-in of the input's
        // shape, whose offsets are those of any standard-layout input of that shape (unit
        // dimensions contribute no offset); the positions are the very array the loops
        // index; `out` by this function's contract.
        let ran = unsafe {
            with_positions!(&self.positions, p => {
                Task::new(loops, axes, input, Operand::of(p), out, store).run::<Raise>()
            })
        };
        ran.map_err(|BadIndex| internal(op, "a resolved position was out of range"))
    }

    /// Lowers the plan's gather of `input` with the resolved `positions` (the plan's own)
    /// as indices and runs `run` on the call.
    fn call<A: Clone, D: Dimension, P: Position, T>(
        &self,
        op: &'static str,
        input: &ArrayRef<A, D>,
        positions: &ArrayD<P>,
        run: impl for<'x> FnOnce(&Call<'x, ndarray::ViewRepr<&'x A>, P>) -> Result<T, GatherError>,
    ) -> Result<T, GatherError> {
        let positions = broadcast_positions(op, &self.indices_shape, positions)?;
        lower::with_call(op, &self.lowering, (input, &positions), IndexMode::Raise, run)
    }
}

/// The stored `positions`, broadcast back to the indices' shape: the indices of the plan's
/// lowering.
fn broadcast_positions<'p, P: Position>(
    op: &'static str,
    indices_shape: &[usize],
    positions: &'p ArrayD<P>,
) -> Result<ArrayViewD<'p, P>, GatherError> {
    positions
        .broadcast(IxDyn(indices_shape))
        .ok_or_else(|| internal(op, "the stored positions do not broadcast to the indices"))
}

/// The loops (for a C-order output) and axis terms of `call` over a C-order stand-in.
fn standard<P: GatherIndex>(call: &Call<'_, ndarray::ViewRepr<&()>, P>) -> Result<Standard, GatherError> {
    let mut plan = call.empty_plan();
    call.plan(&mut plan, 1)?;
    Ok(Standard {
        loops: plan.c_loops(),
        axes: plan.axes,
    })
}

/// Shorter runs of consecutive positions stay element by element (benches/gather.rs,
/// `runs`: over W3's shape, runs of 8 copy as blocks in 0.73x the element loop's time,
/// runs of 4 gained nothing).
const MIN_RUN: usize = 8;

/// `standard` with runs of consecutive positions along its lane copied as blocks: when a
/// single gathered axis's positions, in every lane, go up by one within each aligned
/// group of `r` (`MIN_RUN <= r`, dividing the lane's length), the lane is split into
/// groups of `r` elements, each read from its first position on along the axis (a take of
/// a range, a shuffle of patches). Reading only a run's first position, the axis term may
/// describe its range of run starts: `len - (r - 1)`, which keeps the kernel's bounds
/// invariant (every offset the loops and terms can form is an input element) exact.
fn fold_runs<P: Position>(standard: Standard, positions: &ArrayD<P>) -> Standard {
    let (Some((&lane, outer)), [a]) = (standard.loops.split_last(), &standard.axes[..]) else {
        return standard;
    };
    let Some(p) = positions.as_slice() else {
        return standard;
    };
    if lane.idx == 0 || lane.len < MIN_RUN {
        return standard;
    }
    // The run length: the gcd of the lane's length and of every position that does not
    // continue its predecessor's run.
    let mut r = lane.len;
    let mut lanes: Small<usize> = outer.iter().map(|_| 0).collect(); // an odometer
    'lanes: loop {
        let at: isize = outer.iter().zip(&lanes).map(|(l, &k)| l.idx * k as isize).sum();
        let value = |i: usize| {
            let o = at + a.comp + i as isize * lane.idx;
            usize::try_from(o)
                .ok()
                .and_then(|o| p.get(o))
                .map(|v| v.position())
        };
        let mut prev = value(0);
        for i in 1..lane.len {
            let v = value(i);
            if prev.is_none() || v != prev.map(|p| p + 1) {
                r = gcd(r, i);
                if r < MIN_RUN {
                    return standard;
                }
            }
            prev = v;
        }
        for (k, l) in lanes.iter_mut().zip(outer).rev() {
            *k += 1;
            if *k < l.len {
                continue 'lanes;
            }
            *k = 0;
        }
        break;
    }
    let mut loops: Small<Loop> = outer.iter().copied().collect();
    if r < lane.len {
        loops.push(Loop {
            len: lane.len / r,
            out: lane.out * r as isize,
            inp: lane.inp * r as isize,
            idx: lane.idx * r as isize,
        });
    }
    loops.push(Loop {
        len: r,
        out: lane.out,
        inp: lane.inp + a.stride,
        idx: 0,
    });
    let Some(len) = a.len.checked_sub(r - 1) else {
        return standard; // not possible: a run of `r` positions below `len`
    };
    let axes = [AxisTerm { len, ..*a }];
    Standard {
        loops,
        axes: Small::from(&axes[..]),
    }
}

/// Whether two shapes are equal: an inline loop where `==` calls `memcmp`, a third of a
/// tiny plan's checks. Inlined, as are [`standard_len`] and `GatherPlan::check_input`:
/// left to the compiler, all three stayed calls, and P7's `apply_into` took 16.9-17.5 ns
/// instead of 11.4-11.6 (alternating runs on the AMD EPYC VM).
#[inline(always)]
fn same(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// The number of elements of an array of `shape` with `strides` if they are in standard
/// layout (C-contiguous; strides of unit dimensions do not matter), `None` otherwise.
/// Conservative for empty arrays (a mismatched stride after a zero length is `None`).
#[inline(always)]
fn standard_len(shape: &[usize], strides: &[isize]) -> Option<usize> {
    let mut len = 1usize;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && s != len as isize {
            return None;
        }
        len = len.checked_mul(n)?;
    }
    Some(len)
}

/// `a`'s elements in standard layout as a slice: ndarray's `as_slice` without its
/// dynamic-rank overhead (each of its calls was ~80 of P7's ~340 instructions).
fn standard_slice<A, D: Dimension>(a: &ArrayRef<A, D>) -> Option<&[A]> {
    let len = standard_len(a.shape(), a.strides())?;
    // SAFETY: in standard layout, `a`'s `len` elements are contiguous from its first one,
    // borrowed shared for the slice's lifetime.
    Some(unsafe { std::slice::from_raw_parts(a.as_ptr(), len) })
}

/// [`standard_slice`] for exclusive access.
fn standard_slice_mut<A, D: Dimension>(a: &mut ArrayRef<A, D>) -> Option<&mut [A]> {
    let len = standard_len(a.shape(), a.strides())?;
    // SAFETY: as for `standard_slice`; the borrow of `a` is exclusive, and distinct
    // positions of a standard layout are distinct elements.
    Some(unsafe { std::slice::from_raw_parts_mut(a.as_mut_ptr(), len) })
}

/// The input offset of each output element of a tiny gather (at most [`TINY`] of them,
/// offsets below 2<sup>32</sup>), for an input in standard layout: the kernel's element
/// loop over `loops` (row-major over the output, with C-order output strides) and the
/// axis terms, run once on offsets instead of elements, reading the resolved `positions`
/// at the loops' index offsets. `None` where an offset does not fit (or, which a plan
/// never makes, a position is missing or the output strides are not C-order).
fn input_offsets(loops: &[Loop], axes: &[AxisTerm], positions: &[usize]) -> Option<Box<[u32]>> {
    let (lane, outer) = split_innermost(loops);
    let len = walk::positions(outer, &lane);
    if len > TINY {
        return None;
    }
    if len == 0 {
        return Some(Box::default()); // (`each_lane` visits one lane even of empty loops)
    }
    // With C-order output strides, row-major positions come in output order.
    let mut offsets = Vec::with_capacity(len);
    let found = each_lane(outer, |at| {
        for i in 0..lane.len as isize {
            let at = at.step(&lane, i);
            let mut inp = at.inp;
            for a in axes {
                let o = usize::try_from(at.idx + a.comp).map_err(|_| BadIndex)?;
                inp += *positions.get(o).ok_or(BadIndex)? as isize * a.stride;
            }
            if at.out != offsets.len() as isize {
                return Err(BadIndex);
            }
            offsets.push(u32::try_from(inp).map_err(|_| BadIndex)?);
        }
        Ok(())
    });
    found.ok().map(|()| offsets.into_boxed_slice())
}

/// The greatest common divisor.
fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The resolved positions of the call's indices (of the caller's shape `shape`), with the
/// dimensions along which they repeat reduced to size 1. Values that are never read (an
/// empty output, no gathered axis) are stored as 0.
fn resolved<P: Position>(
    op: &'static str,
    call: &Call<'_, ndarray::ViewRepr<&()>, impl GatherIndex>,
    plan: &Plan,
    shape: &[usize],
) -> Result<ArrayD<P>, GatherError> {
    let len: usize = shape.iter().product();
    let mut values = if plan.out_len > 0 {
        call.resolve_all(plan, P::from_position)?
    } else {
        Vec::new()
    };
    values.resize(len, P::ZERO);
    let full = ArrayD::from_shape_vec(IxDyn(shape), values)
        .map_err(|_| internal(op, "the indices' length is not their shape's"))?;
    Ok(compact(full))
}

/// `full` with every dimension along which it repeats (each slice equal to the first)
/// reduced to size 1.
fn compact<P: Copy + PartialEq>(full: ArrayD<P>) -> ArrayD<P> {
    // Whether dimension `d` repeats, on the row-major values: in every block of the
    // dimensions up to `d`, each of its slices equals the first (slice comparisons, not
    // ndarray's axis iterators: resolving W7's plan took 1470 instructions with them,
    // 890 without, of the build's 7400).
    let repeats = |d: usize| {
        let (n, inner) = (full.shape()[d], full.shape()[d + 1..].iter().product::<usize>());
        let values = full.as_slice().unwrap_or_default();
        n > 1
            && inner > 0
            && values.len() == full.len()
            && values
                .chunks(n * inner)
                .all(|block| block.chunks(inner).skip(1).all(|s| s == &block[..inner]))
    };
    let repeated: Small<usize> = (0..full.ndim()).filter(|&d| repeats(d)).collect();
    if repeated.is_empty() {
        return full;
    }
    let mut view = full.view();
    for &d in &repeated {
        view.slice_axis_inplace(Axis(d), Slice::from(..1));
    }
    view.to_owned()
}

#[cfg(test)]
mod tests {
    use ndarray::{Array2, array};

    use super::*;

    /// A tiny plan's gather, if it is one.
    fn tiny(plan: &GatherPlan) -> Option<&Tiny> {
        match &plan.how {
            How::Tiny(t) => Some(t),
            How::Lowered(_) => None,
        }
    }

    /// A lowered plan's positions and loops.
    fn lowered(plan: &GatherPlan) -> &Lowered {
        match &plan.how {
            How::Lowered(l) => l,
            How::Tiny(t) => panic!("a tiny plan: {t:?}"),
        }
    }

    #[test]
    fn tiny_plans_keep_offsets() {
        let offsets = |plan: &GatherPlan| tiny(plan).map(|t| t.offsets.to_vec());
        // W7: rows 3 and 1 of a [4, 3] table.
        let plan = GatherPlan::gather(&[4, 3], &array![3_i64, 1], 0).unwrap();
        assert_eq!(offsets(&plan), Some(vec![9, 10, 11, 3, 4, 5]));
        let t = tiny(&plan).unwrap();
        assert_eq!((t.dim.slice(), t.strides.slice()), (&[2, 3][..], &[3, 1][..]));
        // Along the last axis, with negative indices and a repeated row.
        let plan = GatherPlan::take_along_axis(&[2, 5], &array![[-1_i64, 0], [-1, 0]], 1).unwrap();
        assert_eq!(offsets(&plan), Some(vec![4, 0, 9, 5]));
        // 64 output elements, and 65.
        let plan = GatherPlan::gather(&[4, 16], &array![3_i64, 0, 1, 2], 0).unwrap();
        assert_eq!(offsets(&plan).map(|o| (o.len(), o[0], o[63])), Some((64, 48, 47)));
        let plan = GatherPlan::gather(&[5, 13], &array![0_i64, 1, 2, 3, 4], 0).unwrap();
        assert_eq!(offsets(&plan), None);
    }

    #[test]
    fn positions_are_resolved_and_repeats_stored_once() {
        // (Outputs of more than 64 elements: a tiny plan keeps input offsets instead.)
        // Every row of the indices is the same: stored once, negatives resolved.
        let ids = Array2::from_shape_fn((40, 3), |(_, j)| j as i64 - 1);
        let plan = GatherPlan::take_along_axis(&[40, 5], &ids, 1).unwrap();
        match &lowered(&plan).positions {
            Positions::U16(p) => assert_eq!(p, &array![[4_u16, 0, 1]].into_dyn()),
            p => panic!("{p:?}"),
        }
        // Nothing repeats: all twelve kept.
        let ids = Array2::from_shape_fn((40, 3), |(i, j)| (i + j) as i64);
        let plan = GatherPlan::take_along_axis(&[40, 45], &ids, 1).unwrap();
        assert!(matches!(&lowered(&plan).positions, Positions::U16(p) if p.shape() == [40, 3]));
        // Repeats along the last dimensions, in 3-D: kept once each.
        let shape_of = |f: fn(usize, usize) -> i64| {
            let ids = ndarray::Array3::from_shape_fn((2, 3, 4), |(i, j, _)| f(i, j));
            let plan = GatherPlan::multiaxis(&[8, 1, 1, 5], &ids.insert_axis(Axis(3)), &[0]).unwrap();
            match &lowered(&plan).positions {
                Positions::U16(p) => (
                    p.shape().to_vec(),
                    p.iter().map(|&v| v as i64).collect::<Vec<_>>(),
                ),
                p => panic!("{p:?}"),
            }
        };
        assert_eq!(shape_of(|i, _| i as i64), (vec![2, 1, 1, 1], vec![0, 1]));
        assert_eq!(
            shape_of(|i, j| (i * 3 + j) as i64),
            (vec![2, 3, 1, 1], (0..6).collect())
        );
        assert_eq!(shape_of(|_, j| j as i64 - 3), (vec![1, 3, 1, 1], vec![5, 6, 7]));
    }

    #[test]
    fn runs_of_consecutive_positions_become_blocks() {
        // The innermost loop's index stride and length: 0 and the run for a block.
        let lane = |ids: &Array2<i64>| {
            let plan = GatherPlan::take_along_axis(&[6, 48], ids, 1).unwrap();
            let standard = &lowered(&plan).standard;
            let l = *standard.loops.last().unwrap();
            (l.idx, l.len, standard.axes[0].len)
        };
        let range = Array2::from_shape_fn((6, 40), |(i, j)| (j + i) as i64);
        assert_eq!(lane(&range), (0, 40, 48 - 39));
        let patches = Array2::from_shape_fn((6, 48), |(i, j)| (((j / 8 + i) % 6) * 8 + j % 8) as i64);
        assert_eq!(lane(&patches), (0, 8, 48 - 7));
        // Runs of 16 in even rows, of 8 in odd ones: runs of 8.
        let mixed = Array2::from_shape_fn((6, 32), |(i, j)| {
            ((j / 16) * 24 + j % 16 + i % 2 * (j % 16 / 8)) as i64
        });
        assert_eq!(lane(&mixed), (0, 8, 48 - 7));
        // Runs of 4 (below MIN_RUN) stay element by element.
        let short = Array2::from_shape_fn((6, 12), |(_, j)| ((11 - j / 4) * 4 + j % 4) as i64);
        assert_eq!(lane(&short).1, 12);
        assert_ne!(lane(&short).0, 0);
    }

    #[test]
    fn positions_beyond_u32_are_wide() {
        // A stand-in input costs nothing, so a plan for a huge axis is cheap to build. An
        // input offset beyond u32 makes even a tiny plan keep positions.
        let plan = GatherPlan::gather(&[1 << 33], &array![-1_i64, 5], 0).unwrap();
        match &lowered(&plan).positions {
            Positions::Wide(p) => assert_eq!(p, &array![(1_usize << 33) - 1, 5].into_dyn()),
            p => panic!("{p:?}"),
        }
        let plan = GatherPlan::gather(&[1 << 32], &array![-1_i64], 0).unwrap();
        assert_eq!(tiny(&plan).map(|t| t.offsets.to_vec()), Some(vec![u32::MAX]));
        // 65 indices (more than a tiny plan's outputs), one value kept.
        let ids = ndarray::Array1::from_elem(65, -1_i64);
        let plan = GatherPlan::gather(&[1 << 32], &ids, 0).unwrap();
        assert!(
            matches!(&lowered(&plan).positions, Positions::U32(p) if p.shape() == [1] && p[[0]] == u32::MAX)
        );
        let plan = GatherPlan::gather(&[(1 << 16) + 1], &ids, 0).unwrap();
        assert!(matches!(&lowered(&plan).positions, Positions::U32(p) if p[[0]] == 1 << 16));
        let plan = GatherPlan::gather(&[1 << 16], &ids, 0).unwrap();
        assert!(matches!(&lowered(&plan).positions, Positions::U16(p) if p[[0]] == u16::MAX));
    }

    #[test]
    fn unread_indices_are_stored_as_zeros() {
        // An empty output never reads its (bad) indices; neither does a plan.
        let plan = GatherPlan::gather(&[0, 2], &Array2::from_elem((0, 3), 5_i64), 1).unwrap();
        assert_eq!(plan.output_shape(), &[0, 0, 3]);
        assert_eq!(tiny(&plan).map(|t| t.offsets.len()), Some(0));
        // No gathered axis: a tiny plan's offsets are the input's own; a larger plan
        // stores zeros.
        let plan = GatherPlan::multiaxis(&[2, 2], &array![[9_i64]], &[]).unwrap();
        assert_eq!(plan.output_shape(), &[2, 2]);
        assert_eq!(tiny(&plan).map(|t| t.offsets.to_vec()), Some(vec![0, 1, 2, 3]));
        let plan = GatherPlan::multiaxis(&[9, 9], &array![[9_i64]], &[]).unwrap();
        assert!(matches!(&lowered(&plan).positions, Positions::U16(p) if p.iter().all(|&v| v == 0)));
    }
}
