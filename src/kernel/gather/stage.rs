//! Staging through a buffer, for rows of lanes that would otherwise stride through memory:
//!
//! - *output*: lanes that stride through the output (a Fortran-order output of a C-order
//!   input: the planner's tiles, or whole element lanes). A group of a row's lanes is
//!   gathered into a buffer with the fast contiguous lane copies (block pipeline,
//!   vectorized element loop), then moved into the output across the lanes, so that the
//!   output is written in runs along the row rather than one element per lane step;
//! - *input*: one gathered axis that strides far through the input while the rows are
//!   adjacent in it (take_along_axis on a transposed input). A group of rows is copied
//!   into a buffer with the axis contiguous (reading the input line by line rather than
//!   each element from another page), then each row gathers from the buffer;
//! - *slab*: a row of lanes that all read the same positions along the lane and the one
//!   gathered axis, far apart in the input (GatherElements along the first axis, in the
//!   planner's strips: `plan::strips`). The slab is copied into a buffer once, axis
//!   position by axis position, and every lane of the row gathers from there.

use std::mem::MaybeUninit;

use super::Task;
use super::lane::Gather;
use crate::index::{GatherIndex, Resolve};
use crate::kernel::walk::{At, Visit, Walk};
use crate::kernel::{BadIndex, Store};
use crate::plan::policy::{INPUT_AHEAD, OUT_AHEAD, SLAB_LANES_AHEAD, SQUARE, STAGE};
use crate::plan::{Loop, Stage, Strategy, output_group};

