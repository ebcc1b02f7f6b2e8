//! The checks every rank runs under `mpirun`: sharded calls against the single-process
//! calls on the whole table (which every rank builds: the table and every rank's batch are
//! functions of a seed), against a naive reference of decision 39's two-level order, in
//! rounds of a few elements, and with bad inputs on random ranks. The launcher runs them
//! with one and with three threads per rank: both must give the references' bits, which
//! do not depend on the thread count. A failed check panics, which ends the rank with an error status, and
//! `mpirun` fails.

use mpi::Threading;
use mpi::collective::SystemOperation;
use mpi::traits::*;
use ndarray::{Array2, Axis, ShapeBuilder};
use ndarray_gather::optim::{Adagrad, Adam, Optimizer, RowwiseAdagrad, Sgd};
use ndarray_gather::prelude::*;
use ndarray_gather::shard::{Rows, ShardedTable, Traffic};

/// A deterministic generator (a 64-bit LCG).
pub(crate) struct Lcg(u64);

impl Lcg {
    pub(crate) fn new(seed: u64) -> Self {
        Lcg(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
    pub(crate) fn value(&mut self) -> f32 {
        // Values of mixed magnitudes and signs, so that the order of additions shows.
        let v = self.below(2001) as f32 - 1000.0;
        v * [1e-3, 1.0, 1e3][self.below(3)]
    }
}

/// One rank's batch for a gather-reduce.
#[derive(Clone)]
pub(crate) struct Batch {
    pub(crate) ids: Vec<i64>,
    /// The segments' array (starts, indptr, lengths or ids) and, for ids, the count.
    pub(crate) seg: Vec<i64>,
    pub(crate) kind: usize,
    pub(crate) count: usize,
    pub(crate) weights: Vec<f32>,
}

impl Batch {
    fn segments(&self) -> Segments<'_> {
        match self.kind {
            0 => Segments::starts(&self.seg),
            1 => Segments::indptr(&self.seg),
            2 => Segments::lengths(&self.seg),
            3 => Segments::uniform(self.count),
            _ => Segments::ids(&self.seg, self.count),
        }
    }

    /// Each position's segment.
    fn segment_of(&self) -> Vec<usize> {
        self.segments().to_ids(self.ids.len()).unwrap().to_vec()
    }
}

/// The batch of `rank` in case `seed`: some ranks' batches are empty, ids anywhere in
/// `-n..n`, every segment kind.
fn batch(seed: u64, rank: usize, n: usize) -> Batch {
    let mut g = Lcg::new(seed * 1000 + rank as u64);
    let positions = if g.below(5) == 0 { 0 } else { g.below(40) };
    let ids: Vec<i64> = (0..positions).map(|_| g.below(2 * n) as i64 - n as i64).collect();
    let weights = (0..positions).map(|_| g.value()).collect();
    let kind = g.below(5);
    let bags = g.below(6);
    let cut = |g: &mut Lcg| {
        let mut c: Vec<i64> = (0..bags).map(|_| g.below(positions + 1) as i64).collect();
        c.sort_unstable();
        c
    };
    let (seg, count) = match kind {
        0 => {
            let mut c = cut(&mut g);
            if let Some(f) = c.first_mut() {
                *f = 0;
            }
            let k = c.len();
            (c, k)
        }
        1 => {
            let mut c = cut(&mut g);
            c.insert(0, 0);
            c.push(positions as i64);
            let k = c.len() - 1;
            (c, k)
        }
        2 => {
            let mut c = cut(&mut g);
            c.insert(0, 0);
            c.push(positions as i64);
            let l: Vec<i64> = c.windows(2).map(|w| w[1] - w[0]).collect();
            let k = l.len();
            (l, k)
        }
        3 => {
            let len = (1..=positions.max(1))
                .rev()
                .find(|l| positions % l == 0)
                .unwrap_or(1);
            (Vec::new(), len)
        }
        _ => {
            let k = 1 + g.below(8);
            ((0..positions).map(|_| g.below(k) as i64).collect(), k)
        }
    };
    // `uniform(len)`: `count` holds the length.
    Batch {
        ids,
        seg,
        kind,
        count,
        weights,
    }
}

/// The whole table of case `seed`: `n` rows of `w` values.
pub(crate) fn whole(seed: u64, n: usize, w: usize) -> Array2<f32> {
    let mut g = Lcg::new(seed);
    Array2::from_shape_simple_fn((n, w), || g.value())
}

/// The bounds of case `seed` for `ranks` ranks: even, or uneven with ranks holding no rows.
pub(crate) fn bounds(seed: u64, n: usize, ranks: usize) -> Rows {
    let mut g = Lcg::new(seed ^ 0xB0B);
    if g.below(2) == 0 {
        return Rows::even(n, ranks);
    }
    let mut cuts: Vec<usize> = (0..ranks - 1).map(|_| g.below(n + 1)).collect();
    cuts.sort_unstable();
    let b: Vec<usize> = std::iter::once(0).chain(cuts).chain(std::iter::once(n)).collect();
    Rows::from_bounds(&b).unwrap()
}

/// Decision 39's order, written out: for each segment, each owner's positions combined in
/// position order (from zero, or the first for `Prod`), the owners' partials in rank order,
/// then the caller's divisor; empty segments `fill`.
pub(crate) fn two_level(
    t: &Array2<f32>,
    rows: &Rows,
    b: &Batch,
    pooling: Pooling,
    weighted: bool,
    skip: Option<i64>,
    fill: f32,
) -> Array2<f32> {
    let (n, w) = t.dim();
    let seg = b.segment_of();
    let count = match b.kind {
        0 | 2 => b.seg.len(),
        1 => b.seg.len() - 1,
        3 => b.ids.len() / b.count,
        _ => b.count,
    };
    let mut out = Array2::from_elem((count, w), fill);
    for s in 0..count {
        let kept: Vec<usize> = (0..b.ids.len())
            .filter(|&p| seg[p] == s && Some(b.ids[p]) != skip)
            .collect();
        if kept.is_empty() {
            continue;
        }
        let row = |p: usize| {
            let i = b.ids[p];
            (if i < 0 { i + n as i64 } else { i }) as usize
        };
        let weight = |p: usize| if weighted { b.weights[p] } else { 1.0 };
        for j in 0..w {
            let mut total: Option<f32> = None;
            for o in 0..rows.ranks() {
                let mine: Vec<usize> = kept
                    .iter()
                    .copied()
                    .filter(|&p| rows.owner(row(p)) == Some(o))
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let partial = match pooling {
                    Pooling::Prod => mine.iter().map(|&p| t[[row(p), j]]).reduce(|a, x| a * x).unwrap(),
                    _ if weighted => mine.iter().fold(0.0, |a, &p| a + weight(p) * t[[row(p), j]]),
                    _ => mine.iter().fold(0.0, |a, &p| a + t[[row(p), j]]),
                };
                total = Some(match (pooling, total) {
                    (Pooling::Prod, None) => partial,
                    (Pooling::Prod, Some(a)) => a * partial,
                    (_, None) => 0.0 + partial,
                    (_, Some(a)) => a + partial,
                });
            }
            let total = total.unwrap();
            let sum_w = kept.iter().fold(0.0f32, |a, &p| a + weight(p));
            let sum_w2 = kept.iter().fold(0.0f32, |a, &p| a + weight(p) * weight(p));
            out[[s, j]] = match pooling {
                Pooling::Mean if weighted => total / sum_w,
                Pooling::Mean => total / kept.len() as f32,
                Pooling::SqrtN if weighted => total / (sum_w2 as f64).sqrt() as f32,
                Pooling::SqrtN => total / (kept.len() as f64).sqrt() as f32,
                _ => total,
            };
        }
    }
    out
}

/// Bits of an array, for exact comparisons (NaN payloads and the sign of zero included).
pub(crate) fn bits(a: &ndarray::ArrayRef<f32, ndarray::Ix2>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

/// `Rows::owner` is the rank whose range holds the row (ranks with no rows skipped), for
/// few ranks and many (its two ways of finding it), and `None` past the end.
fn owners_are_the_ranges_holding_each_row() {
    for seed in 0..200u64 {
        let mut g = Lcg::new(seed);
        let ranks = 1 + g.below(if seed % 2 == 0 { 6 } else { 40 });
        let mut b = vec![0usize];
        for _ in 0..ranks {
            // Every third rank or so holds no rows.
            let more = if g.below(3) == 0 { 0 } else { g.below(5) };
            b.push(b[b.len() - 1] + more);
        }
        let rows = Rows::from_bounds(&b).unwrap();
        for i in 0..=rows.len() {
            let expected = (0..ranks).find(|&r| rows.range(r).contains(&i));
            assert_eq!(rows.owner(i), expected, "row {i} of bounds {b:?}");
        }
    }
}

pub fn run() {
    let (universe, _) = mpi::initialize_with_threading(Threading::Serialized).expect("MPI initializes");
    // A failed check on one rank ends every rank at once: unwinding would finalize MPI,
    // which waits for the ranks still in a collective, and the launch would hang.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        // SAFETY: MPI is initialized (above) and not finalized (the universe lives until
        // `run` returns); `MPI_Abort` on the world communicator takes no other state.
        unsafe { mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, 101) };
    }));
    let world = universe.world();
    let (me, ranks) = (world.rank() as usize, world.size() as usize);
    owners_are_the_ranges_holding_each_row();
    let mut checked = 0;
    for seed in 1..=12u64 {
        let (n, w) = (1 + Lcg::new(seed).below(60), 1 + Lcg::new(seed + 7).below(9));
        let t = whole(seed, n, w);
        let rows = bounds(seed, n, ranks);
        let local = t.slice_axis(Axis(0), rows.range(me).into()).to_owned();
        // Any layout: every other case's local rows in Fortran order.
        let local = if seed % 2 == 0 {
            let mut f = Array2::zeros(local.raw_dim().f());
            f.assign(&local);
            f
        } else {
            local
        };
        let table = ShardedTable::new(&world, local, rows.clone()).unwrap();
        assert_eq!(table.shape(), &[n, w]);
        let batches: Vec<Batch> = (0..ranks).map(|r| batch(seed, r, n)).collect();
        let b = &batches[me];

        // gather: the single-process bits, on any number of ranks and threads, in rounds.
        let want = t.gather(&b.ids, 0).unwrap();
        assert_eq!(
            bits(&table.gather(&b.ids).unwrap()),
            bits(&want),
            "seed {seed}: gather"
        );
        let traffic = table.traffic();
        let mut expect = Traffic::default();
        for (r, other) in batches.iter().enumerate() {
            for &i in &other.ids {
                let owner = rows
                    .owner((if i < 0 { i + n as i64 } else { i }) as usize)
                    .unwrap();
                if r == me && owner != me {
                    expect.sent += 8;
                    expect.received += (4 * w) as u64;
                } else if r != me && owner == me {
                    expect.received += 8;
                    expect.sent += (4 * w) as u64;
                }
            }
        }
        assert_eq!(traffic, expect, "seed {seed}: gather's traffic");

        // gather_reduce for every pooling, weighted and not, skipping and not.
        for pooling in [
            Pooling::Sum,
            Pooling::Mean,
            Pooling::SqrtN,
            Pooling::Prod,
            Pooling::Max,
            Pooling::Min,
        ] {
            for (weighted, skip) in [
                (false, None),
                (true, None),
                (false, b.ids.first().copied()),
                (true, Some(-1_i64)),
            ] {
                let extremum = matches!(pooling, Pooling::Max | Pooling::Min);
                if weighted && (extremum || pooling == Pooling::Prod) {
                    continue;
                }
                // A skip value every rank agrees on is not needed: each rank skips its own.
                let fill = if seed % 3 == 0 { -7.5 } else { 0.0 };
                let mut pool: Pool<'_, f32> = pooling.fill(fill);
                if weighted {
                    pool = pool.weighted(&b.weights);
                }
                if let Some(v) = skip {
                    pool = pool.skip(v);
                }
                let label = format!(
                    "seed {seed} ranks {ranks} {pooling:?} weighted {weighted} skip {skip:?} kind {}",
                    b.kind
                );
                let got = table.gather_reduce(&b.ids, b.segments(), pool.clone()).unwrap();
                let single = t.gather_reduce(&b.ids, b.segments(), 0, pool.clone()).unwrap();
                if extremum || ranks == 1 {
                    assert_eq!(bits(&got), bits(&single), "{label}: the single-process bits");
                }
                if !extremum {
                    let naive = two_level(&t, &rows, b, pooling, weighted, skip, fill);
                    assert_eq!(bits(&got), bits(&naive), "{label}: decision 39's order");
                }
                if extremum {
                    let (m, arg) = table
                        .gather_reduce_arg(&b.ids, b.segments(), pool.clone())
                        .unwrap();
                    let (m1, arg1) = t
                        .gather_reduce_arg(&b.ids, b.segments(), 0, pool.clone())
                        .unwrap();
                    assert_eq!((bits(&m), arg), (bits(&m1), arg1), "{label}: arg");
                }
                checked += 1;
            }
        }
        quantized(&world, seed, &t, &rows, b);
        // A plan: routed once, the same bits as the calls for every pooling, on tables
        // whose values change between applies; a table of other rows is refused.
        let plan = table.plan(&b.ids, b.segments()).unwrap();
        let skipping = table.plan_skipping(&b.ids, -1_i64, b.segments()).unwrap();
        let mut moving = ShardedTable::new(&world, table.local().clone(), rows.clone()).unwrap();
        for step in 0..2 {
            for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Prod, Pooling::Max] {
                let call = moving.gather_reduce(&b.ids, b.segments(), pooling).unwrap();
                let applied = plan.apply(&moving, pooling).unwrap();
                assert_eq!(
                    bits(&applied),
                    bits(&call),
                    "seed {seed} step {step} {pooling:?}: plan"
                );
                let mut into = Array2::from_elem(call.raw_dim(), f32::NAN);
                plan.apply_into(&moving, pooling, &mut into).unwrap();
                assert_eq!(bits(&into), bits(&call), "seed {seed} {pooling:?}: apply_into");
                let skip = skipping.apply(&moving, pooling.skip(-1)).unwrap();
                let want = moving
                    .gather_reduce(&b.ids, b.segments(), pooling.skip(-1))
                    .unwrap();
                assert_eq!(bits(&skip), bits(&want), "seed {seed} {pooling:?}: plan_skipping");
                // A pool without `.skip` uses the plan's (decision 69).
                let plain = skipping.apply(&moving, pooling).unwrap();
                assert_eq!(
                    bits(&plain),
                    bits(&want),
                    "seed {seed} {pooling:?}: the plan's skip"
                );
            }
            let weighted = Pooling::SqrtN.weighted(&b.weights);
            assert_eq!(
                bits(&plan.apply(&moving, weighted.clone()).unwrap()),
                bits(&moving.gather_reduce(&b.ids, b.segments(), weighted).unwrap()),
                "seed {seed}: weighted plan"
            );
            let (m, arg) = plan.apply_arg(&moving, Pooling::Min).unwrap();
            let (m1, arg1) = moving
                .gather_reduce_arg(&b.ids, b.segments(), Pooling::Min)
                .unwrap();
            assert_eq!((bits(&m), &arg), (bits(&m1), &arg1), "seed {seed}: plan's arg");
            // Its `_into` twin (decision 69): the same, into a column-major `out`.
            let mut into = Array2::from_elem(m.raw_dim().f(), f32::NAN);
            let mut arg_into = Array2::from_elem(m.raw_dim(), usize::MAX);
            plan.apply_arg_into(&moving, Pooling::Min, &mut into, &mut arg_into)
                .unwrap();
            assert_eq!(
                (bits(&into), &arg_into),
                (bits(&m), &arg),
                "seed {seed}: apply_arg_into"
            );
            // A wrong `arg` shape on the last rank only: every rank errs, nothing written.
            let last = ranks - 1;
            let mut short = Array2::from_elem((m.nrows() + usize::from(me == last), m.ncols()), 7usize);
            match (
                me == last,
                plan.apply_arg_into(&moving, Pooling::Min, &mut into, &mut short),
            ) {
                (true, Err(GatherError::OutputShape { .. })) => {}
                (false, Err(GatherError::Peer { rank, .. })) if rank == last => {}
                (_, r) => {
                    panic!("seed {seed}: rank {me} of apply_arg_into with a bad arg on {last} gave {r:?}")
                }
            }
            assert!(
                short.iter().all(|&a| a == 7) && bits(&into) == bits(&m),
                "seed {seed}: a refused apply_arg_into wrote"
            );
            // A training step: every local value changes, the routing does not.
            moving.local_mut().mapv_inplace(|v| v * 0.5 - 1.0);
        }
        // The backward: every rank's single-process plan's backward on the whole
        // gradient, in rank order (decision 34 in (source rank, position) order).
        let grad_out = |r: usize, count: usize| {
            let mut g = Lcg::new(seed * 91 + r as u64);
            Array2::from_shape_simple_fn((count, w), || g.value())
        };
        let start = |g: &Array2<f32>| g.slice_axis(Axis(0), rows.range(me).into()).to_owned();
        let init = whole(seed + 5, n, w);
        for (pooling, weighted, skipped) in [
            (Pooling::Sum, false, false),
            (Pooling::Mean, false, false),
            (Pooling::SqrtN, true, false),
            (Pooling::Mean, true, true),
        ] {
            let (p, skip) = if skipped {
                (&skipping, Some(-1_i64))
            } else {
                (&plan, None)
            };
            fn pool_of(b: &Batch, pooling: Pooling, weighted: bool, skip: Option<i64>) -> Pool<'_, f32> {
                let mut pool = Pool::from(pooling);
                if weighted {
                    pool = pool.weighted(&b.weights);
                }
                if let Some(k) = skip {
                    pool = pool.skip(k);
                }
                pool
            }
            let pool = pool_of(b, pooling, weighted, skip);
            let mut grad = ShardedTable::new(&world, start(&init), rows.clone()).unwrap();
            p.backward_into(&grad_out(me, p.segments()), pool.clone(), &mut grad)
                .unwrap();
            let mut all = init.clone();
            for (r, other) in batches.iter().enumerate() {
                let single = match skip {
                    Some(k) => GatherReducePlan::new_skipping(t.shape(), &other.ids, k, other.segments(), 0),
                    None => GatherReducePlan::new(t.shape(), &other.ids, other.segments(), 0),
                }
                .unwrap();
                single
                    .backward_into(
                        &grad_out(r, single.segments()),
                        pool_of(other, pooling, weighted, skip),
                        &mut all,
                    )
                    .unwrap();
            }
            assert_eq!(
                bits(grad.local()),
                bits(&start(&all)),
                "seed {seed} ranks {ranks} {pooling:?} weighted {weighted} skip {skip:?}: backward_into"
            );
            // The touched rows alone: the single plans' backward on a -0.0 gradient (each
            // sum from its first contribution), in rank order, at the rows read here.
            let what = format!("seed {seed} ranks {ranks} {pooling:?} weighted {weighted} skip {skip:?}");
            let (local_rows, g_rows) = p
                .backward_rows(&grad_out(me, p.segments()), pool.clone(), &table)
                .unwrap();
            let mut dense = Array2::from_elem((n, w), -0.0f32);
            let (first, mut read) = (rows.range(me).start, std::collections::BTreeSet::new());
            for (r, other) in batches.iter().enumerate() {
                let single = match skip {
                    Some(k) => GatherReducePlan::new_skipping(t.shape(), &other.ids, k, other.segments(), 0),
                    None => GatherReducePlan::new(t.shape(), &other.ids, other.segments(), 0),
                }
                .unwrap();
                let pool = pool_of(other, pooling, weighted, skip);
                let g = grad_out(r, single.segments());
                let (touched, _) = single.backward_rows(&g, pool.clone()).unwrap();
                read.extend(
                    touched
                        .iter()
                        .filter(|&&i| rows.range(me).contains(&i))
                        .map(|&i| i - first),
                );
                single.backward_into(&g, pool, &mut dense).unwrap();
            }
            assert_eq!(
                local_rows.to_vec(),
                read.iter().copied().collect::<Vec<_>>(),
                "{what}: rows"
            );
            let mine = start(&dense);
            assert_eq!(
                bits(&g_rows),
                bits(&mine.select(Axis(0), &local_rows.to_vec())),
                "{what}: backward_rows"
            );
            // The step: each owner's touched rows, row-wise Adagrad's formula on those rows.
            let mut stepped = ShardedTable::new(&world, start(&t), rows.clone()).unwrap();
            let mut opt = RowwiseAdagrad::new(rows.range(me).len(), 0.25);
            p.step(&grad_out(me, p.segments()), pool.clone(), &mut stepped, &mut opt)
                .unwrap();
            let mut want = start(&t);
            for (k, &r) in local_rows.iter().enumerate() {
                let g = g_rows.row(k);
                let m = g.iter().fold(0.0f32, |s, &x| s + x * x) / w as f32;
                let mult = 0.25 / (m.sqrt() + 1e-8);
                want.row_mut(r).zip_mut_with(&g, |v, &x| *v -= mult * x);
                assert_eq!(opt.state()[r], m, "{what}: moment of local row {r}");
            }
            assert_eq!(bits(stepped.local()), bits(&want), "{what}: step");
            // The last rank's optimizer holds a row too many: every rank errs, none changes.
            let bad = ranks - 1;
            let mut opt = RowwiseAdagrad::new(rows.range(me).len() + usize::from(me == bad), 0.25);
            let before = stepped.local().clone();
            match (
                me == bad,
                p.step(&grad_out(me, p.segments()), pool.clone(), &mut stepped, &mut opt),
            ) {
                (true, Err(GatherError::Optimizer { .. })) => {}
                (false, Err(GatherError::Peer { rank, .. })) if rank == bad => {}
                (_, r) => panic!("{what}: rank {me} of a step with a bad optimizer on {bad} gave {r:?}"),
            }
            assert_eq!(
                bits(stepped.local()),
                bits(&before),
                "{what}: a refused step wrote"
            );
            assert!(
                opt.state().iter().all(|&m| m == 0.0),
                "{what}: a refused step's moments"
            );
            // Decision 66: a state of the right rows but another width on the last rank
            // only (Adagrad one column short, Adam one too many): every rank errs, none
            // changes, and the next step works.
            let mine = rows.range(me).len();
            let width = |extra: bool| {
                if me == bad {
                    if extra { w + 1 } else { w - 1 }
                } else {
                    w
                }
            };
            let mut opts: [Box<dyn Optimizer>; 2] = [
                Box::new(Adagrad::new((mine, width(false)), 0.25)),
                Box::new(Adam::new((mine, width(true)), 0.25)),
            ];
            for opt in &mut opts {
                match (
                    me == bad,
                    p.step(&grad_out(me, p.segments()), pool.clone(), &mut stepped, opt),
                ) {
                    (true, Err(GatherError::Optimizer { .. })) => {}
                    (false, Err(GatherError::Peer { rank, .. })) if rank == bad => {}
                    (_, r) => panic!(
                        "{what}: rank {me} of a step with a state of another width on {bad} gave {r:?}"
                    ),
                }
                assert_eq!(
                    bits(stepped.local()),
                    bits(&before),
                    "{what}: a refused step wrote"
                );
            }
            p.step(
                &grad_out(me, p.segments()),
                pool.clone(),
                &mut stepped,
                &mut Sgd::new(0.0),
            )
            .unwrap();
        }
        // One plan, another layer width (decision 57): the same bits as the table's own
        // call, forward and backward.
        let wide = whole(seed + 7, n, w + 3);
        let slice = |t: &Array2<f32>| t.slice_axis(Axis(0), rows.range(me).into()).to_owned();
        let other = ShardedTable::new(&world, slice(&wide), rows.clone()).unwrap();
        for pooling in [Pooling::Sum, Pooling::Mean] {
            assert_eq!(
                bits(&plan.apply(&other, pooling).unwrap()),
                bits(&other.gather_reduce(&b.ids, b.segments(), pooling).unwrap()),
                "seed {seed}: a plan on a table of width {}",
                w + 3
            );
        }
        let g_wide = {
            let mut g = Lcg::new(seed * 7 + me as u64);
            Array2::from_shape_simple_fn((plan.segments(), w + 3), || g.value())
        };
        let mut grad = ShardedTable::new(&world, slice(&Array2::zeros((n, w + 3))), rows.clone()).unwrap();
        plan.backward_into(&g_wide, Pooling::Sum, &mut grad).unwrap();
        let mut all = Array2::<f32>::zeros((n, w + 3));
        for (r, other_b) in batches.iter().enumerate() {
            let single = GatherReducePlan::new(t.shape(), &other_b.ids, other_b.segments(), 0).unwrap();
            let mut g = Lcg::new(seed * 7 + r as u64);
            let g = Array2::from_shape_simple_fn((single.segments(), w + 3), || g.value());
            single.backward_into(&g, Pooling::Sum, &mut all).unwrap();
        }
        assert_eq!(
            bits(grad.local()),
            bits(&slice(&all)),
            "seed {seed}: a wide backward"
        );
        // A grad_out of the table's width but another: this rank's GradShape, nothing written.
        let before = grad.local().clone();
        match plan.backward_into(&Array2::zeros((plan.segments(), w)), Pooling::Sum, &mut grad) {
            Err(GatherError::GradShape { segments, .. }) if segments == plan.segments() => {}
            r => panic!(
                "seed {seed}: a grad_out of width {w} for a table of {} gave {r:?}",
                w + 3
            ),
        }
        assert_eq!(
            bits(grad.local()),
            bits(&before),
            "seed {seed}: a refused backward wrote"
        );
        // Ranks passing tables of different widths: refused on every rank before anything
        // moves (rank 0's width is the call's).
        if ranks > 1 {
            let mine = if me == 0 { &table } else { &other };
            match (me, plan.apply(mine, Pooling::Sum)) {
                (0, Err(GatherError::Peer { rank: 1, .. })) => {}
                (_, Err(GatherError::RanksDisagree { .. })) if me > 0 => {}
                (_, r) => panic!(
                    "seed {seed}: rank {me} with widths differing by rank gave {:?}",
                    r.map(|a| a.dim())
                ),
            }
        }
        assert!(
            plan.apply(&table, Pooling::Sum.skip(3)).is_err(),
            "seed {seed}: a skip the plan was not made for"
        );

        // In rounds of a few elements: the same bits.
        let small = ShardedTable::new(&world, table.local().clone(), rows.clone())
            .unwrap()
            .with_chunk_elements(3);
        let pool = Pooling::Mean.weighted(&b.weights);
        assert_eq!(
            bits(&small.gather_reduce(&b.ids, b.segments(), pool.clone()).unwrap()),
            bits(&table.gather_reduce(&b.ids, b.segments(), pool).unwrap()),
            "seed {seed}: in rounds"
        );
        assert_eq!(
            bits(&small.gather(&b.ids).unwrap()),
            bits(&want),
            "seed {seed}: gather in rounds"
        );

        // scatter: the single-process scatter of every rank's updates in (rank, position)
        // order, on the whole table.
        let updates = |r: usize| {
            let mut g = Lcg::new(seed * 77 + r as u64);
            Array2::from_shape_simple_fn((batches[r].ids.len(), w), || g.value())
        };
        let mut sharded = ShardedTable::new(&world, table.local().clone(), rows.clone()).unwrap();
        sharded.scatter(&b.ids, &updates(me), reduce::Add).unwrap();
        let mut all = t.clone();
        for (r, other) in batches.iter().enumerate() {
            all.scatter(&other.ids, &updates(r), 0, reduce::Add).unwrap();
        }
        let want = all.slice_axis(Axis(0), rows.range(me).into()).to_owned();
        assert_eq!(bits(sharded.local()), bits(&want), "seed {seed}: scatter");

        // Bad inputs on random ranks: every rank errs, the bad ones with their own error,
        // the others naming the lowest bad rank; nothing is written; the next call works.
        let mut g = Lcg::new(seed ^ 0xBAD);
        let bad: Vec<bool> = (0..ranks).map(|_| g.below(3) == 0).collect();
        let lowest = bad.iter().position(|&x| x);
        let verdict = |e: GatherError, own: fn(&GatherError) -> bool, what: &str| match lowest {
            Some(_) if bad[me] => assert!(own(&e), "seed {seed} {what}: own error expected, got {e}"),
            Some(l) => assert!(
                matches!(e, GatherError::Peer { rank, .. } if rank == l),
                "seed {seed} {what}: Peer {{ rank: {l} }} expected, got {e}"
            ),
            None => unreachable!(),
        };
        let mut ids = b.ids.clone();
        if bad[me] {
            ids.push(n as i64); // out of range
        }
        let before = sharded.local().clone();
        let upd = Array2::<f32>::ones((ids.len(), w));
        match (lowest, sharded.scatter(&ids, &upd, reduce::Add)) {
            (None, r) => r.unwrap(),
            (Some(_), Ok(())) => panic!("seed {seed}: a bad scatter succeeded"),
            (Some(_), Err(e)) => {
                verdict(
                    e,
                    |e| matches!(e, GatherError::IndexOutOfBounds { .. }),
                    "scatter",
                );
                assert_eq!(
                    bits(sharded.local()),
                    bits(&before),
                    "seed {seed}: a failed scatter wrote"
                );
            }
        }
        match (
            lowest,
            table.gather_reduce(&ids, Segments::uniform(ids.len().max(1)), Pooling::Sum),
        ) {
            (None, _) => {}
            (Some(_), r) => verdict(
                r.unwrap_err(),
                |e| matches!(e, GatherError::IndexOutOfBounds { .. }),
                "gather_reduce",
            ),
        }
        // Weights of the wrong length on the bad ranks.
        let weights: Vec<f32> = vec![1.0; b.ids.len() + usize::from(bad[me])];
        let r = table.gather_reduce(&b.ids, b.segments(), Pooling::Sum.weighted(&weights));
        match lowest {
            None => drop(r.unwrap()),
            Some(_) => verdict(
                r.unwrap_err(),
                |e| matches!(e, GatherError::Weights { .. }),
                "weights",
            ),
        }
        // A call pooled otherwise than rank 0's (weights on some ranks only: different
        // exchanges): the ranks that differ err with their own `Pooling` error, the others
        // name the lowest of them; no rank waits. For the call, the plan and its backward.
        let differs: Vec<bool> = (0..ranks).map(|r| r > 0 && bad[r]).collect();
        let first = differs.iter().position(|&x| x);
        let odd = |r: Result<(), GatherError>, what: &str| match (first, r) {
            (None, r) => r.unwrap(),
            (Some(_), Ok(())) => panic!("seed {seed} {what}: a call pooled otherwise succeeded"),
            (Some(_), Err(e)) if differs[me] => {
                assert!(
                    matches!(e, GatherError::RanksDisagree { .. })
                        && e.to_string().contains("differs from rank 0's"),
                    "seed {seed} {what}: {e}"
                )
            }
            (Some(l), Err(e)) => assert!(
                matches!(e, GatherError::Peer { rank, .. } if rank == l),
                "seed {seed} {what}: Peer {{ rank: {l} }} expected, got {e}"
            ),
        };
        let pool = || {
            let p = Pool::from(Pooling::Mean);
            if differs[me] { p.weighted(&b.weights) } else { p }
        };
        odd(
            table.gather_reduce(&b.ids, b.segments(), pool()).map(drop),
            "gather_reduce",
        );
        odd(plan.apply(&table, pool()).map(drop), "apply");
        let mut grad = ShardedTable::new(&world, start(&init), rows.clone()).unwrap();
        odd(
            plan.backward_into(&Array2::ones((plan.segments(), w)), pool(), &mut grad),
            "backward_into",
        );
        if first.is_some() {
            assert_eq!(
                bits(grad.local()),
                bits(&start(&init)),
                "seed {seed}: a refused backward wrote"
            );
        }
        // A backward with a gradient of the wrong shape on the bad ranks: nothing written.
        let mut grad = ShardedTable::new(&world, start(&init), rows.clone()).unwrap();
        let g = Array2::<f32>::ones((plan.segments() + usize::from(bad[me]), w));
        match (lowest, plan.backward_into(&g, Pooling::Sum, &mut grad)) {
            (None, r) => r.unwrap(),
            (Some(_), Ok(())) => panic!("seed {seed}: a bad backward succeeded"),
            (Some(_), Err(e)) => {
                verdict(e, |e| matches!(e, GatherError::GradShape { .. }), "backward");
                assert_eq!(
                    bits(grad.local()),
                    bits(&start(&init)),
                    "seed {seed}: a failed backward wrote"
                );
            }
        }
        // Disagreeing bounds, or a local table of the wrong size, in `new`: every rank can
        // tell which ranks err by themselves (bounds other than rank 0's, or local rows
        // other than their bounds say), so each rank's exact error is known.
        let wrong = |r: usize| {
            if bad[r] {
                Rows::even(n + 1, ranks)
            } else {
                rows.clone()
            }
        };
        let local_rows = rows.range(me).len();
        let errs = |r: usize| wrong(r) != wrong(0) || wrong(r).range(r).len() != rows.range(r).len();
        let first_bad = (0..ranks).find(|&r| errs(r));
        match (
            first_bad,
            ShardedTable::new(&world, table.local().clone(), wrong(me)),
        ) {
            (None, r) => drop(r.unwrap()),
            (Some(_), Ok(_)) => panic!("seed {seed}: new with bad bounds succeeded"),
            (Some(l), Err(e)) => {
                let expected = if wrong(me) != wrong(0) {
                    matches!(e, GatherError::Bounds { .. })
                } else if wrong(me).range(me).len() != local_rows {
                    matches!(e, GatherError::InputShape { .. })
                } else {
                    matches!(e, GatherError::Peer { rank, .. } if rank == l)
                };
                assert!(expected, "seed {seed}: new with bad bounds on rank {me} gave {e}");
            }
        }
        // The next call works.
        assert_eq!(
            bits(&table.gather(&b.ids).unwrap()),
            bits(&t.gather(&b.ids, 0).unwrap())
        );
    }
    // A large case, whose local calls run on the pool's threads where there is more than
    // one: Max and the gather are the single-process bits; every rank prints a digest of
    // its Sum and Mean, which the launcher compares between runs of one and three threads.
    let (n, w) = (20_000, 32);
    let t = whole(99, n, w);
    let rows = bounds(99, n, ranks);
    let local = t.slice_axis(Axis(0), rows.range(me).into()).to_owned();
    let table = ShardedTable::new(&world, local, rows).unwrap();
    let mut g = Lcg::new(1000 + me as u64);
    let ids: Vec<i64> = (0..60_000).map(|_| g.below(n) as i64).collect();
    let dst: Vec<i64> = (0..60_000).map(|_| g.below(5_000) as i64).collect();
    let starts: Vec<i64> = (0..6_000).map(|b| 10 * b as i64).collect();
    let weights: Vec<f32> = (0..60_000).map(|_| g.value()).collect();
    assert_eq!(
        bits(&table.gather(&ids).unwrap()),
        bits(&t.gather(&ids, 0).unwrap()),
        "large gather"
    );
    for segs in [Segments::starts(&starts), Segments::ids(&dst, 5_000)] {
        let (m, arg) = table.gather_reduce_arg(&ids, segs, Pooling::Max).unwrap();
        let (m1, arg1) = t.gather_reduce_arg(&ids, segs, 0, Pooling::Max).unwrap();
        assert_eq!((bits(&m), arg), (bits(&m1), arg1), "large max");
        for pool in [Pooling::Sum.into(), Pooling::Mean.weighted(&weights)] {
            let got = table.gather_reduce(&ids, segs, pool.clone()).unwrap();
            if ranks == 1 {
                let single = t.gather_reduce(&ids, segs, 0, pool).unwrap();
                assert_eq!(bits(&got), bits(&single), "large, one rank");
            }
            let digest = bits(&got).iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
            });
            println!("bits rank {me} of {ranks}: {digest:016x}");
        }
    }
    checked += crate::collections::run(&world);
    // Every rank ran the same number of checks (and none hung).
    let mut total = 0u64;
    world.all_reduce_into(&(checked as u64), &mut total, SystemOperation::sum());
    assert_eq!(total, checked as u64 * ranks as u64);
    if me == 0 {
        println!("rank 0 of {ranks}: {checked} gather-reduce cases, gathers and scatters of 12 tables agree");
    }
}

