//! A vector that keeps up to six elements inline, so that the planner's own shapes,
//! strides and loops for a gather of (lowered) rank up to 6 need no heap allocation:
//! per-call overhead matters for tiny gathers, and so does the size of what a call moves
//! around: six inline elements rather than eight made the tiny W7 call faster. (Calls read
//! the caller's arrays in place and build no ndarray views; a fresh output's dynamic-rank
//! shape is ndarray's `IxDyn`, which keeps rank <= 4 inline.)

use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};

const INLINE: usize = 6;

/// A `Vec<T>` that stores up to six elements without allocating.
///
/// The inline slots past `len` stay uninitialized: a planner's `Small` is made on every
/// call, and zeroing them would be a tiny call's cost (PERFORMANCE.md#tiny-calls-store-forwarding).
#[derive(Clone)]
pub(crate) enum Small<T: Copy> {
    /// `items[..len]` are initialized, `len <= INLINE`.
    Inline {
        len: usize,
        items: [MaybeUninit<T>; INLINE],
    },
    Heap(Vec<T>),
}

impl<T: Copy> Small<T> {
    #[inline]
    pub fn new() -> Self {
        Small::Inline {
            len: 0,
            items: [const { MaybeUninit::uninit() }; INLINE],
        }
    }

    #[inline]
    pub fn push(&mut self, v: T) {
        if let Small::Inline { len, items } = self
            && let Some(slot) = items.get_mut(*len)
        {
            slot.write(v);
            *len += 1;
            return;
        }
        self.push_spilled(v);
    }

    #[cold]
    #[inline(never)]
    fn push_spilled(&mut self, v: T) {
        match self {
            Small::Inline { .. } => {
                let mut heap = self.to_vec();
                heap.push(v);
                *self = Small::Heap(heap);
            }
            Small::Heap(h) => h.push(v),
        }
    }
}

impl<T: Copy> Default for Small<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy> Deref for Small<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            // SAFETY: `items[..len]` are initialized (the `Inline` invariant), and
            // `MaybeUninit<T>` has `T`'s layout.
            Small::Inline { len, items } => unsafe {
                std::slice::from_raw_parts(items.as_ptr().cast::<T>(), *len)
            },
            Small::Heap(v) => v,
        }
    }
}

impl<T: Copy> DerefMut for Small<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            // SAFETY: as for `deref`; the borrow is exclusive.
            Small::Inline { len, items } => unsafe {
                std::slice::from_raw_parts_mut(items.as_mut_ptr().cast::<T>(), *len)
            },
            Small::Heap(v) => v,
        }
    }
}

impl<'a, T: Copy> IntoIterator for &'a Small<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: Copy> FromIterator<T> for Small<T> {
    #[inline]
    fn from_iter<It: IntoIterator<Item = T>>(iter: It) -> Self {
        let mut iter = iter.into_iter();
        match iter.size_hint() {
            (_, Some(hi)) if hi <= INLINE => {
                // Fits inline for sure: fill the array directly.
                let mut items = [const { MaybeUninit::uninit() }; INLINE];
                let mut len = 0;
                for (slot, v) in items.iter_mut().zip(&mut iter) {
                    slot.write(v);
                    len += 1;
                }
                Small::Inline { len, items }
            }
            _ => {
                let mut s = Small::new();
                for v in iter {
                    s.push(v);
                }
                s
            }
        }
    }
}

impl<T: Copy> From<&[T]> for Small<T> {
    fn from(v: &[T]) -> Self {
        v.iter().copied().collect()
    }
}

impl<T: Copy + std::fmt::Debug> std::fmt::Debug for Small<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Copy + PartialEq> PartialEq for Small<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Copy + Eq> Eq for Small<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spills_to_the_heap_past_six() {
        let mut s: Small<usize> = (0..INLINE).collect();
        assert!(matches!(s, Small::Inline { len: INLINE, .. }));
        s.push(INLINE);
        assert!(matches!(s, Small::Heap(_)));
        assert_eq!(&*s, &(0..=INLINE).collect::<Vec<_>>()[..]);
        // Collected past the inline size at once.
        let big: Small<usize> = (0..10).collect();
        assert_eq!(&*big, &(0..10).collect::<Vec<_>>()[..]);
        s[0] = 5;
        assert_eq!(s[0], 5);
        assert_eq!(Small::from(&[1, 2][..]), [1, 2].into_iter().collect());
    }
}
