//! Stores and the guard that keeps uninitialized output sound when a clone panics.

use std::ptr;

/// Stores a clone of `v` at `dst`, assigning (dropping the old value) or initializing.
///
/// # Safety
/// `dst` is valid for writes, and initialized unless `INIT`.
#[inline(always)]
pub(super) unsafe fn store<A: Clone, const INIT: bool>(dst: *mut A, v: &A) {
    let v = v.clone();
    // SAFETY: by the contract above.
    unsafe {
        if INIT {
            ptr::write(dst, v);
        } else {
            *dst = v;
        }
    }
}

/// Drops the elements a range wrote into uninitialized output if the range stops midway
/// (a bad index or a panicking clone). Disarm it when the range completes.
pub(super) struct InitGuard<A> {
    base: *mut A,
    /// Elements initialized so far, in memory order from `base`.
    pub written: usize,
    armed: bool,
}

impl<A> InitGuard<A> {
    /// A guard over the elements written from `base`; armed only if `armed` (uninitialized
    /// output of a type with drop glue).
    pub fn new(base: *mut A, armed: bool) -> Self {
        InitGuard {
            base,
            written: 0,
            armed,
        }
    }

    /// The range completed: its elements now belong to the output.
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl<A> Drop for InitGuard<A> {
    fn drop(&mut self) {
        if self.armed {
            // SAFETY: armed only for `Store::Init`, where a range writes its elements in
            // memory order from `base`, so the first `written` are initialized; the caller
            // abandons the output, so they are dropped exactly once.
            unsafe { ptr::drop_in_place(ptr::slice_from_raw_parts_mut(self.base, self.written)) }
        }
    }
}