/// A sharded `QTable` (decision 48: each rank's rows stay quantized) against the
/// single-process `QTable` on the whole table: gathers, max / min and their argmax bit for
/// bit, every pooling on one rank bit for bit, and on several ranks decision 39's order
/// of the dequantized values within a rounding bound (an owner's partial is FBGEMM's fma
/// chain); a plan gives the calls' bits.
fn quantized(world: &impl Communicator, seed: u64, t: &Array2<f32>, rows: &Rows, b: &Batch) {
    use ndarray_gather::quant::{QTable, Rowwise};
    let (me, ranks) = (world.rank() as usize, world.size() as usize);
    let w = t.ncols();
    let layout = if w.is_multiple_of(2) && seed.is_multiple_of(2) {
        Rowwise::Int4
    } else {
        Rowwise::Int8
    };
    // (Half-float scales and biases hold magnitudes up to 65504: the 4-bit table's values
    // are scaled into them.)
    let t = if layout == Rowwise::Int4 {
        t.mapv(|v| v / 1024.0)
    } else {
        t.clone()
    };
    let q = layout.quantize(&t).unwrap();
    let whole = QTable::new(&q, layout).unwrap();
    let deq = layout.dequantize(&q).unwrap();
    let mine = q.slice_axis(Axis(0), rows.range(me).into()).to_owned();
    let table = ShardedTable::new(world, QTable::new(&mine, layout).unwrap(), rows.clone()).unwrap();
    assert_eq!(table.shape(), &[t.nrows(), w]);
    let label = format!("seed {seed} ranks {ranks} {layout:?}");
    assert_eq!(
        bits(&table.gather(&b.ids).unwrap()),
        bits(&whole.gather(&b.ids).unwrap()),
        "{label}: gather"
    );
    let plan = table.plan(&b.ids, b.segments()).unwrap();
    for pooling in [
        Pooling::Sum,
        Pooling::Mean,
        Pooling::Max,
        Pooling::Min,
        Pooling::Prod,
    ] {
        let got = table.gather_reduce(&b.ids, b.segments(), pooling).unwrap();
        assert_eq!(
            bits(&plan.apply(&table, pooling).unwrap()),
            bits(&got),
            "{label} {pooling:?}: plan"
        );
        let single = whole.gather_reduce(&b.ids, b.segments(), pooling).unwrap();
        if ranks == 1 || matches!(pooling, Pooling::Max | Pooling::Min) {
            assert_eq!(
                bits(&got),
                bits(&single),
                "{label} {pooling:?}: the single-process bits"
            );
        } else if pooling != Pooling::Prod {
            // (Each position rounds at its row's magnitude, its bias and range: FBGEMM adds
            // `w * bias` to the sum before the fma.)
            let naive = two_level(&deq, rows, b, pooling, false, None, 0.0);
            let row_max = deq.map_axis(Axis(1), |r| r.iter().fold(0.0f32, |m, v| m.max(v.abs())));
            let mags = Array2::from_shape_fn(deq.dim(), |(r, _)| row_max[r]);
            let scale = two_level(&mags, rows, b, Pooling::Sum, false, None, 0.0);
            for ((g, n), s) in got.iter().zip(&naive).zip(&scale) {
                assert!(
                    (g - n).abs() <= 1e-6 * s + 1e-6,
                    "{label} {pooling:?}: {g} against {n}"
                );
            }
        }
        if matches!(pooling, Pooling::Max | Pooling::Min) {
            let (m, arg) = table.gather_reduce_arg(&b.ids, b.segments(), pooling).unwrap();
            let (m1, arg1) = whole.gather_reduce_arg(&b.ids, b.segments(), pooling).unwrap();
            assert_eq!((bits(&m), arg), (bits(&m1), arg1), "{label} {pooling:?}: arg");
        }
    }
}
