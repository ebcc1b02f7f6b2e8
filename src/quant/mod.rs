//! Quantized rows (decisions 45-46): tables stored as PyTorch's and FBGEMM's rowwise
//! layouts, one row of 8-, 4- or 2-bit values with its own scale and bias, quantized and
//! read byte for byte as PyTorch's `quantized::embedding_bag_*_prepack` ops write them.
//!
//! ```
//! use ndarray::Array2;
//! use ndarray_gather::quant::{QTable, Rowwise};
//!
//! let table = Array2::from_shape_fn((1000, 64), |(r, c)| ((r * 7 + c) % 31) as f32 - 15.0);
//! let q = Rowwise::Int8.quantize(&table)?; // [1000, 64 + 8] bytes: torch's byte prepack
//! let qt = QTable::new(&q, Rowwise::Int8)?;
//! assert_eq!(qt.dim(), (1000, 64));
//! let rows = qt.gather(&[999, 0])?; // dequantized: [2, 64]
//! assert!((rows[[1, 3]] - table[[0, 3]]).abs() <= 30.0 / 255.0);
//! # Ok::<(), ndarray_gather::GatherError>(())
//! ```

mod half;

use std::borrow::Cow;

use ndarray::{Array, Array2, ArrayRef, ArrayView2, AsArray, Axis, Dimension, Ix2};

use crate::call::reduce::{Rows, resolve_rows};
use crate::error::GatherError;
use crate::index::GatherIndex;
use crate::indices::IndexArray;
pub(crate) use half::{from_f16, to_f16};

/// A rowwise quantized layout, byte for byte as PyTorch stores it (decision 45). A row of
/// `D` values is:
/// - `Int8`: `D` bytes, then its scale and bias as little-endian `f32` (`D + 8` bytes:
///   `quantized::embedding_bag_byte_prepack`);
/// - `Int4` / `Int2`: the values packed two / four to a byte, element `j` in byte
///   `j / (8 / b)` at bit `(j % (8 / b)) * b`, low bits first, then its scale and bias as
///   little-endian half floats (`D / 2 + 4` or `D / 4 + 4` bytes:
///   `embedding_bag_4bit_prepack` / `_2bit_prepack`; `D` a multiple of 2 / 4, as there).
///
/// A value is `scale * q + bias`, computed as one fused multiply-add in `f32`.
#[doc(alias = "embedding_bag_byte_prepack")]
#[doc(alias = "embedding_bag_4bit_prepack")]
#[doc(alias = "embedding_bag_2bit_prepack")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rowwise {
    /// 8-bit values, `f32` scale and bias.
    Int8,
    /// 4-bit values, half-float scale and bias.
    Int4,
    /// 2-bit values, half-float scale and bias.
    Int2,
}

impl Rowwise {
    /// Bits per value.
    fn bits(self) -> usize {
        match self {
            Rowwise::Int8 => 8,
            Rowwise::Int4 => 4,
            Rowwise::Int2 => 2,
        }
    }

    /// Values per byte.
    fn per_byte(self) -> usize {
        8 / self.bits()
    }

    /// The bytes of the scale and the bias after the values.
    fn tail(self) -> usize {
        match self {
            Rowwise::Int8 => 8,
            _ => 4,
        }
    }

