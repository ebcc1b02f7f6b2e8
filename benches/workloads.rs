//! The workloads W1-W8 of shared/BENCH-WORKLOADS.md, shared by the criterion benches
//! (`benches/gather.rs`) and the peer comparison (`examples/workloads.rs`).
//!
//! Each workload owns its data: `alloc` runs the crate's allocating call, `into` the
//! unprepared `gather_multiaxis_into` call (on views lowered once, up front) into a reused
//! output, `plan_into` the prepared gather (P3-P8: a [`GatherPlan`] of the wrapper, built
//! once) into a reused output, `plan_alloc` the same into a new array, and `plan_build`
//! builds that plan.

#![allow(dead_code)]

use ndarray::{Array1, ArrayD, Axis, Dimension, IxDyn, ShapeBuilder};
use ndarray_gather::prelude::*;

pub const IDS: [&str; 8] = [
    "W1_embed",
    "W2_midaxis",
    "W3_elem_last",
    "W4_elem_first",
    "W5_nd_pixels",
    "W6_batched",
    "W7_tiny",
    "W8_multiaxis",
];

/// A timed call.
pub type Timed = Box<dyn FnMut()>;
/// A timed call that needs no exclusive state.
pub type TimedShared = Box<dyn Fn()>;

pub struct Workload {
    pub id: &'static str,
    pub out_bytes: usize,
    pub idx_bytes: usize,
    pub alloc: Box<dyn Fn() -> ArrayD<f32>>,
    pub into: Box<dyn FnMut()>,
    pub plan_into: Box<dyn FnMut()>,
    pub plan_alloc: TimedShared,
    pub plan_build: TimedShared,
}

#[path = "lcg.rs"]
mod lcg;
/// Deterministic uniform indices in `0..n`.
pub use lcg::uniform as indices;

pub fn data(shape: &[usize]) -> ArrayD<f32> {
    let n = shape.iter().product::<usize>();
    ArrayD::from_shape_vec(IxDyn(shape), numpy_like(n, |i| (i % 65521) as f32)).unwrap()
}

pub fn ids(shape: &[usize], n: usize, seed: u64) -> ArrayD<i64> {
    let v = indices(shape.iter().product(), n, seed);
    ArrayD::from_shape_vec(IxDyn(shape), numpy_like(v.len(), |i| v[i])).unwrap()
}

/// Whether inputs are allocated in transparent huge pages: `NDARRAY_GATHER_INPUTS=huge`.
/// By default they are plain `Vec` allocations, as `Array::from_shape_vec`, `Array::zeros`
/// and friends make them (4 KiB pages on Linux unless THP is `always`).
pub fn huge_inputs() -> bool {
    std::env::var("NDARRAY_GATHER_INPUTS").is_ok_and(|v| v == "huge")
}

/// A vector of `f(0), f(1), ...`: a plain allocation, or with [`huge_inputs`] one advised
/// the way NumPy advises its arrays (from 4 MiB up, Linux's transparent-huge-page advice
/// before the first touch; the recipe the README gives users).
pub fn numpy_like<T>(len: usize, f: impl FnMut(usize) -> T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(len);
    #[cfg(target_os = "linux")]
    if huge_inputs() {
        advise_huge_pages(&mut v);
    }
    v.extend((0..len).map(f));
    v
}

/// The README's recipe: advise a fresh, untouched vector's whole 2 MiB pages
/// `MADV_HUGEPAGE` (for 4 MiB and more), so that the kernel backs them with huge pages on
/// first touch.
#[cfg(target_os = "linux")]
pub fn advise_huge_pages<T>(v: &mut Vec<T>) {
    const HUGE: usize = 2 << 20;
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < 4 << 20 {
        return;
    }
    let base = v.as_mut_ptr().cast::<u8>();
    let skip = (base as usize).next_multiple_of(HUGE) - base as usize;
    let len = bytes.saturating_sub(skip) & !(HUGE - 1);
    if len > 0 {
        // SAFETY: `base + skip .. + len` lies inside the vector's allocation (whole 2 MiB
        // pages); MADV_HUGEPAGE changes no contents, only how the kernel backs the pages.
        unsafe { libc::madvise(base.add(skip).cast(), len, libc::MADV_HUGEPAGE) };
    }
}

