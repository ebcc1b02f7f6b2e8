//! [`QTable`]: quantized rows read in place, as a logical table of `f32`: gathered
//! (dequantized) and pooled through the crate's own sorted walk, the rows coming from the
//! kernel's quantized row source.

// (The table's walk names the kernel's types: `PoolTable` is sealed.)
#![allow(private_interfaces, private_bounds)]

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use ndarray::{Array, Array2, ArrayD, ArrayRef, ArrayView2, AsArray, Axis, Dimension, Ix2};

use super::Rowwise;
use crate::call::reduce::{Out, Rows, gather_reduce, resolve_rows};
use crate::call::zeros;
use crate::error::GatherError;
#[cfg(feature = "half")]
use crate::half_bits::{widen_bf16, widen_f16};
use crate::index::GatherIndex;
use crate::indices::IndexArray;
use crate::kernel::BadIndex;
#[cfg(feature = "half")]
use crate::kernel::isa::Isa;
#[cfg(feature = "half")]
use crate::kernel::reduce::Halves;
use crate::kernel::reduce::{
    Entries, Erased, ErasedFn, Geometry, Pooler, QRow, Quantized, RowSource, sorted_quantized, walk_segments,
};
use crate::plan::reduce::{Lane, ahead};
use crate::pool::IntoPool;
use crate::segments::Segments;
use crate::table::{PoolTable, Sealed};

/// A table of quantized rows (decision 45): any `[n, row_bytes]` view of `u8` (an
/// array, a memory map's view) read in place in a [`Rowwise`] layout, or (feature
/// `half`) a view of `half::f16` / `half::bf16` values, as a logical `(n, D)` table of
/// `f32`.
///
/// Rows are read in place when each row's bytes (or values) are contiguous, as in any
/// row-major array or memory map, whatever the step between rows. Rows stored otherwise
/// (a column-major or transposed view) are copied into a row-major table once, when the
/// `QTable` is made, and shared by its clones (no call copies them again).
///
/// ```
/// use ndarray_gather::quant::{QTable, Rowwise};
///
/// let bytes = ndarray::Array2::<u8>::zeros((3, 36)); // 3 rows of 64 4-bit values
/// let qt = QTable::new(&bytes, Rowwise::Int4)?;
/// assert_eq!(qt.dim(), (3, 64));
/// let err = QTable::new(&ndarray::Array2::<u8>::zeros((3, 3)), Rowwise::Int4).unwrap_err();
/// assert!(err.to_string().contains("rows of 3 bytes"));
/// # Ok::<(), ndarray_gather::GatherError>(())
/// ```
#[derive(Debug, Clone)]
pub struct QTable<'a> {
    rows: Stored<'a>,
    values: usize,
}

/// How a [`QTable`]'s rows are stored (decision 45).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Bytes in a rowwise quantized layout.
    Rowwise(Rowwise),
    /// IEEE half floats (`half::f16`: `QTable::f16`, feature `half`).
    F16,
    /// bfloat16 values (`half::bf16`: `QTable::bf16`, feature `half`).
    Bf16,
}

/// The rows: as given, or normalised once.
#[derive(Debug, Clone)]
enum Stored<'a> {
    Rowwise(Held<'a, u8>, Rowwise),
    #[cfg(feature = "half")]
    F16(Held<'a, ::half::f16>),
    #[cfg(feature = "half")]
    Bf16(Held<'a, ::half::bf16>),
}

/// A table's rows, each one contiguous run: the caller's view where its rows are, else a
/// row-major copy made once and shared by the table's clones.
#[derive(Debug, Clone)]
enum Held<'a, T> {
    View(ArrayView2<'a, T>),
    Copy(Arc<Array2<T>>),
}

impl<'a, T: Clone> Held<'a, T> {
    fn of(v: ArrayView2<'a, T>) -> Self {
        if v.ncols() <= 1 || v.strides()[1] == 1 {
            Held::View(v)
        } else {
            Held::Copy(Arc::new(v.as_standard_layout().into_owned()))
        }
    }
}

impl<T> Held<'_, T> {
    /// The same rows, borrowed for a shorter time.
    fn reborrow(&self) -> Held<'_, T> {
        match self {
            Held::View(v) => Held::View(v.view()),
            Held::Copy(a) => Held::Copy(Arc::clone(a)),
        }
    }

    /// The rows, each a contiguous run.
    fn view(&self) -> ArrayView2<'_, T> {
        match self {
            Held::View(v) => v.view(),
            Held::Copy(a) => a.view(),
        }
    }
}

