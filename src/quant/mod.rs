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

use std::borrow::Cow;
use std::sync::Mutex;

use ndarray::{Array, Array2, ArrayRef, ArrayView2, AsArray, Axis, Dimension, Ix2};

use crate::call::reduce::{Rows, check_pool, resolve_rows, with_rows};
use crate::call::zeros;
use crate::error::{GatherError, internal};
use crate::half::{from_f16, to_f16};
use crate::index::GatherIndex;
use crate::indices::IndexArray;
use crate::kernel::isa::Isa;
use crate::kernel::reduce::{Csr, Entries, Geometry, Pooler, Positions, Quantized, sorted_quantized};
use crate::kernel::{BadIndex, schedule};
use crate::plan::policy::QUANTIZE_RANGE_BYTES;
use crate::plan::reduce::{Lane, ReduceWalk, ahead};
use crate::plan::{Ranges, worth_parallel};
use crate::pool::IntoPool;
use crate::segments::{Checked, Segments};

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
        let parts: Vec<Mutex<&mut [u8]>> = out
            .as_slice_mut()
            .expect("a fresh array is contiguous")
            .chunks_mut((ranges.per * bytes).max(1))
            .map(Mutex::new)
            .collect();
        let job = |c: usize| {
            // Each part is locked once, by its own job: never poisoned.
            let mut to = parts[c].lock().map_err(|_| BadIndex)?;
            let rows = ranges.get(c);
            match Isa::detect() {
                Isa::Base => quantize_rows::<false>(self, table, rows, &mut to),
                // SAFETY: the CPU has AVX2 (detected: every variant above `Base` has it).
                #[cfg(target_arch = "x86_64")]
                _ => unsafe { quantize_rows_avx2(self, table, rows, &mut to) },
            }
        };
        let good = if worth_parallel(size) && ranges.count > 1 {
            schedule::run_jobs(ranges.count, false, job).finish().is_ok()
        } else {
            (0..ranges.count).all(|c| job(c).is_ok())
        };
        drop(parts);
        if !good {
            let ((row, column), &value) = table
                .indexed_iter()
                .find(|(_, v)| !v.is_finite())
                .expect("a range stopped at a value that is not finite");
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

/// Rows `rows` of `table` quantized into `to` (their bytes, back to back); `Err` at the
/// first row with a value that is not finite.
#[inline(always)]
fn quantize_rows<const AVX2: bool>(
    layout: Rowwise,
    table: &ArrayRef<f32, Ix2>,
    rows: std::ops::Range<usize>,
    to: &mut [u8],
) -> Result<(), BadIndex> {
    let bytes = layout.row_bytes(table.ncols());
    let (mut buf, mut values) = (Vec::new(), vec![0; table.ncols()]);
    for (r, q) in rows.zip(to.chunks_exact_mut(bytes)) {
        let row = table.row(r);
        let x = match row.as_slice() {
            Some(x) => x,
            None => {
                buf.clear();
                buf.extend(row.iter().copied());
                &buf[..]
            }
        };
        #[cfg(target_arch = "x86_64")]
        let found = if AVX2 {
            // SAFETY: `AVX2` is instantiated only by `quantize_rows_avx2`, on a CPU with it.
            unsafe { min_max_avx2(x) }
        } else {
            min_max(x)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let found = min_max(x);
        let (min, max) = found.ok_or(BadIndex)?;
        match layout {
            Rowwise::Int8 => quantize_int8(x, q, min, max),
            _ => quantize_nbit(layout.bits(), x, q, min, max, &mut values),
        }
    }
    Ok(())
}

/// [`quantize_rows`] compiled for AVX2 (eight lanes where the baseline has four).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_rows_avx2(
    layout: Rowwise,
    table: &ArrayRef<f32, Ix2>,
    rows: std::ops::Range<usize>,
    to: &mut [u8],
) -> Result<(), BadIndex> {
    quantize_rows::<true>(layout, table, rows, to)
}

/// [`min_max`] eight lanes at a time in AVX registers (`vminps` / `vmaxps`: for finite
/// values they differ from the ordered compare only between `0.0` and `-0.0`, which the
/// ordered pass after them settles, as in [`min_max`]).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn min_max_avx2(x: &[f32]) -> Option<(f32, f32)> {
    use std::arch::x86_64::*;
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    if x.len() < 8 {
        return min_max(x);
    }
    let (mut lo, mut hi) = (_mm256_set1_ps(x[0]), _mm256_set1_ps(x[0]));
    let (sign, inf) = (_mm256_set1_ps(-0.0), _mm256_set1_ps(f32::INFINITY));
    let mut finite = _mm256_set1_ps(f32::from_bits(u32::MAX));
    for c in chunks {
        // SAFETY: a chunk of 8 `f32`s, read unaligned.
        let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
        lo = _mm256_min_ps(lo, v);
        hi = _mm256_max_ps(hi, v);
        // |v| < inf: false for infinities and NaN.
        finite = _mm256_and_ps(
            finite,
            _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_andnot_ps(sign, v), inf),
        );
    }
    if _mm256_movemask_ps(finite) != 0xff || !rest.iter().all(|v| v.is_finite()) {
        return None;
    }
    let (mut l, mut h) = ([0.0f32; 8], [0.0f32; 8]);
    // SAFETY: eight `f32`s each, stored unaligned.
    unsafe {
        _mm256_storeu_ps(l.as_mut_ptr(), lo);
        _mm256_storeu_ps(h.as_mut_ptr(), hi);
    }
    let mut min = l.iter().chain(rest).fold(l[0], |m, &v| m.min(v));
    let mut max = h.iter().chain(rest).fold(h[0], |m, &v| m.max(v));
    let pick = |a: f32, b: f32, take: bool| if take { b } else { a };
    if min == 0.0 {
        min = x.iter().fold(x[0], |m, &v| pick(m, v, v < m));
    }
    if max == 0.0 {
        max = x.iter().fold(x[0], |m, &v| pick(m, v, v > m));
    }
    Some((min, max))
}

