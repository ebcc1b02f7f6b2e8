//! Sharded collections (decisions 61-65) on every rank: every placement mixed in one
//! model against the single-process `Collection` (bits; row-wise against decision 39's
//! two-level order), the step against the single-process step of every rank's batch back
//! to back (bits; a replicated table's rank-order sum), errors on one rank only.

use mpi::traits::*;
use ndarray::{Array2, s};
use ndarray_gather::bags::{Collection, Jagged};
use ndarray_gather::optim::{Adagrad, Optimizer, Sgd};
use ndarray_gather::prelude::*;
use ndarray_gather::shard::{Placement, Planner, Rows, ShardedCollection};

use crate::checks::{Batch, Lcg, bits, bounds, two_level, whole};

/// Table shapes: a row-wise table, a column-wise one, a table-wise one, a replicated one,
/// and a second row-wise one.
const TABLES: [(usize, usize); 5] = [(40, 6), (12, 5), (9, 3), (7, 2), (30, 4)];

/// One rank's batch: `(values, lengths, weights, batch size)`, ids anywhere in `-n..n`
/// of each feature's table, some `-1` (skipped by the features that skip).
struct Ids {
    values: Vec<i64>,
    lengths: Vec<i64>,
    weights: Vec<f32>,
    batch: usize,
}

impl Ids {
    fn of(seed: u64, rank: usize, model: &[(usize, &str)]) -> Ids {
        let mut g = Lcg::new(seed * 7919 + rank as u64);
        let batch = g.below(5);
        let (mut values, mut lengths) = (Vec::new(), Vec::new());
        for &(t, _) in model {
            let n = TABLES[t].0;
            for _ in 0..batch {
                let len = g.below(5);
                lengths.push(len as i64);
                values.extend((0..len).map(|_| g.below(2 * n) as i64 - n as i64));
            }
        }
        let weights = (0..values.len()).map(|_| g.value()).collect();
        Ids {
            values,
            lengths,
            weights,
            batch,
        }
    }

    fn jagged(&self) -> Jagged<'_, i64> {
        Jagged::lengths(&self.values, &self.lengths, self.batch)
            .unwrap()
            .weighted(&self.weights)
    }

    /// Feature `f`'s ids, weights and bags' lengths.
    fn feature(&self, f: usize) -> (Vec<i64>, Vec<f32>, Vec<i64>) {
        let b = self.batch;
        let start: i64 = self.lengths[..f * b].iter().sum();
        let lens = self.lengths[f * b..(f + 1) * b].to_vec();
        let end = start + lens.iter().sum::<i64>();
        let r = start as usize..end as usize;
        (self.values[r.clone()].to_vec(), self.weights[r].to_vec(), lens)
    }
}

/// Every rank's batches back to back in rank order (feature-major), as one batch.
fn concatenated(all: &[Ids], features: usize) -> Ids {
    let (mut values, mut lengths, mut weights) = (Vec::new(), Vec::new(), Vec::new());
    for f in 0..features {
        for ids in all {
            let (v, w, l) = ids.feature(f);
            values.extend(v);
            weights.extend(w);
            lengths.extend(l);
        }
    }
    Ids {
        values,
        lengths,
        weights,
        batch: all.iter().map(|i| i.batch).sum(),
    }
}

/// The features: `(table, pooling)`; `w` weighted, `s` skipping -1, `f` filling 7.
fn build(features: &[(usize, &str)]) -> Collection {
    let mut model = Collection::new();
    for &(n, d) in &TABLES {
        model = model.table(n, d);
    }
    for &(t, p) in features {
        let pooling: Pooling = p.trim_end_matches(['w', 's', 'f']).parse().unwrap();
        let mut pool: Pool<'static, f32> = pooling.into();
        if p.ends_with('s') {
            pool = pool.skip(-1);
        }
        if p.ends_with('f') {
            pool = pool.fill(7.0);
        }
        model = match p.ends_with('w') {
            true => model.weighted_feature(t, pool),
            false => model.feature(t, pool),
        };
    }
    model
}

