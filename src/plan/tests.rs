use super::*;

fn lay<'a>(shape: &'a [usize], strides: &'a [isize]) -> Layout<'a> {
    Layout { shape, strides }
}

#[test]
fn seed_shape_example() {
    // Input [4,2,1,2], indices [1,3,2,2], axes [1] -> output [4,3,2,2].
    let p = Plan::new(
        "t",
        lay(&[4, 2, 1, 2], &[4, 2, 2, 1]),
        lay(&[1, 3, 2, 2], &[12, 4, 2, 1]),
        &[1],
        4,
    )
    .unwrap();
    assert_eq!(&*p.out_shape, &[4, 3, 2, 2]);
    let strides: Vec<isize> = p.dims.iter().map(|d| d.inp).collect();
    assert_eq!(strides, vec![4, 0, 0, 1]);
    let strides: Vec<isize> = p.dims.iter().map(|d| d.idx).collect();
    assert_eq!(strides, vec![0, 4, 2, 1]);
}

#[test]
fn loops_merge_block_runs() {
    // An embedding lookup [P,1,1,Q] with indices [1,R,S,1]: R and S merge, Q is a run.
    let p = Plan::new(
        "t",
        lay(&[50, 1, 1, 8], &[8, 8, 8, 1]),
        lay(&[1, 3, 4, 1], &[12, 4, 1, 1]),
        &[0],
        4,
    )
    .unwrap();
    assert_eq!(&*p.out_shape, &[1, 3, 4, 8]);
    let loops = p.loops(&[96, 32, 8, 1]);
    // A fresh C-order output's loops are the same, made from the plan alone.
    let mut fresh = p.clone();
    assert_eq!(fresh.c_loops(), loops);
    let outs: Vec<isize> = fresh.dims.iter().map(|d| d.out).collect();
    assert_eq!(outs, [96, 32, 8, 1]);
    assert_eq!(
        &*loops,
        &[
            Loop {
                len: 12,
                out: 8,
                inp: 0,
                idx: 1
            },
            Loop {
                len: 8,
                out: 1,
                inp: 1,
                idx: 0
            },
        ]
    );
}

#[test]
fn any_order_loops_tile_or_reverse() {
    let lp = |len, out, inp, idx| Loop { len, out, inp, idx };
    // W1 lowered, into a Fortran-order output: tiles of 64 lookups by 64 columns.
    let p = Plan::new(
        "t",
        lay(&[50, 1, 1, 256], &[256, 256, 256, 1]),
        lay(&[1, 128, 3, 1], &[384, 3, 1, 1]),
        &[0],
        4,
    )
    .unwrap();
    assert_eq!(
        &*p.loops_any_order(&[1, 1, 128, 384]),
        &[
            lp(3, 128, 0, 1),
            lp(2, 64, 0, 192),
            lp(4, 64 * 384, 64, 0),
            lp(64, 1, 0, 3),
            lp(64, 384, 1, 0)
        ]
    );
    // W8 lowered, into a Fortran-order output: the 2 images' loop moves inside chunks
    // of 256 of the 512 points.
    let w8 = Plan::new(
        "t",
        lay(&[2, 5, 6, 4], &[120, 24, 4, 1]),
        lay(&[2, 512, 1, 2], &[1024, 2, 2, 1]),
        &[2, 1],
        4,
    )
    .unwrap();
    assert_eq!(
        &*w8.loops_any_order(&[1, 2, 1024, 1024]),
        &[
            lp(2, 512, 0, 512),
            lp(2, 1, 120, 1024),
            lp(256, 2, 0, 2),
            lp(4, 1024, 1, 0)
        ]
    );
    // A C-order output keeps the row-major loops.
    assert_eq!(
        p.loops_any_order(&[98304, 98304, 768, 1]),
        p.loops(&[98304, 98304, 768, 1])
    );
    // Everything in Fortran order: the column-major loops (the lane contiguous in all
    // three operands).
    let p = Plan::new("t", lay(&[4, 6], &[1, 4]), lay(&[4, 6], &[1, 4]), &[1], 4).unwrap();
    assert_eq!(&*p.loops_any_order(&[1, 4]), &[lp(6, 4, 0, 4), lp(4, 1, 1, 1)]);
}

#[test]
fn lanes_of_indices_into_rows_do_not_count_as_reading_along_the_input() {
    let lp = |len, out, inp, idx| Loop { len, out, inp, idx };
    // Rows gathered along the first axis by 1-D indices into a Fortran-order output:
    // the column-major lane (contiguous in the output and the indices) would read
    // each element from another row; the row-major lane, staged in tiles of 64 rows
    // by 64 columns, reads whole runs of rows.
    let p = Plan::new("t", lay(&[50, 256], &[256, 1]), lay(&[128, 1], &[1, 1]), &[0], 4).unwrap();
    assert_eq!(&*p.out_shape, &[128, 256]);
    assert_eq!(
        &*p.loops_any_order(&[1, 128]),
        &[
            lp(2, 64, 0, 64),
            lp(4, 64 * 128, 64, 0),
            lp(64, 1, 0, 1),
            lp(64, 128, 1, 0)
        ]
    );
    // Indices along the contiguous axis keep the column-major lane: its elements come
    // from one column of the input.
    let p = Plan::new("t", lay(&[50, 256], &[1, 50]), lay(&[128, 1], &[1, 1]), &[0], 4).unwrap();
    assert_eq!(
        &*p.loops_any_order(&[1, 128]),
        &[lp(256, 128, 50, 0), lp(128, 1, 0, 1)]
    );
}

#[test]
fn long_lanes_along_a_far_axis_run_in_strips() {
    let lp = |len, out, inp, idx| Loop { len, out, inp, idx };
    let w4 = |rows: usize| {
        let c = [2048, 1];
        Plan::new("t", lay(&[2048, 2048], &c), lay(&[rows, 2048], &c), &[0], 4).unwrap()
    };
    // W4: strips of 128 columns (a slab of 2048 x 128 elements), outside the rows.
    let mut p = w4(2048);
    let want = [lp(16, 128, 128, 128), lp(2048, 2048, 0, 2048), lp(128, 1, 1, 1)];
    assert_eq!(&*p.loops_any_order(&[2048, 1]), &want);
    assert_eq!(&*strips(p.c_loops(), &p.axes), &want);
    // Too few rows to re-read a slab, or gathering along the last axis: row-major.
    for mut p in [
        w4(1000),
        Plan::new(
            "t",
            lay(&[2048, 2048], &[2048, 1]),
            lay(&[2048, 2048], &[2048, 1]),
            &[1],
            4,
        )
        .unwrap(),
    ] {
        assert_eq!(p.loops_any_order(&[2048, 1]), p.loops(&[2048, 1]));
        assert_eq!(strips(p.c_loops(), &p.axes), p.loops(&[2048, 1]));
    }
}
