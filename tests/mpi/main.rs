//! The sharded tables' checks (feature `mpi`). `cargo test --features mpi` runs this
//! program, which launches itself under `mpirun -n 1`, `2`, `3` and `4` with one thread
//! per rank and `-n 1`, `2` with three (each under a timeout: a hang is a failure) and reports one line per launch; under `mpirun` it runs
//! the checks of `checks.rs` on every rank.

mod checks;
mod collections;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `mpirun` may take before it counts as hung.
const TIMEOUT: Duration = Duration::from_secs(240);

fn main() {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() || std::env::var_os("PMI_SIZE").is_some() {
        checks::run();
        return;
    }
    let me = std::env::current_exe().expect("the test's own path");
    let (mut passed, mut failed) = (0, 0);
    // The large case's digests of each rank count with one thread per rank.
    let mut one_thread: Vec<(usize, String)> = Vec::new();
    // 1-4 ranks of one thread each, and 1-2 ranks of three (the same bits).
    for (ranks, threads) in [(1, 1), (2, 1), (3, 1), (4, 1), (1, 3), (2, 3)] {
        let start = Instant::now();
        let child = Command::new("mpirun")
            .args(["-n", &ranks.to_string(), "--oversubscribe"])
            .arg(&me)
            // As root (CI's containers), OpenMPI asks for both.
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("RAYON_NUM_THREADS", threads.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                println!(
                    "mpirun -n {ranks} ({threads} threads each): could not start mpirun ({e}): install OpenMPI (.ci/run does)"
                );
                failed += 1;
                continue;
            }
        };
        // Read the ranks' lines as they come (a full pipe would stop them).
        let out = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(out), &mut text);
            text
        });
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if start.elapsed() > TIMEOUT => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(_) => break None,
            }
        };
        let text = reader.join().unwrap_or_default();
        print!(
            "{}",
            text.lines()
                .filter(|l| !l.starts_with("bits "))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        );
        // The digests of the large case, sorted (ranks print in any order).
        let mut digests: Vec<&str> = text.lines().filter(|l| l.starts_with("bits ")).collect();
        digests.sort_unstable();
        let digests = digests.join("\n");
        let same = match one_thread.iter().find(|(r, _)| *r == ranks) {
            Some((_, d)) if threads > 1 => *d == digests,
            _ => {
                one_thread.push((ranks, digests));
                true
            }
        };
        match status {
            Some(_) if !same => {
                println!(
                    "mpirun -n {ranks} ({threads} threads each): FAILED (other bits than with one thread)"
                );
                failed += 1;
            }
            Some(s) if s.success() => {
                println!(
                    "mpirun -n {ranks} ({threads} threads each): ok ({:.1} s)",
                    start.elapsed().as_secs_f64()
                );
                passed += 1;
            }
            Some(s) => {
                println!("mpirun -n {ranks} ({threads} threads each): FAILED ({s})");
                failed += 1;
            }
            None => {
                println!(
                    "mpirun -n {ranks} ({threads} threads each): FAILED (no end within {} s: a hang)",
                    TIMEOUT.as_secs()
                );
                failed += 1;
            }
        }
    }
    println!("mpi: {passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
