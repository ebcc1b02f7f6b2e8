//! What a gather-reduce pools ([`PoolTable`]): an array of numbers, or rows stored
//! otherwise ([`QTable`](crate::quant::QTable)'s quantized bytes) that the kernel's walk
//! reads through a row source of its own. The one seam between a call's checks and where
//! its rows come from: the calls, the plans and the sharded tables take any of them.

// The trait's hidden methods name the kernel's types: it is sealed, so nothing outside
// the crate implements or calls them.
#![allow(private_interfaces, private_bounds)]

use std::ops::Range;

use ndarray::{ArrayBase, ArrayD, ArrayRef, Axis, Data, Dimension, Slice};

use crate::error::GatherError;
use crate::ext::GatherExt;
use crate::index::GatherIndex;

use crate::kernel::BadIndex;
use crate::kernel::reduce::{Entries, Geometry, Pooler, sorted, walk_input};
use crate::plan::reduce::{ahead, row_loops};
use crate::pool::PoolElement;

mod sealed {
    /// Only the crate's tables are tables: the kernel relies on their geometry.
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// A table of `A` with dimensions `D` that a gather-reduce pools: any array of numbers
/// (`&Array`, `&ArrayView`, `&ArrayRef`, any layout), or a
/// [`QTable`](crate::quant::QTable) of quantized rows, which is an `(n, D)` table of
/// `f32` (decision 48). [`GatherReducePlan`](crate::GatherReducePlan)'s `apply` methods
/// take one.
///
/// ```
/// use ndarray::array;
/// use ndarray_gather::prelude::*;
/// use ndarray_gather::quant::{QTable, Rowwise};
///
/// let table = array![[0.0, 255.0], [1.0, 1.0], [-2.0, 2.0]];
/// let q = Rowwise::Int8.quantize(&table)?;
/// let qt = QTable::new(&q, Rowwise::Int8)?;
/// let plan = GatherReducePlan::new(qt.dim(), &[2, 0, 1], Segments::starts(&[0, 2]), 0)?;
/// assert_eq!(plan.apply(&qt, Pooling::Sum)?, plan.apply(&table.mapv(|v| v as f32), Pooling::Sum)?);
/// # Ok::<(), GatherError>(())
/// ```
pub trait PoolTable<A, D>: Sealed {
    /// The table's shape.
    #[doc(hidden)]
    fn dim(&self) -> D;

    /// Whether an output of ids may be walked by ids (in place, any order); else the
    /// walk sorts them first.
    #[doc(hidden)]
    const BY_IDS: bool = true;

    /// Whether per-head weights (`[P, H]`) may weigh the slices after the axis
    /// ([`head_geometry`](Self::head_geometry)); else `[P]` weights only.
    #[doc(hidden)]
    const HEADS: bool = false;

    /// Whether the walk can write `out` (or an argmax of its strides) where it is.
    #[doc(hidden)]
    fn writes(&self, _out: &ArrayRef<A, D>) -> bool {
        true
    }

    /// The walk's geometry of this table along `axis` into `out` (which `writes`) and
    /// `arg` (null, or an argmax of `out`'s shape and strides) of `segments` segments.
    #[doc(hidden)]
    fn geometry(
        &self,
        axis: usize,
        out: &mut ArrayRef<A, D>,
        arg: *mut usize,
        segments: usize,
    ) -> Geometry<A>;

    /// [`geometry`](Self::geometry) of head `h`: the slice `h` of the dimension after
    /// `axis` of the table and `out` (an array's; `None`: the table has no heads).
    #[doc(hidden)]
    fn head_geometry(
        &self,
        _axis: usize,
        _out: &mut ArrayRef<A, D>,
        _arg: *mut usize,
        _segments: usize,
        _h: usize,
    ) -> Option<Geometry<A>> {
        None
    }

    /// Builds every segment of `e` into `g` (this table's geometry) in `jobs` chunks.
    #[doc(hidden)]
    fn sorted<E: Entries>(
        &self,
        g: &Geometry<A>,
        e: &E,
        p: &Pooler<'_, A>,
        jobs: usize,
    ) -> Result<(), BadIndex>;

    /// Builds the segments `segs` of `e` into `g` (this table's geometry) on this thread.
    ///
    /// # Safety
    /// No other thread builds any of `segs` of `g`'s output meanwhile.
    #[doc(hidden)]
    unsafe fn walk<E: Entries>(
        &self,
        g: &Geometry<A>,
        e: &E,
        p: &Pooler<'_, A>,
        segs: Range<usize>,
    ) -> Result<(), BadIndex>;