/// The placements of case `seed` on `ranks` ranks.
fn placements(seed: u64, ranks: usize) -> Vec<Placement> {
    let r = |k: usize| (seed as usize + k) % ranks;
    vec![
        Placement::Rows(bounds(seed, TABLES[0].0, ranks)),
        Placement::Columns(vec![(r(1), 0..2), (r(2), 2..3), (r(0), 3..5)]),
        Placement::Table(r(3)),
        Placement::Replicated,
        Placement::Rows(Rows::even(TABLES[4].0, ranks)),
    ]
}

fn blocks(
    model: &Collection,
    placements: &[Placement],
    me: usize,
    tables: &[Array2<f32>],
) -> Vec<Array2<f32>> {
    Placement::shards(placements, model, me)
        .iter()
        .map(|s| {
            tables[s.table]
                .slice(s![s.rows.clone(), s.cols.clone()])
                .to_owned()
        })
        .collect()
}

pub fn run(world: &impl Communicator) -> usize {
    let (me, ranks) = (world.rank() as usize, world.size() as usize);
    let mut checked = 0;
    let forward: [(usize, &str); 10] = [
        (0, "sum"),
        (1, "mean"),
        (2, "sums"),
        (3, "max"),
        (0, "meanw"),
        (1, "sumw"),
        (4, "sqrtnw"),
        (4, "max"),
        (0, "prod"),
        (2, "minf"),
    ];
    for seed in 1..=6u64 {
        let tables: Vec<Array2<f32>> = (0..TABLES.len())
            .map(|t| whole(seed * 10 + t as u64, TABLES[t].0, TABLES[t].1))
            .collect();
        let placements = placements(seed, ranks);
        let model = build(&forward);
        let sc = ShardedCollection::new(
            world,
            &model,
            &placements,
            blocks(&model, &placements, me, &tables),
        )
        .unwrap();
        let ids = Ids::of(seed, me, &forward);
        let out = sc.gather_reduce(&ids.jagged()).unwrap();
        let single = model.gather_reduce(&tables, &ids.jagged()).unwrap();
        let mut at = 0;
        for (f, &(t, p)) in forward.iter().enumerate() {
            let d = TABLES[t].1;
            let got = out.slice(s![.., at..at + d]).to_owned();
            let rowwise =
                matches!(placements[t], Placement::Rows(_)) && !p.starts_with("max") && !p.starts_with("min");
            let want = if rowwise && ranks > 1 {
                let Placement::Rows(rows) = &placements[t] else {
                    unreachable!()
                };
                let (v, w, l) = ids.feature(f);
                let b = Batch {
                    ids: v,
                    seg: l,
                    kind: 2,
                    count: ids.batch,
                    weights: w,
                };
                let pooling: Pooling = p.trim_end_matches(['w', 's', 'f']).parse().unwrap();
                two_level(&tables[t], rows, &b, pooling, p.ends_with('w'), None, 0.0)
            } else {
                single.slice(s![.., at..at + d]).to_owned()
            };
            assert_eq!(
                bits(&got),
                bits(&want),
                "seed {seed}: feature {f} ({p} of table {t}) on rank {me}"
            );
            at += d;
        }
        let plan = sc.plan(&ids.jagged()).unwrap();
        assert_eq!(
            bits(&plan.apply(&sc).unwrap()),
            bits(&out),
            "seed {seed}: the plan's apply"
        );
        checked += 1;

        // The step: a model with backwards only, Sgd and Adagrad, three steps.
        let trained: [(usize, &str); 8] = [
            (0, "sum"),
            (1, "mean"),
            (2, "sums"),
            (3, "sum"),
            (0, "meanw"),
            (1, "sumw"),
            (4, "sqrtnw"),
            (3, "meanw"),
        ];
        let model = build(&trained);
        let mut sc = ShardedCollection::new(
            world,
            &model,
            &placements,
            blocks(&model, &placements, me, &tables),
        )
        .unwrap();
        let all: Vec<Ids> = (0..ranks).map(|r| Ids::of(seed + 100, r, &trained)).collect();
        let every = concatenated(&all, trained.len());
        let mut reference = tables.clone();
        let lr = 0.25;
        let shards = Placement::shards(&placements, &model, me);
        let mut opts: Vec<Box<dyn Optimizer>> = shards
            .iter()
            .map(|s| -> Box<dyn Optimizer> {
                match s.table {
                    1 | 4 => Box::new(Adagrad::new((s.rows.len(), s.cols.len()), lr)),
                    _ => Box::new(Sgd::new(lr)),
                }
            })
            .collect();
        let mut ref_opts: Vec<Box<dyn Optimizer>> = TABLES
            .iter()
            .enumerate()
            .map(|(t, &(n, d))| -> Box<dyn Optimizer> {
                match t {
                    1 | 4 => Box::new(Adagrad::new((n, d), lr)),
                    _ => Box::new(Sgd::new(lr)),
                }
            })
            .collect();
        for step in 0..3 {
            let mut g = Lcg::new(seed + step);
            let grads: Vec<Array2<f32>> = all
                .iter()
                .map(|i| Array2::from_shape_simple_fn((i.batch, model.width()), || g.value()))
                .collect();
            let plan = sc.plan(&all[me].jagged()).unwrap();
            plan.step(&grads[me], &mut sc, &mut opts).unwrap();
            // The single-process step of every batch back to back, but the replicated
            // table (3), stepped by every rank's rows summed in rank order.
            let whole_grad = ndarray::concatenate(
                ndarray::Axis(0),
                &grads.iter().map(|g| g.view()).collect::<Vec<_>>(),
            )
            .unwrap();
            let before = reference[3].clone();
            let single = model.plan(&every.jagged()).unwrap();
            single.step(&whole_grad, &mut reference, &mut ref_opts).unwrap();
            reference[3] = before;
            let mut sum: Option<Array2<f32>> = None;
            for (r, i) in all.iter().enumerate() {
                let rows = model.plan(&i.jagged()).unwrap().backward_rows(&grads[r]).unwrap();
                let mut dense = Array2::from_elem(TABLES[3], f32::NAN);
                for (k, &row) in rows[3].0.iter().enumerate() {
                    dense.row_mut(row).assign(&rows[3].1.row(k));
                }
                sum = Some(match sum {
                    None => dense,
                    Some(a) => ndarray::Zip::from(&a).and(&dense).map_collect(|&a, &x| {
                        match (a.is_nan(), x.is_nan()) {
                            (true, _) => x,
                            (false, true) => a,
                            _ => a + x,
                        }
                    }),
                });
            }
            if let Some(sum) = &sum {
                ndarray::Zip::from(&mut reference[3]).and(sum).for_each(|w, &g| {
                    if !g.is_nan() {
                        *w -= lr * g;
                    }
                });
            }
            // backward_rows: each block's touched rows, as the step used them.
            let got = plan.backward_rows(&grads[me], &sc).unwrap();
            let want = single.backward_rows(&whole_grad).unwrap();
            for (k, s) in shards.iter().enumerate() {
                let (rows, g): (Vec<usize>, Vec<f32>) = match s.table {
                    3 => {
                        let sum = sum.as_ref().unwrap();
                        let rows: Vec<usize> = (0..sum.nrows()).filter(|&r| !sum[[r, 0]].is_nan()).collect();
                        let g = rows.iter().flat_map(|&r| sum.row(r).to_vec()).collect();
                        (rows, g)
                    }
                    t => {
                        let (rows, grads) = &want[t];
                        let keep: Vec<usize> =
                            (0..rows.len()).filter(|&i| s.rows.contains(&rows[i])).collect();
                        let g = keep
                            .iter()
                            .flat_map(|&i| grads.slice(s![i, s.cols.clone()]).to_vec())
                            .collect();
                        (keep.iter().map(|&i| rows[i]).collect(), g)
                    }
                };
                assert_eq!(
                    got[k].0.to_vec(),
                    rows,
                    "seed {seed}: backward_rows' rows of block {k}"
                );
                let found: Vec<u32> = got[k].1.iter().map(|v| v.to_bits()).collect();
                let expected: Vec<u32> = g.iter().map(|v| v.to_bits()).collect();
                assert_eq!(found, expected, "seed {seed}: backward_rows of block {k}");
            }
            for (k, s) in shards.iter().enumerate() {
                let want = reference[s.table]
                    .slice(s![s.rows.clone(), s.cols.clone()])
                    .to_owned();
                assert_eq!(
                    bits(&sc.local_blocks()[k]),
                    bits(&want),
                    "seed {seed}, step {step}: block {k} (table {}) on rank {me}",
                    s.table
                );
            }
        }
        checked += 1;

        // Errors on one rank only: every rank errs, nothing moves, the next call works.
        let bad = seed as usize % ranks;
        let mut broken = Ids::of(seed + 100, me, &trained);
        if me == bad && !broken.values.is_empty() {
            broken.values[0] = 1000;
        }
        let plan = sc.plan(&all[me].jagged()).unwrap();
        let e = sc.plan(&broken.jagged());
        let any_bad = {
            let flag = u64::from(me == bad && !broken.values.is_empty());
            let mut total = 0u64;
            world.all_reduce_into(&flag, &mut total, mpi::collective::SystemOperation::sum());
            total > 0
        };
        match (any_bad, e) {
            (false, Ok(_)) => {}
            (true, Err(GatherError::Feature { .. })) if me == bad => {}
            (true, Err(GatherError::Peer { rank, .. })) if me != bad => assert_eq!(rank, bad),
            (_, other) => panic!("seed {seed}: a bad id on rank {bad} gave {other:?} on rank {me}"),
        }
        let before: Vec<Array2<f32>> = sc.local_blocks().to_vec();
        let mut wrong: Vec<Box<dyn Optimizer>> = shards
            .iter()
            .map(|s| -> Box<dyn Optimizer> {
                Box::new(Adagrad::new(
                    (s.rows.len(), s.cols.len() + usize::from(me == bad)),
                    lr,
                ))
            })
            .collect();
        let g = Array2::<f32>::ones((all[me].batch, model.width()));
        let e = plan.step(&g, &mut sc, &mut wrong);
        let bad_state = any_rank(world, me == bad && !shards.is_empty());
        assert_eq!(
            e.is_err(),
            bad_state,
            "seed {seed}: a wrong state on rank {bad}: {e:?}"
        );
        for (k, b) in sc.local_blocks().iter().enumerate() {
            assert_eq!(
                bits(b),
                bits(&before[k]),
                "seed {seed}: a refused step changed block {k}"
            );
        }
        let e = plan.step(
            &Array2::<f32>::ones((all[me].batch + usize::from(me == bad), model.width())),
            &mut sc,
            &mut opts,
        );
        assert!(
            peer_or(&e, me, bad, |e| matches!(e, GatherError::GradShape { .. })),
            "seed {seed}: a gradient of another shape on rank {bad}: {e:?}"
        );
        plan.step(&g, &mut sc, &mut opts).unwrap();
        // A batch of another number of features, or without the weights its weighted
        // features read, on one rank: every rank errs; an empty batch on one rank serves.
        let few = Jagged::lengths(&[0_i64], &[1_i64], 1).unwrap();
        let mine = all[me].jagged();
        let e = sc.gather_reduce(if me == bad { &few } else { &mine });
        let collection = |e: &GatherError| matches!(e, GatherError::Collection { .. });
        assert!(
            peer_or(&e, me, bad, collection),
            "seed {seed}: a batch of one feature on rank {bad}: {e:?}"
        );
        let unweighted = Jagged::lengths(&all[me].values, &all[me].lengths, all[me].batch).unwrap();
        let e = sc.gather_reduce(if me == bad { &unweighted } else { &mine });
        assert!(
            peer_or(&e, me, bad, collection),
            "seed {seed}: no weights on rank {bad}: {e:?}"
        );
        let empty = Jagged::lengths(&[0_i64; 0], &[0_i64; 0], 0)
            .unwrap()
            .weighted(&[]);
        let out = sc.gather_reduce(if me == bad { &empty } else { &mine }).unwrap();
        assert_eq!(
            out.dim(),
            (if me == bad { 0 } else { all[me].batch }, model.width())
        );
        checked += 1;
    }

    // Placements that do not fit, and a block of another shape, on one rank.
    let model = build(&[(0, "sum")]);
    let tables: Vec<Array2<f32>> = TABLES.iter().map(|&(n, d)| Array2::zeros((n, d))).collect();
    let good = placements(1, ranks);
    let mut wrong = good.clone();
    if me == ranks - 1 {
        wrong[2] = Placement::Table(ranks);
    }
    let e = ShardedCollection::new(world, &model, &wrong, blocks(&model, &good, me, &tables));
    assert!(e.is_err(), "a placement on a rank that is not there");
    let mut local = blocks(&model, &good, me, &tables);
    if me == 0 {
        local[0] = Array2::zeros((1, 1));
    }
    assert!(
        ShardedCollection::new(world, &model, &good, local).is_err(),
        "a block of another shape"
    );
    let mut cols = good.clone();
    cols[1] = Placement::Columns(vec![(0, 0..2), (0, 3..5)]);
    assert!(ShardedCollection::new(world, &model, &cols, blocks(&model, &good, me, &tables)).is_err());
    checked
        + 1
        + planner(world, &forward)
        + quantized(
            world,
            &build(&[(0, "max"), (2, "sum"), (3, "mean"), (4, "sum"), (0, "sum")]),
        )
}