    /// The layout's name in messages.
    fn name(self) -> &'static str {
        match self {
            Rowwise::Int8 => "Int8",
            Rowwise::Int4 => "Int4",
            Rowwise::Int2 => "Int2",
        }
    }

    /// The bytes of a row of `d` values (`d` a multiple of the values per byte).
    ///
    /// ```
    /// use ndarray_gather::quant::Rowwise;
    ///
    /// assert_eq!((Rowwise::Int8.row_bytes(64), Rowwise::Int4.row_bytes(64), Rowwise::Int2.row_bytes(64)), (72, 36, 20));
    /// ```
    pub fn row_bytes(self, d: usize) -> usize {
        d.div_ceil(self.per_byte()) + self.tail()
    }

    /// The values `D` of a row of `row_bytes` bytes, or the error that names both.
    fn values(self, op: &'static str, row_bytes: usize) -> Result<usize, GatherError> {
        row_bytes
            .checked_sub(self.tail())
            .map(|b| b * self.per_byte())
            .ok_or_else(|| GatherError::RowWidth {
                op,
                layout: self.name(),
                width: row_bytes,
                unit: "bytes",
                detail: format!(
                    "a row of {} holds its scale and bias in its last {} bytes",
                    self.name(),
                    self.tail()
                ),
            })
    }

    /// The table quantized row by row, as FBGEMM's reference quantizers (which PyTorch's
    /// prepack ops call) do it, bit for bit (decision 46):
    /// - `Int8`: `scale = (max - min) / 255`, `bias = min`, each value
    ///   `round((x - min) * (255 / (max - min + 1e-8)))` (to nearest, ties to even);
    /// - `Int4` / `Int2`: `min` rounded to a half float first, `scale = (max - min) /
    ///   (2^b - 1)` rounded to a half float (1 where it is 0, or its inverse infinite),
    ///   each value `round((x - min) * (1 / scale))` clamped into `0..2^b`.
    ///
    /// A row of no values stores a scale and bias of 0.
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::quant::Rowwise;
    ///
    /// // scale 3 / 15, as a half float 0x3266 (0.19995); values 0, 8, 15, 3; bias 0
    /// let q = Rowwise::Int4.quantize(&array![[0.0, 1.5, 3.0, 0.5]])?;
    /// assert_eq!(q.row(0).to_vec(), [0x0 | 0x8 << 4, 0xf | 0x3 << 4, 0x66, 0x32, 0x00, 0x00]);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`NotFinite`](GatherError::NotFinite) for a NaN or infinite value (naming the first,
    /// by row and column); [`RowWidth`](GatherError::RowWidth) for `Int4` / `Int2` rows of
    /// a number of values that does not divide into bytes (as PyTorch).
    #[doc(alias = "embedding_bag_byte_prepack", alias = "embedding_bag_4bit_prepack")]
    pub fn quantize(self, table: &ArrayRef<f32, Ix2>) -> Result<Array2<u8>, GatherError> {
        const OP: &str = "Rowwise::quantize";
        let (n, d) = table.dim();
        if !d.is_multiple_of(self.per_byte()) {
            return Err(GatherError::RowWidth {
                op: OP,
                layout: self.name(),
                width: d,
                unit: "values",
                detail: format!(
                    "{} packs {} values to a byte, so a row's values must be a multiple of {}",
                    self.name(),
                    self.per_byte(),
                    self.per_byte()
                ),
            });
        }
        if let Some(((row, column), &value)) = table.indexed_iter().find(|(_, v)| !v.is_finite()) {
            return Err(GatherError::NotFinite {
                op: OP,
                row,
                column,
                value,
            });
        }
        let mut out = Array2::<u8>::zeros((n, self.row_bytes(d)));
        let mut buf = Vec::with_capacity(d);
        for (x, mut q) in table.outer_iter().zip(out.outer_iter_mut()) {
            buf.clear();
            buf.extend(x.iter().copied());
            let q = q.as_slice_mut().expect("a fresh array's row is contiguous");
            match self {
                Rowwise::Int8 => quantize_int8(&buf, q),
                _ => quantize_nbit(self.bits(), &buf, q),
            }
        }
        Ok(out)
    }

    /// The rows' values in `f32` (`fma(scale, q, bias)`, PyTorch's unpack ops), `[n, D]`
    /// for `[n, row_bytes]` bytes in this layout (any memory order).
    ///
    /// ```
    /// use ndarray::array;
    /// use ndarray_gather::quant::Rowwise;
    ///
    /// let table = array![[0.0, 1.0, 2.0, 3.0]];
    /// let q = Rowwise::Int2.quantize(&table)?;
    /// assert_eq!(Rowwise::Int2.dequantize(&q)?, table);
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    ///
    /// # Errors
    /// [`RowWidth`](GatherError::RowWidth) for rows narrower than their scale and bias.
    #[doc(alias = "embedding_bag_byte_unpack", alias = "embedding_bag_4bit_unpack")]
    pub fn dequantize<'a>(self, rows: impl AsArray<'a, u8, Ix2>) -> Result<Array2<f32>, GatherError> {
        let qt = QTable::named("Rowwise::dequantize", rows.into(), self)?;
        let mut out = Array2::zeros(qt.dim());
        for (r, mut o) in out.outer_iter_mut().enumerate() {
            qt.decode(r, o.as_slice_mut().expect("a fresh array's row is contiguous"));
        }
        Ok(out)
    }
}

/// A row of `Int8`: its values' bytes, then scale and bias (`f32`, little-endian).
fn quantize_int8(x: &[f32], q: &mut [u8]) {
    let d = x.len();
    let (min, max) = min_max(x);
    let range = max - min;
    let inverse = 255.0 / (range + 1e-8);
    for (q, &v) in q.iter_mut().zip(x) {
        // (Round to nearest, ties to even, as `lrintf`; then the low byte, as C's cast.)
        *q = ((v - min) * inverse).round_ties_even() as i64 as u8;
    }
    q[d..d + 4].copy_from_slice(&(range / 255.0).to_le_bytes());
    q[d + 4..d + 8].copy_from_slice(&min.to_le_bytes());
}

