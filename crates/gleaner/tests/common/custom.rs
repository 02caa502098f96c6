//! A GC scheme defined outside the engine, through the public policy API only (issue 24, item
//! 9): victims oldest table first, full reads, validity by index lookups, inheritance (or
//! write-back) commit, and a value router of its own that separates values by its own
//! threshold, keeps a payload, `len=N`, with every handle and metadata, `born=ORIGIN`, with
//! every value table, which its picker reads (GC survivors last); its hooks mark the payloads
//! of entries written into the bottommost level, refuse trivial moves there (so the entries
//! pass the hooks), and count what flushes, compactions and GC jobs tell them.
//! It keeps a model file of its own (`<name>.model.pol`: the GC jobs it learned from), read
//! at open and saved at close by a background task. `tests/custom_policy.rs` tests it by itself; `common::gc_variants` runs every engine suite
//! under it as variant `custom`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gleaner::gc::{
    CommitStyle, CompactionContext, CompactionHooks, DropEvent, DropListener, EntryHooks,
    GcReadMode, GcReport, GcVerdict, HandlePayload, IndexOracle, JobOracle, JobStart, JobStats,
    KeptEntry, LookupKind, OracleEnv, ParsedKey, PickContext, Placement, PolicyContext,
    PolicyFactory, PolicySet, RecordRef, RouteContext, RouteOrigin, StoredHandle, TableOrigin,
    Validity, ValidityOracle, ValueRouter, ValueTableMeta, Verdict, VictimCandidate, VictimPicker,
};

/// Values of at least this many bytes are separated by the scheme's router, even where option
/// `min_separated_value_size` is larger (tests/custom_policy.rs sets it to 100); where the
/// option is smaller, the option's threshold holds (the engine suites count on it).
pub const OWN_THRESHOLD: u64 = 64;

/// Candidates the picker saw carrying this scheme's table metadata (tests/custom_policy.rs
/// checks the picker is shown it).
pub static CANDIDATES_WITH_META: AtomicU64 = AtomicU64::new(0);

/// Records GC jobs copied whose route context carried the live version's payload (the
/// oracle's [`Verdict`](gleaner::gc::Verdict)).
pub static GC_ROUTED_WITH_PAYLOAD: AtomicU64 = AtomicU64::new(0);

/// The metadata the router gives each table: where it was written, `born=flush`, `born=gc`...
fn born(origin: RouteOrigin) -> &'static str {
    match origin {
        RouteOrigin::Flush => "born=flush",
        RouteOrigin::Recovery => "born=recovery",
        RouteOrigin::Gc => "born=gc",
        RouteOrigin::Compaction => "born=compaction",
        RouteOrigin::Write => "born=write",
        _ => "born=elsewhere",
    }
}

/// Generational: tables a GC job wrote (survivors) after the others; within each, the oldest
/// first; only tables holding garbage, while they fit in the job's input.
#[derive(Debug)]
struct OldestFirst;

impl VictimPicker for OldestFirst {
    fn pick(&self, candidates: &[VictimCandidate], ctx: &PickContext) -> Vec<u64> {
        let mut old: Vec<&VictimCandidate> = candidates
            .iter()
            .filter(|c| c.garbage_records > 0)
            .collect();
        let survivor = |c: &VictimCandidate| {
            let mine = c.policy_meta.filter(|m| m.tag.starts_with(NAME));
            if mine.is_some() {
                CANDIDATES_WITH_META.fetch_add(1, Ordering::Relaxed);
            }
            mine.is_some_and(|m| m.data == born(RouteOrigin::Gc).as_bytes())
        };
        old.sort_by_key(|c| (survivor(c), c.number));
        let mut size = 0;
        let mut out = Vec::new();
        for c in old {
            if !out.is_empty() && size + c.file_size > ctx.max_input {
                break;
            }
            size += c.file_size;
            out.push(c.number);
        }
        out
    }
}

/// One class; values of at least `min_size` bytes separated, each handle carrying
/// `len=N`, the value's length, made at the flush and kept wherever the value moves.
#[derive(Debug)]
struct LengthTagged {
    min_size: u64,
}

impl ValueRouter for LengthTagged {
    fn class_names(&self) -> &'static [&'static str] {
        &["all"]
    }

    fn place(&self, ctx: &RouteContext<'_>) -> Placement {
        if ctx.value_len < self.min_size && ctx.origin.may_inline() {
            return Placement::Inline;
        }
        if ctx.origin == RouteOrigin::Gc
            && ctx
                .payload
                .is_some_and(|p| p.as_bytes().starts_with(b"len="))
        {
            GC_ROUTED_WITH_PAYLOAD.fetch_add(1, Ordering::Relaxed);
        }
        let payload = ctx.payload.cloned().or_else(|| {
            Some(HandlePayload::new(format!("len={}", ctx.value_len).as_bytes()).expect("short"))
        });
        Placement::Separated { class: 0, payload }
    }

    fn table_meta(&self, _: &ValueTableMeta, at: &TableOrigin) -> Option<Vec<u8>> {
        Some(born(at.origin).as_bytes().to_vec())
    }
}

