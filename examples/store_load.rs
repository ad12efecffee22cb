//! Loads a `--store file:` path the way `serve` does and prints how long it
//! took and the process's resident memory afterwards, for the store figures
//! in BENCHMARKS.md (and for callgrind on a smaller store).
//!
//! `cargo run --release --example store_load -- STORE_PATH`

use std::path::PathBuf;

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: store_load STORE_PATH")?,
    );
    let before = rss_kib();
    let started = std::time::Instant::now();
    let snapshot = nodescope::store::file::load(&path)?;
    let elapsed = started.elapsed();
    println!(
        "{} VPAs, {} problems, loaded in {:.0} ms, RSS {:?} KiB before, {:?} KiB after",
        snapshot.vpa_count(),
        snapshot.problems.len(),
        elapsed.as_secs_f64() * 1e3,
        before,
        rss_kib()
    );
    Ok(())
}
