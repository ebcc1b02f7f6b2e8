//! A [`Collection`] sharded per table over the ranks ([`ShardedCollection`], decisions
//! 61-65): each table table-wise, column-wise, row-wise or replicated, one exchange of ids
//! per call for every feature, and the pooled rows (or row-wise partials) back.

use std::cell::{Cell, RefCell};

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence, Root};
use ndarray::{Array2, ArrayRef, Ix2};

use super::Traffic;
use super::exchange::{Received, agree, exchange};
use super::placement::{Layout, Placement};
use crate::bags::{AsTable, Collection, Jagged};
use crate::error::GatherError;
use crate::index::GatherIndex;
use crate::plan::policy::SHARD_CHUNK_ELEMENTS;

pub use super::collection_plan::ShardedCollectionPlan;

/// A [`Collection`] whose tables are sharded over the ranks of an MPI communicator, each by
/// its own [`Placement`] (TorchRec's `ShardedEmbeddingBagCollection` on CPU: decisions
/// 61-65). This rank holds its blocks (`B`: `Array2<f32>` to train, views or
/// [`QTable`](crate::quant::QTable)s to serve), in [`Placement::shards`] order.
///
/// Every call is collective: every rank calls it, in the same order, with its own batch
/// (TorchRec's data-parallel input), and gets its own `[B_rank, Σ D_f]`. A call's ids
/// travel to their owners in one exchange for every feature; each owner pools its
/// features with the single-process collection (a table-wise, column-wise or replicated
/// feature is bit for bit the single-process `Collection` call; a row-wise one follows
/// decision 39: each owner's partial, combined in rank order); the pooled rows travel back
/// in one more. Errors are collective and all-or-nothing (decision 40).
///
/// ```no_run
/// use ndarray::Array2;
/// use ndarray_gather::bags::{Collection, Jagged};
/// use ndarray_gather::prelude::*;
/// use ndarray_gather::shard::{Placement, Rows, ShardedCollection, mpi};
/// use mpi::traits::*;
///
/// let universe = mpi::initialize().unwrap();
/// let world = universe.world();
/// let (ranks, me) = (world.size() as usize, world.rank() as usize);
/// let model = Collection::new().table(1000, 8).table(50, 4).feature(0, Pooling::Sum).feature(1, Pooling::Mean);
/// let placements = vec![Placement::Rows(Rows::even(1000, ranks)), Placement::Table(ranks - 1)];
/// let blocks: Vec<Array2<f32>> = Placement::shards(&placements, &model, me)
///     .iter()
///     .map(|s| Array2::from_elem((s.rows.len(), s.cols.len()), 0.5))
///     .collect();
/// let sc = ShardedCollection::new(&world, &model, &placements, blocks)?;
/// // This rank's two samples: feature 0's bags hold 2 and 1 ids, feature 1's 1 and 0.
/// let batch = Jagged::lengths(&[3_i64, 999, 7, 42], &[2_i64, 1, 1, 0], 2)?;
/// let out = sc.gather_reduce(&batch)?;
/// assert_eq!(out.dim(), (2, 8 + 4));
/// # Ok::<(), GatherError>(())
/// ```
pub struct ShardedCollection<'c, C: Communicator, B = Array2<f32>> {
    pub(super) comm: &'c C,
    pub(super) model: Collection,
    pub(super) placements: Vec<Placement>,
    pub(super) layout: Layout,
    pub(super) blocks: Vec<B>,
    pub(super) traffic: Cell<Traffic>,
    /// The most elements one round of an exchange moves per rank.
    pub(super) chunk: usize,
    /// The buffers of the last call, kept for the next: no fresh pages.
    pub(super) spare: RefCell<Kept>,
}