/// What the scheme's hooks were told, for the tests to compare with the engine's figures.
#[derive(Debug, Default)]
pub struct HookCounts {
    /// GC verdicts, and the live ones among them.
    pub verdicts: AtomicU64,
    pub live_verdicts: AtomicU64,
    /// Live verdicts that carried the live version's payload.
    pub live_with_payload: AtomicU64,
    /// Entries compactions out of L0 kept, and those with an older version the hook found
    /// (`CompactionContext::version_before`).
    pub l0_kept: AtomicU64,
    pub l0_priors: AtomicU64,
    /// GC jobs that committed, and the records they read.
    pub gc_jobs: AtomicU64,
    pub gc_records_read: AtomicU64,
    /// Flushes and compactions finished.
    pub compactions: AtomicU64,
    /// Trivial moves into the bottommost level refused (rewritten through the hooks).
    pub refused_moves: AtomicU64,
    /// Payloads marked bottommost by the kept-entry hook.
    pub marked: AtomicU64,
    /// The jobs the model file said were learned, read at the last open.
    pub loaded: AtomicU64,
    /// GC jobs the job oracle began, and those whose commit it heard of.
    pub jobs_begun: AtomicU64,
    pub jobs_committed: AtomicU64,
}

/// The scheme's validity checks: the index lookup, one job at a time, counting the jobs it
/// prepares and the commits it hears of.
#[derive(Debug)]
struct CountingOracle {
    index: IndexOracle,
    counts: Arc<HookCounts>,
}

impl ValidityOracle for CountingOracle {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> gleaner::Result<Validity> {
        self.index.check(record, env)
    }

    fn verdict(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> gleaner::Result<Verdict> {
        self.index.verdict(record, env)
    }

    fn begin_job<'s>(
        &'s self,
        start: &mut JobStart<'_>,
    ) -> gleaner::Result<Box<dyn JobOracle + 's>> {
        assert!(!start.victims.is_empty());
        self.counts.jobs_begun.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(CountingJob(self)))
    }
}

/// One job of [`CountingOracle`].
struct CountingJob<'s>(&'s CountingOracle);

impl JobOracle for CountingJob<'_> {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> gleaner::Result<Validity> {
        self.0.index.check(record, env)
    }

    fn verdict(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> gleaner::Result<Verdict> {
        self.0.index.verdict(record, env)
    }

    fn committed(&self, victims: &[u64], _outputs: &[u64]) {
        assert!(!victims.is_empty());
        self.0.counts.jobs_committed.fetch_add(1, Ordering::Relaxed);
    }
}

/// The scheme's model file: how many GC jobs it has learned from, over every open.
pub const MODEL_SLOT: &str = "model";

/// The model file's contents for `jobs` jobs.
pub fn model(jobs: u64) -> Vec<u8> {
    format!("jobs={jobs}").into_bytes()
}

/// The jobs a model file holds, or `None` for bytes that are not one.
fn parse_model(data: &[u8]) -> Option<u64> {
    std::str::from_utf8(data)
        .ok()?
        .strip_prefix("jobs=")?
        .parse()
        .ok()
}

/// Appended to a handle's payload by the kept-entry hook when a compaction writes the entry
/// into the bottommost level.
pub const BOTTOM_MARK: &str = ";b";

/// The kept-entry hook of one compaction: at the bottommost level, it marks each payload; out
/// of L0, it looks up each entry's older version.
struct MarkBottom<'a> {
    ctx: CompactionContext<'a>,
    bottommost: bool,
    counts: &'a HookCounts,
}

impl DropListener for MarkBottom<'_> {
    fn on_drop(&mut self, _: &DropEvent<'_>) {}
}

impl EntryHooks for MarkBottom<'_> {
    fn kept(&mut self, key: &ParsedKey<'_>, handle: &StoredHandle) -> KeptEntry {
        if self.ctx.input_level == Some(0) {
            self.counts.l0_kept.fetch_add(1, Ordering::Relaxed);
            // A read the fault suites fail costs the count, never the compaction.
            let prior = self
                .ctx
                .version_before(key.user_key, key.seq)
                .ok()
                .flatten();
            if let Some((seq, _)) = prior {
                assert!(seq < key.seq, "an older version");
                self.counts.l0_priors.fetch_add(1, Ordering::Relaxed);
            }
        }
        let Some(p) = handle.payload.as_ref().filter(|_| self.bottommost) else {
            return KeptEntry::Keep;
        };
        if p.as_bytes().ends_with(BOTTOM_MARK.as_bytes()) {
            return KeptEntry::Keep;
        }
        self.counts.marked.fetch_add(1, Ordering::Relaxed);
        let mut marked = p.as_bytes().to_vec();
        marked.extend_from_slice(BOTTOM_MARK.as_bytes());
        KeptEntry::SetPayload(Some(HandlePayload::new(&marked).expect("short")))
    }
}