impl<'a> QTable<'a> {
    /// The rows `bytes` (`[n, row_bytes]`, any memory order) in `layout`.
    ///
    /// # Errors
    /// [`RowWidth`](GatherError::RowWidth) where a row is narrower than its scale and bias.
    pub fn new(bytes: impl AsArray<'a, u8, Ix2>, layout: Rowwise) -> Result<Self, GatherError> {
        Self::named("QTable::new", bytes.into(), layout)
    }

    pub(super) fn named(
        op: &'static str,
        bytes: ArrayView2<'a, u8>,
        layout: Rowwise,
    ) -> Result<Self, GatherError> {
        let values = layout.values(op, bytes.ncols())?;
        Ok(QTable {
            rows: Stored::Rowwise(Held::of(bytes), layout),
            values,
        })
    }

    /// A table of IEEE half floats (`[n, D]`, any memory order), pooled as the `f32`
    /// table of their values: every call gives the bits it gives on that table
    /// (accumulated in `f32`, where `F.embedding_bag` on a half table rounds each bag to
    /// half).
    ///
    /// ```
    /// use ndarray_gather::quant::half::f16;
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::prelude::*;
    /// use ndarray_gather::quant::QTable;
    ///
    /// let t = array![[1.5f32, -2.0], [0.25, 8.0]];
    /// let h: Array2<f16> = t.mapv(f16::from_f32);
    /// let qt = QTable::f16(&h);
    /// let bags = qt.gather_reduce(&[1, 0, 1], Segments::starts(&[0, 2]), Pooling::Sum)?;
    /// assert_eq!(bags, t.gather_reduce(&[1, 0, 1], Segments::starts(&[0, 2]), 0, Pooling::Sum)?);
    /// # Ok::<(), GatherError>(())
    /// ```
    #[cfg(feature = "half")]
    #[cfg_attr(docsrs, doc(cfg(feature = "half")))]
    pub fn f16(rows: impl AsArray<'a, ::half::f16, Ix2>) -> Self {
        let rows = rows.into();
        QTable {
            values: rows.ncols(),
            rows: Stored::F16(Held::of(rows)),
        }
    }

    /// A table of bfloat16 values (`[n, D]`, any memory order), as [`f16`](Self::f16).
    ///
    /// ```
    /// use ndarray_gather::quant::half::bf16;
    /// use ndarray::array;
    /// use ndarray_gather::quant::QTable;
    ///
    /// let h = array![[bf16::from_f32(1.5), bf16::from_f32(-3.0)]];
    /// assert_eq!(QTable::bf16(&h).gather(&[0, 0])?, array![[1.5, -3.0], [1.5, -3.0]]);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    #[cfg(feature = "half")]
    #[cfg_attr(docsrs, doc(cfg(feature = "half")))]
    pub fn bf16(rows: impl AsArray<'a, ::half::bf16, Ix2>) -> Self {
        let rows = rows.into();
        QTable {
            values: rows.ncols(),
            rows: Stored::Bf16(Held::of(rows)),
        }
    }