/// A zero output of `shape`, allocated by [`numpy_like`] (as a user's `Array::zeros`).
fn zeros(shape: &[usize]) -> ArrayD<f32> {
    ArrayD::from_shape_vec(IxDyn(shape), numpy_like(shape.iter().product(), |_| 0.0)).unwrap()
}

/// A copy of a standard-layout array, allocated by [`numpy_like`].
fn copy<T: Clone>(a: &ArrayD<T>) -> ArrayD<T> {
    let s = a.as_slice().unwrap();
    ArrayD::from_shape_vec(a.raw_dim(), numpy_like(s.len(), |i| s[i].clone())).unwrap()
}

/// An owned array with unit axes inserted at `at` (ascending positions of the result).
fn reshaped<T>(a: ArrayD<T>, at: &[usize]) -> ArrayD<T> {
    at.iter().fold(a, |a, &ax| a.insert_axis(Axis(ax)))
}

/// `into` for `gather_multiaxis_into(indices, axes)` on pre-lowered operands; the output
/// has the lowered shape.
fn into_fn(input: ArrayD<f32>, idx: ArrayD<i64>, axes: Vec<usize>) -> Box<dyn FnMut()> {
    let mut out = zeros(input.gather_multiaxis(&idx, &axes).unwrap().shape());
    Box::new(move || input.gather_multiaxis_into(&idx, &axes, &mut out).unwrap())
}

/// `into_fn` into an output of the lowered shape in Fortran order.
fn into_f_fn(input: ArrayD<f32>, idx: ArrayD<i64>, axes: Vec<usize>) -> Timed {
    let shape = input.gather_multiaxis(&idx, &axes).unwrap().shape().to_vec();
    let storage = numpy_like(shape.iter().product(), |_| 0.0f32);
    let mut out = ArrayD::from_shape_vec(IxDyn(&shape).f(), storage).unwrap();
    Box::new(move || input.gather_multiaxis_into(&idx, &axes, &mut out).unwrap())
}

/// The memory-order variants of W1, W3 and W8 (`into` with another layout), each timed
/// like `into`: `into_f_out` gathers into a Fortran-order output, `into_t_in` (W3) from a
/// transposed input (a C-order array's `.t()` view) into a C-order output.
pub fn orders(id: &str) -> Vec<(&'static str, Timed)> {
    match id {
        "W1_embed" => {
            let (table, ix) = (data(&[50000, 1, 1, 256]), ids(&[1, 64, 512, 1], 50000, 1));
            vec![("into_f_out", into_f_fn(table, ix, vec![0]))]
        }
        "W3_elem_last" => {
            let (x, ix) = (data(&[2048, 2048]), ids(&[2048, 2048], 2048, 4));
            let t_in: Timed = {
                let (x, ix) = (x.clone(), ix.clone());
                let mut out = zeros(&[2048, 2048]);
                Box::new(move || x.t().gather_multiaxis_into(&ix, &[1], &mut out).unwrap())
            };
            vec![("into_f_out", into_f_fn(x, ix, vec![1])), ("into_t_in", t_in)]
        }
        "W8_multiaxis" => {
            let (x, ix) = (data(&[8, 256, 256, 16]), ids(&[8, 65536, 1, 2], 256, 8));
            vec![("into_f_out", into_f_fn(x, ix, vec![2, 1]))]
        }
        _ => Vec::new(),
    }
}

