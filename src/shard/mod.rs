//! Sharded tables (feature `mpi`): the same gathers, gather-reduces and scatters when a
//! table outgrows one machine, over the ranks of an MPI communicator (rsmpi).
//!
//! The table is sharded row-wise ([`Rows`]), as TorchRec's row-wise sharding does: each
//! rank holds a range of rows as its local array. Every call is collective (every rank of
//! the communicator calls it, in the same order, with its own batch): each rank's ids
//! travel to the ranks that own their rows once (an all-to-all of variable counts), the
//! owners gather or pool locally with this crate's own calls, and only the gathered rows
//! (a `gather`) or one pooled partial row per segment and owner (a `gather_reduce`) travel
//! back. Nothing is summed by MPI: the caller combines the owners' partials in increasing
//! rank order, so the results are the same bits run after run and on any thread count
//! (decision 39 of the API). Errors are collective and all-or-nothing: one small
//! all-reduce decides, before anything moves, whether every rank's input was good; if one
//! was not, every rank returns `Err` (the bad rank its own error, the others
//! [`GatherError::Peer`]) and nothing was written anywhere. Every rank pools the same
//! way (the same pooling, weighted or not, with or without the argmax: what travels
//! depends on it), each with its own weights; a rank whose call differs from rank 0's
//! gets a [`GatherError::RanksDisagree`] that says so. The crate re-exports [`mpi`]
//! (rsmpi), so a program names only `ndarray-gather` in its `Cargo.toml`.
//!
//! ```no_run
//! use ndarray_gather::shard::mpi;
//! use mpi::traits::*;
//! use ndarray::Array2;
//! use ndarray_gather::prelude::*;
//! use ndarray_gather::shard::{Rows, ShardedTable};
//!
//! let universe = mpi::initialize().unwrap();
//! let world = universe.world();
//! let (n, rank) = (1000, world.rank() as usize);
//! let rows = Rows::even(n, world.size() as usize);
//! // This rank's rows of the global [1000, 4] table.
//! let local = Array2::from_shape_fn((rows.range(rank).len(), 4), |(i, j)| (rows.range(rank).start + i + j) as f32);
//! let table = ShardedTable::new(&world, local, rows)?;
//! // Each rank pools its own bags; rows it does not hold come from their owners.
//! let bags = table.gather_reduce(&[3_i64, 999, 500, 7], Segments::starts(&[0, 2]), Pooling::Sum)?;
//! assert_eq!(bags.dim(), (2, 4));
//! # Ok::<(), GatherError>(())
//! ```
//!
//! Tests and examples run on one machine (`mpirun -n 2 cargo run --release --features mpi
//! --example sharded_bags`); `cargo test --features mpi` launches `mpirun -n 1..4` itself.

mod backward;
mod collection;
mod collection_apply;
mod collection_owner;
mod collection_plan;
mod collection_step;
mod combine;
mod exchange;
mod merge;
mod placement;
mod plan;
mod planner;
mod route;
mod rows;
mod scatter;
mod spare;

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

/// The `mpi` crate (rsmpi) this crate is built with (decision 68): `use
/// ndarray_gather::shard::mpi::traits::*;` and `mpi::initialize()` without a dependency of
/// your own, at the version the sharded calls take.
pub use ::mpi;

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence, Root};
use ndarray::{Array, ArrayD, ArrayRef, ArrayView1, Dimension, IxDyn};

pub use self::collection::{ShardedCollection, ShardedCollectionPlan};
use self::combine::Routed;
use self::exchange::{CallShape, agree, agree_pooled, exchange};
pub use self::placement::{Placement, Shard};
pub use self::plan::ShardedPlan;
pub use self::planner::{Estimate, Planner};
use self::route::{Route, lend};
pub use self::rows::Rows;
use self::spare::Spare;
use crate::call::into_dim;
use crate::call::reduce::{Out, check_pool, gather_reduce, resolve_rows};
use crate::error::{GatherError, internal};
use crate::index::GatherIndex;
use crate::indices::IndexArray;
use crate::layout::checked_len;
use crate::plan::policy::SHARD_CHUNK_ELEMENTS;
use crate::pool::{IntoPool, Pool, PoolElement};
use crate::rank::GatherRank;
use crate::segments::{Checked, Segments};
use crate::table::PoolTable;