impl<A: Clone + Send + Sync, I: GatherIndex> Task<'_, A, I> {
    /// `count` whole lanes along `row`, the first at offsets `at`, in groups of
    /// [`output_group`] lanes: each group gathered into `buf`, then moved into the output
    /// lane position by lane position, across the group.
    ///
    /// # Safety
    /// The contract of [`Task::run`]; the `count` lanes exist; the task stages
    /// ([`Stage::Output`]), and `buf` has room for [`Stage::capacity`] elements
    /// (`output_group(n) * n` for lanes of `n`).
    #[inline(never)]
    pub(super) unsafe fn stage_row<R: Resolve>(
        &self,
        row: Loop,
        count: usize,
        at: At,
        buf: *mut MaybeUninit<A>,
        written: &mut usize,
    ) -> Result<(), BadIndex> {
        let n = self.walk.lane.len;
        let group = output_group(n);
        let buf = buf.cast::<A>();
        // The same gather with each lane contiguous in the buffer, `n` apart; lanes that
        // read whole rows prefetch the next lane's row as in a C-order output
        // (PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
        let staged = Task {
            walk: Walk {
                outer: std::slice::from_ref(&row),
                lane: Loop {
                    out: 1,
                    ..self.walk.lane
                },
                axes: self.walk.axes,
            },
            out: buf,
            store: Store::Init,
            strategy: Strategy {
                staged: Stage::No,
                stream: false,
                ..self.strategy
            },
            ..*self
        };
        // The group's row in the buffer: lanes `n` apart.
        let in_buf = Loop {
            out: n as isize,
            ..row
        };
        let mut done = 0;
        while done < count {
            let g = group.min(count - done);
            let first = at.step(&row, done as isize);
            let into_buf = At { out: 0, ..first };
            let mut w = 0;
            if row.out.unsigned_abs() == 1 && g * n <= STAGE {
                // A tile's output runs, to be in cache when the move writes them (not a
                // group of whole lanes', which gains nothing: PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages).
                let low = first.out + (g as isize - 1) * row.out.min(0);
                for i in 0..n as isize {
                    let p = self.out.wrapping_offset(low + i * self.walk.lane.out);
                    crate::kernel::prefetch::prefetch_block(p, g * size_of::<A>());
                }
            }
            // SAFETY: the staged task reads the lanes this task would (same input and
            // indices offsets, `Task::run`'s contract); it writes lane `k` of the group to
            // `buf[k * n..(k + 1) * n]`, within the buffer (`g <= group`, and the buffer
            // holds `group * n`). Its row prefetches only (no access). Elements need no
            // drop (`Stage::of`), so abandoning the buffer after an error is sound.
            unsafe {
                if self.walk.blocks() {
                    staged.block_row::<R, true>(in_buf, g, into_buf, &mut w)?;
                } else {
                    let mut v = Gather::<A, I, R, true>::new(&staged, buf);
                    for k in 0..g {
                        v.lane(into_buf.step(&in_buf, k as isize), 0, n)?;
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
                    move_squares::<A, SQUARE>(buf, n as isize, (g, n), out, self.walk.lane.out, OUT_AHEAD);
                } else {
                    for i in 0..n as isize {
                        let (dst, src) = (out.offset(i * self.walk.lane.out), buf.offset(i));
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

    /// `count` whole lanes along `row`, the first at offsets `at`, in groups of up to
    /// [`INPUT_ROWS`](crate::plan::policy::INPUT_ROWS) rows: each group's rows copied into `buf` (row `k`'s element `j` of
    /// the gathered axis at `buf[k * len + j]`), then each lane gathered from its row
    /// there.
    ///
    /// # Safety
    /// The contract of [`Task::run`]; the `count` lanes exist; the task stages
    /// ([`Stage::Input`]), and `buf` has room for [`Stage::capacity`] elements.
    #[inline(never)]
    pub(super) unsafe fn stage_inputs<R: Resolve, const INIT: bool>(
        &self,
        row: Loop,
        count: usize,
        at: At,
        buf: *mut MaybeUninit<A>,
        written: &mut usize,
    ) -> Result<(), BadIndex> {
        let a = self.walk.axes[0];
        let group = Stage::Input.capacity(self.walk.axes, self.walk.lane.len) / a.len;
        let buf = buf.cast::<A>();
        // The same gather along a contiguous axis of the buffer.
        let axes = [crate::plan::AxisTerm { stride: 1, ..a }];
        let staged = Task {
            walk: Walk {
                outer: &[],
                axes: &axes,
                ..self.walk
            },
            inp: buf.cast_const(),
            strategy: Strategy {
                staged: Stage::No,
                stream: false,
                ..self.strategy
            },
            ..*self
        };
        let mut v = Gather::<A, I, R, INIT>::new(&staged, self.out);
        let mut done = 0;
        while done < count {
            let g = group.min(count - done);
            let first = at.step(&row, done as isize);
            // SAFETY: every offset `first.inp + k * row.inp + j * a.stride` with `k < g`,
            // `j < a.len` is an input element (the lanes exist, and any position of the
            // axis can be gathered: `Task::run`'s contract), and `buf` has room for the
            // `g * a.len <= capacity` copies. Row by row of the axis, the group's rows are
            // adjacent in the input.
            unsafe {
                let src = self.inp.offset(first.inp);
                if row.inp == 1 {
                    // Bitwise copies (no drop glue: the input's elements stay as they
                    // were); the lanes clone from them.
                    // Four axis positions at a time, so that each page is visited once.
                    for j in (0..a.len).step_by(SQUARE) {
                        let (s, d) = (src.offset(j as isize * a.stride), buf.add(j));
                        // Each of the square's rows' runs, whole: rows far apart, each run
                        // on a page of its own, are not followed by the hardware.
                        for r in 0..SQUARE as isize {
                            let ahead = s.wrapping_offset((INPUT_AHEAD + r) * a.stride);
                            crate::kernel::prefetch::prefetch_block(ahead, g * size_of::<A>());
                        }
                        move_squares::<A, SQUARE>(
                            s,
                            a.stride,
                            ((a.len - j).min(SQUARE), g),
                            d,
                            a.len as isize,
                            0,
                        );
                    }
                } else {
                    for j in 0..a.len {
                        let s = src.offset(j as isize * a.stride);
                        for k in 0..g {
                            buf.add(k * a.len + j)
                                .write(s.offset(k as isize * row.inp).read());
                        }
                    }
                }
            }
            for k in 0..g {
                let lane = first.step(&row, k as isize);
                // SAFETY: the staged task writes this lane's output positions and reads
                // its indices as this task would; its input offsets are `k * a.len` plus
                // a resolved position below `a.len`, within the group's copies.
                unsafe {
                    v.lane(
                        At {
                            inp: (k * a.len) as isize,
                            ..lane
                        },
                        0,
                        self.walk.lane.len,
                    )?;
                }
            }
            done += g;
        }
        *written += v.guard.written;
        v.guard.disarm();
        Ok(())
    }

    /// `count` whole lanes along `row`, the first at offsets `at`, which all read the same
    /// slab (`row.inp == 0`): the slab copied into `buf` (axis position `r`, lane
    /// position `k` at `buf[r * n + k]` for lanes of `n`), then each lane gathered from
    /// there.
    ///
    /// # Safety
    /// The contract of [`Task::run`]; the `count` lanes exist; the task stages
    /// ([`Stage::Slab`]), and `buf` has room for [`Stage::capacity`] elements.
    #[inline(never)]
    pub(super) unsafe fn stage_slab<R: Resolve, const INIT: bool>(
        &self,
        row: Loop,
        count: usize,
        at: At,
        buf: *mut MaybeUninit<A>,
        written: &mut usize,
    ) -> Result<(), BadIndex> {
        let (a, n, step) = (self.walk.axes[0], self.walk.lane.len, self.walk.lane.inp);
        let buf = buf.cast::<A>();
        // SAFETY: every offset `at.inp + k * step + r * a.stride` with `k < n`, `r < a.len`
        // is an input element (the lanes exist, and any position of the axis can be
        // gathered at any position of a lane: `Task::run`'s contract), and `buf` has room
        // for the `a.len * n` copies (`Stage::capacity`). Bitwise copies: the elements
        // have no drop glue (`Stage::of`) and the input's stay as they were; the lanes
        // clone from the copies.
        unsafe {
            let src = self.inp.offset(at.inp);
            for r in 0..a.len {
                let (s, d) = (src.offset(r as isize * a.stride), buf.add(r * n));
                if step == 1 {
                    std::ptr::copy_nonoverlapping(s, d, n);
                } else {
                    for k in 0..n {
                        d.add(k).write(s.offset(k as isize * step).read());
                    }
                }
            }
        }
        // The same gather from the slab: the lane contiguous, the axis `n` apart.
        let axes = [crate::plan::AxisTerm {
            stride: n as isize,
            ..a
        }];
        let staged = Task {
            walk: Walk {
                outer: &[],
                lane: Loop {
                    inp: 1,
                    ..self.walk.lane
                },
                axes: &axes,
            },
            inp: buf.cast_const(),
            // (Still a slab's lanes, only ever passed to `Gather::lane`: their indices
            // are a row apart, so the element loop prefetches none past a lane's end.)
            ..*self
        };
        let mut v = Gather::<A, I, R, INIT>::new(&staged, self.out);
        for c in 0..count {
            let ahead = at.step(&row, c as isize + SLAB_LANES_AHEAD);
            crate::kernel::prefetch::prefetch_block(self.idx.wrapping_offset(ahead.idx), n * size_of::<I>());
            crate::kernel::prefetch::prefetch_block(self.out.wrapping_offset(ahead.out), n * size_of::<A>());
            // SAFETY: the staged task writes this lane's output positions and reads its
            // indices as this task would; its input offsets are a lane position below `n`
            // plus a resolved position below `a.len` times `n`, within the copies.
            unsafe {
                v.lane(
                    At {
                        inp: 0,
                        ..at.step(&row, c as isize)
                    },
                    0,
                    n,
                )?
            };
        }
        *written += v.guard.written;
        v.guard.disarm();
        Ok(())
    }
}

/// Moves the `rows` x `cols` elements `src[r * pitch + c]` to `dst[r + c * step]`, in
/// squares of `W` x `W`: `W` reads of `W` contiguous elements, `W` writes of `W`, the
/// rest element by element. Bitwise: the source is left as if moved from. (Squares of 4
/// beat the element loop, squares of 8 do not: PERFORMANCE.md#lanes-prefetch-scatter-passes-fresh-pages.)
///
/// With `ahead` > 0, each column's writes first prefetch the column `ahead` columns on:
/// columns far apart (each on its own page) are runs the hardware's prefetcher does not
/// follow, so each line's first write otherwise waits for the line to arrive.
///
/// # Safety
/// Every `src[r * pitch + c]` is a readable element, every `dst[r + c * step]` a distinct
/// element valid for writes, for `r < rows`, `c < cols`; the elements need no drop, or the
/// source's are not used again.
#[inline(always)]
pub(crate) unsafe fn move_squares<A, const W: usize>(
    src: *const A,
    pitch: isize,
    (rows, cols): (usize, usize),
    dst: *mut A,
    step: isize,
    ahead: usize,
) {
    use std::mem::MaybeUninit as M;
    let (c4, r4) = (cols - cols % W, rows - rows % W);
    let at = |r: usize, c: usize| (r as isize * pitch + c as isize, r as isize + c as isize * step);
    // SAFETY: (the whole body) every read and write is of one of the elements the contract
    // above names; each is read once.
    unsafe {
        for c in (0..c4).step_by(W) {
            if ahead > 0 {
                for c in (c + ahead..cols).take(W) {
                    let run = dst.wrapping_offset(c as isize * step);
                    crate::kernel::prefetch::prefetch_block(run, rows * size_of::<A>());
                }
            }
            for r in (0..r4).step_by(W) {
                let lines: [[M<A>; W]; W] =
                    std::array::from_fn(|k| src.offset(at(r + k, c).0).cast::<[M<A>; W]>().read());
                let across: [[M<A>; W]; W] =
                    std::array::from_fn(|j| std::array::from_fn(|k| std::ptr::read(&lines[k][j])));
                for (j, line) in across.into_iter().enumerate() {
                    dst.offset(at(r, c + j).1).cast::<[M<A>; W]>().write(line);
                }
            }
            for r in r4..rows {
                for c in c..c + W {
                    let (s, d) = at(r, c);
                    dst.offset(d).write(src.offset(s).read());
                }
            }
        }
        for c in c4..cols {
            for r in 0..rows {
                let (s, d) = at(r, c);
                dst.offset(d).write(src.offset(s).read());
            }
        }
    }
}
