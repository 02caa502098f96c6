//! Tables beyond `max_open_files`: a table whose file the cache closed to make room opens again
//! from the metadata the cache retained, without reading it (a file that changed under the
//! retained metadata is `Error::Corruption`: `cache/file_cache.rs`'s unit tests).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gleaner::io::{FaultFs, FaultKind, FaultOp, FaultRule};
use gleaner::{Db, GcPolicyKind, Options};

const TABLES: usize = 4;

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_inline_background_work(true)
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_min_separated_value_size(100)
        // No value cache: every read of a separated value goes to its table.
        .with_value_cache_share(0.0)
        .with_max_open_files(1)
}

fn value(i: usize) -> Vec<u8> {
    vec![i as u8; 2000]
}

/// One value table per flush, each holding the value of key `k{i}`.
fn fill(db: &Db) {
    for i in 0..TABLES {
        db.put(format!("k{i}"), value(i)).expect("put");
        db.flush().expect("flush");
    }
}

fn value_tables(fs: &FaultFs) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs
        .list_files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "vst"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_table_opened_again_reads_no_metadata() {
    let fs = FaultFs::new(1);
    let db = Db::open(Path::new("/db"), options(&fs)).expect("open");
    fill(&db);
    assert_eq!(value_tables(&fs).len(), TABLES, "one value table a flush");
    let before = db.stats().cache;
    for round in 0..5 {
        for i in 0..TABLES {
            assert_eq!(
                db.get(format!("k{i}")).expect("get"),
                Some(value(i)),
                "round {round}, key {i}"
            );
        }
    }
    let after = db.stats().cache;
    assert_eq!(
        after.open_value_tables, 1,
        "max_open_files bounds the open files"
    );
    let opens = after.table_opens - before.table_opens;
    let reads = after.table_metadata_reads - before.table_metadata_reads;
    // Most gets of another table than the last close one file and open another.
    assert!(opens >= (3 * TABLES) as u64, "{opens} opens");
    // Each key and value table had its metadata read once at most since the flushes (a
    // compaction may have replaced the flushed key tables by one).
    assert!(
        reads <= 2 * TABLES as u64,
        "{reads} metadata reads for {opens} opens"
    );
    assert!(after.retained_metadata_bytes > 0);
}

#[test]
fn a_read_that_finds_no_file_descriptor_left_closes_idle_tables_and_succeeds() {
    let fs = FaultFs::new(3);
    let db = Db::open(Path::new("/db"), options(&fs).with_max_open_files(8)).expect("open");
    fill(&db);
    for i in 0..TABLES {
        assert_eq!(db.get(format!("k{i}")).expect("get"), Some(value(i)));
    }
    // The process is out of descriptors at the next open of a value table.
    fs.add_fault(FaultRule {
        op: FaultOp::Open,
        path_contains: Some(".vst".into()),
        skip: 0,
        times: Some(1),
        kind: FaultKind::Emfile,
    });
    db.put("late", value(9)).expect("put");
    db.flush().expect("flush");
    assert_eq!(db.get("late").expect("get"), Some(value(9)));
    for i in 0..TABLES {
        assert_eq!(db.get(format!("k{i}")).expect("get"), Some(value(i)));
    }
    assert_eq!(fs.injected_faults(), 1, "the open failed once");
    assert_eq!(db.stats().cache.table_opens_after_emfile, 1);
}
