//! A short end-to-end run: open a database, load 100,000 keys in batches, overwrite and delete
//! some, read them back through gets, a snapshot and a range scan, compact, reopen, and print
//! the engine's statistics.
//!
//! `cargo run --release --example quickstart -- [DIR]` (default: a fresh directory under the
//! system temporary directory, removed at the end).

#![expect(
    clippy::print_stdout,
    reason = "an example reports its results on stdout"
)]

use std::time::Instant;

use gleaner::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

fn main() -> gleaner::Result<()> {
    let (dir, temporary) = match std::env::args().nth(1) {
        Some(d) => (std::path::PathBuf::from(d), false),
        None => (
            std::env::temp_dir().join(format!("gleaner-quickstart-{}", std::process::id())),
            true,
        ),
    };
    let opts = Options::default().with_memtable_size(8 << 20);
    let n = 100_000u32;
    let value =
        |i: u32, round: u32| format!("value-{round}-{i:08}-{}", "x".repeat(100)).into_bytes();

    let db = Db::open(&dir, opts.clone())?;
    let start = Instant::now();
    let mut batch = WriteBatch::new();
    for i in 0..n {
        batch.put(format!("key{i:08}"), value(i, 0));
        if batch.count() == 1000 {
            db.write(std::mem::take(&mut batch), &WriteOptions::default())?;
        }
    }
    db.write(batch, &WriteOptions::sync())?;
    println!("loaded {n} keys in {:.2?}", start.elapsed());

    let snapshot = db.snapshot();
    for i in (0..n).step_by(3) {
        db.put(format!("key{i:08}"), value(i, 1))?;
    }
    for i in (0..n).step_by(10) {
        db.delete(format!("key{i:08}"))?;
    }
    let check = |db: &Db, i: u32| -> gleaner::Result<()> {
        let got = db.get(format!("key{i:08}"))?;
        let want = if i.is_multiple_of(10) {
            None
        } else if i.is_multiple_of(3) {
            Some(value(i, 1))
        } else {
            Some(value(i, 0))
        };
        assert_eq!(got, want, "key{i:08}");
        Ok(())
    };
    for i in (0..n).step_by(7) {
        check(&db, i)?;
    }
    let old = db.get_with("key00000030", &ReadOptions::default().at(&snapshot))?;
    assert_eq!(
        old,
        Some(value(30, 0)),
        "the snapshot still sees the first value"
    );
    drop(snapshot);

    let start = Instant::now();
    let live = db.range(&b"key"[..].., &ReadOptions::default())?.count();
    println!("scanned {live} live keys in {:.2?}", start.elapsed());
    assert_eq!(live as u32, n - n.div_ceil(10));

    let start = Instant::now();
    db.compact_range(None, None)?;
    println!("compacted in {:.2?}", start.elapsed());
    db.close()?;
    drop(db);

    let db = Db::open(&dir, opts)?;
    for i in (0..n).step_by(11) {
        check(&db, i)?;
    }
    let stats = db.stats();
    println!(
        "after reopen: {} key tables, {} bytes",
        stats.levels.iter().map(|l| l.files).sum::<usize>(),
        stats.total_table_bytes
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&stats).unwrap_or_default()
    );
    db.close()?;
    drop(db);
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!("quickstart ok");
    Ok(())
}