/// The planner: deterministic (the same placements on every rank, call after call),
/// within its memory cap, and its placements serve; infeasible inputs are errors.
fn planner(world: &impl Communicator, features: &[(usize, &str)]) -> usize {
    let model = &build(features);
    let (me, ranks) = (world.rank() as usize, world.size() as usize);
    // The tables hold 1844 bytes; Adagrad's state doubles them.
    let planner = Planner::new(ranks)
        .memory_per_rank(4000)
        .batch(4)
        .ids_per_bag(&[2.0; 10])
        .optimizer_bytes_per_row(8);
    let placements = planner.plan(model).unwrap();
    assert_eq!(placements, planner.plan(model).unwrap());
    let text = format!("{placements:?}");
    let digest = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let (mut low, mut high) = (0u64, 0u64);
    world.all_reduce_into(&digest, &mut low, mpi::collective::SystemOperation::min());
    world.all_reduce_into(&digest, &mut high, mpi::collective::SystemOperation::max());
    assert_eq!(low, high, "the planner's placements differ between ranks");
    let estimate = planner.estimate(model, &placements).unwrap();
    assert!(estimate.iter().all(|e| e.memory <= 4000), "{estimate:?}");
    // A cap that only a split meets: the 960-byte row-wise table split (on two ranks the
    // 1844 bytes fit no way: an error naming a table).
    if ranks > 1 {
        let tight = Planner::new(ranks).memory_per_rank(900).batch(4);
        match tight.plan(model) {
            Ok(p) => {
                assert!(
                    !matches!(p[0], Placement::Table(_) | Placement::Replicated),
                    "{p:?}"
                );
                assert!(tight.estimate(model, &p).unwrap().iter().all(|e| e.memory <= 900));
            }
            Err(e) => assert!(ranks == 2 && e.to_string().contains("fits no rank"), "{e}"),
        }
    }
    let e = Planner::new(ranks).memory_per_rank(10).plan(model).unwrap_err();
    assert!(e.to_string().contains("fits no rank"), "{e}");
    assert!(Planner::new(ranks).ids_per_bag(&[1.0]).plan(model).is_err());
    assert!(planner.estimate(model, &placements[1..]).is_err());
    // The planner's placements serve.
    let tables: Vec<Array2<f32>> = TABLES
        .iter()
        .enumerate()
        .map(|(t, &(n, d))| whole(77 + t as u64, n, d))
        .collect();
    let sc =
        ShardedCollection::new(world, model, &placements, blocks(model, &placements, me, &tables)).unwrap();
    let ids = Ids::of(5, me, features);
    let single = model.gather_reduce(&tables, &ids.jagged()).unwrap();
    let out = sc.gather_reduce(&ids.jagged()).unwrap();
    if ranks == 1 {
        assert_eq!(bits(&out), bits(&single), "the planner's placements on one rank");
    }
    1
}