    /// The same table, borrowed for a shorter time (a collection's call takes it so).
    pub(crate) fn reborrow(&self) -> QTable<'_> {
        let rows = match &self.rows {
            Stored::Rowwise(b, l) => Stored::Rowwise(b.reborrow(), *l),
            #[cfg(feature = "half")]
            Stored::F16(h) => Stored::F16(h.reborrow()),
            #[cfg(feature = "half")]
            Stored::Bf16(h) => Stored::Bf16(h.reborrow()),
        };
        QTable {
            rows,
            values: self.values,
        }
    }

    /// The logical table's shape: `(rows, D)`, `D` the values of a row.
    pub fn dim(&self) -> (usize, usize) {
        let n = match &self.rows {
            Stored::Rowwise(b, _) => b.view().nrows(),
            #[cfg(feature = "half")]
            Stored::F16(h) => h.view().nrows(),
            #[cfg(feature = "half")]
            Stored::Bf16(h) => h.view().nrows(),
        };
        (n, self.values)
    }

    /// The rows' layout, and (below) the bytes as given:
    ///
    /// ```
    /// use ndarray::Array2;
    /// use ndarray_gather::quant::{Layout, QTable, Rowwise};
    ///
    /// let q = Rowwise::Int2.quantize(&Array2::<f32>::zeros((2, 8)))?;
    /// let qt = QTable::new(q.view(), Rowwise::Int2)?;
    /// assert_eq!(qt.layout(), Layout::Rowwise(Rowwise::Int2));
    /// assert_eq!(qt.bytes().map(|b| b.dim()), Some((2, 8 / 4 + 4)));
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    pub fn layout(&self) -> Layout {
        match &self.rows {
            Stored::Rowwise(_, l) => Layout::Rowwise(*l),
            #[cfg(feature = "half")]
            Stored::F16(_) => Layout::F16,
            #[cfg(feature = "half")]
            Stored::Bf16(_) => Layout::Bf16,
        }
    }

    /// The bytes, for a rowwise layout (`None` for rows of half floats): the view as
    /// given, or its row-major copy where its rows were not contiguous.
    pub fn bytes(&self) -> Option<ArrayView2<'_, u8>> {
        match &self.rows {
            Stored::Rowwise(b, _) => Some(b.view()),
            #[cfg(feature = "half")]
            _ => None,
        }
    }

    /// The bytes of one stored row.
    fn row_bytes(&self) -> usize {
        match &self.rows {
            Stored::Rowwise(_, l) => l.row_bytes(self.values),
            #[cfg(feature = "half")]
            _ => 2 * self.values,
        }
    }

    /// Row `r`'s values into `out` (`D` long).
    pub(super) fn decode(&self, r: usize, out: &mut [f32]) {
        let values = self.values;
        match &self.rows {
            Stored::Rowwise(b, l) => {
                let b = b.view();
                let row = b.index_axis(Axis(0), r);
                // (Rows are contiguous: `Held::of`.)
                let bytes = &*match row.to_slice() {
                    Some(s) => Cow::Borrowed(s),
                    None => Cow::Owned(row.to_vec()),
                };
                match l {
                    Rowwise::Int8 => QRow::<8> { bytes, values }.decode(out),
                    Rowwise::Int4 => QRow::<4> { bytes, values }.decode(out),
                    Rowwise::Int2 => QRow::<2> { bytes, values }.decode(out),
                }
            }
            #[cfg(feature = "half")]
            Stored::F16(h) => out
                .iter_mut()
                .zip(h.view().row(r))
                .for_each(|(o, h)| *o = widen_f16(h.to_bits())),
            #[cfg(feature = "half")]
            Stored::Bf16(h) => out
                .iter_mut()
                .zip(h.view().row(r))
                .for_each(|(o, h)| *o = widen_bf16(h.to_bits())),
        }
    }

    /// The gather-reduce of the rows `indices` name into `segments` with `pool` (decision
    /// 47), each row's bytes read once and made `f32` in registers (no dequantized copy):
    /// as [`gather_reduce`](crate::GatherReduceExt::gather_reduce) of the `f32` table along
    /// axis 0, every pooling, weight, skip and fill. `Sum` (and `Mean` / `SqrtN`, which
    /// divide it) adds each position as FBGEMM does, `out = fma(w * scale, q, out + w *
    /// bias)` from zero: PyTorch's `quantized::embedding_bag_{byte,4bit,2bit}_rowwise_offsets`
    /// to the bit; the other poolings see each value as `fma(scale, q, bias)`. Each segment
    /// is built by one thread in position order: the same bits on any thread count.
    /// A [`GatherReducePlan`](crate::GatherReducePlan) applies to a `QTable` too.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    /// use ndarray_gather::quant::{QTable, Rowwise};
    ///
    /// let q = Rowwise::Int8.quantize(&array![[0.0, 255.0], [1.0, 1.0], [-2.0, 2.0]])?;
    /// let qt = QTable::new(&q, Rowwise::Int8)?;
    /// // torch: quantized::embedding_bag_byte_rowwise_offsets(q, [2, 0, 1], offsets=[0, 2])
    /// let bags = qt.gather_reduce(&[2, 0, 1], Segments::starts(&[0, 2]), Pooling::Sum)?;
    /// assert_eq!(bags, array![[-2.0, 257.0], [1.0, 1.0]]);
    /// let m = qt.gather_reduce(&[2, 0, 1], Segments::starts(&[0, 2]), Pooling::Max.skip(1))?;
    /// assert_eq!(m, array![[0.0, 255.0], [0.0, 0.0]]); // the second bag: all skipped
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As `gather_reduce`'s: the segments, the pool (weights, their count), the indices.
    #[doc(
        alias = "embedding_bag_byte_rowwise_offsets",
        alias = "embedding_bag_4bit_rowwise_offsets"
    )]
    pub fn gather_reduce<'w, I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        pool: impl IntoPool<'w, f32>,
    ) -> Result<Array2<f32>, GatherError> {
        const OP: &str = "QTable::gather_reduce";
        indices.with_ref(OP, |ix| {
            gather_reduce(OP, self, ix, &segments, 0, pool.into_pool(), Out::Fresh)?.fresh(OP)
        })
    }

    /// [`gather_reduce`](Self::gather_reduce) into `out` (`[segments, D]`, any layout):
    /// the call with no allocation but small per-call tallies. On `Err`, `out` is
    /// unchanged.
    ///
    /// ```
    /// use ndarray::{Array2, array};
    /// use ndarray_gather::prelude::*;
    /// use ndarray_gather::quant::{QTable, Rowwise};
    ///
    /// let q = Rowwise::Int8.quantize(&array![[0.0, 255.0], [1.0, 1.0], [-2.0, 2.0]])?;
    /// let qt = QTable::new(&q, Rowwise::Int8)?;
    /// let mut out = Array2::zeros((2, 2));
    /// qt.gather_reduce_into(&[2, 0, 1], Segments::starts(&[0, 2]), Pooling::Sum, &mut out)?;
    /// assert_eq!(out, qt.gather_reduce(&[2, 0, 1], Segments::starts(&[0, 2]), Pooling::Sum)?);
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As `gather_reduce`'s, and [`OutputShape`](GatherError::OutputShape).
    pub fn gather_reduce_into<'w, I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        pool: impl IntoPool<'w, f32>,
        out: &mut ArrayRef<f32, Ix2>,
    ) -> Result<(), GatherError> {
        const OP: &str = "QTable::gather_reduce_into";
        indices.with_ref(OP, |ix| {
            gather_reduce(OP, self, ix, &segments, 0, pool.into_pool(), Out::Into(out)).map(|_| ())
        })
    }

    /// [`gather_reduce`](Self::gather_reduce) with `Max` or `Min` and, for each output
    /// element, the position its value came from, as
    /// [`gather_reduce_arg`](crate::GatherReduceExt::gather_reduce_arg) of the `f32` table
    /// (ties keep the first position; empty segments the number of positions).
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::prelude::*;
    /// use ndarray_gather::quant::{QTable, Rowwise};
    ///
    /// let q = Rowwise::Int8.quantize(&array![[0.0, 255.0], [1.0, 1.0], [-2.0, 2.0]])?;
    /// let qt = QTable::new(&q, Rowwise::Int8)?;
    /// let (m, arg) = qt.gather_reduce_arg(&[2, 0, 1], Segments::ids(&[0, 0, 0], 2), Pooling::Max)?;
    /// assert_eq!(m, array![[1.0, 255.0], [0.0, 0.0]]);
    /// assert_eq!(arg, array![[2, 1], [3, 3]]); // the empty second segment: 3 positions
    /// # Ok::<(), GatherError>(())
    /// ```
    ///
    /// # Errors
    /// As [`gather_reduce`](Self::gather_reduce), and a [`Pooling`](GatherError::Pooling)
    /// error for a pooling other than `Max` and `Min`.
    #[allow(clippy::type_complexity)]
    pub fn gather_reduce_arg<'w, I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        pool: impl IntoPool<'w, f32>,
    ) -> Result<(Array2<f32>, Array2<usize>), GatherError> {
        const OP: &str = "QTable::gather_reduce_arg";
        indices.with_ref(OP, |ix| {
            gather_reduce(OP, self, ix, &segments, 0, pool.into_pool(), Out::Arg)?.with_arg(OP)
        })
    }

    /// The rows `indices` name, dequantized (`fma(scale, q, bias)`): the indices' shape
    /// followed by `D`, as `gather(&indices, 0)` on the `f32` table. Negative indices
    /// count from the end.
    ///
    /// # Errors
    /// [`IndexOutOfBounds`](GatherError::IndexOutOfBounds) naming the first bad index.
    pub fn gather<I: GatherIndex, E: Dimension>(
        &self,
        indices: impl IndexArray<I, E>,
    ) -> Result<Array<f32, E::Larger>, GatherError> {
        const OP: &str = "QTable::gather";
        let (n, d) = self.dim();
        indices.with_ref(OP, |ix| {
            let mut dim = E::Larger::zeros(ix.ndim() + 1);
            dim.slice_mut()[..ix.ndim()].copy_from_slice(ix.shape());
            dim.slice_mut()[ix.ndim()] = d;
            // A zero-size output reads nothing: any index is fine (decision 4).
            if d == 0 {
                return zeros(OP, dim);
            }
            let rows = resolve_rows(OP, ix, 0, n, None)?;
            let mut out = zeros::<f32, _>(OP, dim)?;
            let flat = out.as_slice_mut().expect("a fresh array is contiguous");
            let each = |k: usize| match &rows {
                Rows::Narrow(v) => v[k] as usize,
                Rows::Wide(v) => v[k],
            };
            if d > 0 {
                for (k, o) in flat.chunks_exact_mut(d).enumerate() {
                    self.decode(each(k), o);
                }
            }
            Ok(out)
        })
    }
}

