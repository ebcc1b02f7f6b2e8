//! Where a sharded call's positions go: each position's global row resolved and checked,
//! its owner found, and the positions grouped by owner ([`Route`]).

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use ndarray::{ArrayRef, Dimension};

use super::ShardedTable;
use super::exchange::{CallShape, agree, agree_pooled, offsets};
use crate::call::reduce::{resolve_rows, with_rows};
use crate::error::GatherError;
use crate::index::GatherIndex;
use crate::indices::IndexArray;
use crate::kernel::reduce::Row;
use crate::pool::PoolElement;
use crate::table::PoolTable;

/// Runs `body` on `indices` as ndarray's reference type; if they cannot be lent (`body`
/// never ran), this rank still takes its part in the agreement, with that error (the
/// pooled agreement for a pooled call, `pooled` its shape, as `body`'s would be).
pub(super) fn lend<C: Communicator, I: GatherIndex, E: Dimension, T>(
    comm: &C,
    op: &'static str,
    pooled: Option<CallShape>,
    indices: impl IndexArray<I, E>,
    body: impl FnOnce(&ArrayRef<I, E>) -> Result<T, GatherError>,
) -> Result<T, GatherError> {
    let mut ran = false;
    let out = indices.with_ref(op, |ix| {
        ran = true;
        body(ix)
    });
    match (ran, pooled) {
        (true, _) => out,
        (false, Some(shape)) => agree_pooled(comm, op, shape, out),
        (false, None) => agree(comm, op, out),
    }
}

/// Each position's owner and local row, grouped by owner (in position order within an
/// owner): what travels to the owners.
pub(super) struct Route {
    /// The positions each owner serves, owner by owner.
    pub positions: Vec<usize>,
    /// Their local rows on their owners.
    pub ids: Vec<u64>,
    /// How many positions each owner serves.
    pub counts: Vec<usize>,
    /// The number of positions, skipped ones included.
    pub total: usize,
}

impl Route {
    /// Where owner `o`'s positions start.
    pub fn start(&self, o: usize) -> usize {
        self.counts[..o].iter().sum()
    }

    /// Owner `o`'s positions.
    pub fn of(&self, o: usize) -> &[usize] {
        &self.positions[self.start(o)..][..self.counts[o]]
    }

    /// Owner `o`'s positions' local rows.
    pub fn ids_of(&self, o: usize) -> &[u64] {
        &self.ids[self.start(o)..][..self.counts[o]]
    }
}

impl<C, A, D, T> ShardedTable<'_, C, A, D, T>
where
    C: Communicator + CommunicatorCollectives,
    A: PoolElement + Equivalence + Copy + Default,
    D: Dimension,
    T: PoolTable<A, D>,
{
    /// The global rows of `indices` (negative ones from the end of `n`; `skip` left out)
    /// grouped by owner; or the error naming the first bad index. Local: no collective.
    pub(super) fn route<I: GatherIndex, E: Dimension>(
        &self,
        op: &'static str,
        indices: &ArrayRef<I, E>,
        skip: Option<i128>,
    ) -> Result<Route, GatherError> {
        let resolved = resolve_rows(op, indices, 0, self.rows.len(), skip)?;
        let mut spare = self.spare.borrow_mut();
        let bufs = (
            std::mem::take(&mut spare.positions),
            std::mem::take(&mut spare.ids),
        );
        Ok(with_rows!(resolved, r => self.bucket(r.rows, bufs)))
    }

    /// Positions grouped by the owner of their row (a stable counting sort), in the
    /// storage of `positions` and `ids`.
    fn bucket<R: Row>(&self, rows: &[R], (mut positions, mut ids): (Vec<usize>, Vec<u64>)) -> Route {
        let ranks = self.rows.ranks();
        let owner = |r: R| (r != R::SKIP).then(|| self.rows.owner(r.get())).flatten();
        // Each position's owner found once (`NONE`: skipped), then counted and placed.
        const NONE: u32 = u32::MAX;
        let owners: Vec<u32> = rows
            .iter()
            .map(|&r| owner(r).map_or(NONE, |o| o as u32))
            .collect();
        let mut counts = vec![0usize; ranks];
        for &o in &owners {
            if o != NONE {
                counts[o as usize] += 1;
            }
        }
        let mut next = offsets(&counts);
        let kept = counts.iter().sum();
        positions.clear();
        positions.resize(kept, 0);
        ids.clear();
        ids.resize(kept, 0);
        let starts = &self.rows.bounds()[..ranks];
        for (p, (&r, &o)) in rows.iter().zip(&owners).enumerate() {
            if o != NONE {
                let o = o as usize;
                positions[next[o]] = p;
                ids[next[o]] = (r.get() - starts[o]) as u64;
                next[o] += 1;
            }
        }
        Route {
            positions,
            ids,
            counts,
            total: rows.len(),
        }
    }
}