/// `QTable` blocks serve (decision 61): each table quantized whole, each rank's rows of
/// it as its blocks, against the single-process collection on the whole `QTable`s.
fn quantized(world: &impl Communicator, model: &Collection) -> usize {
    use ndarray_gather::bags::Table;
    use ndarray_gather::quant::{QTable, Rowwise};
    let (me, ranks) = (world.rank() as usize, world.size() as usize);
    let placements = vec![
        Placement::Rows(bounds(3, TABLES[0].0, ranks)),
        Placement::Table(0),
        Placement::Table(ranks - 1),
        Placement::Replicated,
        Placement::Rows(Rows::even(TABLES[4].0, ranks)),
    ];
    let bytes: Vec<Array2<u8>> = TABLES
        .iter()
        .enumerate()
        .map(|(t, &(n, d))| Rowwise::Int8.quantize(&whole(300 + t as u64, n, d)).unwrap())
        .collect();
    let shards = Placement::shards(&placements, model, me);
    let local: Vec<QTable<'_>> = shards
        .iter()
        .map(|s| QTable::new(bytes[s.table].slice(s![s.rows.clone(), ..]), Rowwise::Int8).unwrap())
        .collect();
    let sc = ShardedCollection::new(world, model, &placements, local).unwrap();
    let features = [(0, "max"), (2, "sum"), (3, "mean"), (4, "sum"), (0, "sum")];
    let ids = Ids::of(9, me, &features);
    let out = sc.gather_reduce(&ids.jagged()).unwrap();
    let whole: Vec<Table<'_>> = bytes
        .iter()
        .map(|b| Table::from(QTable::new(b, Rowwise::Int8).unwrap()))
        .collect();
    let single = model.gather_reduce(&whole, &ids.jagged()).unwrap();
    let mut at = 0;
    for (f, &(t, p)) in features.iter().enumerate() {
        let d = TABLES[t].1;
        let exact = ranks == 1 || !matches!(placements[t], Placement::Rows(_)) || p == "max";
        if exact {
            assert_eq!(
                bits(&out.slice(s![.., at..at + d]).to_owned()),
                bits(&single.slice(s![.., at..at + d]).to_owned()),
                "quantized feature {f} ({p} of table {t})"
            );
        } else {
            // (Mixed magnitudes cancel: the bound is relative to the feature's largest.)
            let want = single.slice(s![.., at..at + d]);
            let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
            let close = out
                .slice(s![.., at..at + d])
                .iter()
                .zip(want)
                .all(|(a, b)| (a - b).abs() <= 1e-4 * scale);
            assert!(
                close,
                "quantized feature {f} ({p} of table {t}): far from the single-process sum"
            );
        }
        at += d;
    }
    1
}

/// Whether `e` is what rank `me` gets when only rank `bad`'s input is bad: the bad
/// rank's own error (`own`), the others' `Peer` naming it.
fn peer_or<T>(e: &Result<T, GatherError>, me: usize, bad: usize, own: impl Fn(&GatherError) -> bool) -> bool {
    match e {
        Err(e) if me == bad => own(e),
        Err(GatherError::Peer { rank, .. }) => *rank == bad,
        _ => false,
    }
}

/// Whether `flag` holds on any rank.
fn any_rank(world: &impl Communicator, flag: bool) -> bool {
    let mut total = 0u64;
    world.all_reduce_into(
        &u64::from(flag),
        &mut total,
        mpi::collective::SystemOperation::sum(),
    );
    total > 0
}
