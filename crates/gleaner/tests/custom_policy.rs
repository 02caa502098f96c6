//! The GC scheme of `common/custom.rs`, defined outside the engine through the public policy
//! API (issue 24, item 9): the database must stay exact under it, its payloads must survive
//! flushes, compactions and GC, and an open that does not know the policy must say which it
//! lacks. (The engine suites run under it too, as variant `custom` of `common::gc_variants`.)

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
mod rounds;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use std::sync::atomic::Ordering;

use common::custom::{
    BOTTOM_MARK, CANDIDATES_WITH_META, OWN_THRESHOLD, OldestFirstFactory, inheritance,
};
use common::dump::{handles, hex, manifest_dump};
use gleaner::gc::{CommitStyle, PolicyContext, PolicyFactory, PolicySet};
use gleaner::io::FaultFs;
use gleaner::{Db, GcPolicyKind, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The policy tests' options (`rounds::inline_options`) on the real file system, so `gleaner
/// dump` can read the key tables.
fn plain_options() -> Options {
    let mut opts = rounds::inline_options(&FaultFs::new(24));
    opts = opts.with_file_system(Arc::new(gleaner::io::PosixFs::new()));
    opts
}

fn options(factory: &Arc<OldestFirstFactory>) -> Options {
    plain_options().with_custom_policy(Arc::clone(factory) as Arc<dyn PolicyFactory>)
}

/// A value of `len` bytes naming `key` and `round`.
fn value(key: u32, round: u32, len: usize) -> Vec<u8> {
    let mut v = format!("{key}/{round}/").into_bytes();
    v.resize(len.max(v.len()), b'a' + (round % 26) as u8);
    v
}

fn key(i: u32) -> String {
    format!("k{i:04}")
}

/// Each key's newest value is separated exactly when the router says, and its handle carries
/// the length of that value.
fn check_payloads(dir: &Path, model: &BTreeMap<String, Vec<u8>>, ctx: &str) {
    let found = handles(dir);
    for (k, v) in model {
        let separated = v.len() as u64 >= OWN_THRESHOLD;
        match found.get(k).cloned().flatten() {
            Some((_, payload)) => {
                assert!(separated, "{ctx}: {k} of {} bytes has a handle", v.len());
                // Made at the flush, marked by the kept-entry hook at the bottom level.
                assert_eq!(
                    payload.as_deref(),
                    Some(hex(format!("len={}{BOTTOM_MARK}", v.len()).as_bytes()).as_str()),
                    "{ctx}: {k}"
                );
            }
            None => assert!(!separated, "{ctx}: {k} of {} bytes is inline", v.len()),
        }
    }
}

#[test]
fn a_scheme_from_outside_keeps_the_database_exact_and_its_payloads_with_the_keys() {
    exact_with_payloads(CommitStyle::Inheritance);
}

/// GC's write-backs carry the payload of the entry they replace.
#[test]
fn written_back_handles_keep_their_payloads() {
    exact_with_payloads(CommitStyle::WriteBack);
}

fn exact_with_payloads(commit: CommitStyle) {
    let factory = Arc::new(OldestFirstFactory::new(commit));
    let name = factory.name().to_string();
    let mut records_read = 0;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = StdRng::seed_from_u64(24);
    let mut model = BTreeMap::new();
    let mut moved_rounds = 0;
    let db = Db::open(dir.path(), options(&factory)).expect("open");
    assert_eq!(db.stats().gc.policy, name);
    for round in 0..4u32 {
        for _ in 0..300 {
            let i = rng.random_range(0..200u32);
            if rng.random_bool(0.1) {
                db.delete(key(i)).expect("delete");
                model.remove(&key(i));
                continue;
            }
            // Below the router's threshold, between it and the option's, and above both.
            let len = [20, 80, 300][rng.random_range(0..3)];
            let v = value(i, round, len);
            db.put(key(i), &v).expect("put");
            model.insert(key(i), v);
        }
        db.flush().expect("flush");
        db.compact_range(None, None).expect("compact");
        check_payloads(dir.path(), &model, &format!("round {round}"));
        let before = handles(dir.path());
        let gc = db.run_gc().expect("gc");
        records_read += gc.totals.records_read;
        common::reads::assert_reads(&db, &model, &format!("round {round} after GC"));
        // Compaction rewrites the handles that name collected tables; payloads stay.
        db.compact_range(None, None).expect("compact");
        check_payloads(dir.path(), &model, &format!("round {round} after GC"));
        if round > 0 {
            assert!(gc.jobs > 0, "round {round}: the picker found garbage");
        }
        // Each record the job copied is a key's newest version (no snapshot exists), whose
        // handle names a collected table until the compaction renames it.
        if gc.totals.records_written > 0 {
            moved_rounds += 1;
            let moved = handles(dir.path())
                .iter()
                .filter(|(k, now)| {
                    let file = |e: Option<&Option<(u64, Option<String>)>>| {
                        e.cloned().flatten().map(|(f, _)| f)
                    };
                    file(Some(now)).is_some() && file(before.get(*k)) != file(Some(now))
                })
                .count();
            assert!(
                moved > 0,
                "round {round}: GC moved records and compaction renamed them"
            );
        }
    }
    assert!(moved_rounds > 0, "some GC job copied live records");
    // The scheme reports its own figures in stats(), by its names.
    let own = db.stats().gc.policy_stats;
    assert_eq!(
        own.get("gc_verdicts").copied(),
        Some(factory.counts.verdicts.load(Ordering::Relaxed)),
        "{own:?}"
    );
    assert!(own.get("bottom_marks").is_some_and(|&m| m > 0), "{own:?}");
    common::reads::assert_reads(&db, &model, "before reopen");
    db.close().expect("close");

    // The value tables carry the scheme's metadata in a manifest of format 3, and its picker
    // was shown it.
    let manifest = manifest_dump(dir.path());
    assert!(manifest.contains("format_version: 3\n"), "{manifest}");
    for born in ["born=flush", "born=gc"] {
        let line = format!(
            "  policy_meta: policy={name} data={}\n",
            hex(born.as_bytes())
        );
        assert!(manifest.contains(&line), "{born}: {manifest}");
    }
    assert!(CANDIDATES_WITH_META.load(Ordering::Relaxed) > 0);
    // The hooks heard every GC job's records and end, and every compaction's.
    let counts = &factory.counts;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    assert!(get(&counts.gc_jobs) > 0 && get(&counts.compactions) > 0);
    // Its job oracle prepared every job and heard of every commit.
    assert_eq!(get(&counts.jobs_committed), get(&counts.gc_jobs));
    assert!(get(&counts.jobs_begun) >= get(&counts.jobs_committed));
    assert_eq!(get(&counts.gc_records_read), records_read);
    assert!(get(&counts.verdicts) >= records_read && get(&counts.live_verdicts) > 0);
    // Its index oracle handed each live verdict the payload of the version that reads the
    // record, and the router saw it when the job copied the record.
    assert_eq!(get(&counts.live_with_payload), get(&counts.live_verdicts));
    assert!(common::custom::GC_ROUTED_WITH_PAYLOAD.load(Ordering::Relaxed) > 0);
    // Compactions out of L0 found the older versions the rounds overwrote.
    assert!(
        get(&counts.l0_priors) > 0 && get(&counts.l0_priors) <= get(&counts.l0_kept),
        "{} of {}",
        get(&counts.l0_priors),
        get(&counts.l0_kept)
    );
    assert!(
        get(&counts.marked) > 0,
        "the kept-entry hook rewrote payloads"
    );
    // The policy's task saved its model at close, in a file of its own.
    let learned = get(&counts.gc_jobs);
    let model_file = dir.path().join(format!("{name}.model.pol"));
    let mut text = Vec::new();
    gleaner::tools::dump_file(&model_file, &mut text, false).expect("dump the model");
    let text = String::from_utf8(text).expect("utf8");
    assert!(
        text.contains(&format!("data: {}\n", hex(&common::custom::model(learned)))),
        "{text}"
    );

    // Without the factory: refused by name; read-only: readable.
    let err = Db::open(dir.path(), plain_options()).expect_err("unknown policy");
    assert!(err.to_string().contains(&format!("`{name}`")), "{err}");
    let ro = Db::open_read_only(dir.path(), plain_options()).expect("read-only");
    common::reads::assert_reads(&ro, &model, "read-only without the factory");
    drop(ro);

    // Another policy chosen explicitly, without the scheme registered: its tables' metadata is
    // unknown, and the open says whose it is.
    let other = plain_options().with_gc_policy(GcPolicyKind::Terarkdb);
    let err = Db::open(dir.path(), other.clone()).expect_err("metadata of an unknown policy");
    assert!(
        err.to_string()
            .contains(&format!("carries metadata of GC policy `{name}`")),
        "{err}"
    );
    // With it registered, another policy reads the database exactly, and the scheme takes it
    // back.
    let other = options(&factory).with_gc_policy(GcPolicyKind::Terarkdb);
    let db = Db::open(dir.path(), other).expect("switch to terarkdb");
    common::reads::assert_reads(&db, &model, "under terarkdb");
    db.run_gc().expect("gc");
    common::reads::assert_reads(&db, &model, "under terarkdb after GC");
    db.close().expect("close");
    let db = Db::open(dir.path(), options(&factory)).expect("back to the scheme");
    common::reads::assert_reads(&db, &model, "back");
    assert_eq!(get(&counts.loaded), learned, "the model read back at open");
    db.close().expect("close");

    // A damaged model costs what was learned, never the open; check says so.
    let mut bytes = std::fs::read(&model_file).expect("model");
    bytes[0] ^= 0x20;
    std::fs::write(&model_file, bytes).expect("damage");
    let report = gleaner::tools::check_db(dir.path(), &options(&factory)).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.to_string().contains("policy file unusable")),
        "{:?}",
        report.warnings
    );
    let db = Db::open(dir.path(), options(&factory)).expect("open with a damaged model");
    assert_eq!(get(&counts.loaded), 0, "learning starts over");
    assert_eq!(db.stats().gc.policy_files_damaged, 1);
    common::reads::assert_reads(&db, &model, "with a damaged model");
    db.close().expect("close");
    let report = gleaner::tools::check_db(dir.path(), &options(&factory)).expect("check");
    assert!(
        report.warnings.is_empty(),
        "rewritten at close: {:?}",
        report.warnings
    );
}

