//! The caller's arrays as a call reads them, in place ([`Raw`]), and the lowered layouts
//! the lowerings make of them ([`Dims`]).

use std::marker::PhantomData;

use ndarray::{ArrayRef, Dimension, RawData, ViewRepr};

use crate::layout;
use crate::plan::Layout;
use crate::small::Small;

/// The shape and strides of a view as a lowering sees it: the caller's, with unit axes
/// inserted. The lowerings build these instead of reshaping ndarray's dynamic-rank views,
/// which costs a tiny call more than its gather (PERFORMANCE.md#tiny-calls-store-forwarding).
#[derive(Debug, Clone)]
pub(crate) struct Dims {
    pub shape: Small<usize>,
    pub strides: Small<isize>,
}

impl Dims {
    /// The layout of a view with this shape and strides, with `n` unit axes inserted
    /// before each dimension `at` of `units` (ascending, positions in `shape`). Inlined
    /// into the lowering, which moves the result into its call: a returned `Dims` was
    /// copied with 16-byte loads right after its 8-byte stores, and waited for them
    /// (PERFORMANCE.md#tiny-calls-store-forwarding).
    #[inline(always)]
    pub fn with_units(shape: &[usize], strides: &[isize], units: &[(usize, usize)]) -> Dims {
        let rank = shape.len() + units.iter().map(|u| u.1).sum::<usize>();
        // Filled in place: unit axes are the ones left as they were made.
        let mut d = Dims {
            shape: std::iter::repeat_n(1, rank).collect(),
            strides: std::iter::repeat_n(0, rank).collect(),
        };
        let (lens, steps): (&mut [usize], &mut [isize]) = (&mut d.shape, &mut d.strides);
        let (mut units, mut k) = (units.iter().peekable(), 0);
        for (dim, (&len, &stride)) in shape.iter().zip(strides).enumerate() {
            while let Some(&(_, n)) = units.next_if(|u| u.0 <= dim) {
                k += n;
            }
            if let (Some(l), Some(s)) = (lens.get_mut(k), steps.get_mut(k)) {
                (*l, *s) = (len, stride);
            }
            k += 1;
        }
        d
    }

    #[inline]
    pub(super) fn layout(&self) -> Layout<'_> {
        Layout {
            shape: &self.shape,
            strides: &self.strides,
        }
    }
}

/// A caller's array as a call reads it: where its first element is, and its shape and
/// strides, borrowed from the array for `'s`. `S` says how the elements are borrowed:
/// `ViewRepr<&'a A>` (a gather's input, any indices) or `ViewRepr<&'a mut A>` (a
/// scatter's destination).
///
/// (Not ndarray's dynamic-rank views, whose making costs a tiny call more than its gather:
/// PERFORMANCE.md#tiny-calls-store-forwarding.)
pub(crate) struct Raw<'s, S: RawData> {
    ptr: *mut S::Elem,
    shape: &'s [usize],
    strides: &'s [isize],
    borrow: PhantomData<S>,
}

// SAFETY: a `Raw` is a borrow of its array, shared or exclusive as `S` says; it is sent and
// shared as that borrow would be.
unsafe impl<S: RawData + Send> Send for Raw<'_, S> {}
// SAFETY: as above; `&Raw` gives no access that `&S`'s borrow would not.
unsafe impl<S: RawData + Sync> Sync for Raw<'_, S> {}

impl<'a, A> Raw<'a, ViewRepr<&'a A>> {
    /// A shared borrow of `a`.
    #[inline(always)]
    pub fn of<D: Dimension>(a: &'a ArrayRef<A, D>) -> Self {
        Raw {
            ptr: a.as_ptr().cast_mut(),
            shape: a.shape(),
            strides: a.strides(),
            borrow: PhantomData,
        }
    }

    /// `self` with its elements at `ptr`, which its layout never leaves: an array of
    /// no elements whose lowered layout (zero strides) stands at a real element.
    ///
    /// # Safety
    /// Either `self` has no elements and the call's lowered layout has only zero strides,
    /// or every offset of `self`'s layout from `ptr` is an element valid for reads for
    /// `'a`.
    #[inline]
    pub unsafe fn at(self, ptr: *const A) -> Self {
        Raw {
            ptr: ptr.cast_mut(),
            ..self
        }
    }

    /// The same borrow for a shorter `'b`. (`Raw` is invariant in `S`, through its
    /// pointer to `S::Elem`, so this does not happen by itself.)
    #[inline(always)]
    pub fn shorten<'b>(self) -> Raw<'b, ViewRepr<&'b A>>
    where
        'a: 'b,
    {
        Raw {
            ptr: self.ptr,
            shape: self.shape,
            strides: self.strides,
            borrow: PhantomData,
        }
    }

    /// The elements as a slice, in row-major order, when the layout is standard.
    pub fn as_slice(&self) -> Option<&'a [A]> {
        // SAFETY: a standard layout's elements are the `len` elements from `ptr` on.
        self.is_standard_layout()
            .then(|| unsafe { std::slice::from_raw_parts(self.ptr.cast_const(), self.len()) })
    }

    /// The elements in row-major order.
    pub fn iter(&self) -> impl Iterator<Item = &'a A> + '_ {
        let (shape, strides) = (self.shape, self.strides);
        let mut at: Small<usize> = shape.iter().map(|_| 0).collect();
        let mut offset = 0isize;
        (0..self.len()).map(move |k| {
            if k > 0 {
                // The next position: the last dimension that is not at its end steps on,
                // the ones after it start again.
                for d in (0..shape.len()).rev() {
                    at[d] += 1;
                    offset += strides[d];
                    if at[d] < shape[d] {
                        break;
                    }
                    offset -= strides[d] * shape[d] as isize;
                    at[d] = 0;
                }
            }
            // SAFETY: `at` is a position of the shape, so `offset` is an element's (the
            // borrow `Raw::of` made).
            unsafe { &*self.ptr.offset(offset) }
        })
    }
}