impl<'c, C, B> ShardedCollection<'c, C, B>
where
    C: Communicator + CommunicatorCollectives,
    B: AsTable,
{
    /// The collection `model` sharded by `placements` (one per table), this rank holding
    /// `local`: its blocks in [`Placement::shards`] order (`f32` arrays or views, or
    /// `QTable`s to serve). Collective.
    ///
    /// # Errors
    /// On every rank, if any rank's input is bad: [`Collection`](GatherError::Collection)
    /// naming the table whose placement does not fit it (a rank beyond the communicator's,
    /// rows of another count, column ranges that do not cover its columns once), or the
    /// block of another shape than its shard; [`RanksDisagree`](GatherError::RanksDisagree)
    /// for a model or placements other than rank 0's; [`Peer`](GatherError::Peer) on the
    /// other ranks.
    pub fn new(
        comm: &'c C,
        model: &Collection,
        placements: &[Placement],
        local: Vec<B>,
    ) -> Result<Self, GatherError> {
        const OP: &str = "ShardedCollection::new";
        let (ranks, me) = (comm.size() as usize, comm.rank() as usize);
        let layout = Layout::new(OP, model, placements, ranks, me).and_then(|layout| {
            check_blocks(OP, &layout, &local)?;
            Ok(layout)
        });
        // Rank 0's model and placements, which every rank must share.
        let mine = layout.as_ref().map(|l| l.signature.clone()).unwrap_or_default();
        let root = comm.process_at_rank(0);
        let mut len = mine.len() as u64;
        root.broadcast_into(&mut len);
        let mut theirs = if me == 0 {
            mine.clone()
        } else {
            vec![0; len as usize]
        };
        root.broadcast_into(&mut theirs[..]);
        let layout = layout.and_then(|l| match theirs == mine {
            true => Ok(l),
            false => Err(GatherError::RanksDisagree {
                op: OP,
                detail:
                    "this rank's collection or placements differ from rank 0's (every rank passes the same)"
                        .into(),
            }),
        });
        let layout = agree(comm, OP, layout)?;
        Ok(ShardedCollection {
            comm,
            model: model.clone(),
            placements: placements.to_vec(),
            layout,
            blocks: local,
            traffic: Cell::new(Traffic::default()),
            chunk: SHARD_CHUNK_ELEMENTS,
            spare: RefCell::default(),
        })
    }

    /// Every feature's pooled rows of this rank's `batch` side by side: `[B_rank, Σ D_f]`
    /// in `KeyedTensor` order (decision 62). Collective. The same as
    /// `self.plan(batch)?.apply(self)`, without the plan's training data.
    ///
    /// # Errors
    /// On every rank, if any rank's batch is bad: the bad rank's
    /// [`Feature`](GatherError::Feature) (naming the feature and its table) or
    /// [`Collection`](GatherError::Collection), [`Peer`](GatherError::Peer) elsewhere.
    pub fn gather_reduce<I: GatherIndex, J: GatherIndex>(
        &self,
        batch: &Jagged<'_, I, J>,
    ) -> Result<Array2<f32>, GatherError> {
        const OP: &str = "ShardedCollection::gather_reduce";
        let plan = ShardedCollectionPlan::build(self, OP, batch, false)?;
        let mut out = Array2::zeros((plan.batch(), self.model.width()));
        plan.apply_checked(self, OP, &mut out)?;
        Ok(out)
    }

    /// This rank's `batch` routed and checked once, with every owner's side of it
    /// (decision 43): `apply` it to this collection as its blocks change, `step` it.
    /// Collective.
    ///
    /// # Errors
    /// As [`gather_reduce`](Self::gather_reduce)'s.
    pub fn plan<I: GatherIndex, J: GatherIndex>(
        &self,
        batch: &Jagged<'_, I, J>,
    ) -> Result<ShardedCollectionPlan, GatherError> {
        ShardedCollectionPlan::build(self, "ShardedCollection::plan", batch, true)
    }
}