/// W9, `gather_elements` along the last, contiguous axis of [8, 512, 64] `f32` with `k`
/// indices per row (top-k, beam search): `method` (the allocating call), `plan_into` and
/// `plan_alloc` (its `GatherPlan`), and `slice_loop`, the floor a user would write
/// (`out_row[j] = in_row[idx_row[j]]` over contiguous slices, one thread), into a reused
/// buffer or (`slice_loop_alloc`) a fresh array, as the method returns.
pub fn w9(k: usize) -> Vec<(&'static str, Timed)> {
    let x = data(&[8, 512, 64]);
    let ix = ids(&[8, 512, k], 64, 9);
    let plan = std::rc::Rc::new(GatherPlan::gather_elements(x.shape(), &ix, -1).unwrap());
    let mut out = zeros(&[8, 512, k]);
    let (x1, ix1, p1, x2, p2, x3) = (
        x.clone(),
        ix.clone(),
        plan.clone(),
        x.clone(),
        plan.clone(),
        x.clone(),
    );
    let mut loop_out = vec![0f32; 8 * 512 * k];
    let (x4, ix4) = (x.clone(), ix.clone());
    // The slice loop into a fresh array, as the allocating method returns one.
    let fresh_loop = move || {
        let (xs, is) = (x4.as_slice().unwrap(), ix4.as_slice().unwrap());
        let mut out = Vec::with_capacity(is.len());
        for (i, r) in is.chunks_exact(k).zip(xs.chunks_exact(64)) {
            out.extend(i.iter().map(|&i| r[i as usize]));
        }
        ArrayD::from_shape_vec(IxDyn(&[8, 512, k]), out).unwrap()
    };
    vec![
        (
            "slice_loop_alloc",
            Box::new(move || drop(std::hint::black_box(fresh_loop()))),
        ),
        (
            "method",
            Box::new(move || drop(std::hint::black_box(x1.gather_elements(&ix1, -1).unwrap()))),
        ),
        (
            "plan_into",
            Box::new(move || p1.apply_into(&x2, &mut out).unwrap()),
        ),
        (
            "plan_alloc",
            Box::new(move || drop(std::hint::black_box(p2.apply(&x3).unwrap()))),
        ),
        (
            "slice_loop",
            Box::new(move || {
                let (xs, is) = (x.as_slice().unwrap(), ix.as_slice().unwrap());
                for ((o, i), r) in loop_out
                    .chunks_exact_mut(k)
                    .zip(is.chunks_exact(k))
                    .zip(xs.chunks_exact(64))
                {
                    for (o, &i) in o.iter_mut().zip(i) {
                        *o = r[i as usize];
                    }
                }
                std::hint::black_box(&loop_out);
            }),
        ),
    ]
}

/// `plan_into`, `plan_alloc` and `plan_build` for the plan `make` builds for `input`'s
/// shape.
fn planned(
    input: ArrayD<f32>,
    make: impl Fn(&[usize]) -> GatherPlan + 'static,
) -> (Timed, TimedShared, TimedShared) {
    let shape = input.shape().to_vec();
    let plan = std::rc::Rc::new(make(&shape));
    let input = std::rc::Rc::new(input);
    let mut out = zeros(plan.output_shape());
    let (p, x) = (plan.clone(), input.clone());
    let apply_into = Box::new(move || p.apply_into(&*x, &mut out).unwrap());
    let apply = Box::new(move || drop(std::hint::black_box(plan.apply(&*input).unwrap())));
    (
        apply_into,
        apply,
        Box::new(move || drop(std::hint::black_box(make(&shape)))),
    )
}