    /// The rows at `indices` along axis 0 (a sharded table's owners send them).
    #[doc(hidden)]
    fn gather_rows<I: GatherIndex, E: Dimension>(
        &self,
        indices: &ArrayRef<I, E>,
    ) -> Result<ArrayD<A>, GatherError>;
}

impl<A, D> Sealed for ArrayRef<A, D> {}

impl<A: PoolElement, D: Dimension> PoolTable<A, D> for ArrayRef<A, D> {
    fn dim(&self) -> D {
        self.raw_dim()
    }

    const HEADS: bool = true;

    fn geometry(
        &self,
        axis: usize,
        out: &mut ArrayRef<A, D>,
        arg: *mut usize,
        segments: usize,
    ) -> Geometry<A> {
        let (lane, outer) = row_loops(self.shape(), self.strides(), out.strides(), axis);
        let row: usize = (0..self.ndim())
            .filter(|&d| d != axis)
            .map(|d| self.shape()[d])
            .product();
        // The contract of `Geometry`: `self` and `out` are arrays of the same shape but
        // along `axis` (`rows` and `segments` long), the lanes are their other dimensions,
        // and the argmax array has the output's shape and strides; a mutable array's
        // elements are distinct, so distinct segments' rows are.
        Geometry {
            x: self.as_ptr(),
            x_step: self.strides()[axis],
            rows: self.shape()[axis],
            out: out.as_mut_ptr(),
            o_step: out.strides()[axis],
            segments,
            arg,
            ahead: ahead(row.saturating_mul(size_of::<A>())),
            lane,
            outer,
        }
    }

    fn head_geometry(
        &self,
        axis: usize,
        out: &mut ArrayRef<A, D>,
        arg: *mut usize,
        segments: usize,
        h: usize,
    ) -> Option<Geometry<A>> {
        let (d, head) = (Axis(axis + 1), Slice::from(h..h + 1));
        // (The argmax has the output's strides.)
        let at = h as isize * out.strides().get(axis + 1)?;
        let arg = if arg.is_null() {
            arg
        } else {
            arg.wrapping_offset(at)
        };
        let x = self.slice_axis(d, head);
        Some(x.geometry(axis, &mut out.slice_axis_mut(d, head), arg, segments))
    }

    fn sorted<E: Entries>(
        &self,
        g: &Geometry<A>,
        e: &E,
        p: &Pooler<'_, A>,
        jobs: usize,
    ) -> Result<(), BadIndex> {
        sorted(g, e, p, jobs)
    }

    unsafe fn walk<E: Entries>(
        &self,
        g: &Geometry<A>,
        e: &E,
        p: &Pooler<'_, A>,
        segs: Range<usize>,
    ) -> Result<(), BadIndex> {
        // SAFETY: the caller's.
        unsafe { walk_input(g, e, p, segs) }
    }

    fn gather_rows<I: GatherIndex, E: Dimension>(
        &self,
        indices: &ArrayRef<I, E>,
    ) -> Result<ArrayD<A>, GatherError> {
        self.gather(&indices.view().into_dyn(), 0)
    }
}

impl<S: Data, D> Sealed for ArrayBase<S, D> {}

// (An array is its `ArrayRef`'s table: every method forwards.)
impl<A: PoolElement, S: Data<Elem = A>, D: Dimension> PoolTable<A, D> for ArrayBase<S, D> {
    fn dim(&self) -> D {
        self.raw_dim()
    }

    const HEADS: bool = true;

    fn geometry(
        &self,
        axis: usize,
        out: &mut ArrayRef<A, D>,
        arg: *mut usize,
        segments: usize,
    ) -> Geometry<A> {
        (**self).geometry(axis, out, arg, segments)
    }

    fn head_geometry(
        &self,
        axis: usize,
        out: &mut ArrayRef<A, D>,
        arg: *mut usize,
        segments: usize,
        h: usize,
    ) -> Option<Geometry<A>> {
        (**self).head_geometry(axis, out, arg, segments, h)
    }

    fn sorted<E: Entries>(
        &self,
        g: &Geometry<A>,
        e: &E,
        p: &Pooler<'_, A>,
        jobs: usize,
    ) -> Result<(), BadIndex> {
        (**self).sorted(g, e, p, jobs)
    }

    unsafe fn walk<E: Entries>(
        &self,
        g: &Geometry<A>,
        e: &E,
        p: &Pooler<'_, A>,
        segs: Range<usize>,
    ) -> Result<(), BadIndex> {
        // SAFETY: the caller's.
        unsafe { (**self).walk(g, e, p, segs) }
    }

    fn gather_rows<I: GatherIndex, E: Dimension>(
        &self,
        indices: &ArrayRef<I, E>,
    ) -> Result<ArrayD<A>, GatherError> {
        (**self).gather_rows(indices)
    }
}
