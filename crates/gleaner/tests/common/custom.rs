//! A GC scheme defined outside the engine, through the public policy API only (issue 24, item
//! 9): victims oldest table first, full reads, validity by index lookups, inheritance (or
//! write-back) commit, and a value router of its own that separates values by its own
//! threshold, keeps a payload, `len=N`, with every handle and metadata, `born=ORIGIN`, with
//! every value table, which its picker reads (GC survivors last). `tests/custom_policy.rs` tests it
//! by itself; `common::gc_variants` runs every engine suite under it as variant `custom`.

use std::sync::Arc;

use gleaner::Options;
use std::sync::atomic::{AtomicU64, Ordering};

use gleaner::gc::{
    CommitStyle, GcReadMode, IndexOracle, LookupKind, NoHooks, PickContext, Placement,
    PolicyFactory, PolicySet, RouteContext, RouteOrigin, ValueRouter, VictimCandidate,
    VictimPicker,
};
use gleaner::value::HandlePayload;
use gleaner::version::ValueTableMeta;

/// Values of at least this many bytes are separated by the scheme's router, even where option
/// `min_separated_value_size` is larger (tests/custom_policy.rs sets it to 100); where the
/// option is smaller, the option's threshold holds (the engine suites count on it).
pub const OWN_THRESHOLD: u64 = 64;

/// Candidates the picker saw carrying this scheme's table metadata (tests/custom_policy.rs
/// checks the picker is shown it).
pub static CANDIDATES_WITH_META: AtomicU64 = AtomicU64::new(0);

/// The metadata the router gives each table: where it was written, `born=flush`, `born=gc`...
fn born(origin: RouteOrigin) -> &'static str {
    match origin {
        RouteOrigin::Flush => "born=flush",
        RouteOrigin::Recovery => "born=recovery",
        RouteOrigin::Gc => "born=gc",
        RouteOrigin::Compaction => "born=compaction",
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
        let payload = ctx.payload.cloned().or_else(|| {
            Some(HandlePayload::new(format!("len={}", ctx.value_len).as_bytes()).expect("short"))
        });
        Placement::Separated { class: 0, payload }
    }

    fn table_meta(&self, _: &ValueTableMeta, origin: RouteOrigin) -> Option<Vec<u8>> {
        Some(born(origin).as_bytes().to_vec())
    }
}

/// The scheme, committing by inheritance (its name [`NAME`]) or by writing the new handles back
/// into the index tree (`oldest-first-wb`).
#[derive(Debug)]
pub struct OldestFirstFactory {
    /// How the scheme commits.
    pub commit: CommitStyle,
}

pub const NAME: &str = "oldest-first";

pub const INHERITANCE: OldestFirstFactory = OldestFirstFactory {
    commit: CommitStyle::Inheritance,
};

impl PolicyFactory for OldestFirstFactory {
    fn name(&self) -> &str {
        match self.commit {
            CommitStyle::Inheritance => NAME,
            CommitStyle::WriteBack => "oldest-first-wb",
        }
    }

    fn build(&self, opts: &Options) -> gleaner::Result<PolicySet> {
        Ok(PolicySet {
            name: self.name().to_string(),
            picker: Box::new(OldestFirst),
            read_mode: GcReadMode::Full,
            oracle: Box::new(IndexOracle::new(LookupKind::Get, None)),
            router: Arc::new(LengthTagged {
                min_size: OWN_THRESHOLD.min(opts.min_separated_value_size()),
            }),
            commit: self.commit,
            hooks: Box::new(NoHooks),
            drop_cache: None,
            updates_handles_on_read: false,
        })
    }
}