pub fn build(id: &str) -> Workload {
    match id {
        "W1_embed" => {
            let table = data(&[50000, 256]);
            let ix = ids(&[64, 512], 50000, 1);
            let into = into_fn(
                reshaped(copy(&table), &[1, 2]),
                reshaped(copy(&ix), &[0, 3]),
                vec![0],
            );
            let (plan_into, plan_alloc, plan_build) = {
                let ix = ix.clone();
                planned(copy(&table), move |s| GatherPlan::gather(s, &ix, 0).unwrap())
            };
            Workload {
                id: "W1_embed",
                out_bytes: 64 * 512 * 256 * 4,
                idx_bytes: 64 * 512 * 8,
                alloc: Box::new(move || table.gather(&ix, 0).unwrap()),
                plan_into,
                plan_alloc,
                plan_build,
                into,
            }
        }
        "W2_midaxis" => {
            let x = data(&[64, 2048, 64]);
            let ix = ids(&[1024], 2048, 2);
            let into = into_fn(reshaped(copy(&x), &[2]), reshaped(copy(&ix), &[0, 1, 3]), vec![1]);
            let (plan_into, plan_alloc, plan_build) = {
                let ix = ix.clone();
                planned(copy(&x), move |s| GatherPlan::gather(s, &ix, 1).unwrap())
            };
            Workload {
                id: "W2_midaxis",
                out_bytes: 64 * 1024 * 64 * 4,
                idx_bytes: 1024 * 8,
                alloc: Box::new(move || x.gather(&ix, 1).unwrap()),
                plan_into,
                plan_alloc,
                plan_build,
                into,
            }
        }
        "W3_elem_last" | "W4_elem_first" => {
            let axis = usize::from(id == "W3_elem_last");
            let x = data(&[2048, 2048]);
            let ix = ids(&[2048, 2048], 2048, 3 + axis as u64);
            let into = into_fn(copy(&x), copy(&ix), vec![axis]);
            let (plan_into, plan_alloc, plan_build) = {
                let ix = ix.clone();
                planned(copy(&x), move |s| {
                    GatherPlan::gather_elements(s, &ix, axis as isize).unwrap()
                })
            };
            Workload {
                id: if axis == 1 {
                    "W3_elem_last"
                } else {
                    "W4_elem_first"
                },
                out_bytes: 2048 * 2048 * 4,
                idx_bytes: 2048 * 2048 * 8,
                alloc: Box::new(move || x.take_along_axis(&ix, axis as isize).unwrap()),
                plan_into,
                plan_alloc,
                plan_build,
                into,
            }
        }
        "W5_nd_pixels" => {
            let n = 1_000_000;
            let x = data(&[1024, 1024, 4]);
            let ix = ids(&[n, 2], 1024, 5);
            let into = into_fn(reshaped(copy(&x), &[3]), reshaped(copy(&ix), &[1, 2]), vec![0, 1]);
            let (plan_into, plan_alloc, plan_build) = {
                let ix = ix.clone();
                planned(copy(&x), move |s| GatherPlan::gather_nd(s, &ix, 0).unwrap())
            };
            Workload {
                id: "W5_nd_pixels",
                out_bytes: n * 4 * 4,
                idx_bytes: n * 2 * 8,
                alloc: Box::new(move || x.gather_nd(&ix, 0).unwrap()),
                plan_into,
                plan_alloc,
                plan_build,
                into,
            }
        }
        "W6_batched" => {
            let x = data(&[32, 4096, 128]);
            let ix = ids(&[32, 512], 4096, 6);
            let into = into_fn(reshaped(copy(&x), &[2]), reshaped(copy(&ix), &[1, 3]), vec![1]);
            let (plan_into, plan_alloc, plan_build) = {
                let ix = ix.clone();
                planned(copy(&x), move |s| {
                    GatherPlan::gather_batched(s, &ix, 1, 1).unwrap()
                })
            };
            Workload {
                id: "W6_batched",
                out_bytes: 32 * 512 * 128 * 4,
                idx_bytes: 32 * 512 * 8,
                alloc: Box::new(move || x.gather_batched(&ix, 1, 1).unwrap()),
                plan_into,
                plan_alloc,
                plan_build,
                into,
            }
        }
        "W7_tiny" => {
            let x = ArrayD::from_shape_vec(
                IxDyn(&[4, 3]),
                vec![0., 1., 2., 10., 11., 12., 20., 21., 22., 30., 31., 32.],
            )
            .unwrap();
            let ix = Array1::from(vec![3_i64, 1]).into_dyn();
            let into = into_fn(reshaped(copy(&x), &[1]), reshaped(copy(&ix), &[0, 2]), vec![0]);
            let (plan_into, plan_alloc, plan_build) = {
                let ix = ix.clone();
                planned(copy(&x), move |s| GatherPlan::gather(s, &ix, 0).unwrap())
            };
            Workload {
                id: "W7_tiny",
                out_bytes: 6 * 4,
                idx_bytes: 2 * 8,
                alloc: Box::new(move || x.gather(&ix, 0).unwrap()),
                plan_into,
                plan_alloc,
                plan_build,
                into,
            }
        }
        "W8_multiaxis" => {
            let n = 65536;
            let x = data(&[8, 256, 256, 16]);
            let ix = ids(&[8, n, 1, 2], 256, 8);
            let into = into_fn(copy(&x), copy(&ix), vec![2, 1]);
            let (plan_into, plan_alloc, plan_build) = {
                let ix = ix.clone();
                planned(copy(&x), move |s| GatherPlan::multiaxis(s, &ix, &[2, 1]).unwrap())
            };
            Workload {
                id: "W8_multiaxis",
                out_bytes: 8 * n * 16 * 4,
                idx_bytes: 8 * n * 2 * 8,
                alloc: Box::new(move || x.gather_multiaxis(&ix, &[2, 1]).unwrap()),
                plan_into,
                plan_alloc,
                plan_build,
                into,
            }
        }
        other => panic!("unknown workload {other}"),
    }
}

