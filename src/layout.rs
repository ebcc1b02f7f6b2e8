//! Layout arithmetic, in one place: C-order strides, standard-layout tests, element
//! counts that fit in `isize`, row-major positions, and the span of offsets a layout
//! reaches.

use ndarray::{Dimension, IxDyn};

use crate::plan::policy::INLINE_RANK;
use crate::small::Small;

/// ndarray's C-order strides for an array of `shape`: all zero for an empty array, as
/// ndarray makes them.
pub(crate) fn default_strides(shape: &[usize]) -> IxDyn {
    // Computed on the stack and copied once: `IxDyn`'s every element access branches on
    // where its items are (PERFORMANCE.md#tiny-calls-store-forwarding).
    let mut strides = [0usize; INLINE_RANK];
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
pub(crate) fn c_order(shape: &[usize], strides: &mut [usize]) {
    if shape.iter().all(|&n| n > 0) {
        let mut acc = 1;
        for (s, &n) in strides.iter_mut().zip(shape).rev() {
            *s = acc;
            acc *= n;
        }
    }
}

/// The number of elements of `shape`, if it and its size in bytes fit in `isize`.
pub(crate) fn checked_len(shape: &[usize], elem_size: usize) -> Option<usize> {
    let len = shape.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n))?;
    let bytes = len.checked_mul(elem_size.max(1))?;
    (bytes <= isize::MAX as usize).then_some(len)
}

/// The row-major multi-index of flat position `flat` in `shape`.
pub(crate) fn unravel(mut flat: usize, shape: &[usize]) -> Small<usize> {
    let mut pos: Small<usize> = shape.iter().map(|_| 0).collect();
    for (p, &n) in pos.iter_mut().zip(shape).rev() {
        if n > 0 {
            *p = flat % n;
            flat /= n;
        }
    }
    pos
}

/// The lowest and highest element offsets of `shape` with `strides` (`None` if empty).
pub(crate) fn span(shape: &[usize], strides: &[isize]) -> Option<(isize, isize)> {
    let mut lo_hi = (0isize, 0isize);
    for (&n, &s) in shape.iter().zip(strides) {
        let reach = (n.checked_sub(1)? as isize) * s;
        if reach < 0 {
            lo_hi.0 += reach
        } else {
            lo_hi.1 += reach
        }
    }
    Some(lo_hi)
}

/// Whether two shapes are equal: an inline loop where `==` calls `memcmp`, which a tiny
/// plan's checks would feel. Inlined, as are [`standard_len`] and `GatherPlan::check_input`:
/// left to the compiler, all three stay calls (PERFORMANCE.md#tiny-calls-store-forwarding).
#[inline(always)]
pub(crate) fn same(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// The number of elements of an array of `shape` with `strides` if they are in standard
/// layout (C-contiguous; strides of unit dimensions do not matter), `None` otherwise.
/// Conservative for empty arrays (a mismatched stride after a zero length is `None`):
/// [`is_standard_layout`] is ndarray's test.
#[inline(always)]
pub(crate) fn standard_len(shape: &[usize], strides: &[isize]) -> Option<usize> {
    let mut len = 1usize;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && s != len as isize {
            return None;
        }
        len = len.checked_mul(n)?;
    }
    Some(len)
}

/// Whether an array of `shape` with `strides` is in standard layout, as ndarray decides it
/// (dimensions of length 1 may have any stride; an empty array is).
#[inline]
pub(crate) fn is_standard_layout(shape: &[usize], strides: &[isize]) -> bool {
    shape.contains(&0) || standard_len(shape, strides).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_len_limits() {
        assert_eq!(checked_len(&[], 4), Some(1));
        assert_eq!(checked_len(&[usize::MAX, 0], 4), Some(0));
        assert_eq!(checked_len(&[usize::MAX, 2], 1), None);
        assert_eq!(checked_len(&[1 << 62], 4), None);
    }

    #[test]
    fn unravel_row_major() {
        assert_eq!(&*unravel(5, &[2, 3]), &[1, 2]);
        assert!(unravel(0, &[]).is_empty());
    }
}
