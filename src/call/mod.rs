//! The one gather every method lowers to: a [`Call`] holds the caller's arrays (as
//! [`Raw`] borrows), their lowered layouts and the axes; it plans, validates the indices
//! and runs the kernel. Its rooms:
//!
//! - `raw`: the caller's arrays read in place ([`Raw`]) and lowered layouts ([`Dims`]);
//! - `resolve`: index resolution and the error for the first bad index;
//! - `gather`: the gather runs (into a fresh array, into the caller's output);
//! - `scatter`: the scatter run, with `updates` fitted to the gather's output;
//! - `fresh`: fresh outputs.
//!
//! A call is generic over how the input is borrowed so that a scatter lowers its
//! destination (borrowed mutably) exactly as the matching gather lowers its input.

pub(crate) mod attention;
mod fresh;
mod gather;
mod raw;
pub(crate) mod reduce;
mod resolve;
mod scatter;

use ndarray::{RawData, ViewRepr};

pub(crate) use self::fresh::{fresh, fresh_loops, into_dim, zeros};
pub(crate) use self::raw::{Dims, Raw};
pub(crate) use self::scatter::Fit;
use crate::error::GatherError;
use crate::index::{GatherIndex, IndexMode};
use crate::plan::{Layout, Plan};
use crate::small::Small;

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
    /// store forwarding (PERFORMANCE.md#tiny-calls-store-forwarding).
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

    /// Whether `shape` is [`Call::final_shape`] of `lowered`, compared in place rather
    /// than copied (PERFORMANCE.md#tiny-calls-store-forwarding).
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
}
