//! Lanes that stride through the output (a Fortran-order output of a C-order input, the
//! planner's tiles): a group of a row's lanes is gathered into a buffer with the fast
//! contiguous lane copies (block pipeline, vectorized element loop), then moved into the
//! output across the lanes, so that the output is written in runs along the row rather
//! than one element per lane step.

use std::mem::{MaybeUninit, needs_drop};

use super::walk::At;
use super::{BadIndex, Gather, Store, Task};
use crate::index::{GatherIndex, Resolve};
use crate::plan::Loop;

/// The most elements a staged group holds: 16 KiB of `f32`, within L1 beside the lines
/// being written.
pub(super) const STAGE: usize = if cfg!(miri) { 64 } else { 4096 };

/// Whether a task over `lane` and the `outer` loops around it stages its rows: the lane
/// strides through the output while its row moves through it more densely, the lane fits
/// the buffer, and elements need no drop (the buffer is abandoned on a bad index or a
/// panic, and assigning moves over old elements without dropping them).
pub(super) fn stages<A>(lane: &Loop, outer: &[Loop]) -> bool {
    let Some(row) = outer.last() else {
        return false;
    };
    !needs_drop::<A>()
        && size_of::<A>() > 0
        && lane.len >= 2
        && lane.len <= STAGE
        && row.len >= 2
        && row.out.unsigned_abs() < lane.out.unsigned_abs()
        && lane.out.unsigned_abs() > 1
}

impl<A: Clone + Send + Sync, I: GatherIndex> Task<'_, A, I> {
    /// `count` whole lanes along `row`, the first at offsets `at`, in groups of as many
    /// lanes as [`STAGE`] holds: each group gathered into `buf`, then moved into the output
    /// lane position by lane position, across the group.
    ///
    /// # Safety
    /// The contract of [`Task::run`]; the `count` lanes exist; the task stages
    /// ([`stages`]), and `buf` has room for [`STAGE`] elements.
    #[inline(never)]
    pub(super) unsafe fn stage_row<R: Resolve>(
        &self,
        row: Loop,
        count: usize,
        at: At,
        buf: *mut MaybeUninit<A>,
        written: &mut usize,
    ) -> Result<(), BadIndex> {
        let n = self.lane.len;
        let group = (STAGE / n).max(1);
        let buf = buf.cast::<A>();
        // The same gather with each lane contiguous in the buffer, `n` apart.
        let staged = Task {
            outer: &[],
            lane: Loop { out: 1, ..self.lane },
            out: buf,
            store: Store::Init,
            staged: false,
            ..*self
        };
        let mut done = 0;
        while done < count {
            let g = group.min(count - done);
            let first = at.step(&row, done as isize);
            let into_buf = At { out: 0, ..first };
            let mut w = 0;
            if row.out.unsigned_abs() == 1 {
                // The group's output runs, to be in cache when the move writes them.
                let low = first.out + (g as isize - 1) * row.out.min(0);
                for i in 0..n as isize {
                    let p = self.out.wrapping_offset(low + i * self.lane.out);
                    super::blocks::prefetch_block(p, g * size_of::<A>());
                }
            }
            // SAFETY: the staged task reads the lanes this task would (same input and
            // indices offsets, `Task::run`'s contract); it writes lane `k` of the group to
            // `buf[k * n..(k + 1) * n]`, within the buffer (`g * n <= STAGE`). Elements
            // need no drop (`stages`), so abandoning the buffer after an error is sound.
            unsafe {
                if self.blocks() {
                    staged.block_row::<R, true>(
                        Loop {
                            out: n as isize,
                            ..row
                        },
                        g,
                        into_buf,
                        &mut w,
                    )?;
                } else {
                    let mut v = Gather::<A, I, R, true>::new(&staged, buf);
                    for k in 0..g {
                        let lane = into_buf.step(
                            &Loop {
                                out: n as isize,
                                ..row
                            },
                            k as isize,
                        );
                        super::walk::Visit::lane(&mut v, lane, 0, n)?;
                    }
                    v.guard.disarm();
                }
            }
            // SAFETY: the group's lanes exist in the output (`Task::run`'s contract) and
            // the buffer holds their `g * n` gathered elements. Moving them over the old
            // ones (or into uninitialized storage) without a drop is sound: they have no
            // drop glue.
            unsafe {
                let out = self.out.offset(first.out);
                if row.out == 1 {
                    move_squares::<A, 4>(buf, n, g, out, self.lane.out);
                } else {
                    for i in 0..n as isize {
                        let (dst, src) = (out.offset(i * self.lane.out), buf.offset(i));
                        for k in 0..g as isize {
                            dst.offset(k * row.out).write(src.offset(k * n as isize).read());
                        }
                    }
                }
            }
            *written += g * n;
            done += g;
        }
        Ok(())
    }
}

/// Moves `g` staged lanes of `n` elements (`buf[k * n + i]`) to `out[k + i * step]`, in
/// squares of `W` x `W`: `W` reads of `W` contiguous elements, `W` writes of `W`, the
/// rest element by element. (W1 and W3 into Fortran-order outputs: squares of 4 took
/// 0.85x the element loop's time, squares of 8 no less than it.)
///
/// # Safety
/// `buf` holds the `g * n` elements; `out[k + i * step]` are distinct elements of the
/// output, valid for writes, for every `k < g`, `i < n`.
#[inline(always)]
unsafe fn move_squares<A, const W: usize>(buf: *const A, n: usize, g: usize, out: *mut A, step: isize) {
    use std::mem::MaybeUninit as M;
    let (n4, g4) = (n - n % W, g - g % W);
    // SAFETY: (the whole body) every read is of one of the `g * n` staged elements, every
    // write of one of the output's, by the contract above; each element is read once.
    unsafe {
        for i in (0..n4).step_by(W) {
            for k in (0..g4).step_by(W) {
                let rows: [[M<A>; W]; W] =
                    std::array::from_fn(|r| buf.add((k + r) * n + i).cast::<[M<A>; W]>().read());
                let cols: [[M<A>; W]; W] =
                    std::array::from_fn(|c| std::array::from_fn(|r| std::ptr::read(&rows[r][c])));
                for (c, col) in cols.into_iter().enumerate() {
                    let dst = out.offset((i + c) as isize * step + k as isize);
                    dst.cast::<[M<A>; W]>().write(col);
                }
            }
            for k in g4..g {
                for c in i..i + W {
                    out.offset(c as isize * step + k as isize)
                        .write(buf.add(k * n + c).read());
                }
            }
        }
        for i in n4..n {
            for k in 0..g {
                out.offset(i as isize * step + k as isize)
                    .write(buf.add(k * n + i).read());
            }
        }
    }
}
