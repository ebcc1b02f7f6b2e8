use ndarray::{Array2, Axis, array};

use super::*;

/// A tiny plan's gather, if it is one.
fn tiny<O: Dimension>(plan: &GatherPlan<O>) -> Option<&Tiny> {
    match &plan.how {
        How::Tiny(t) => Some(t),
        How::Lowered(_) => None,
    }
}

/// A lowered plan's positions and loops.
fn lowered<O: Dimension>(plan: &GatherPlan<O>) -> &Lowered {
    match &plan.how {
        How::Lowered(l) => l,
        How::Tiny(t) => panic!("a tiny plan: {t:?}"),
    }
}

#[test]
fn tiny_plans_keep_offsets() {
    fn offsets<O: Dimension>(plan: &GatherPlan<O>) -> Option<Vec<u32>> {
        tiny(plan).map(|t| t.offsets.to_vec())
    }
    // W7: rows 3 and 1 of a [4, 3] table.
    let plan = GatherPlan::gather([4, 3], &array![3_i64, 1], 0).unwrap();
    assert_eq!(offsets(&plan), Some(vec![9, 10, 11, 3, 4, 5]));
    let t = tiny(&plan).unwrap();
    assert_eq!((t.dim.slice(), t.strides.slice()), (&[2, 3][..], &[3, 1][..]));
    // Along the last axis, with negative indices and a repeated row.
    let plan = GatherPlan::take_along_axis([2, 5], &array![[-1_i64, 0], [-1, 0]], 1).unwrap();
    assert_eq!(offsets(&plan), Some(vec![4, 0, 9, 5]));
    // 64 output elements, and 65.
    let plan = GatherPlan::gather([4, 16], &array![3_i64, 0, 1, 2], 0).unwrap();
    assert_eq!(offsets(&plan).map(|o| (o.len(), o[0], o[63])), Some((64, 48, 47)));
    let plan = GatherPlan::gather([5, 13], &array![0_i64, 1, 2, 3, 4], 0).unwrap();
    assert_eq!(offsets(&plan), None);
}

#[test]
fn positions_are_resolved_and_repeats_stored_once() {
    // (Outputs of more than 64 elements: a tiny plan keeps input offsets instead.)
    // Every row of the indices is the same: stored once, negatives resolved.
    let ids = Array2::from_shape_fn((40, 3), |(_, j)| j as i64 - 1);
    let plan = GatherPlan::take_along_axis([40, 5], &ids, 1).unwrap();
    match &lowered(&plan).positions {
        Positions::U16(p) => assert_eq!(p, &array![[4_u16, 0, 1]].into_dyn()),
        p => panic!("{p:?}"),
    }
    // Nothing repeats: all twelve kept.
    let ids = Array2::from_shape_fn((40, 3), |(i, j)| (i + j) as i64);
    let plan = GatherPlan::take_along_axis([40, 45], &ids, 1).unwrap();
    assert!(matches!(&lowered(&plan).positions, Positions::U16(p) if p.shape() == [40, 3]));
    // Repeats along the last dimensions, in 3-D: kept once each.
    let shape_of = |f: fn(usize, usize) -> i64| {
        let ids = ndarray::Array3::from_shape_fn((2, 3, 4), |(i, j, _)| f(i, j));
        let plan = GatherPlan::multiaxis([8, 1, 1, 5], &ids.insert_axis(Axis(3)), &[0]).unwrap();
        match &lowered(&plan).positions {
            Positions::U16(p) => (
                p.shape().to_vec(),
                p.iter().map(|&v| v as i64).collect::<Vec<_>>(),
            ),
            p => panic!("{p:?}"),
        }
    };
    assert_eq!(shape_of(|i, _| i as i64), (vec![2, 1, 1, 1], vec![0, 1]));
    assert_eq!(
        shape_of(|i, j| (i * 3 + j) as i64),
        (vec![2, 3, 1, 1], (0..6).collect())
    );
    assert_eq!(shape_of(|_, j| j as i64 - 3), (vec![1, 3, 1, 1], vec![5, 6, 7]));
}