impl Sealed for QTable<'_> {}

impl PoolTable<f32, Ix2> for QTable<'_> {
    fn dim(&self) -> Ix2 {
        let (n, d) = QTable::dim(self);
        Ix2(n, d)
    }

    const BY_IDS: bool = false;

    fn writes(&self, out: &ArrayRef<f32, Ix2>) -> bool {
        out.ncols() <= 1 || out.strides()[1] == 1
    }

    fn geometry(
        &self,
        _axis: usize,
        out: &mut ArrayRef<f32, Ix2>,
        arg: *mut usize,
        segments: usize,
    ) -> Geometry<f32> {
        let (n, d) = QTable::dim(self);
        // The contract of `Geometry` for a row source: the output's rows are single runs
        // (`writes`), the argmax has its strides; the input pointer is never read (the rows
        // come from `Quantized`, whose contract `sorted` gives).
        Geometry {
            x: std::ptr::NonNull::<f32>::dangling().as_ptr(),
            x_step: 0,
            rows: n,
            out: out.as_mut_ptr(),
            o_step: out.strides()[0],
            segments,
            arg,
            ahead: ahead(self.row_bytes()),
            lane: Lane { len: d, x: 1, o: 1 },
            outer: Vec::new(),
        }
    }

    fn sorted<E: Entries>(
        &self,
        g: &Geometry<f32>,
        e: &E,
        p: &Pooler<'_, f32>,
        jobs: usize,
    ) -> Result<(), BadIndex> {
        self.sorted_erased(g, &e.erase(), p, jobs)
    }

    unsafe fn walk<E: Entries>(
        &self,
        g: &Geometry<f32>,
        e: &E,
        p: &Pooler<'_, f32>,
        segs: Range<usize>,
    ) -> Result<(), BadIndex> {
        // SAFETY: the caller's contract.
        unsafe { self.walk_erased(g, &e.erase(), p, segs) }
    }

    fn gather_rows<I: GatherIndex, E: Dimension>(
        &self,
        indices: &ArrayRef<I, E>,
    ) -> Result<ArrayD<f32>, GatherError> {
        self.gather(indices).map(|g| g.into_dyn())
    }
}

