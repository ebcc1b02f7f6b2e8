//! What S1 (`scatter(.., Add)` of 32768 rows of 1 KiB into a [50000, 256] f32 table) can
//! gain from its threads on this machine: the crate's call beside two hand-written loops
//! on the same data, none of them checking anything the crate would not (each checks its
//! indices first, as the crate does):
//! - `halves`: the crate's split by hand: each thread owns half of the table and walks
//!   every position, combining the rows that land in its half;
//! - `lists`: PyTorch's way: the positions sorted (stably) into one list per sixteenth of
//!   the table, the lists claimed one at a time by the threads, so that a thread that
//!   comes late takes only what is left.
//!
//! Prints each round's medians and their ratio to the crate's. Run it on one and on two
//! threads, quiet and beside a busy process (issue 45's case):
//!
//! ```text
//! RAYON_NUM_THREADS=1 cargo run --release -p ndarray-gather-benches --example s1_floor
//! yes > /dev/null & RAYON_NUM_THREADS=2 cargo run ... ; kill %1
//! ```

#[path = "workloads.rs"]
mod workloads;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

const ROWS: usize = 50000;
const COLS: usize = 256;
/// Positions prefetched ahead (4 KiB of rows, as the crate's scatter pipeline).
const AHEAD: usize = 4;

/// The destination as the threads share it: each writes only rows it owns.
struct Table(*mut f32);
// SAFETY: the loops below write disjoint rows from each thread.
unsafe impl Sync for Table {}

impl Table {
    /// Adds `u` into row `r`.
    ///
    /// # Safety
    /// `r < ROWS`, and no other thread touches row `r` meanwhile.
    unsafe fn add(&self, r: usize, u: &[f32]) {
        // SAFETY: the caller's.
        let row = unsafe { std::slice::from_raw_parts_mut(self.0.add(r * COLS), COLS) };
        for (x, v) in row.iter_mut().zip(u) {
            *x += *v;
        }
    }

    fn prefetch(&self, r: usize, u: &[f32]) {
        #[cfg(target_arch = "x86_64")]
        for line in (0..COLS).step_by(16) {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            // SAFETY: a prefetch only hints, at any address.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(self.0.wrapping_add(r * COLS + line).cast());
                _mm_prefetch::<_MM_HINT_T0>(u.as_ptr().wrapping_add(line).cast());
            }
        }
    }
}

/// `job(c)` for every `c < jobs`, claimed one at a time by the caller and the pool's
/// other threads.
fn claimed(jobs: usize, job: impl Fn(usize) + Sync) {
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= jobs {
                return;
            }
            job(c);
        }
    };
    rayon::in_place_scope(|s| {
        for _ in 1..rayon::current_num_threads().min(jobs) {
            s.spawn(|_| work());
        }
        work();
    });
}

fn halves(t: &Table, idx: &[usize], upd: &[f32]) {
    assert!(idx.iter().all(|&r| r < ROWS));
    let parts = rayon::current_num_threads();
    let width = ROWS.div_ceil(parts);
    claimed(parts, |p| {
        let own = p * width..(p + 1) * width;
        for (k, &r) in idx.iter().enumerate() {
            if let Some(&next) = idx.get(k + AHEAD)
                && own.contains(&next)
            {
                t.prefetch(next, &upd[(k + AHEAD) * COLS..]);
            }
            if own.contains(&r) {
                // SAFETY: checked above; row `r` is this part's.
                unsafe { t.add(r, &upd[k * COLS..(k + 1) * COLS]) };
            }
        }
    });
}

fn lists(t: &Table, idx: &[usize], upd: &[f32]) {
    const PARTS: usize = 16;
    let width = ROWS.div_ceil(PARTS);
    let mut lists: Vec<Vec<(u32, u32)>> = (0..PARTS)
        .map(|_| Vec::with_capacity(idx.len() / PARTS * 2))
        .collect();
    for (k, &r) in idx.iter().enumerate() {
        assert!(r < ROWS);
        lists[r / width].push((r as u32, k as u32));
    }
    claimed(PARTS, |p| {
        let list = &lists[p];
        for (j, &(r, k)) in list.iter().enumerate() {
            if let Some(&(r, k)) = list.get(j + AHEAD) {
                t.prefetch(r as usize, &upd[k as usize * COLS..]);
            }
            let k = k as usize;
            // SAFETY: checked above; the rows of list `p` are this part's.
            unsafe { t.add(r as usize, &upd[k * COLS..(k + 1) * COLS]) };
        }
    });
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let (mut crate_s1, _) = workloads::build_scatter("S1_embed_grad");
    let idx: Vec<usize> = workloads::ids(&[64, 512], ROWS, 1)
        .iter()
        .map(|&i| i as usize)
        .collect();
    let upd = workloads::updates(&[64, 512, COLS]).into_raw_vec_and_offset().0;
    let pristine = vec![0f32; ROWS * COLS];
    let mut table = pristine.clone();
    // Both loops add each row's updates in position order: the bits of a serial loop.
    let mut serial = table.clone();
    for (k, &r) in idx.iter().enumerate() {
        for c in 0..COLS {
            serial[r * COLS + c] += upd[k * COLS + c];
        }
    }
    for f in [halves as fn(&Table, &[usize], &[f32]), lists] {
        table.fill(0.0);
        f(&Table(table.as_mut_ptr()), &idx, &upd);
        assert!(table == serial, "a hand loop differs from the serial one");
    }
    println!(
        "{} threads; medians in ms (ratio to the crate's)",
        rayon::current_num_threads()
    );
    for round in 0..3 {
        let mut crate_ms = Vec::new();
        let (mut halves_ms, mut lists_ms) = (Vec::new(), Vec::new());
        for _ in 0..40 {
            crate_s1.reset();
            let t = Instant::now();
            crate_s1.call();
            crate_ms.push(t.elapsed().as_secs_f64() * 1e3);
            for (f, times) in [
                (halves as fn(&Table, &[usize], &[f32]), &mut halves_ms),
                (lists, &mut lists_ms),
            ] {
                // Reset as the crate's workload is (a copy from a pristine table).
                table.copy_from_slice(&pristine);
                let t = Instant::now();
                f(&Table(table.as_mut_ptr()), &idx, &upd);
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        let c = median(crate_ms);
        let (h, l) = (median(halves_ms), median(lists_ms));
        println!(
            "round {round}: crate {c:.2}  halves {h:.2} ({:.2})  lists {l:.2} ({:.2})",
            h / c,
            l / c
        );
    }
}