/// A row of `bits`-bit values, packed low bits first, then scale and bias (half floats,
/// little-endian).
fn quantize_nbit(bits: usize, x: &[f32], q: &mut [u8]) {
    let per_byte = 8 / bits;
    let packed = x.len().div_ceil(per_byte);
    let (min, max) = min_max(x);
    let min_h = to_f16(min);
    let min = from_f16(min_h);
    let range = max - min;
    let top = ((1 << bits) - 1) as f32;
    let scale = if range == 0.0 { 1.0 } else { range / top };
    let mut scale = from_f16(to_f16(scale));
    if scale == 0.0 {
        scale = 1.0;
    }
    let mut inverse = 1.0 / scale;
    if inverse.is_infinite() {
        (scale, inverse) = (1.0, 1.0);
    }
    q[..packed].fill(0);
    for (j, &v) in x.iter().enumerate() {
        let value = ((v - min) * inverse).round_ties_even().clamp(0.0, top) as u8;
        q[j / per_byte] |= value << ((j % per_byte) * bits);
    }
    q[packed..packed + 2].copy_from_slice(&to_f16(scale).to_le_bytes());
    q[packed + 2..packed + 4].copy_from_slice(&min_h.to_le_bytes());
}

/// The first smallest and largest values (`std::min_element` / `max_element`); 0 and 0
/// for no values.
fn min_max(x: &[f32]) -> (f32, f32) {
    let Some(&first) = x.first() else {
        return (0.0, 0.0);
    };
    x.iter().fold((first, first), |(lo, hi), &v| {
        (if v < lo { v } else { lo }, if v > hi { v } else { hi })
    })
}

/// A table of quantized rows (decision 45): any `[n, row_bytes]` view of `u8` (an
/// array, a memory map's view) read in place in a [`Rowwise`] layout, as a logical
/// `(n, D)` table of `f32`.
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
#[derive(Debug, Clone, Copy)]
pub struct QTable<'a> {
    bytes: ArrayView2<'a, u8>,
    layout: Rowwise,
    values: usize,
}

impl<'a> QTable<'a> {
    /// The rows `bytes` (`[n, row_bytes]`, any memory order) in `layout`.
    ///
    /// # Errors
    /// [`RowWidth`](GatherError::RowWidth) where a row is narrower than its scale and bias.
    pub fn new(bytes: impl AsArray<'a, u8, Ix2>, layout: Rowwise) -> Result<Self, GatherError> {
        Self::named("QTable::new", bytes.into(), layout)
    }

    fn named(op: &'static str, bytes: ArrayView2<'a, u8>, layout: Rowwise) -> Result<Self, GatherError> {
        let values = layout.values(op, bytes.ncols())?;
        Ok(QTable {
            bytes,
            layout,
            values,
        })
    }

    /// The logical table's shape: `(rows, D)`, `D` the values of a row.
    pub fn dim(&self) -> (usize, usize) {
        (self.bytes.nrows(), self.values)
    }

    /// The rows' layout.
    pub fn layout(&self) -> Rowwise {
        self.layout
    }

    /// The bytes, as given.
    pub fn bytes(&self) -> ArrayView2<'a, u8> {
        self.bytes
    }

    /// Row `r`'s bytes: the row itself where it is contiguous.
    fn row(&self, r: usize) -> Cow<'_, [u8]> {
        let row = self.bytes.index_axis(Axis(0), r);
        match row.to_slice() {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(row.to_vec()),
        }
    }

    /// Row `r`'s values into `out` (`D` long).
    fn decode(&self, r: usize, out: &mut [f32]) {
        let row = self.row(r);
        let d = self.values;
        match self.layout {
            Rowwise::Int8 => {
                let word = |at: usize| f32::from_le_bytes(row[at..at + 4].try_into().expect("4 bytes"));
                let (scale, bias) = (word(d), word(d + 4));
                for (o, &q) in out.iter_mut().zip(&row[..d]) {
                    *o = scale.mul_add(f32::from(q), bias);
                }
            }
            layout => {
                let (bits, per_byte) = (layout.bits(), layout.per_byte());
                let packed = d / per_byte;
                let half = |at: usize| from_f16(u16::from_le_bytes([row[at], row[at + 1]]));
                let (scale, bias) = (half(packed), half(packed + 2));
                let mask = (1u8 << bits) - 1;
                for (j, o) in out.iter_mut().enumerate() {
                    let q = (row[j / per_byte] >> ((j % per_byte) * bits)) & mask;
                    *o = scale.mul_add(f32::from(q), bias);
                }
            }
        }
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
            let rows = resolve_rows(OP, ix, 0, n, None)?;
            let mut dim = E::Larger::zeros(ix.ndim() + 1);
            dim.slice_mut()[..ix.ndim()].copy_from_slice(ix.shape());
            dim.slice_mut()[ix.ndim()] = d;
            let mut out = Array::<f32, _>::zeros(dim);
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
