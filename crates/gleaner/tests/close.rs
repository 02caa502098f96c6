//! `close` and jobs running on callers' threads: a manual compaction and a GC run held inside
//! their work (by gates of the fault-injecting file system) while another thread closes the
//! database. `close` must wait for both before it releases the lock; once it returns, nothing of
//! the closed handle may touch the files, so a handle opened right after sees everything.

#[allow(
    dead_code,
    reason = "the shared simulation helpers name the GC variants' type"
)]
mod common;
mod sim;

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use gleaner::io::{FaultFs, FaultOp};
use gleaner::{Db, Error, GcPolicyKind, Options};

/// How long the test gives `close` to return while both jobs are held. A correct `close` never
/// returns then, so this only bounds how long a broken one is given to show itself; the outcome
/// for a correct engine does not depend on it.
const EARLY_CLOSE_GRACE: Duration = Duration::from_secs(1);
/// Bound on every other wait of the test (a hang is a failure, not a stuck CI job).
const WAIT: Duration = Duration::from_secs(60);

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        // No workers: only the two jobs the test starts touch the files.
        .with_inline_background_work(true)
        .with_gc_threads(0)
        .with_gc_policy(GcPolicyKind::Scavenger)
        .with_memtable_size(1 << 20)
        .with_l0_compaction_trigger(8)
        .with_min_separated_value_size(100)
        .with_gc_garbage_ratio(0.1)
}

fn key(i: u32) -> String {
    format!("key{i:04}")
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i} {round} ").into_bytes();
    v.resize(500, b'a' + (round % 26) as u8);
    v
}

/// Writes `keys` at `round` and flushes them into one L0 key table and a value table.
fn write_round(db: &Db, keys: impl Iterator<Item = u32>, round: u32, latest: &mut [u32]) {
    for i in keys {
        db.put(key(i), value(i, round)).expect("put");
        latest[i as usize] = round;
    }
    db.flush().expect("flush");
}

#[test]
fn close_waits_for_a_manual_compaction_and_a_gc_run_on_other_threads() {
    const KEYS: u32 = 200;
    let fs = FaultFs::new(7);
    let path = Path::new("/db");
    let opts = options(&fs);
    let db = Arc::new(Db::open(path, opts.clone()).expect("open"));
    let mut latest = vec![0u32; KEYS as usize];
    // Garbage for GC: the first table's overwritten half, counted by a full compaction. Then an
    // L0 table for the manual compaction to merge.
    write_round(&db, 0..KEYS, 0, &mut latest);
    write_round(&db, (0..KEYS).step_by(2), 1, &mut latest);
    db.compact_range(None, None).expect("compact");
    write_round(&db, (0..KEYS).step_by(3), 2, &mut latest);

    // GC is held at its first output table, the compaction at its manifest edit (holding the
    // manifest lock, past every check it makes before the edit).
    let gc_gate = fs.add_gate(FaultOp::Create, Some(".vst"), 0);
    let edit_gate = fs.add_gate(FaultOp::Append, Some("MANIFEST"), 0);
    let gc = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.run_gc())
    };
    assert!(gc_gate.wait_until_reached(WAIT), "GC reaches its output");
    let compaction = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.compact_range(None, None))
    };
    assert!(
        edit_gate.wait_until_reached(WAIT),
        "the compaction reaches its edit"
    );

    // The closing thread reports the file system's operation count as `close` returns: from
    // then on the closed handle must not touch a file.
    let (closed_tx, closed_rx) = mpsc::channel();
    let closer = {
        let db = Arc::clone(&db);
        let fs = fs.clone();
        std::thread::spawn(move || {
            let r = db.close();
            let _ = closed_tx.send(fs.mutating_ops());
            r
        })
    };
    let early = closed_rx.recv_timeout(EARLY_CLOSE_GRACE).ok();
    gc_gate.open();
    edit_gate.open();
    let gc = gc.join().expect("gc thread");
    let compaction = compaction.join().expect("compaction thread");
    let ops_at_close = match early {
        Some(ops) => ops,
        None => closed_rx.recv_timeout(WAIT).expect("close returns"),
    };
    closer.join().expect("close thread").expect("close");
    assert_eq!(
        fs.mutating_ops(),
        ops_at_close,
        "the closed handle changed files after close returned (close returned {}while a \
         compaction and a GC job were running)",
        if early.is_some() { "" } else { "not " }
    );
    // Both calls end at the shutdown (the compaction's edit being written completes, but the
    // manual compaction stops before its next level); neither fails otherwise.
    for (what, r) in [
        ("compaction", compaction.map(|_| ())),
        ("GC", gc.map(|_| ())),
    ] {
        assert!(
            matches!(r, Err(Error::Closed)),
            "the {what} gives up at the shutdown: {r:?}"
        );
    }
    assert!(
        early.is_none(),
        "close returned while a compaction and a GC job were still running"
    );

    let db2 = Db::open(path, opts.clone()).expect("reopen");
    for i in 0..KEYS {
        assert_eq!(
            db2.get(key(i))
                .unwrap_or_else(|e| panic!("get {}: {e}", key(i))),
            Some(value(i, latest[i as usize])),
            "{}",
            key(i)
        );
    }
    sim::check_recovered_state(db2, path, &opts, "after close and reopen");
}