/// A scatter workload (S1-S5, S8): `reset` restores the destination from a pristine copy
/// (not to be timed), `call` runs the crate's scatter into it.
pub trait ScatterWorkload {
    fn reset(&mut self);
    fn call(&mut self);
}

struct Scatter<A, F> {
    pristine: ArrayD<A>,
    x: ArrayD<A>,
    f: F,
}

impl<A: Clone, F: FnMut(&mut ArrayD<A>)> ScatterWorkload for Scatter<A, F> {
    fn reset(&mut self) {
        // A slice copy where both are contiguous: S4 times its resets apart and subtracts
        // them, and ndarray's `assign` of a dynamic-rank array took about four times the
        // tiny scatter itself, whose figure then moved with the resets' noise.
        match (self.x.as_slice_mut(), self.pristine.as_slice()) {
            (Some(x), Some(p)) => x.clone_from_slice(p),
            _ => self.x.assign(&self.pristine),
        }
    }
    fn call(&mut self) {
        (self.f)(std::hint::black_box(&mut self.x));
    }
}

fn scatter<A: Clone + 'static>(
    pristine: ArrayD<A>,
    f: impl FnMut(&mut ArrayD<A>) + 'static,
) -> Box<dyn ScatterWorkload> {
    let x = pristine.clone();
    Box::new(Scatter { pristine, x, f })
}

pub const SCATTER_IDS: [&str; 10] = [
    "S1_embed_grad",
    "S1p_plan_grad",
    "S2_elem_add",
    "S2p_plan_elem",
    "S3_nd_replace",
    "S4_tiny",
    "S5_histogram",
    "S8_multiaxis_grad",
    "S9_rows_add",
    "S9_rows_max",
];

/// Scatter values: small and varied.
pub fn updates(shape: &[usize]) -> ArrayD<f32> {
    ArrayD::from_shape_fn(IxDyn(shape), |d| {
        (d.slice().iter().sum::<usize>() % 251) as f32 * 0.01
    })
}

