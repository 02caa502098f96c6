//! Crash loops with real processes: `gleaner-stress loop` SIGKILLs a writer at random moments
//! and verifies the database after each kill (see docs/reliability.md). These tests run it at
//! CI scale and prove that its verifier does catch a damaged database.

use std::path::Path;
use std::process::{Command, Output};

use gleaner::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

fn stress(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gleaner-stress"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("run gleaner-stress")
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The `N` of the final "ok: C cycles, N ops acked" line.
fn ops_acked(out: &Output) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("ok: "))
        .unwrap_or_else(|| panic!("no summary line\n{}", text(out)));
    let n = line
        .split(", ")
        .find_map(|part| part.strip_suffix(" ops acked"))
        .unwrap_or_else(|| panic!("no ops count in {line:?}"));
    n.parse().expect("ops count")
}

/// Twenty kill-verify cycles (half of them with compaction and GC churning), `--cycles` in the
/// binary for longer runs. Every kill must leave exactly an acknowledged prefix of the stream.
#[test]
fn twenty_sigkill_cycles_keep_every_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = stress(
        &[
            "loop", "--seed", "7", "--cycles", "20", "--min-ms", "150", "--max-ms", "700",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "crash loop failed\n{}", text(&out));
    let acked = ops_acked(&out);
    assert!(
        acked > 20,
        "too few operations acknowledged ({acked})\n{}",
        text(&out)
    );
}

/// Two kill-verify cycles under each of the fourteen GC variants in turn (`--gc all`), so every
/// policy and technique combination is killed mid-flight, and the database changes GC variant
/// at every restart; one of the two with values separated at flush, the other with values
/// written once (`--separate-at alternate`), which switches every other restart.
#[test]
fn sigkill_cycles_under_every_gc_variant_keep_every_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = stress(
        &[
            "loop",
            "--seed",
            "11",
            "--cycles",
            "28",
            "--min-ms",
            "150",
            "--max-ms",
            "500",
            "--gc",
            "all",
            "--separate-at",
            "alternate",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "crash loop failed\n{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for variant in [
        "scavenger",
        "titan",
        "blobdb",
        "novkv",
        "dumpkv",
        "diffkv",
        "tdb",
        "tdb-r",
        "tdb-l",
        "tdb-w",
        "tdb-rl",
        "tdb-rw",
        "tdb-lw",
        "tdb-rlw",
    ] {
        for at in ["flush", "write"] {
            let cycles = stdout
                .lines()
                .filter(|l| l.contains(&format!("(GC {variant}, ")))
                .filter(|l| l.ends_with(&format!("values separated at {at}")))
                .count();
            assert_eq!(cycles, 1, "cycles under {variant} at {at}\n{}", text(&out));
        }
    }
    assert!(ops_acked(&out) > 18, "too few operations\n{}", text(&out));
}

/// Kill-verify cycles alternating leveled and tiered compaction (`--style alternate`): tiered
/// compaction is killed mid-flight, and every restart switches styles, so leveled compaction
/// recovers a tiered database's runs and tiered a leveled tree.
#[test]
fn sigkill_cycles_alternating_compaction_styles_keep_every_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = stress(
        &[
            "loop",
            "--seed",
            "13",
            "--cycles",
            "12",
            "--min-ms",
            "150",
            "--max-ms",
            "600",
            "--style",
            "alternate",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "crash loop failed\n{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for style in ["leveled", "tiered"] {
        let cycles = stdout
            .lines()
            .filter(|l| l.starts_with("cycle ") && l.contains(&format!(", {style}):")))
            .count();
        assert_eq!(cycles, 6, "cycles under {style}\n{}", text(&out));
    }
    assert!(ops_acked(&out) > 12, "too few operations\n{}", text(&out));
}

/// Kill-verify cycles of DP-KV's partitioned tree (`--style dpkv`): its detector ticks every
/// 100 accesses (a cycle under load acks a hundred operations or so) and moves the keys between
/// the partitions as its thread gets to it, so kills land amid flushes split by
/// the routing, moves, and the detector's saves; every restart recovers the routing with its
/// tables and the statistics from their files.
#[test]
fn sigkill_cycles_of_a_partitioned_tree_keep_every_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = stress(
        &[
            "loop", "--seed", "29", "--cycles", "8", "--min-ms", "150", "--max-ms", "700",
            "--style", "dpkv",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "crash loop failed\n{}", text(&out));
    assert!(ops_acked(&out) > 8, "too few operations\n{}", text(&out));
    assert!(
        dir.path().join("db").join("HOTNESS").exists(),
        "the detector saved its statistics\n{}",
        text(&out)
    );
}

/// The verifier is not vacuous: deleting one acknowledged key behind its back makes `verify`
/// exit 1 and name that key.
#[test]
fn verify_catches_a_lost_acknowledged_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = stress(
        &[
            "loop", "--seed", "3", "--cycles", "3", "--min-ms", "150", "--max-ms", "400",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "crash loop failed\n{}", text(&out));
    // A clean stop, so acked == attempted and only one expected state remains.
    let out = stress(&["write", "--seed", "3", "--ops", "30"], dir.path());
    assert!(out.status.success(), "write failed\n{}", text(&out));
    let out = stress(&["verify", "--seed", "3"], dir.path());
    assert!(
        out.status.success(),
        "verify of an intact db failed\n{}",
        text(&out)
    );

    // Same options as the tool: the shape options are persisted, so defaults reopen it.
    let db = Db::open(dir.path().join("db"), Options::default()).expect("open");
    // Among the keys the stream never writes with an expiry (`key00000` to `key00009`): what
    // this open's clock reads of them is what `verify` reads.
    let (victim, _) = db
        .range(
            (
                std::ops::Bound::<&[u8]>::Included(&b"key00000"[..]),
                std::ops::Bound::<&[u8]>::Excluded(&b"key00010"[..]),
            ),
            &ReadOptions::default(),
        )
        .expect("range")
        .next()
        .expect("db is not empty")
        .expect("read");
    let mut batch = WriteBatch::new();
    batch.delete(&victim);
    db.write(batch, &WriteOptions { sync: true })
        .expect("delete");
    db.close().expect("close");

    let out = stress(&["verify", "--seed", "3"], dir.path());
    assert_eq!(
        out.status.code(),
        Some(1),
        "verify must fail\n{}",
        text(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let victim = String::from_utf8_lossy(&victim).into_owned();
    assert!(
        stderr.contains(&format!("key {victim}: expected")) && stderr.contains("found absent"),
        "message must name the lost key {victim}\n{}",
        text(&out)
    );
}