/// The bytes a rank sent to and received from the other ranks in a sharded call (its ids,
/// weights, rows and partials; the counts and the error agreement, a few bytes per rank,
/// are left out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes sent to other ranks.
    pub sent: u64,
    /// Bytes received from other ranks.
    pub received: u64,
}

/// A table sharded row-wise over the ranks of an MPI communicator: this rank's rows
/// (`local`: an array of any layout, or a [`QTable`](crate::quant::QTable), whose rows
/// stay quantized), which rows every rank holds ([`Rows`]), and the calls, each
/// collective. See the [module](self) for how a call runs.
///
/// The elements are numbers: `A: PoolElement + Equivalence` (MPI sends them as they are).
/// A quantized table gathers and pools (its rows dequantized on their owner); scatters
/// and backwards write an array's rows.
pub struct ShardedTable<'c, C: Communicator, A, D: Dimension, T = Array<A, D>> {
    comm: &'c C,
    local: T,
    rows: Rows,
    /// The global shape: `n` rows of the local array's row shape.
    shape: Vec<usize>,
    traffic: Cell<Traffic>,
    /// The most elements one round of an exchange moves per rank.
    chunk: usize,
    /// The buffers of the last call, kept for the next.
    spare: RefCell<Spare<A>>,
    /// (The local rows' dimensions: `T`'s, as a `PoolTable<A, D>`.)
    dim: PhantomData<D>,
}