impl<C: Communicator, B> ShardedCollection<'_, C, B> {
    /// The bytes this rank sent to and received from the other ranks in its last call
    /// (decision 42).
    pub fn traffic(&self) -> Traffic {
        self.traffic.get()
    }

    /// This rank's blocks, in [`Placement::shards`] order.
    pub fn local_blocks(&self) -> &[B] {
        &self.blocks
    }

    /// This rank's blocks, to change their values (their shapes stay: a call checks them).
    pub fn local_blocks_mut(&mut self) -> &mut [B] {
        &mut self.blocks
    }

    /// The placements, one per table.
    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }

    /// The collection.
    pub fn model(&self) -> &Collection {
        &self.model
    }

    /// The most elements one round of an exchange moves per rank. For tests of the rounds.
    #[doc(hidden)]
    pub fn with_chunk_elements(mut self, elements: usize) -> Self {
        self.chunk = elements.max(1);
        self
    }
}

/// A collection's buffers between calls: an owner's pooled rows, the rows received, and
/// the routing's words and floats (per rank, then each message sent and received).
#[derive(Default)]
pub(super) struct Kept {
    pub pooled: Vec<f32>,
    pub rows_in: Vec<f32>,
    pub words: (Vec<u64>, Vec<u64>),
    pub floats: (Vec<f32>, Vec<f32>),
    /// The routing's words and floats to each rank, before they are one message.
    pub parts: (Vec<Vec<u64>>, Vec<Vec<f32>>),
}

/// This rank's blocks against its shards: their number and shapes.
pub(super) fn check_blocks<B: AsTable>(
    op: &'static str,
    layout: &Layout,
    local: &[B],
) -> Result<(), GatherError> {
    if local.len() != layout.local.len() {
        return Err(GatherError::Collection {
            op,
            detail: format!(
                "this rank holds {} blocks (Placement::shards), but {} were given",
                layout.local.len(),
                local.len()
            ),
        });
    }
    for (k, (&b, block)) in layout.local.iter().zip(local).enumerate() {
        let s = &layout.blocks[b].shard;
        let want = (s.rows.len(), s.cols.len());
        let found = block.as_table().dim();
        if found != want {
            return Err(GatherError::Collection {
                op,
                detail: format!(
                    "block {k} (table {}, rows {:?}, columns {:?}) has shape {found:?}, but its shard is {want:?}",
                    s.table, s.rows, s.cols
                ),
            });
        }
    }
    Ok(())
}

/// `out`'s shape against `[batch, width]`.
pub(super) fn check_out(
    op: &'static str,
    out: &ArrayRef<f32, Ix2>,
    batch: usize,
    width: usize,
) -> Result<(), GatherError> {
    if out.shape() != [batch, width] {
        return Err(GatherError::OutputShape {
            op,
            expected: vec![batch, width],
            found: out.shape().to_vec(),
        });
    }
    Ok(())
}

/// `values` sent to every rank; every rank's received, in rank order.
pub(super) fn to_every_rank<C: CommunicatorCollectives, B, T: Equivalence + Copy + Default>(
    sc: &ShardedCollection<'_, C, B>,
    values: &[T],
    traffic: &mut Traffic,
) -> Received<T> {
    send_parts(sc, &vec![values.to_vec(); sc.comm.size() as usize], traffic)
}

/// `parts[r]` sent to each rank `r`; what every rank sent this one received, in rank order.
pub(super) fn send_parts<C: CommunicatorCollectives, B, T: Equivalence + Copy + Default>(
    sc: &ShardedCollection<'_, C, B>,
    parts: &[Vec<T>],
    traffic: &mut Traffic,
) -> Received<T> {
    send_kept(sc, parts, &mut (Vec::new(), Vec::new()), traffic)
}

/// [`send_parts`] through kept buffers (`kept`: the message sent, and the storage the
/// next one is received into, which the caller gives back).
pub(super) fn send_kept<C: CommunicatorCollectives, B, T: Equivalence + Copy + Default>(
    sc: &ShardedCollection<'_, C, B>,
    parts: &[Vec<T>],
    kept: &mut (Vec<T>, Vec<T>),
    traffic: &mut Traffic,
) -> Received<T> {
    let counts: Vec<usize> = parts.iter().map(Vec::len).collect();
    kept.0.clear();
    parts.iter().for_each(|p| kept.0.extend_from_slice(p));
    let into = std::mem::take(&mut kept.1);
    exchange(sc.comm, &kept.0, &counts, false, sc.chunk, traffic, into)
}