// The walks over a table's rows, not generic: compiled once, here, rather than in each
// user's build (a minute of a release build for five sources, seven poolings and three
// instruction sets).
impl QTable<'_> {
    /// [`PoolTable::sorted`] over entries of a concrete type.
    fn sorted_erased(
        &self,
        g: &Geometry<f32>,
        e: &Erased<'_>,
        p: &Pooler<'_, f32>,
        jobs: usize,
    ) -> Result<(), BadIndex> {
        e.with(Sorted { g, e: self, p, jobs })
    }

    /// [`PoolTable::walk`] over entries of a concrete type.
    ///
    /// # Safety
    /// `PoolTable::walk`'s.
    unsafe fn walk_erased(
        &self,
        g: &Geometry<f32>,
        e: &Erased<'_>,
        p: &Pooler<'_, f32>,
        segs: Range<usize>,
    ) -> Result<(), BadIndex> {
        // (The caller's contract is `Walk`'s.)
        e.with(Walk { g, e: self, p, segs })
    }

    /// `walk` with this table's rows as the kernel's row source: each row's bytes (or
    /// half floats) read in place (each row is contiguous: `Held::of`).
    fn with_rows(&self, walk: impl WithRows) -> Result<(), BadIndex> {
        let values = self.values;
        match &self.rows {
            Stored::Rowwise(b, l) => {
                let bytes = b.view();
                // `Quantized`'s contract: `n` rows of `row_bytes` contiguous bytes,
                // `strides()[0]` apart (the view's, whose width `new` checked).
                let (base, stride) = (bytes.as_ptr(), bytes.strides()[0]);
                match l {
                    Rowwise::Int8 => walk.run(&Quantized::<8> { base, stride, values }),
                    Rowwise::Int4 => walk.run(&Quantized::<4> { base, stride, values }),
                    Rowwise::Int2 => walk.run(&Quantized::<2> { base, stride, values }),
                }
            }
            #[cfg(feature = "half")]
            Stored::F16(h) => halves::<_, false>(h.view(), |rows| walk.run(rows)),
            #[cfg(feature = "half")]
            Stored::Bf16(h) => halves::<_, true>(h.view(), |rows| walk.run(rows)),
        }
    }
}

