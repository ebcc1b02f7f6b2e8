//! Quantized rows (decisions 45-47): tables stored as PyTorch's and FBGEMM's rowwise
//! layouts, one row of 8-, 4- or 2-bit values with its own scale and bias, quantized and
//! read byte for byte as PyTorch's `quantized::embedding_bag_*_prepack` ops write them.
//! Its rooms: this file (the layouts, and quantizing a table), `rows` (one row
//! quantized), `table` ([`QTable`]: rows read in place, gathered and pooled; the pooling
//! is the crate's own walk, with the rows from the kernel's quantized row source).
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

mod rows;
mod table;
#[cfg(all(test, feature = "half"))]
mod tiers;

use ndarray::{Array2, ArrayRef, AsArray, Ix2};

use self::rows::quantize_rows;
#[cfg(target_arch = "x86_64")]
use self::rows::quantize_rows_avx2;
pub use self::table::{Layout, QTable};

use crate::call::zeros;
use crate::error::{GatherError, internal};
use crate::kernel::isa::Isa;
use crate::kernel::schedule;
use crate::plan::policy::QUANTIZE_RANGE_BYTES;
use crate::plan::{Ranges, worth_parallel};
/// The `half` crate this crate's `f16` / `bf16` rows are (feature `half`, decision 68):
/// `ndarray_gather::quant::half::f16` without a dependency of your own.
#[cfg(feature = "half")]
#[cfg_attr(docsrs, doc(cfg(feature = "half")))]
pub use ::half;

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
        let bytes = self.row_bytes(d);
        // (A large table in huge pages, as the crate's fresh outputs: its rows are then
        // read at random, one page walk each in 4 KiB pages.)
        let mut out = zeros::<u8, _>(OP, Ix2(n, bytes))?;
        // Rows in ranges of about `QUANTIZE_RANGE_BYTES` of input, on the pool's threads
        // when the table is large; a range stops at its first row with a NaN or an
        // infinity, and the first in row-major order is then found and named.
        let size = n * d * size_of::<f32>();
        let ranges = Ranges::new(n, size, QUANTIZE_RANGE_BYTES);
        let isa = Isa::detect();
        let slice = out
            .as_slice_mut()
            .ok_or_else(|| internal(OP, "a fresh array out of order"))?;
        let good = schedule::run_parts(
            slice,
            bytes,
            &ranges,
            worth_parallel(size),
            |rows, to| match isa {
                Isa::Base => quantize_rows::<false>(self, table, rows, to),
                // SAFETY: the CPU has AVX2, FMA and F16C (detected: every variant above `Base` has them).
                #[cfg(target_arch = "x86_64")]
                _ => unsafe { quantize_rows_avx2(self, table, rows, to) },
            },
        )
        .is_ok();
        if !good {
            let ((row, column), &value) = table
                .indexed_iter()
                .find(|(_, v)| !v.is_finite())
                .ok_or_else(|| internal(OP, "a range stopped at a finite table"))?;
            return Err(GatherError::NotFinite {
                op: OP,
                row,
                column,
                value,
            });
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