/// 2^23: a value in `0..2^23` added to it leaves its nearest integer (ties to even, as
/// `lrintf` in the default rounding mode) in the low bits of the sum, with no rounding
/// instruction (which the baseline x86-64 lacks: a call per value).
const MAGIC: f32 = 8_388_608.0;

/// The nearest integer to `x` (in `0..2^23`), ties to even, modulo 256.
#[inline(always)]
fn round_byte(x: f32) -> u8 {
    (x + MAGIC).to_bits() as u8
}

/// A row of `Int8` (its smallest and largest values `min`, `max`): its values' bytes, then
/// scale and bias (`f32`, little-endian).
#[inline(always)]
fn quantize_int8(x: &[f32], q: &mut [u8], min: f32, max: f32) {
    let d = x.len();
    let range = max - min;
    let inverse = 255.0 / (range + 1e-8);
    // (`(x - min) * inverse` lies in 0..=255 for finite values: rounded as `lrintf`.)
    for (q, &v) in q.iter_mut().zip(x) {
        *q = round_byte((v - min) * inverse);
    }
    q[d..d + 4].copy_from_slice(&(range / 255.0).to_le_bytes());
    q[d + 4..d + 8].copy_from_slice(&min.to_le_bytes());
}

/// A row of `bits`-bit values, packed low bits first, then scale and bias (half floats,
/// little-endian); `values` holds the row's values unpacked on the way (one pass that
/// vectorizes, then the packing).
#[inline(always)]
fn quantize_nbit(bits: usize, x: &[f32], q: &mut [u8], min: f32, max: f32, values: &mut [u8]) {
    let per_byte = 8 / bits;
    let packed = x.len() / per_byte;
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
    // Clamped before rounding, which is the same as after for a whole `top`; a NaN (an
    // infinite scale's `0 * inf`) clamps to 0, as C's conversion of it did here.
    for (v, &x) in values.iter_mut().zip(x) {
        *v = round_byte(((x - min) * inverse).clamp(0.0, top).max(0.0));
    }
    if bits == 4 {
        for (b, v) in q[..packed].iter_mut().zip(values.chunks_exact(2)) {
            *b = v[0] | v[1] << 4;
        }
    } else {
        for (b, v) in q[..packed].iter_mut().zip(values.chunks_exact(4)) {
            *b = v[0] | v[1] << 2 | v[2] << 4 | v[3] << 6;
        }
    }
    q[packed..packed + 2].copy_from_slice(&to_f16(scale).to_le_bytes());
    q[packed + 2..packed + 4].copy_from_slice(&min_h.to_le_bytes());
}

