#![no_main]

//! The interpolating gathers over any shapes, grids and boxes (NaN, infinities, huge and
//! tiny values, every option): `grid_sample`, its plan's apply and backward, the grid's
//! gradient, `roi_align` and its backward must return a value or an error, never panic,
//! and a plan's apply must give the call's bits.

use arbitrary::Arbitrary;
use ndarray::{Array2, ArrayD, Dimension, IxDyn};
use ndarray_gather::sample::{GridSample, Interp, Padding, RoiAlign, SampleExt, SamplePlan};

#[derive(Debug, Arbitrary)]
struct Input {
    x_shape: Vec<u8>,
    grid_shape: Vec<u8>,
    coords: Vec<i32>,
    wild: Vec<(u8, u8)>,
    interp: u8,
    padding: u8,
    align: bool,
    boxes: Vec<[i16; 4]>,
    batch: Vec<i8>,
    out: (u8, u8),
    ratio: i8,
    scale: u8,
    aligned: bool,
    max: bool,
}

const WILD: [f32; 8] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, -f32::MAX, 1e-45, -0.0, 1e30];

libfuzzer_sys::fuzz_target!(|input: Input| {
    let dims = |v: &[u8], max: usize| v.iter().take(6).map(|&d| d as usize % max).collect::<Vec<_>>();
    let x_shape = dims(&input.x_shape, 6);
    let grid_shape = dims(&input.grid_shape, 5);
    let (xn, gn): (usize, usize) = (x_shape.iter().product(), grid_shape.iter().product());
    if xn > 4096 || gn > 4096 {
        return;
    }
    let x = ArrayD::from_shape_fn(IxDyn(&x_shape), |i| (i.slice().iter().sum::<usize>() % 7) as f32 - 3.0);
    let mut coords: Vec<f32> = (0..gn)
        .map(|i| input.coords.get(i).map_or(0.5, |&c| c as f32 / 1e4))
        .collect();
    for &(at, w) in &input.wild {
        if let Some(c) = coords.get_mut(at as usize) {
            *c = WILD[w as usize % WILD.len()];
        }
    }
    let grid = ArrayD::from_shape_vec(IxDyn(&grid_shape), coords).unwrap();
    let interp = [Interp::Linear, Interp::Nearest, Interp::Cubic][input.interp as usize % 3];
    let padding = [Padding::Zeros, Padding::Border, Padding::Reflection][input.padding as usize % 3];
    let opts = GridSample::new(interp).padding(padding).align_corners(input.align);
    if let Ok(y) = x.grid_sample(&grid, opts) {
        let plan = SamplePlan::grid(x.shape(), &grid, opts).unwrap();
        let again = plan.apply(&x).unwrap();
        assert!(y.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()));
        let mut g_x = ArrayD::zeros(x.raw_dim());
        plan.backward_into(&y, &mut g_x).unwrap();
        x.grid_sample_backward_grid(&grid, &y, opts).unwrap();
    }
    let k = input.boxes.len().min(8);
    let boxes = Array2::from_shape_fn((k, 4), |(b, j)| {
        let v = input.boxes[b][j];
        if v == i16::MIN { f32::NAN } else { v as f32 / 256.0 }
    });
    let batch: Vec<i64> = (0..k).map(|b| input.batch.get(b).map_or(0, |&v| v as i64)).collect();
    let out = (input.out.0 as usize % 5, input.out.1 as usize % 5);
    let mut ro = RoiAlign::new((input.scale % 16) as f64 / 32.0).sampling_ratio(input.ratio as i64 % 6).aligned(input.aligned);
    if input.max {
        ro = ro.max();
    }
    if let Ok(r) = x.roi_align(&boxes, &batch, out, ro) {
        let mut g_x = ArrayD::zeros(x.raw_dim());
        let back = ro.backward_into(&boxes, &batch, &r, &mut g_x);
        assert_eq!(back.is_err(), input.max);
    }
});