/// Scatter workload `id` and the bytes its 1-thread memcpy reference copies (the updates',
/// for S5 the indices').
pub fn build_scatter(id: &str) -> (Box<dyn ScatterWorkload>, usize) {
    use ndarray_gather::reduce::{Add, Replace};
    match id {
        "S1_embed_grad" => {
            let (i, u) = (ids(&[64, 512], 50000, 1), updates(&[64, 512, 256]));
            let bytes = u.len() * 4;
            let t = ArrayD::<f32>::zeros(IxDyn(&[50000, 256]));
            (scatter(t, move |x| x.scatter(&i, &u, 0, Add).unwrap()), bytes)
        }
        // S1 and S2 through a plan made once from the same indices (the forward's): the
        // scatter reads no index to check it.
        "S1p_plan_grad" => {
            let (i, u) = (ids(&[64, 512], 50000, 1), updates(&[64, 512, 256]));
            let bytes = u.len() * 4;
            let plan = GatherPlan::gather([50000, 256], &i, 0).unwrap();
            let t = ArrayD::<f32>::zeros(IxDyn(&[50000, 256]));
            (scatter(t, move |x| plan.scatter(x, &u, Add).unwrap()), bytes)
        }
        "S2p_plan_elem" => {
            let (i, u) = (ids(&[2048, 2048], 2048, 3), updates(&[2048, 2048]));
            let bytes = u.len() * 4;
            let plan = GatherPlan::gather_elements([2048, 2048], &i, 1).unwrap();
            (
                scatter(updates(&[2048, 2048]), move |x| plan.scatter(x, &u, Add).unwrap()),
                bytes,
            )
        }
        "S2_elem_add" => {
            let (i, u) = (ids(&[2048, 2048], 2048, 3), updates(&[2048, 2048]));
            let bytes = u.len() * 4;
            (
                scatter(updates(&[2048, 2048]), move |x| {
                    x.scatter_elements(&i, &u, 1, Add).unwrap()
                }),
                bytes,
            )
        }
        "S3_nd_replace" => {
            let (i, u) = (ids(&[1_000_000, 2], 1024, 5), updates(&[1_000_000, 4]));
            let bytes = u.len() * 4;
            (
                scatter(updates(&[1024, 1024, 4]), move |x| {
                    x.scatter_nd(&i, &u, 0, Replace).unwrap()
                }),
                bytes,
            )
        }
        "S4_tiny" => {
            let (i, u) = (ids(&[8], 16, 7), updates(&[8]));
            (
                scatter(updates(&[16]), move |x| {
                    x.scatter_elements(&i, &u, 0, Add).unwrap()
                }),
                32,
            )
        }
        "S5_histogram" => {
            let i = ids(&[16_777_216], 1024, 9);
            let bytes = i.len() * 8;
            let one = ndarray::arr0(1.0f64);
            let h = ArrayD::<f64>::zeros(IxDyn(&[1024]));
            (
                scatter(h, move |x| {
                    x.scatter(&i, &one.broadcast(16_777_216).unwrap(), 0, Add)
                        .unwrap()
                }),
                bytes,
            )
        }
        "S8_multiaxis_grad" => {
            let (i, u) = (ids(&[8, 65536, 1, 2], 256, 11), updates(&[8, 65536, 1, 16]));
            let bytes = u.len() * 4;
            let t = ArrayD::<f32>::zeros(IxDyn(&[8, 256, 256, 16]));
            (
                scatter(t, move |x| x.scatter_multiaxis(&i, &[2, 1], &u, Add).unwrap()),
                bytes,
            )
        }
        // A graph layer's aggregation (issue 45): 100k rows of 64 f32 into [10000, 64],
        // summed or maxed (a NaN wins, ties keep the old value).
        "S9_rows_add" | "S9_rows_max" => {
            let (i, u) = (ids(&[100_000], 10_000, 13), updates(&[100_000, 64]));
            let bytes = u.len() * 4;
            let t = ArrayD::<f32>::zeros(IxDyn(&[10_000, 64]));
            let max = id == "S9_rows_max";
            (
                scatter(t, move |x| {
                    if max {
                        x.scatter(&i, &u, 0, ndarray_gather::reduce::Max).unwrap()
                    } else {
                        x.scatter(&i, &u, 0, Add).unwrap()
                    }
                }),
                bytes,
            )
        }
        other => panic!("unknown scatter workload {other}"),
    }
}
