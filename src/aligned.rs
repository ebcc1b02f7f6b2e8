//! Arrays whose rows start on cache lines: [`zeros_aligned`].

use ndarray::{Array, Array1, Dimension, s};
use num_traits::Zero;

use crate::error::GatherError;
use crate::machine::CACHE_LINE;
use crate::shape::ShapeArg;

/// A zeroed array of `shape` in standard (C) order whose first element starts on a 64-byte
/// cache line, so that every row whose bytes are a multiple of 64 does too. An `Array`
/// from `Array::zeros` (the global allocator: glibc's `malloc`) starts 16 bytes past a
/// line, so each 256-byte row read at random spans five lines instead of four; PyTorch's
/// allocator aligns its tensors to 64 bytes. Tables read at random by row (bags, graphs)
/// allocated this way read a fifth less memory for such rows (PERFORMANCE.md, "The
/// table's layout"). It is an ordinary owned `Array` (a view into an allocation a line
/// longer): fill it with `assign`, `fill` or `Zip`, and it stays aligned. A 0-sized
/// element type, which has no lines, gives a plain array.
///
/// ```
/// use ndarray::Array2;
/// use ndarray_gather::prelude::*;
///
/// let mut table: Array2<f32> = ndarray_gather::zeros_aligned((1000, 64))?;
/// table.assign(&Array2::from_shape_fn((1000, 64), |(r, c)| (r * 64 + c) as f32));
/// assert_eq!(table.as_ptr() as usize % 64, 0);
/// let bags = table.gather_reduce(&[999, 0], Segments::starts(&[0]), 0, Pooling::Sum)?;
/// assert_eq!(bags[[0, 1]], 63_937.0 + 1.0); // rows 999 and 0, column 1
/// # Ok::<(), GatherError>(())
/// ```
///
/// # Errors
/// [`SizeOverflow`](GatherError::SizeOverflow) if the array's bytes overflow `isize`.
pub fn zeros_aligned<M, A: Clone + Zero, S: ShapeArg<M>>(shape: S) -> Result<Array<A, S::Dim>, GatherError> {
    const OP: &str = "zeros_aligned";
    let dim = shape.into_dim();
    let overflow = || GatherError::SizeOverflow {
        op: OP,
        shape: dim.slice().to_vec(),
    };
    let len = dim.size_checked().ok_or_else(overflow)?;
    let size = size_of::<A>();
    if size == 0 {
        return Array::from_shape_vec(dim.clone(), vec![A::zero(); len]).map_err(|_| overflow());
    }
    // A line's worth of elements more, so that a line starts within the first line's
    // worth; it starts a whole number of elements in where the element's size divides the
    // gap (every number type's; otherwise the array starts where the allocation does).
    let spare = CACHE_LINE.div_ceil(size);
    let total = len
        .checked_add(spare)
        .filter(|&n| n.checked_mul(size).is_some_and(|b| b <= isize::MAX as usize));
    let buf = Array1::from_elem(total.ok_or_else(overflow)?, A::zero());
    let gap = (buf.as_ptr() as usize).next_multiple_of(CACHE_LINE) - buf.as_ptr() as usize;
    let skip = if gap.is_multiple_of(size) { gap / size } else { 0 };
    buf.slice_move(s![skip..skip + len])
        .into_shape_with_order(dim.clone())
        .map_err(|_| overflow())
}
