//! The planner: turns a call into shapes and strides, or an error, before any element is
//! read.
//!
//! A [`Plan`] describes the output as a set of loops. Each output dimension `d` reads the
//! input at a *positional* stride (zero on gathered axes and on input dimensions of size 1
//! that broadcast) and the indices at a *logical* stride (zero where the indices broadcast,
//! `k` times the actual stride on the folded last dimension). Each gathered axis adds
//! `resolve(indices[idx_offset + comp_j]) * input_stride_j` to the input offset. Every
//! wrapper in the crate lowers to this one description.
//!
//! Its rooms: this file (the loops and axis terms of a call, validated), `tile` (tiles,
//! strips and slabs: the order in which the kernel visits positions), `strategy` (how a
//! gather or scatter runs: tiny, serial or parallel, which rows go through a buffer, the
//! scatter's way and parts), `reduce` (the gather-reduce's row geometry and its walk) and
//! `policy` (every tuning constant, each named once).

pub(crate) mod policy;
pub(crate) mod reduce;
mod strategy;
mod tile;

#[cfg(all(target_arch = "x86_64", not(miri)))]
pub(crate) use self::strategy::stream_pays;
pub(crate) use self::strategy::{
    Ranges, Run, ScatterStrategy, ScatterWay, Stage, Strategy, is_tiny, keeps_offsets, output_group,
    worth_parallel,
};
use self::tile::tiled;
pub(crate) use self::tile::{slab, strips};
use crate::error::{GatherError, axis_range};
use crate::layout::checked_len;
use crate::small::Small;

/// One output dimension: its length and the strides (in elements) at which the output,
/// the input and the indices advance along it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Loop {
    pub len: usize,
    pub out: isize,
    pub inp: isize,
    pub idx: isize,
}

/// One gathered axis: the index found at `idx_offset + comp` selects a position on an
/// input axis of length `len` and stride `stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AxisTerm {
    pub axis: usize,
    pub len: usize,
    pub stride: isize,
    pub comp: isize,
}

/// The innermost of `loops` (the lane) and the loops around it; a lane of one position
/// for none (rank 0).
#[inline(always)]
pub(crate) fn split_innermost(loops: &[Loop]) -> (Loop, &[Loop]) {
    match loops.split_last() {
        Some((inner, outer)) => (*inner, outer),
        None => (
            Loop {
                len: 1,
                ..Loop::default()
            },
            &[][..],
        ),
    }
}

/// The number of positions of `outer` loops around a `lane`.
#[inline]
pub(crate) fn positions(outer: &[Loop], lane: &Loop) -> usize {
    outer.iter().map(|l| l.len).product::<usize>() * lane.len
}

/// A validated gather: everything the kernel needs except the data pointers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub op: &'static str,
    pub out_shape: Small<usize>,
    pub out_len: usize,
    /// One per output dimension; their `out` strides are zero until
    /// [`Plan::set_out_strides`] fills them in ([`Plan::loops`] takes its own).
    pub dims: Small<Loop>,
    pub axes: Small<AxisTerm>,
}

/// The layout of one operand: shape and strides in elements, as ndarray reports them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout<'a> {
    pub shape: &'a [usize],
    pub strides: &'a [isize],
}

impl Plan {
    /// A plan of no dimensions, to be filled by [`Plan::build`].
    #[inline]
    pub fn empty(op: &'static str) -> Plan {
        Plan {
            op,
            out_shape: Small::new(),
            out_len: 0,
            dims: Small::new(),
            axes: Small::new(),
        }
    }

    /// Whether the gather is tiny ([`is_tiny`]): it runs over the plan's own dimensions
    /// ([`Plan::set_out_strides`]), which merging loops would not repay.
    #[inline(always)]
    pub fn tiny(&self) -> bool {
        is_tiny(self.out_len)
    }

    /// Whether the scatter of this plan is tiny: two plain passes over its positions
    /// ([`SCATTER_TINY`](policy::SCATTER_TINY)).
    #[inline(always)]
    pub fn tiny_scatter(&self) -> bool {
        self.out_len <= policy::SCATTER_TINY
    }

