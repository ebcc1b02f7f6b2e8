//! Criterion benches of the interpolating gathers I1, I2 and I3 of
//! shared/BENCH-WORKLOADS.md: `grid_sample` (bilinear, zeros, align_corners false) of x
//! [8, 64, 128, 128] f32 (NCHW, and a channels-last copy) through an affine warp grid
//! [8, 128, 128, 2] (rotation 10°, scale 0.9, shift 0.05), its plan's `apply_into`, the
//! plan's input gradient and the grid's gradient, beside a memcpy of the output's bytes; I3
//! `roi_align` (x [2, 256, 64, 64], 512 boxes, 7 x 7, sampling_ratio 2, aligned) and its
//! backward.
//! PyTorch's figures: `benches/peers/sample_peers.py`.
//!
//! `cargo bench -p ndarray-gather-benches --bench sample`, or `... -- I2` for one.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use ndarray::{Array2, Array4, Axis};
use ndarray_gather::sample::{GridSample, Interp, RoiAlign, SampleExt, SamplePlan};

/// I1's shapes and its affine warp grid (as `F.affine_grid`, align_corners false).
fn i1() -> (Array4<f32>, Array4<f32>) {
    let (n, c, h, w) = (8, 64, 128, 128);
    let x = Array4::from_shape_fn((n, c, h, w), |(a, b, i, j)| {
        ((a * 7 + b * 3 + i * 5 + j) % 17) as f32 - 8.0
    });
    let (th, s, t) = (10f32.to_radians(), 0.9_f32, 0.05_f32);
    let grid = Array4::from_shape_fn((n, h, w, 2), |(_, oy, ox, k)| {
        let u = (2.0 * ox as f32 + 1.0) / w as f32 - 1.0;
        let v = (2.0 * oy as f32 + 1.0) / h as f32 - 1.0;
        if k == 0 {
            s * (th.cos() * u - th.sin() * v) + t
        } else {
            s * (th.sin() * u + th.cos() * v) + t
        }
    });
    (x, grid)
}

/// A workload's group: 10 samples over 3 s, throughput in `bytes`.
fn group<'c>(c: &'c mut Criterion, id: &str, bytes: usize) -> BenchmarkGroup<'c, WallTime> {
    let mut g = c.benchmark_group(id);
    g.throughput(Throughput::Bytes(bytes as u64));
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g
}

fn samples(c: &mut Criterion) {
    let (x, grid) = i1();
    let opts = GridSample::new(Interp::Linear);
    let plan = SamplePlan::grid(x.dim(), &grid, opts).unwrap();
    let mut y = Array4::<f32>::zeros(x.dim());
    // Channels-last: a [N, H, W, C] array seen as [N, C, H, W].
    let last = x
        .view()
        .permuted_axes([0, 2, 3, 1])
        .as_standard_layout()
        .into_owned();
    let x_last = last.view().permuted_axes([0, 3, 1, 2]);
    let mut y_last_store = Array4::<f32>::zeros((8, 128, 128, 64));
    let bytes = x.len() * 4;
    let (src, mut dst) = (vec![1u8; bytes], vec![0u8; bytes]);

    let mut g = group(c, "I1", bytes);
    g.bench_function("call", |b| {
        b.iter(|| black_box(x.grid_sample(&grid, opts).unwrap()))
    });
    g.bench_function("plan", |b| {
        b.iter(|| black_box(SamplePlan::grid(x.dim(), &grid, opts).unwrap()))
    });
    g.bench_function("apply_into", |b| b.iter(|| plan.apply_into(&x, &mut y).unwrap()));
    g.bench_function("apply_into_channels_last", |b| {
        b.iter(|| {
            let mut y_last = y_last_store.view_mut().permuted_axes([0, 3, 1, 2]);
            plan.apply_into(&x_last, &mut y_last).unwrap()
        })
    });
    g.bench_function("memcpy", |b| b.iter(|| dst.copy_from_slice(black_box(&src))));
    g.finish();

    let g_y = x.grid_sample(&grid, opts).unwrap();
    let mut g_x = Array4::<f32>::zeros(x.dim());
    let mut g = group(c, "I2", bytes);
    g.bench_function("backward_into", |b| {
        b.iter(|| {
            g_x.fill(0.0);
            plan.backward_into(&g_y, &mut g_x).unwrap()
        })
    });
    g.bench_function("backward_grid", |b| {
        b.iter(|| black_box(x.grid_sample_backward_grid(&grid, &g_y, opts).unwrap()))
    });
    g.bench_function("zero_fill", |b| b.iter(|| g_x.fill(0.0)));
    g.finish();
    black_box(y.index_axis(Axis(0), 0).sum());
}

/// I3's boxes: 512, seeded, sides 4-48 px inside a 64 x 64 image, batch items alternating.
fn i3_boxes() -> (Array2<f32>, Vec<i64>) {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |lo: f32, hi: f32| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        lo + (hi - lo) * ((state >> 40) as f32 / (1u64 << 24) as f32)
    };
    let boxes = Array2::from_shape_fn((512, 4), |_| 0.0).to_owned();
    let mut boxes = boxes;
    for mut b in boxes.outer_iter_mut() {
        let (w, h) = (next(4.0, 48.0), next(4.0, 48.0));
        let (x1, y1) = (next(0.0, 64.0 - w), next(0.0, 64.0 - h));
        b.assign(&ndarray::array![x1, y1, x1 + w, y1 + h]);
    }
    (boxes, (0..512).map(|k| k % 2).collect())
}

fn rois(c: &mut Criterion) {
    let x = Array4::from_shape_fn((2, 256, 64, 64), |(a, b, i, j)| {
        ((a * 7 + b * 3 + i * 5 + j) % 17) as f32 - 8.0
    });
    let (boxes, batch) = i3_boxes();
    let opts = RoiAlign::new(1.0).sampling_ratio(2).aligned(true);
    let y = x.roi_align(&boxes, &batch, (7, 7), opts).unwrap();
    let mut g_x = Array4::<f32>::zeros(x.dim());
    let bytes = y.len() * 4;
    let (src, mut dst) = (vec![1u8; bytes], vec![0u8; bytes]);
    let mut g = group(c, "I3", bytes);
    g.bench_function("roi_align", |b| {
        b.iter(|| black_box(x.roi_align(&boxes, &batch, (7, 7), opts).unwrap()))
    });
    g.bench_function("backward_into", |b| {
        b.iter(|| {
            g_x.fill(0.0);
            opts.backward_into(&boxes, &batch, &y, &mut g_x).unwrap()
        })
    });
    g.bench_function("memcpy", |b| b.iter(|| dst.copy_from_slice(black_box(&src))));
    g.finish();
}

criterion_group!(sample_benches, samples, rois);
criterion_main!(sample_benches);