impl<'a> Raw<'a, ViewRepr<&'a ()>> {
    /// Elements of `()` at a dangling pointer, laid out by `shape` and `strides`.
    ///
    /// # Safety
    /// The product of `shape`'s non-zero lengths fits in `isize`, and so does every
    /// offset the layout forms (an element of `()` takes no memory, so every one of them
    /// lies at the dangling pointer).
    #[inline]
    pub unsafe fn at_dangling(shape: &'a [usize], strides: &'a [isize]) -> Self {
        Raw {
            ptr: std::ptr::NonNull::<()>::dangling().as_ptr(),
            shape,
            strides,
            borrow: PhantomData,
        }
    }
}

impl<'a, A> Raw<'a, ViewRepr<&'a mut A>> {
    /// An exclusive borrow of `a`'s elements (its shape and strides are read, shared).
    #[inline(always)]
    pub fn of_mut<D: Dimension>(a: &'a mut ArrayRef<A, D>) -> Self {
        let ptr = a.as_mut_ptr();
        let a: &'a ArrayRef<A, D> = a;
        Raw {
            ptr,
            shape: a.shape(),
            strides: a.strides(),
            borrow: PhantomData,
        }
    }

    /// The first element, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut A {
        self.ptr
    }
}

impl<S: RawData> Raw<'_, S> {
    #[inline]
    pub fn shape(&self) -> &[usize] {
        self.shape
    }

    #[inline]
    pub fn strides(&self) -> &[isize] {
        self.strides
    }

    #[inline]
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// The first element.
    #[inline]
    pub fn as_ptr(&self) -> *const S::Elem {
        self.ptr.cast_const()
    }

    /// Whether the elements lie in row-major order, one after the other (as ndarray
    /// decides it: dimensions of length 1 may have any stride; an empty array is).
    pub fn is_standard_layout(&self) -> bool {
        layout::is_standard_layout(self.shape, self.strides)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn raw_arrays_read_as_ndarray_reads_them() {
        use ndarray::{Array3, ArrayViewD, s};
        let a = Array3::from_shape_fn((3, 4, 5), |(i, j, k)| (i * 100 + j * 10 + k) as i32);
        let b = a.broadcast((2, 3, 4, 5)).expect("broadcast");
        let empty = a.slice(s![.., 1..1, ..]);
        let layouts: Vec<ArrayViewD<'_, i32>> = vec![
            a.view().into_dyn(),
            a.t().into_dyn(),
            a.slice(s![..;-1, 1..;2, ..]).into_dyn(),
            a.slice(s![.., 2..3, ..;3]).into_dyn(),
            a.slice(s![1, .., 4]).into_dyn(),
            b.into_dyn(),
            empty.into_dyn(),
            a.slice(s![1..2, .., ..]).into_dyn(),
        ];
        for v in &layouts {
            let raw = Raw::of(&**v);
            assert_eq!(
                (raw.shape(), raw.strides(), raw.len()),
                (v.shape(), v.strides(), v.len())
            );
            assert_eq!(
                raw.is_standard_layout(),
                v.is_standard_layout(),
                "{:?}",
                v.strides()
            );
            assert_eq!(raw.as_slice(), v.as_slice(), "{:?}", v.strides());
            assert!(raw.iter().eq(v.iter()), "{:?}", v.strides());
        }
    }

    #[test]
    fn unit_axes_go_before_their_dimensions() {
        let d = Dims::with_units(&[4, 3], &[3, 1], &[(0, 1), (1, 2), (2, 1)]);
        assert_eq!(
            (&*d.shape, &*d.strides),
            (&[1, 4, 1, 1, 3, 1][..], &[0, 3, 0, 0, 1, 0][..])
        );
        let none = Dims::with_units(&[5], &[-2], &[(1, 0)]);
        assert_eq!((&*none.shape, &*none.strides), (&[5][..], &[-2][..]));
        // Past six dimensions the arrays spill to the heap, in the same order.
        let many = Dims::with_units(&[2, 3], &[3, 1], &[(1, 5)]);
        assert_eq!(&*many.shape, &[2, 1, 1, 1, 1, 1, 3]);
    }
}