    /// Validates a `gather_multiaxis` call and describes it.
    #[cfg(test)]
    pub fn new(
        op: &'static str,
        input: Layout<'_>,
        indices: Layout<'_>,
        axes: &[usize],
        elem_size: usize,
    ) -> Result<Plan, GatherError> {
        let mut plan = Plan::empty(op);
        plan.build(input, indices, axes, elem_size)?;
        Ok(plan)
    }

    /// Validates a `gather_multiaxis` call and describes it in this plan, which must be
    /// [`Plan::empty`]. (Filled in place rather than returned: a plan is a few hundred
    /// bytes, and each move of one out of a `Result` was a `memcpy` call, four of them in
    /// W7's call.)
    ///
    /// `elem_size` is the size of one output element, so that an output too large to
    /// allocate is an error here rather than a panic later.
    pub fn build(
        &mut self,
        input: Layout<'_>,
        indices: Layout<'_>,
        axes: &[usize],
        elem_size: usize,
    ) -> Result<(), GatherError> {
        let (op, plan) = (self.op, self);
        debug_assert!(
            plan.dims.is_empty() && plan.axes.is_empty(),
            "{op}: a plan is built once"
        );
        let rank = input.shape.len();
        let k = check_call(op, input, indices, axes)?;
        // (No division for one axis: a tiny call feels two of them,
        // PERFORMANCE.md#tiny-calls-and-tiny-plans-w7-p7.)
        let per_coordinate = |n: usize| if k == 1 { n } else { n / k };
        // One pass over the dimensions: the output's length on each (the logical indices
        // size on the axes, elsewhere input and indices sizes broadcast strictly: equal,
        // or one of them 1) and the strides at which input and indices advance along it.
        for d in 0..rank {
            let last = d + 1 == rank;
            let (n, m) = (
                input.shape[d],
                if last {
                    per_coordinate(indices.shape[d])
                } else {
                    indices.shape[d]
                },
            );
            let gathered = axes.contains(&d);
            let len = if gathered {
                m
            } else if n == m || m == 1 {
                n
            } else if n == 1 {
                m
            } else {
                return Err(GatherError::ShapeMismatch {
                    op,
                    dim: d,
                    input_shape: input.shape.to_vec(),
                    indices_shape: fold(indices.shape, k),
                    detail: format!("sizes {n} and {m} do not broadcast (one must be 1)"),
                });
            };
            plan.out_shape.push(len);
            let loop_d = Loop {
                len,
                out: 0,
                inp: if gathered || n == 1 { 0 } else { input.strides[d] },
                idx: match (m, last) {
                    (1, _) => 0,
                    (_, true) => indices.strides[d] * k as isize,
                    (_, false) => indices.strides[d],
                },
            };
            push_loop(&mut plan.dims, loop_d);
        }
        plan.out_len = checked_len(&plan.out_shape, elem_size).ok_or_else(|| GatherError::SizeOverflow {
            op,
            shape: plan.out_shape.to_vec(),
        })?;

        plan.push_axes(input, indices, axes)
    }

    /// The axis terms of `axes` (after the dimensions): each reads its component of the
    /// coordinate at its own offset along the last indices dimension. An empty gathered
    /// axis is an error unless the output is empty.
    #[inline(always)]
    fn push_axes(
        &mut self,
        input: Layout<'_>,
        indices: Layout<'_>,
        axes: &[usize],
    ) -> Result<(), GatherError> {
        let last = indices.strides.last().copied().unwrap_or(0);
        for (j, &axis) in axes.iter().enumerate() {
            push_in_place(&mut self.axes, |t| {
                (t.axis, t.len, t.stride, t.comp) =
                    (axis, input.shape[axis], input.strides[axis], j as isize * last)
            });
        }
        if self.out_len > 0
            && let Some(t) = self.axes.iter().find(|t| t.len == 0)
        {
            return Err(GatherError::EmptyAxis {
                op: self.op,
                axis: t.axis,
                input_shape: input.shape.to_vec(),
                output_shape: self.out_shape.to_vec(),
            });
        }
        Ok(())
    }