/// What runs with a table's row source (a closure generic over the source's type).
trait WithRows {
    fn run<R: RowSource<f32>>(self, rows: &R) -> Result<(), BadIndex>;
}

/// A call's sorted walk, on the pool's threads.
struct Sorted<'a, 'w, E> {
    g: &'a Geometry<f32>,
    e: &'a E,
    p: &'a Pooler<'w, f32>,
    jobs: usize,
}

impl<E: Entries> WithRows for Sorted<'_, '_, E> {
    fn run<R: RowSource<f32>>(self, rows: &R) -> Result<(), BadIndex> {
        sorted_quantized(self.g, self.e, self.p, self.jobs, rows)
    }
}

impl ErasedFn<Result<(), BadIndex>> for Sorted<'_, '_, QTable<'_>> {
    fn run<E: Entries>(self, e: &E) -> Result<(), BadIndex> {
        let Sorted { g, e: table, p, jobs } = self;
        table.with_rows(Sorted { g, e, p, jobs })
    }
}

/// One job's segments, on this thread (the contract of `walk_segments`: no other thread
/// builds them meanwhile, `PoolTable::walk`'s caller's).
struct Walk<'a, 'w, E> {
    g: &'a Geometry<f32>,
    e: &'a E,
    p: &'a Pooler<'w, f32>,
    segs: Range<usize>,
}

impl<E: Entries> WithRows for Walk<'_, '_, E> {
    fn run<R: RowSource<f32>>(self, rows: &R) -> Result<(), BadIndex> {
        // SAFETY: `PoolTable::walk`'s caller's contract, which is `walk_segments`'.
        unsafe { walk_segments(self.g, self.e, self.p, self.segs, rows) }
    }
}

impl ErasedFn<Result<(), BadIndex>> for Walk<'_, '_, QTable<'_>> {
    fn run<E: Entries>(self, e: &E) -> Result<(), BadIndex> {
        let Walk { g, e: table, p, segs } = self;
        table.with_rows(Walk { g, e, p, segs })
    }
}

/// `walk` over the rows of 2-byte floats `h` as a [`Halves`] source, their bits read in
/// place (each row is contiguous: `Held::of`).
#[cfg(feature = "half")]
fn halves<H: Copy, const BF: bool>(
    h: ArrayView2<'_, H>,
    walk: impl FnOnce(&Halves<BF>) -> Result<(), BadIndex>,
) -> Result<(), BadIndex> {
    if h.ncols() > 1 && h.strides()[1] != 1 {
        return Err(BadIndex);
    }
    // (`half::f16` and `bf16` are `repr(transparent)` over their `u16` bits.)
    // `Halves`' contract: `n` rows of `D` (the geometry's lane) contiguous `u16`s,
    // `stride` apart.
    walk(&Halves {
        base: h.as_ptr().cast::<u16>(),
        stride: h.strides()[0],
        isa: Isa::detect(),
    })
}