#[test]
fn runs_of_consecutive_positions_become_blocks() {
    // The innermost loop's index stride and length: 0 and the run for a block.
    let lane = |ids: &Array2<i64>| {
        let plan = GatherPlan::take_along_axis([6, 48], ids, 1).unwrap();
        let standard = &lowered(&plan).standard;
        let l = *standard.loops.last().unwrap();
        (l.idx, l.len, standard.axes[0].len)
    };
    let range = Array2::from_shape_fn((6, 40), |(i, j)| (j + i) as i64);
    assert_eq!(lane(&range), (0, 40, 48 - 39));
    let patches = Array2::from_shape_fn((6, 48), |(i, j)| (((j / 8 + i) % 6) * 8 + j % 8) as i64);
    assert_eq!(lane(&patches), (0, 8, 48 - 7));
    // Runs of 16 in even rows, of 8 in odd ones: runs of 8.
    let mixed = Array2::from_shape_fn((6, 32), |(i, j)| {
        ((j / 16) * 24 + j % 16 + i % 2 * (j % 16 / 8)) as i64
    });
    assert_eq!(lane(&mixed), (0, 8, 48 - 7));
    // Runs of 4 (below MIN_RUN) stay element by element.
    let short = Array2::from_shape_fn((6, 12), |(_, j)| ((11 - j / 4) * 4 + j % 4) as i64);
    assert_eq!(lane(&short).1, 12);
    assert_ne!(lane(&short).0, 0);
}

#[test]
fn positions_beyond_u32_are_wide() {
    // A stand-in input costs nothing, so a plan for a huge axis is cheap to build. An
    // input offset beyond u32 makes even a tiny plan keep positions.
    let plan = GatherPlan::gather([1 << 33], &array![-1_i64, 5], 0).unwrap();
    match &lowered(&plan).positions {
        Positions::Wide(p) => assert_eq!(p, &array![(1_usize << 33) - 1, 5].into_dyn()),
        p => panic!("{p:?}"),
    }
    let plan = GatherPlan::gather([1 << 32], &array![-1_i64], 0).unwrap();
    assert_eq!(tiny(&plan).map(|t| t.offsets.to_vec()), Some(vec![u32::MAX]));
    // 65 indices (more than a tiny plan's outputs), one value kept.
    let ids = ndarray::Array1::from_elem(65, -1_i64);
    let plan = GatherPlan::gather([1 << 32], &ids, 0).unwrap();
    assert!(matches!(&lowered(&plan).positions, Positions::U32(p) if p.shape() == [1] && p[[0]] == u32::MAX));
    let plan = GatherPlan::gather([(1 << 16) + 1], &ids, 0).unwrap();
    assert!(matches!(&lowered(&plan).positions, Positions::U32(p) if p[[0]] == 1 << 16));
    let plan = GatherPlan::gather([1 << 16], &ids, 0).unwrap();
    assert!(matches!(&lowered(&plan).positions, Positions::U16(p) if p[[0]] == u16::MAX));
}

#[test]
fn unread_indices_are_stored_as_zeros() {
    // An empty output never reads its (bad) indices; neither does a plan.
    let plan = GatherPlan::gather([0, 2], &Array2::from_elem((0, 3), 5_i64), 1).unwrap();
    assert_eq!(plan.output_shape(), &[0, 0, 3]);
    assert_eq!(tiny(&plan).map(|t| t.offsets.len()), Some(0));
    // No gathered axis: a tiny plan's offsets are the input's own; a larger plan
    // stores zeros.
    let plan = GatherPlan::multiaxis([2, 2], &array![[9_i64]], &[]).unwrap();
    assert_eq!(plan.output_shape(), &[2, 2]);
    assert_eq!(tiny(&plan).map(|t| t.offsets.to_vec()), Some(vec![0, 1, 2, 3]));
    let plan = GatherPlan::multiaxis([9, 9], &array![[9_i64]], &[]).unwrap();
    assert!(matches!(&lowered(&plan).positions, Positions::U16(p) if p.iter().all(|&v| v == 0)));
}