#[test]
fn a_bad_custom_policy_is_refused_before_anything_is_written() {
    #[derive(Debug)]
    struct Named(&'static str);
    impl PolicyFactory for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn build(&self, ctx: &PolicyContext<'_>) -> gleaner::Result<PolicySet> {
            inheritance().build(ctx)
        }
    }
    for (name, expect) in [
        ("has space", "letters, digits"),
        ("", "letters, digits"),
        ("another-name", "built roles named `oldest-first`"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = plain_options().with_custom_policy(Arc::new(Named(name)));
        let err = Db::open(dir.path(), opts).expect_err(name);
        assert!(err.to_string().contains(expect), "{name}: {err}");
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            0,
            "{name}: nothing written"
        );
    }
    // `gc_policy=custom` by name, without a factory.
    let mut opts = plain_options();
    opts.set("gc_policy", "custom").expect("parses");
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Db::open(dir.path(), opts).expect_err("no factory");
    assert!(err.to_string().contains("with_custom_policy"), "{err}");
}

/// Tasks of a policy whose open then fails, still running.
static TASKS_RUNNING: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// An open that fails after the policy was built (here writing OPTIONS) stops the tasks the
/// policy started: no thread outlives the failed open.
#[test]
fn a_failed_open_stops_the_policys_tasks() {
    #[derive(Debug)]
    struct Tasked;
    impl PolicyFactory for Tasked {
        fn name(&self) -> &str {
            "tasked"
        }
        fn build(&self, ctx: &PolicyContext<'_>) -> gleaner::Result<PolicySet> {
            ctx.tasks.spawn("idle", |stop| {
                TASKS_RUNNING.fetch_add(1, Ordering::SeqCst);
                while !stop.wait(std::time::Duration::from_secs(3600)) {}
                TASKS_RUNNING.fetch_sub(1, Ordering::SeqCst);
            })?;
            let mut set = inheritance().build(ctx)?;
            set.name = "tasked".to_string();
            Ok(set)
        }
    }
    let fs = FaultFs::new(5);
    let opts = rounds::inline_options(&fs).with_custom_policy(Arc::new(Tasked));
    let db = Db::open("/db", opts.clone()).expect("open");
    db.put("k", "v").expect("put");
    db.close().expect("close");
    fs.add_fault(gleaner::io::FaultRule {
        op: gleaner::io::FaultOp::Create,
        path_contains: Some("OPTIONS".into()),
        skip: 0,
        times: None,
        kind: gleaner::io::FaultKind::Eio,
    });
    assert!(
        Db::open("/db", opts.clone()).is_err(),
        "writing OPTIONS fails"
    );
    assert_eq!(
        TASKS_RUNNING.load(Ordering::SeqCst),
        0,
        "the task was stopped"
    );
    fs.clear_faults();
    let db = Db::open("/db", opts).expect("open");
    assert_eq!(db.get("k").expect("get").as_deref(), Some(&b"v"[..]));
    db.close().expect("close");
    assert_eq!(TASKS_RUNNING.load(Ordering::SeqCst), 0);
}

/// The scheme names only the public API: what the `internals` feature (which the tests enable)
/// adds is out of its reach, so a user's crate could define it as it stands.
#[test]
fn the_scheme_uses_only_the_public_api() {
    let source = include_str!("common/custom.rs");
    let public = ["gc", "io", "options", "stats", "tools", "error", "logging"];
    let mut paths = 0;
    for (at, _) in source.match_indices("gleaner::") {
        let rest = &source[at + "gleaner::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // A lower-case name is a module; `gleaner::Result` and the like are the crate root's.
        let is_module = name.starts_with(|c: char| c.is_ascii_lowercase());
        assert!(
            !is_module || public.contains(&name.as_str()),
            "common/custom.rs reaches into `gleaner::{name}`, which is not public API"
        );
        paths += 1;
    }
    assert!(paths > 0, "the scheme names the crate");
}