impl<'c, C, A, D, T> ShardedTable<'c, C, A, D, T>
where
    C: Communicator + CommunicatorCollectives,
    A: PoolElement + Equivalence + Copy + Default,
    D: Dimension,
    T: PoolTable<A, D>,
{
    /// This rank's share of a table of `rows`: `local` holds its rows
    /// (`rows.range(rank)`: an array of any layout, or a `QTable` of quantized rows, which
    /// stay quantized: `ShardedTable::new(&world, QTable::new(&bytes, Rowwise::Int8)?,
    /// rows)`, decision 48). Collective: every rank passes the same `rows` and row shape
    /// (checked against rank 0's), and a local table of its row count.
    ///
    /// # Errors
    /// On every rank, if any rank's input is bad: [`Bounds`](GatherError::Bounds) for
    /// bounds that are not for the communicator's ranks or differ from rank 0's,
    /// [`InputShape`](GatherError::InputShape) for a local array of another row count or
    /// row shape (or of rank 0), [`Peer`](GatherError::Peer) on the other ranks.
    pub fn new(comm: &'c C, local: T, rows: Rows) -> Result<Self, GatherError> {
        let op = "ShardedTable::new";
        let (size, me) = (comm.size() as usize, comm.rank() as usize);
        let dim = local.dim();
        let row_shape = dim.slice().get(1..).unwrap_or(&[]).to_vec();
        // Rank 0's bounds and row shape, which every rank must share.
        let mine: Vec<u64> = rows
            .bounds()
            .iter()
            .chain(&row_shape)
            .map(|&v| v as u64)
            .collect();
        let root = comm.process_at_rank(0);
        let mut header = [rows.bounds().len() as u64, row_shape.len() as u64];
        root.broadcast_into(&mut header[..]);
        let mut theirs = if me == 0 {
            mine.clone()
        } else {
            vec![0; (header[0] + header[1]) as usize]
        };
        root.broadcast_into(&mut theirs[..]);
        let checked = (|| {
            if rows.ranks() != size {
                return Err(GatherError::Bounds {
                    op,
                    entry: rows.ranks(),
                    value: rows.len(),
                    detail: format!(
                        "the rows have {} bounds, for {} ranks, but the communicator has {size}",
                        rows.ranks() + 1,
                        rows.ranks()
                    ),
                });
            }
            let nb = header[0] as usize;
            if let Some(e) = (0..rows.bounds().len()).find(|&e| Some(&mine[e]) != theirs.get(e)) {
                return Err(GatherError::Bounds {
                    op,
                    entry: e,
                    value: rows.bounds()[e],
                    detail: "it differs from rank 0's bound (every rank passes the same rows)".into(),
                });
            }
            let expected: Vec<usize> = std::iter::once(rows.range(me).len())
                .chain(theirs[nb..].iter().map(|&v| v as usize))
                .collect();
            if dim.ndim() == 0 || dim.slice() != &expected[..] {
                return Err(GatherError::InputShape {
                    op,
                    expected,
                    found: dim.slice().to_vec(),
                });
            }
            let shape: Vec<usize> = std::iter::once(rows.len())
                .chain(row_shape.iter().copied())
                .collect();
            checked_len(&shape, size_of::<A>()).ok_or_else(|| GatherError::SizeOverflow {
                op,
                shape: shape.clone(),
            })?;
            Ok(shape)
        })();
        let shape = agree(comm, op, checked)?;
        Ok(ShardedTable {
            comm,
            local,
            rows,
            shape,
            traffic: Cell::new(Traffic::default()),
            chunk: SHARD_CHUNK_ELEMENTS,
            spare: RefCell::new(Spare::default()),
            dim: PhantomData,
        })
    }

    /// Which rows each rank holds. (See [`traffic`](Self::traffic) for an example.)
    pub fn rows(&self) -> &Rows {
        &self.rows
    }

    /// This rank's rows. (See [`traffic`](Self::traffic) for an example.)
    pub fn local(&self) -> &T {
        &self.local
    }

    /// The global table's shape: `n` rows of the local rows' shape. (See [`traffic`](Self::traffic) for an example.)
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The bytes this rank sent to and received from the other ranks in its last call.
    ///
    /// ```no_run
    /// # use ndarray::Array2;
    /// # use ndarray_gather::prelude::*;
    /// # use ndarray_gather::shard::{Rows, ShardedTable};
    /// # let universe = mpi::initialize().unwrap();
    /// # let world = universe.world();
    /// # let rows = Rows::even(10, 1);
    /// let mut table = ShardedTable::new(&world, Array2::<f32>::zeros((10, 4)), rows)?;
    /// assert_eq!((table.shape(), table.rows().len(), table.local().nrows()), (&[10, 4][..], 10, 10));
    /// let bags = table.gather_reduce(&[1_i64, 9, 9], Segments::starts(&[0, 1]), Pooling::Sum)?;
    /// println!("sent {} bytes", table.traffic().sent); // ids and partials, this rank's
    /// // A training step: the gradient rows to their owners, then an update of the local rows.
    /// table.scatter(&[1_i64, 9, 9], &Array2::<f32>::ones((3, 4)), reduce::Add)?;
    /// table.local_mut().mapv_inplace(|v| v * 0.9);
    /// # let _ = bags;
    /// # Ok::<(), GatherError>(())
    /// ```
    pub fn traffic(&self) -> Traffic {
        self.traffic.get()
    }

    /// The most elements one round of an exchange moves per rank (MPI counts are 32-bit:
    /// larger exchanges run in rounds). For tests of the rounds.
    #[doc(hidden)]
    pub fn with_chunk_elements(mut self, elements: usize) -> Self {
        self.chunk = elements.max(1);
        self
    }

    /// The elements of one row.
    pub(super) fn row_len(&self) -> usize {
        self.shape[1..].iter().product()
    }

    /// The global rows at `indices` (any rank `q`): an array of shape
    /// `indices.shape() ++ row shape`, bit for bit the single-process
    /// `table.gather(&indices, 0)` on the whole table. Collective; rows travel from their
    /// owners.
    ///
    /// ```no_run
    /// # use ndarray::Array2;
    /// # use ndarray_gather::shard::{Rows, ShardedTable};
    /// # let universe = mpi::initialize().unwrap();
    /// # let world = universe.world();
    /// # let rows = Rows::even(1, 1);
    /// # let table = ShardedTable::new(&world, Array2::<f32>::zeros((1, 4)), rows)?;
    /// let emb: Array2<f32> = table.gather(&[0_i64, -1])?;
    /// assert_eq!(emb.dim(), (2, 4));
    /// # Ok::<(), ndarray_gather::GatherError>(())
    /// ```
    ///
    /// # Errors
    /// On every rank, if any rank's indices are bad: the bad rank's own error
    /// ([`IndexOutOfBounds`](GatherError::IndexOutOfBounds), ...), [`Peer`](GatherError::Peer)
    /// elsewhere.
    pub fn gather<I: GatherIndex, E: GatherRank<D>>(
        &self,
        indices: impl IndexArray<I, E>,
    ) -> Result<Array<A, E::Out>, GatherError> {
        let op = "ShardedTable::gather";
        let mut traffic = Traffic::default();
        let out = lend(self.comm, op, None, indices, |ix| {
            let shape: Vec<usize> = ix.shape().iter().chain(&self.shape[1..]).copied().collect();
            let local = self.route(op, ix, None).and_then(|route| {
                checked_len(&shape, size_of::<A>())
                    .map(|_| route)
                    .ok_or_else(|| GatherError::SizeOverflow {
                        op,
                        shape: shape.clone(),
                    })
            });
            let route = agree(self.comm, op, local)?;
            if self.rows.ranks() == 1 {
                // One rank holds the whole table: no routing.
                return self.local.gather_rows(ix);
            }
            let asked = self.send(&route.ids, &route.counts, false, &mut traffic, Vec::new());
            // The owner's side: the rows asked of it, in the order asked.
            // (A failure here, which the agreement rules out, still takes part in the
            // exchange below, with zeros, so that no rank waits alone.)
            let gathered = self.local.gather_rows(&ArrayView1::from(&asked.values[..]));
            let zeros;
            let (found, failed) = match gathered.as_ref().map(|f| f.as_slice()) {
                Ok(Some(f)) => (f, None),
                other => {
                    zeros = vec![A::zero(); asked.values.len() * self.row_len()];
                    let e = match other {
                        Err(e) => e.clone(),
                        _ => internal(op, "a fresh gather not in standard layout"),
                    };
                    (&zeros[..], Some(e))
                }
            };
            let w = self.row_len();
            let sizes: Vec<usize> = asked.counts.iter().map(|&c| c * w).collect();
            let got = self.send(found, &sizes, false, &mut traffic, Vec::new());
            if let Some(e) = failed {
                return Err(e);
            }
            let mut out = vec![A::zero(); shape.iter().product()];
            for o in 0..self.rows.ranks() {
                for (&p, row) in route.of(o).iter().zip(got.from(o).chunks(w.max(1))) {
                    out[p * w..(p + 1) * w].copy_from_slice(row);
                }
            }
            ArrayD::from_shape_vec(IxDyn(&shape), out)
                .map_err(|_| internal(op, "a gathered output of another size"))
        });
        self.traffic.set(traffic);
        into_dim(op, out?)
    }

    /// The gather-reduce of the global rows at `indices` (position `p` is the indices'
    /// `p`-th in row-major order) pooled by `segments`: an array of shape
    /// `[S] ++ row shape`. `Max` / `Min` are bit for bit the single-process
    /// `table.gather_reduce(&indices, segments, 0, pool)`; `Sum` / `Mean` / `SqrtN` /
    /// `Prod` combine each owner's partial (its positions in position order, from zero or
    /// one) in increasing rank order, then divide by the caller's own count or weight sums
    /// (decision 39): on one rank, the single-process bits. Collective; one partial row per
    /// segment and owner travels back, never the gathered rows.
    ///
    /// # Errors
    /// On every rank, if any rank's input is bad (indices, segments, pool, weights): the
    /// bad rank's own error, [`Peer`](GatherError::Peer) elsewhere.
    pub fn gather_reduce<'w, I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        pool: impl IntoPool<'w, A>,
    ) -> Result<Array<A, D>, GatherError>
    where
        A: 'w,
    {
        let op = "ShardedTable::gather_reduce";
        let (out, _) = self.reduce(op, indices, segments, pool.into_pool(), false)?;
        into_dim(op, out)
    }

    /// [`gather_reduce`](Self::gather_reduce) with `Max` / `Min` and, for each output
    /// element, the position its value came from (the single-process
    /// `gather_reduce_arg`'s, bit for bit: ties keep the first position, on any rank).
    ///
    /// # Errors
    /// As [`gather_reduce`](Self::gather_reduce), and a [`Pooling`](GatherError::Pooling)
    /// error for another pooling.
    #[allow(clippy::type_complexity)]
    pub fn gather_reduce_arg<'w, I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        pool: impl IntoPool<'w, A>,
    ) -> Result<(Array<A, D>, Array<usize, D>), GatherError>
    where
        A: 'w,
    {
        let op = "ShardedTable::gather_reduce_arg";
        let (out, arg) = self.reduce(op, indices, segments, pool.into_pool(), true)?;
        let arg = arg.ok_or_else(|| internal(op, "an argmax was asked for"))?;
        Ok((into_dim(op, out)?, into_dim(op, arg)?))
    }

    /// The run of `gather_reduce` and `gather_reduce_arg`.
    #[allow(clippy::type_complexity)]
    fn reduce<I: GatherIndex, E: Dimension, J: GatherIndex>(
        &self,
        op: &'static str,
        indices: impl IndexArray<I, E>,
        segments: Segments<'_, J>,
        pool: Pool<'_, A>,
        arg: bool,
    ) -> Result<(ArrayD<A>, Option<ArrayD<usize>>), GatherError> {
        let mut traffic = Traffic::default();
        let shape_of_call = CallShape::of(&pool, arg, self.row_len());
        let out = lend(self.comm, op, Some(shape_of_call), indices, |ix| {
            let positions = ix.len();
            // Segments, then the pool, then the indices: the order of the arguments.
            // One rank holds the whole table: the single-process call is the result
            // (decision 39), with no routing.
            let single = self.rows.ranks() == 1;
            let local = Checked::new(op, &segments, positions).and_then(|segs| {
                check_pool(op, &pool, positions, arg, None)?;
                let route = if single {
                    resolve_rows(op, ix, 0, self.rows.len(), pool.skip).map(|_| None)?
                } else {
                    Some(self.route(op, ix, pool.skip)?)
                };
                let shape: Vec<usize> = std::iter::once(segs.count())
                    .chain(self.shape[1..].iter().copied())
                    .collect();
                let size = size_of::<A>().max(size_of::<usize>());
                checked_len(&shape, size).ok_or_else(|| GatherError::SizeOverflow {
                    op,
                    shape: shape.clone(),
                })?;
                Ok((segs, route, shape))
            });
            let (segs, route, shape) = agree_pooled(self.comm, op, shape_of_call, local)?;
            let Some(route) = route else {
                return Ok(if arg {
                    let (m, a) =
                        gather_reduce(op, &self.local, ix, &segments, 0, pool, Out::Arg)?.with_arg(op)?;
                    (m.into_dyn(), Some(a.into_dyn()))
                } else {
                    let out =
                        gather_reduce(op, &self.local, ix, &segments, 0, pool, Out::Fresh)?.fresh(op)?;
                    (out.into_dyn(), None)
                });
            };
            let routed = Routed::new(self, &segs, route, false, &mut traffic);
            let out = routed
                .pool(self, op, pool, arg, shape, None, None, &mut traffic)
                .and_then(|(out, arg)| Ok((out.ok_or_else(|| internal(op, "a fresh output"))?, arg)));
            routed.give_back(&mut self.spare.borrow_mut());
            out
        });
        self.traffic.set(traffic);
        out
    }
}

impl<C: CommunicatorCollectives, A, D: Dimension, T> ShardedTable<'_, C, A, D, T> {
    /// [`exchange`] on this table's communicator, in its rounds: `values` (`counts[r]` to
    /// rank `r`) out, what every rank sent back (`keep_own`: this rank's block stays).
    fn send<V: Equivalence + Copy + Default>(
        &self,
        values: &[V],
        counts: &[usize],
        keep_own: bool,
        traffic: &mut Traffic,
        into: Vec<V>,
    ) -> exchange::Received<V> {
        exchange(self.comm, values, counts, keep_own, self.chunk, traffic, into)
    }
}

impl<C, A, D> ShardedTable<'_, C, A, D>
where
    C: Communicator,
    D: Dimension,
{
    /// This rank's rows, to change their values (a training step's update, as in
    /// [`traffic`](Self::traffic)'s example); their shape stays the table's.
    pub fn local_mut(&mut self) -> &mut ArrayRef<A, D> {
        &mut self.local
    }
}