    /// The loops over an output with strides `out_strides`, outermost first: dimensions of
    /// length 1 dropped and neighbours that advance uniformly in all three operands merged,
    /// so the innermost loop is as long as the layouts allow. Never empty.
    pub fn loops(&self, out_strides: &[isize]) -> Small<Loop> {
        merge(self.dims_with(out_strides))
    }

    /// Fills in the output strides of the plan's own dimensions (one per dimension), so
    /// that `dims` are loops over the same positions as [`Plan::loops`], in the same
    /// order, unmerged (dimensions of length 1 kept): for tiny calls, which merging does
    /// not repay (PERFORMANCE.md#tiny-calls-store-forwarding).
    pub fn set_out_strides(&mut self, out_strides: impl IntoIterator<Item = isize>) {
        for (l, s) in self.dims.iter_mut().zip(out_strides) {
            l.out = s;
        }
    }

    /// [`Plan::set_out_strides`] for a C-contiguous output of the plan's shape (a fresh
    /// one), computed in place rather than made first (PERFORMANCE.md#tiny-calls-store-forwarding).
    pub fn set_c_out_strides(&mut self) {
        let mut acc = 1isize;
        for l in self.dims.iter_mut().rev() {
            l.out = acc;
            acc = acc.wrapping_mul(l.len as isize);
        }
    }

    /// [`Plan::loops`] for a C-contiguous output of the plan's shape; leaves the output
    /// strides in `dims`, as [`Plan::set_c_out_strides`] does.
    pub fn c_loops(&mut self) -> Small<Loop> {
        self.set_c_out_strides();
        merge(self.dims.iter().copied())
    }

    /// The plan's dimensions, outermost first, with the output strides filled in.
    fn dims_with<'s>(&'s self, out_strides: &'s [isize]) -> impl DoubleEndedIterator<Item = Loop> + 's {
        self.dims
            .iter()
            .zip(out_strides)
            .map(|(dim, &out)| Loop { out, ..*dim })
    }

    /// The loops for a gather into an existing output with strides `out_strides`, which
    /// may visit positions in any order: the row-major [`Plan::loops`] or their reverse
    /// (the column-major loops), whichever lane moves with unit stride in more of the
    /// three operands (row-major on a tie), then [`tiled`] where the lane still strides
    /// through the output. A Fortran-order output of a Fortran-order input thus runs
    /// column by column, a Fortran-order output of a C-order input tile by tile. A lane
    /// whose indices move it along an axis of stride above 1 does not count as moving
    /// with unit stride through the input: rows gathered by 1-D indices into a
    /// Fortran-order output would otherwise run lane by lane down the columns, each
    /// element from another row (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
    pub fn loops_any_order(&self, out_strides: &[isize]) -> Small<Loop> {
        let unit = |l: &Loop| {
            [l.out, l.inp, l.idx]
                .iter()
                .filter(|s| s.unsigned_abs() <= 1)
                .count()
        };
        let lane = |loops: &Small<Loop>| loops.last().map_or(0, unit);
        let c = merge(self.dims_with(out_strides));
        if lane(&c) == 3 {
            // Unit strides all round: nothing to gain from another order or tiles, but
            // perhaps from strips.
            return strips(c, &self.axes);
        }
        // Against the other order, the input counts as moving with unit stride only where
        // the lane's indices do not move it along a far axis: a lane of indices into rows
        // reads each element from another row.
        let far = self.axes.iter().any(|a| a.stride.unsigned_abs() > 1);
        let moves = |loops: &Small<Loop>| {
            loops.last().map_or(0, |l| {
                unit(l) - usize::from(far && l.idx != 0 && l.inp.unsigned_abs() <= 1)
            })
        };
        let f = merge(self.dims_with(out_strides).rev());
        tiled(if moves(&f) > moves(&c) { f } else { c })
    }
}

