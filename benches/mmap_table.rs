//! Gathering rows from a table larger than memory: the table is a `.npy` file, mapped
//! with `memmap2` and viewed with ndarray-npy's `ViewNpyExt` (no copy); `gather` and a
//! `GatherPlan` then read only the pages of the rows they pick.
//!
//! ```text
//! cargo run --release -p ndarray-gather-benches --example mmap_table -- [TABLE_MIB] [LOOKUPS] [PATH]
//! ```
//!
//! Writes a `[rows, 256]` f32 table of `TABLE_MIB` MiB (default 1024) at `PATH` (default
//! in the temporary directory), drops it from the page cache, then gathers `LOOKUPS`
//! (default 4096) random rows: cold (from disk), warm (from the page cache), through
//! `gather` and a `GatherPlan`. The map is advised `Random`: without it, Linux reads
//! ahead around every faulted page, and random rows end up reading most of the table. For each it prints rows per second and what the process
//! read from storage: its major page faults and, where Linux reports it, `read_bytes`.
//! The file is removed at the end.

use std::fs::{File, OpenOptions};
use std::time::Instant;

use memmap2::{Advice, Mmap, MmapMut};
use ndarray::{Array1, Array2, ArrayView2, ArrayViewMut2, Axis};
use ndarray_gather::prelude::*;
use ndarray_npy::{ViewMutNpyExt, ViewNpyExt, write_zeroed_npy};

const COLS: usize = 256;

/// (major page faults, bytes read from storage) of this process so far.
fn io_counters() -> (u64, Option<u64>) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Field 12 (majflt), counted after the command name's closing parenthesis.
    let majflt = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(9))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let read_bytes = std::fs::read_to_string("/proc/self/io").ok().and_then(|io| {
        io.lines()
            .find_map(|l| l.strip_prefix("read_bytes: "))
            .and_then(|v| v.trim().parse().ok())
    });
    (majflt, read_bytes)
}

/// Asks the kernel to drop the file's pages from its cache (after writing them back).
fn drop_from_cache(file: &File) {
    file.sync_all().expect("sync the table");
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain system call on an open file descriptor; it only gives advice.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
}

/// Deterministic row ids in `0..rows` (a 64-bit LCG).
fn row_ids(count: usize, rows: usize) -> Array1<i64> {
    let mut s = 0x9E37_79B9_7F4A_7C15_u64;
    Array1::from_shape_fn(count, |_| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 33) % rows as u64) as i64
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mib: usize = args.first().map_or(Ok(1024), |a| a.parse())?;
    let lookups: usize = args.get(1).map_or(Ok(4096), |a| a.parse())?;
    let path = args.get(2).map_or_else(
        || std::env::temp_dir().join("ndarray-gather-table.npy"),
        std::path::PathBuf::from,
    );
    let rows = (mib << 20) / (COLS * 4);

    // Write the table: a zeroed .npy of the right shape, filled through a writable map
    // (row r holds r in every column).
    let t = Instant::now();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)?;
    write_zeroed_npy::<f32, _>(&file, (rows, COLS))?;
    {
        // SAFETY: this process alone uses the file while it is mapped.
        let mut map = unsafe { MmapMut::map_mut(&file)? };
        let mut table = ArrayViewMut2::<f32>::view_mut_npy(&mut map)?;
        for (r, mut row) in table.axis_iter_mut(Axis(0)).enumerate() {
            row.fill(r as f32);
        }
        map.flush()?;
    }
    drop_from_cache(&file);
    println!(
        "table: {} rows x {COLS} f32 = {} MiB at {} (written in {:.1} s)",
        rows,
        mib,
        path.display(),
        t.elapsed().as_secs_f64()
    );

    let ids = row_ids(lookups, rows);
    let mut out = Array2::<f32>::zeros((lookups, COLS));
    for use_plan in [false, true] {
        // A fresh map of a file out of the page cache: cold.
        drop_from_cache(&file);
        // SAFETY: as above; nothing writes the file while it is mapped.
        let map = unsafe { Mmap::map(&file)? };
        // Random rows: no read-ahead around each one (else the kernel reads the whole
        // neighbourhood of every row, most of a table this size).
        map.advise(Advice::Random)?;
        let table = ArrayView2::<f32>::view_npy(&map)?;
        let plan = GatherPlan::gather(table.shape(), &ids, 0)?;
        for when in ["cold", "warm"] {
            let (f0, b0) = io_counters();
            let t = Instant::now();
            if use_plan {
                plan.apply_into(&table, &mut out)?;
            } else {
                out = table.gather(&ids, 0)?.into_dimensionality()?;
            }
            let secs = t.elapsed().as_secs_f64();
            let (f1, b1) = io_counters();
            let read = match (b0, b1) {
                (Some(a), Some(b)) => format!("{:>7.1} MiB read", (b - a) as f64 / (1 << 20) as f64),
                _ => "read bytes not reported".to_string(),
            };
            println!(
                "{:>6} {when}: {:>10.0} rows/s, {:>6} major faults, {read} (the rows: {:.1} MiB)",
                if use_plan { "plan" } else { "gather" },
                lookups as f64 / secs,
                f1 - f0,
                (lookups * COLS * 4) as f64 / (1 << 20) as f64
            );
            assert!(
                out.outer_iter()
                    .zip(&ids)
                    .all(|(row, &i)| row.iter().all(|&v| v == i as f32))
            );
        }
    }
    std::fs::remove_file(&path)?;
    Ok(())
}
