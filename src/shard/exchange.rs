//! The collectives a sharded call makes: the agreement on errors before anything moves,
//! and the all-to-all exchange of variable counts, split into rounds under MPI's 32-bit
//! counts, with the bytes it moved counted.

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence, Root};

use super::Traffic;
use crate::error::GatherError;
use crate::pool::{Pool, Pooling};

/// `local` on every rank if every rank's is `Ok`; else `Err` on every rank: a rank's own
/// error where it has one, [`GatherError::Peer`] naming the lowest bad rank elsewhere. One
/// small all-reduce, which every rank makes whatever its input (so none waits alone).
pub(super) fn agree<C: Communicator, T>(
    comm: &C,
    op: &'static str,
    local: Result<T, GatherError>,
) -> Result<T, GatherError> {
    let mine: i32 = if local.is_err() { comm.rank() } else { i32::MAX };
    let mut lowest = i32::MAX;
    comm.all_reduce_into(&mine, &mut lowest, SystemOperation::min());
    match local {
        Err(e) => Err(e),
        Ok(_) if lowest != i32::MAX => Err(GatherError::Peer {
            op,
            rank: lowest as usize,
        }),
        Ok(v) => Ok(v),
    }
}

/// What a pooled call's exchanges depend on: its pooling, whether it has weights (they
/// travel), whether it returns an argmax (positions travel) and its row width (a plan
/// applies to tables of any). Every rank must make the same call; each passes its own
/// weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CallShape {
    pub pooling: Pooling,
    pub weighted: bool,
    pub arg: bool,
    pub width: usize,
}

impl CallShape {
    pub fn of<A>(pool: &Pool<'_, A>, arg: bool, width: usize) -> Self {
        CallShape {
            pooling: pool.pooling,
            weighted: pool.weights.is_some(),
            arg,
            width,
        }
    }

    fn code(self) -> u64 {
        let p = Pooling::ALL.iter().position(|&p| p == self.pooling).unwrap_or(0) as u64;
        p | u64::from(self.weighted) << 3 | u64::from(self.arg) << 4 | (self.width as u64) << 5
    }

    fn of_code(code: u64) -> Self {
        CallShape {
            pooling: Pooling::ALL[(code & 7) as usize % Pooling::ALL.len()],
            weighted: code & 8 != 0,
            arg: code & 16 != 0,
            width: (code >> 5) as usize,
        }
    }
}

impl std::fmt::Display for CallShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.pooling)?;
        if self.weighted {
            write!(f, ", weighted")?;
        }
        if self.arg {
            write!(f, ", with its argmax")?;
        }
        write!(f, ", rows of {} elements", self.width)
    }
}

/// [`agree`] for a pooled call: a rank whose [`CallShape`] differs from rank 0's errs as
/// well (the exchanges that follow depend on it: a rank making others would wait
/// forever). One broadcast more.
pub(super) fn agree_pooled<C: Communicator, T>(
    comm: &C,
    op: &'static str,
    shape: CallShape,
    local: Result<T, GatherError>,
) -> Result<T, GatherError> {
    let mut first = shape.code();
    comm.process_at_rank(0).broadcast_into(&mut first);
    let local = match local {
        Ok(_) if first != shape.code() => Err(GatherError::RanksDisagree {
            op,
            detail: format!(
                "this rank's call ({shape}) differs from rank 0's ({}): every rank pools the same way, over tables of one row width, each with its own weights",
                CallShape::of_code(first)
            ),
        }),
        local => local,
    };
    agree(comm, op, local)
}

/// What an exchange delivered: the values from each rank, back to back in rank order,
/// and how many came from each.
pub(super) struct Received<T> {
    pub values: Vec<T>,
    pub counts: Vec<usize>,
}

impl<T> Received<T> {
    /// The values from rank `r`.
    pub fn from(&self, r: usize) -> &[T] {
        let start: usize = self.counts[..r].iter().sum();
        &self.values[start..start + self.counts[r]]
    }
}