/// The loops over `dims`, outermost first: dimensions of length 1 dropped and neighbours
/// that advance uniformly in all three operands merged. Never empty.
#[inline(always)]
pub(crate) fn merge(dims: impl Iterator<Item = Loop>) -> Small<Loop> {
    let mut loops: Small<Loop> = Small::new();
    for inner in dims {
        if inner.len == 1 {
            continue;
        }
        if let Some(outer) = loops.last_mut() {
            let n = inner.len as isize;
            if outer.out == inner.out * n && outer.inp == inner.inp * n && outer.idx == inner.idx * n {
                *outer = Loop {
                    len: outer.len * inner.len,
                    ..inner
                };
                continue;
            }
        }
        push_loop(&mut loops, inner);
    }
    if loops.is_empty() {
        loops.push(Loop {
            len: 1,
            out: 0,
            inp: 0,
            idx: 0,
        });
    }
    loops
}

/// Pushes `l` field by field ([`push_in_place`]).
#[inline(always)]
fn push_loop(loops: &mut Small<Loop>, l: Loop) {
    push_in_place(loops, |last| {
        (last.len, last.out, last.inp, last.idx) = (l.len, l.out, l.inp, l.idx)
    });
}

/// Pushes a default `T` and lets `set` fill in its fields: a 32-byte `Loop` or `AxisTerm`
/// copied whole goes through the stack, and its 16-byte reloads of 8-byte stores stall on
/// store forwarding (PERFORMANCE.md#tiny-calls-store-forwarding).
#[inline(always)]
fn push_in_place<T: Copy + Default>(v: &mut Small<T>, set: impl FnOnce(&mut T)) {
    v.push(T::default());
    if let Some(last) = v.last_mut() {
        set(last);
    }
}

/// The checks before any dimension is planned: the ranks agree, every axis names a
/// dimension once, and the last indices dimension holds whole coordinates of
/// `k = max(axes.len(), 1)` values. Returns `k`.
#[inline(always)]
fn check_call(
    op: &'static str,
    input: Layout<'_>,
    indices: Layout<'_>,
    axes: &[usize],
) -> Result<usize, GatherError> {
    let rank = input.shape.len();
    if indices.shape.len() != rank {
        return Err(GatherError::RankMismatch {
            op,
            input_shape: input.shape.to_vec(),
            indices_shape: indices.shape.to_vec(),
            requirement: "have the same rank",
        });
    }
    check_axes(op, axes, rank)?;
    let k = axes.len().max(1);
    if let Some(&last) = indices.shape.last()
        && (if k == 1 { last } else { last / k * k }) != last
    {
        return Err(GatherError::CoordinateFold {
            op,
            indices_shape: indices.shape.to_vec(),
            last,
            coordinate_size: k,
        });
    }
    Ok(k)
}

/// Every axis names a dimension of a rank-`rank` input, once.
fn check_axes(op: &'static str, axes: &[usize], rank: usize) -> Result<(), GatherError> {
    for (i, &axis) in axes.iter().enumerate() {
        if axis >= rank {
            return Err(GatherError::AxisOutOfBounds {
                op,
                axis: axis as isize,
                ndim: rank,
                valid: if rank == 0 {
                    axis_range(0)
                } else {
                    format!("0..={}", rank - 1)
                },
            });
        }
        if axes[..i].contains(&axis) {
            return Err(GatherError::DuplicateAxis {
                op,
                axis,
                axes: axes.to_vec(),
            });
        }
    }
    Ok(())
}

/// The logical indices shape: coordinates of `k` values folded out of the last dimension
/// (whose length `k` divides), for messages.
fn fold(indices: &[usize], k: usize) -> Vec<usize> {
    let mut logical = indices.to_vec();
    if let Some(last) = logical.last_mut() {
        *last /= k;
    }
    logical
}

#[cfg(test)]
mod tests;
