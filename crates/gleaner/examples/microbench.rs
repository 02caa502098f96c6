//! Rough single-threaded throughput of puts, gets and scans (not the benchmark harness; a quick
//! sanity check for regressions while developing).

#![expect(
    clippy::print_stdout,
    reason = "an example reports its results on stdout"
)]

use std::time::Instant;

use gleaner::{Db, Options, ReadOptions};

fn main() -> gleaner::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("gleaner-microbench-{}", std::process::id()))
        });
    let n: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let value_size: usize = std::env::args()
        .nth(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let db = Db::open(&dir, Options::default())?;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Incompressible values, like the papers' workloads.
    let value: Vec<u8> = (0..value_size)
        .map(|i| {
            (i as u64)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(17) as u8
        })
        .collect();
    let start = Instant::now();
    for _ in 0..n {
        let k = next() % (n * 4);
        db.put(format!("{k:016}"), &value)?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "put: {:.0} ops/s, {:.1} MB/s ({n} puts, 16 B keys, {value_size} B values)",
        n as f64 / secs,
        n as f64 * (16 + value_size) as f64 / secs / 1e6
    );
    db.flush()?;
    let start = Instant::now();
    let mut found = 0u64;
    for _ in 0..n / 4 {
        let k = next() % (n * 4);
        if db.get(format!("{k:016}"))?.is_some() {
            found += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "get: {:.0} ops/s ({} gets, {found} found)",
        (n / 4) as f64 / secs,
        n / 4
    );
    let start = Instant::now();
    let mut count = 0u64;
    for item in db.range(.., &ReadOptions::default())? {
        item?;
        count += 1;
    }
    println!(
        "scan: {:.0} entries/s ({count} entries)",
        count as f64 / start.elapsed().as_secs_f64()
    );
    let s = db.stats();
    println!(
        "levels {:?}, stalls {:?}, compactions {}, value tables {} ({} garbage records), gc jobs {}, space amplification {:.2}",
        s.levels.iter().map(|l| l.files).collect::<Vec<_>>(),
        s.stalls,
        s.compaction.compactions,
        s.values.tables,
        s.values.garbage_records,
        s.gc.jobs,
        s.space.space_amplification
    );
    db.close()?;
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