/// Sends `counts[r]` values of `send` (back to back in rank order) to each rank `r` and
/// receives what every rank sends this one: an all-to-all of the counts, then of the
/// values (`MPI_Alltoallv`), in as many rounds as keep every rank's per-round totals at
/// most `chunk` elements (MPI counts and displacements are 32-bit), each pair's values
/// split evenly over the rounds, into `into`'s storage (a buffer kept from an earlier
/// call: no fresh pages). Adds the bytes sent to and received from other ranks to
/// `traffic`. Collective: every rank calls it with its own counts. With `keep_own`, this
/// rank's own block of `send` stays (nothing is received from itself): for the values a
/// rank serves itself without a copy.
pub(super) fn exchange<C, T>(
    comm: &C,
    send: &[T],
    counts: &[usize],
    keep_own: bool,
    chunk: usize,
    traffic: &mut Traffic,
    into: Vec<T>,
) -> Received<T>
where
    C: CommunicatorCollectives,
    T: Equivalence + Copy + Default,
{
    let (size, me) = (comm.size() as usize, comm.rank() as usize);
    // Where each rank's block starts in `send` (the own block's too, when it stays).
    let send_at = offsets(counts);
    let mut counts = counts.to_vec();
    if keep_own {
        counts[me] = 0;
    }
    let counts = &counts[..];
    let send_counts: Vec<u64> = counts.iter().map(|&c| c as u64).collect();
    let mut recv_counts = vec![0u64; size];
    comm.all_to_all_into(&send_counts[..], &mut recv_counts[..]);
    let recv_counts: Vec<usize> = recv_counts.iter().map(|&c| c as usize).collect();
    let (total_send, total_recv) = (send.len(), recv_counts.iter().sum::<usize>());
    let bytes = |c: &[usize]| {
        c.iter()
            .enumerate()
            .filter(|&(r, _)| r != me)
            .map(|(_, &n)| (n * size_of::<T>()) as u64)
            .sum::<u64>()
    };
    traffic.sent += bytes(counts);
    traffic.received += bytes(&recv_counts);
    // Every rank takes part in every round: the rounds are those of the largest exchange.
    let largest = total_send.max(total_recv) as u64;
    let mut most = 0u64;
    comm.all_reduce_into(&largest, &mut most, SystemOperation::max());
    let chunk = chunk.clamp(1, i32::MAX as usize / 2) as u64;
    let rounds = most.div_ceil(chunk).max(1) as usize;
    // (The kept buffer's old values are overwritten by the exchange: not zeroed first.)
    let mut values = into;
    values.resize(total_recv, T::default());
    let as_counts = |c: &[usize]| -> Vec<mpi::Count> { c.iter().map(|&n| n as mpi::Count).collect() };
    if rounds == 1 {
        // One round: straight from `send` into `values` (every total is below `chunk`,
        // itself below 2^30, so the counts and displacements fit).
        let (sc, rc) = (as_counts(counts), as_counts(&recv_counts));
        let sd: Vec<mpi::Count> = send_at.iter().map(|&a| a as mpi::Count).collect();
        let rd = offsets(&rc);
        let s = Partition::new(send, &sc[..], &sd[..]);
        let mut r = PartitionMut::new(&mut values[..], &rc[..], &rd[..]);
        comm.all_to_all_varcount_into(&s, &mut r);
        return Received {
            values,
            counts: recv_counts,
        };
    }
    let recv_at = offsets(&recv_counts);
    // Round `k`'s share of `n` values: `n * k / rounds .. n * (k + 1) / rounds`.
    let share = |n: usize, k: usize| (n as u128 * k as u128 / rounds as u128) as usize;
    let mut out_buf: Vec<T> = Vec::new();
    let mut in_buf: Vec<T> = Vec::new();
    for k in 0..rounds {
        let part = |c: &[usize]| -> Vec<(usize, usize)> {
            c.iter().map(|&n| (share(n, k), share(n, k + 1))).collect()
        };
        let (sp, rp) = (part(counts), part(&recv_counts));
        out_buf.clear();
        for (r, &(lo, hi)) in sp.iter().enumerate() {
            out_buf.extend_from_slice(&send[send_at[r] + lo..send_at[r] + hi]);
        }
        // (Each round's totals are below `chunk`, itself below 2^30.)
        let sc: Vec<mpi::Count> = sp.iter().map(|&(lo, hi)| (hi - lo) as mpi::Count).collect();
        let rc: Vec<mpi::Count> = rp.iter().map(|&(lo, hi)| (hi - lo) as mpi::Count).collect();
        let (sd, rd) = (offsets(&sc), offsets(&rc));
        in_buf.clear();
        in_buf.resize(rc.iter().map(|&c| c as usize).sum(), T::default());
        {
            let s = Partition::new(&out_buf[..], &sc[..], &sd[..]);
            let mut r = PartitionMut::new(&mut in_buf[..], &rc[..], &rd[..]);
            comm.all_to_all_varcount_into(&s, &mut r);
        }
        let mut at = 0;
        for (r, &(lo, hi)) in rp.iter().enumerate() {
            values[recv_at[r] + lo..recv_at[r] + hi].copy_from_slice(&in_buf[at..at + hi - lo]);
            at += hi - lo;
        }
    }
    Received {
        values,
        counts: recv_counts,
    }
}

/// Where each of blocks of `counts` values, back to back, starts.
pub(super) fn offsets<N: Copy + Default + std::ops::Add<Output = N>>(counts: &[N]) -> Vec<N> {
    counts
        .iter()
        .scan(N::default(), |at, &n| {
            let o = *at;
            *at = o + n;
            Some(o)
        })
        .collect()
}