/// The scheme's hooks: the bottom mark, no trivial move into the bottommost level, and counts.
#[derive(Debug)]
struct Hooks(Arc<HookCounts>);

impl CompactionHooks for Hooks {
    fn begin<'a>(&'a self, ctx: &CompactionContext<'a>) -> Option<Box<dyn EntryHooks + 'a>> {
        Some(Box::new(MarkBottom {
            ctx: *ctx,
            bottommost: ctx.bottommost && ctx.input_level.is_some(),
            counts: &self.0,
        }))
    }

    fn allows_trivial_move(&self, ctx: &CompactionContext<'_>) -> bool {
        if ctx.bottommost {
            self.0.refused_moves.fetch_add(1, Ordering::Relaxed);
        }
        !ctx.bottommost
    }

    fn compaction_finished(&self, _: &CompactionContext<'_>, _: &JobStats) {
        self.0.compactions.fetch_add(1, Ordering::Relaxed);
    }

    fn gc_verdict(&self, verdict: &GcVerdict<'_>) {
        self.0.verdicts.fetch_add(1, Ordering::Relaxed);
        if verdict.validity == Validity::Live {
            self.0.live_verdicts.fetch_add(1, Ordering::Relaxed);
            if verdict.payload.is_some() {
                self.0.live_with_payload.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn stats(&self) -> std::collections::BTreeMap<String, u64> {
        let c = &self.0;
        [
            ("gc_verdicts", &c.verdicts),
            ("gc_live_verdicts", &c.live_verdicts),
            ("bottom_marks", &c.marked),
            ("trivial_moves_refused", &c.refused_moves),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.load(Ordering::Relaxed)))
        .collect()
    }

    fn gc_finished(&self, report: &GcReport<'_>) {
        assert!((0.0..=1.0).contains(&report.valid_ratio()));
        self.0.gc_jobs.fetch_add(1, Ordering::Relaxed);
        self.0
            .gc_records_read
            .fetch_add(report.stats.records_read, Ordering::Relaxed);
    }
}

/// The scheme, committing by inheritance (its name [`NAME`]) or by writing the new handles back
/// into the index tree (`oldest-first-wb`); its hooks count into `counts`.
#[derive(Debug)]
pub struct OldestFirstFactory {
    /// How the scheme commits.
    pub commit: CommitStyle,
    /// What its hooks were told, over every database it builds roles for.
    pub counts: Arc<HookCounts>,
}

pub const NAME: &str = "oldest-first";

/// The scheme committing by inheritance.
pub fn inheritance() -> OldestFirstFactory {
    OldestFirstFactory::new(CommitStyle::Inheritance)
}

impl OldestFirstFactory {
    /// The scheme committing so, with counts of its own.
    pub fn new(commit: CommitStyle) -> Self {
        OldestFirstFactory {
            commit,
            counts: Arc::default(),
        }
    }
}

impl PolicyFactory for OldestFirstFactory {
    fn name(&self) -> &str {
        match self.commit {
            CommitStyle::Inheritance => NAME,
            CommitStyle::WriteBack => "oldest-first-wb",
        }
    }

    fn build(&self, ctx: &PolicyContext<'_>) -> gleaner::Result<PolicySet> {
        let opts = ctx.opts;
        // What earlier opens learned; a damaged file reads as none, and learning starts over.
        let loaded = ctx
            .files
            .read(MODEL_SLOT)?
            .and_then(|d: Vec<u8>| parse_model(&d))
            .unwrap_or(0);
        self.counts.loaded.store(loaded, Ordering::Relaxed);
        if !ctx.read_only {
            // The model is saved at close, by a task the close waits for.
            let (files, counts) = (ctx.files.clone(), Arc::clone(&self.counts));
            let start = counts.gc_jobs.load(Ordering::Relaxed);
            ctx.tasks.spawn("model", move |stop| {
                while !stop.wait(std::time::Duration::from_secs(3600)) {}
                let learned = counts.gc_jobs.load(Ordering::Relaxed) - start;
                // A failed save costs what this open learned, nothing else.
                let _ = files.write(MODEL_SLOT, &model(loaded + learned));
            })?;
        }
        Ok(PolicySet {
            name: self.name().to_string(),
            picker: Box::new(OldestFirst),
            read_mode: GcReadMode::Full,
            oracle: Box::new(CountingOracle {
                index: IndexOracle::new(LookupKind::Get),
                counts: Arc::clone(&self.counts),
            }),
            router: Arc::new(LengthTagged {
                min_size: OWN_THRESHOLD.min(opts.min_separated_value_size()),
            }),
            commit: self.commit,
            hooks: Box::new(Hooks(Arc::clone(&self.counts))),
            updates_handles_on_read: false,
        })
    }
}
