//! [`ShardedTable::scatter`]: `gather`'s adjoint, rows travelling to their owners.

use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use ndarray::{ArrayRef, ArrayView, Dimension, IxDyn};

use super::exchange::agree;
use super::route::lend;
use super::{ShardedTable, Traffic};
use crate::error::{GatherError, internal};
use crate::ext::ScatterExt;
use crate::index::GatherIndex;
use crate::indices::IndexArray;
use crate::pool::PoolElement;
use crate::reduce::Reducer;

impl<C, A, D> ShardedTable<'_, C, A, D>
where
    C: Communicator + CommunicatorCollectives,
    A: PoolElement + Equivalence + Copy + Default,
    D: Dimension,
{
    /// Combines `updates` (of shape `indices.shape() ++ row shape`) into the global rows
    /// at `indices` through `reducer`: `gather`'s adjoint. Each rank's update rows travel
    /// to their owners, which apply them in (source rank, position) order: bit for bit the
    /// single-process scatter of every rank's updates in that order, on any thread count.
    /// Collective.
    ///
    /// # Errors
    /// On every rank, before anything moves or is written, if any rank's input is bad
    /// (an index, the updates' shape): the bad rank's own error,
    /// [`Peer`](GatherError::Peer) elsewhere.
    pub fn scatter<I: GatherIndex, E: Dimension, E2: Dimension, R: Reducer<A>>(
        &mut self,
        indices: impl IndexArray<I, E>,
        updates: &ArrayRef<A, E2>,
        reducer: R,
    ) -> Result<(), GatherError> {
        let op = "ShardedTable::scatter";
        let mut traffic = Traffic::default();
        let done = lend(self.comm, op, None, indices, |ix| {
            let expected: Vec<usize> = ix.shape().iter().chain(&self.shape[1..]).copied().collect();
            let local = self.route(op, ix, None).and_then(|route| {
                if updates.shape() == &expected[..] {
                    Ok(route)
                } else {
                    Err(GatherError::UpdatesShape {
                        op,
                        expected: expected.clone(),
                        found: updates.shape().to_vec(),
                    })
                }
            });
            let route = agree(self.comm, op, local)?;
            if self.rows.ranks() == 1 {
                // One rank holds the whole table: no routing.
                return self.local.scatter(ix, updates, 0, reducer);
            }
            let w = self.row_len();
            // (No fallible step between the agreement and the exchanges: a rank that returned
            // here would leave the others waiting.)
            let updates = updates.as_standard_layout();
            let copied: Vec<A>;
            let flat = match updates.as_slice() {
                Some(f) => f,
                None => {
                    copied = updates.iter().copied().collect();
                    &copied
                }
            };
            // Into the buffers the table keeps (fresh pages each call cost more than the
            // copies), given back after the owner's scatter.
            let mut spare = self.spare.borrow_mut();
            let mut rows = std::mem::take(&mut spare.partials);
            rows.clear();
            rows.reserve(route.positions.len() * w);
            for &p in &route.positions {
                rows.extend_from_slice(&flat[p * w..(p + 1) * w]);
            }
            let sizes: Vec<usize> = route.counts.iter().map(|&c| c * w).collect();
            let asked = std::mem::take(&mut spare.asked);
            let ids = self.send(&route.ids, &route.counts, false, &mut traffic, asked);
            let got = self.send(&rows, &sizes, false, &mut traffic, std::mem::take(&mut spare.got));
            // The owner's side: every source's rows, in (source rank, position) order,
            // scattered from where they arrived.
            let shape: Vec<usize> = std::iter::once(ids.values.len())
                .chain(self.shape[1..].iter().copied())
                .collect();
            let done = match ArrayView::from_shape(IxDyn(&shape), &got.values[..]) {
                Ok(view) => self.local.scatter(&ids.values, &view, 0, reducer),
                Err(_) => Err(internal(op, "received rows of another size")),
            };
            (spare.partials, spare.asked, spare.got) = (rows, ids.values, got.values);
            (spare.positions, spare.ids) = (route.positions, route.ids);
            done
        });
        self.traffic.set(traffic);
        done
    }
}