/// The first smallest and largest values (`std::min_element` / `max_element`), and
/// whether every value is finite (`None` if one is not); 0 and 0 for no values. Eight
/// lanes side by side in one pass (so that it vectorizes), then the lanes: the same
/// values as one ordered pass, but for which zero is kept where `0.0` and `-0.0` tie, so a
/// zero is found again in order.
#[inline(always)]
fn min_max(x: &[f32]) -> Option<(f32, f32)> {
    let Some(&first) = x.first() else {
        return Some((0.0, 0.0));
    };
    let (mut lo, mut hi, mut ok) = ([first; 8], [first; 8], [true; 8]);
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    // (`f32::min` / `max` compile to one instruction each here; for finite values they
    // differ from the first-kept compare only between `0.0` and `-0.0`, settled below.)
    for c in chunks {
        for k in 0..8 {
            lo[k] = lo[k].min(c[k]);
            hi[k] = hi[k].max(c[k]);
            ok[k] &= c[k].is_finite();
        }
    }
    if !(ok.iter().all(|&o| o) && rest.iter().all(|v| v.is_finite())) {
        return None;
    }
    let tree = |v: [f32; 8], f: fn(f32, f32) -> f32| {
        f(f(f(v[0], v[1]), f(v[2], v[3])), f(f(v[4], v[5]), f(v[6], v[7])))
    };
    let mut min = rest.iter().fold(tree(lo, f32::min), |m, &v| m.min(v));
    let mut max = rest.iter().fold(tree(hi, f32::max), |m, &v| m.max(v));
    let pick = |a: f32, b: f32, take: bool| if take { b } else { a };
    if min == 0.0 {
        min = x.iter().fold(first, |m, &v| pick(m, v, v < m));
    }
    if max == 0.0 {
        max = x.iter().fold(first, |m, &v| pick(m, v, v > m));
    }
    Some((min, max))
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

    /// The gather-reduce of the rows `indices` name into `segments` with `pool` (decision
    /// 47), each row's bytes read once and made `f32` in registers (no dequantized copy):
    /// as [`gather_reduce`](crate::GatherReduceExt::gather_reduce) of the `f32` table along
    /// axis 0, every pooling, weight, skip and fill. `Sum` (and `Mean` / `SqrtN`, which
    /// divide it) adds each position as FBGEMM does, `out = fma(w * scale, q, out + w *
    /// bias)` from zero: PyTorch's `quantized::embedding_bag_{byte,4bit,2bit}_rowwise_offsets`
    /// to the bit; the other poolings see each value as `fma(scale, q, bias)`. Each segment
    /// is built by one thread in position order: the same bits on any thread count.
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
        let pool = pool.into_pool();
        let (n, d) = self.dim();
        indices.with_ref(OP, |ix| {
            let positions = ix.len();
            let segs = Checked::new(OP, &segments, positions)?;
            check_pool(OP, &pool, positions, false)?;
            let rows = resolve_rows(OP, ix, 0, n, pool.skip)?;
            let count = segs.count();
            let mut out = zeros::<f32, _>(OP, Ix2(count, d))?;
            // The walk reads each row's bytes as one run.
            let copy;
            let bytes = if self.bytes.ncols() <= 1 || self.bytes.strides()[1] == 1 {
                self.bytes
            } else {
                copy = self.bytes.as_standard_layout().into_owned();
                copy.view()
            };
            let ReduceWalk::Sorted { jobs } = ReduceWalk::of(false, count, positions, d * 4, 0) else {
                return Err(internal(OP, "sorted segments walked by ids"));
            };
            // The contract of `Geometry` for a row source: the output is a fresh `[count, d]`
            // array in standard order (its rows single runs); the input pointer is never
            // read (the rows come from `Quantized`, whose contract the view gives: `n` rows
            // of `row_bytes` contiguous bytes, `strides()[0]` apart).
            let g = Geometry {
                x: std::ptr::NonNull::<f32>::dangling().as_ptr(),
                x_step: 0,
                rows: n,
                out: out.as_mut_ptr(),
                o_step: d as isize,
                segments: count,
                arg: std::ptr::null_mut(),
                ahead: ahead(self.layout.row_bytes(d)),
                lane: Lane { len: d, x: 1, o: 1 },
                outer: Vec::new(),
            };
            let p = Pooler::of(pool, positions);
            let w = Walk {
                g: &g,
                p: &p,
                jobs,
                bytes,
                layout: self.layout,
                values: d,
            };
            // Segments that are ranges walk them as they are; ids are sorted into CSR.
            with_rows!(rows, r => match &segs {
                Checked::Sorted(bounds, _) => w.run(&Positions { rows: r, bounds, len: positions }),
                Checked::Ids(ids, count) => match Csr::by_ids(r, n, *ids, *count) {
                    Some(csr) => w.run(&csr),
                    None => {
                        return Err(GatherError::SizeOverflow {
                            op: OP,
                            shape: ix.shape().to_vec(),
                        });
                    }
                },
            })
            .map_err(|BadIndex| internal(OP, "a row out of range after the check"))?;
            Ok(out)
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

/// A quantized gather-reduce's walk over some entries: its geometry, pooler and jobs, and
/// the rows' bytes in their layout.
struct Walk<'a, 'w> {
    g: &'a Geometry<f32>,
    p: &'a Pooler<'w, f32>,
    jobs: usize,
    bytes: ArrayView2<'a, u8>,
    layout: Rowwise,
    values: usize,
}

impl Walk<'_, '_> {
    /// The sorted walk over `e`, with the rows of this layout.
    fn run<E: Entries>(&self, e: &E) -> Result<(), BadIndex> {
        let (base, stride, values) = (self.bytes.as_ptr(), self.bytes.strides()[0], self.values);
        let (g, p, jobs) = (self.g, self.p, self.jobs);
        match self.layout {
            Rowwise::Int8 => sorted_quantized(g, e, p, jobs, &Quantized::<8> { base, stride, values }),
            Rowwise::Int4 => sorted_quantized(g, e, p, jobs, &Quantized::<4> { base, stride, values }),
            Rowwise::Int2 => sorted_quantized(g, e, p, jobs, &Quantized::<2> { base, stride, values }),
        }
    }
}
