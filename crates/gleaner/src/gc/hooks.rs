//! The hooks of a GC policy: what it adds to flushes, compactions and GC jobs, each told the
//! job's context (docs/architecture.md, "Extension points for GC schemes").
//!
//! - A flush or compaction starts with [`CompactionHooks::begin`], given a
//!   [`CompactionContext`]; the [`EntryHooks`] it returns see every drop event of the job and
//!   decide, for every entry a compaction keeps whose value is a handle, whether to keep it,
//!   rewrite its payload, or relocate its value ([`KeptEntry`]).
//! - [`CompactionHooks::allows_trivial_move`] may turn a trivial move into a rewrite, so the
//!   entries pass through the hooks; [`CompactionHooks::compaction_finished`] closes each job.
//! - A GC job reports each record's verdict ([`CompactionHooks::gc_verdict`]) and its end
//!   ([`CompactionHooks::gc_finished`]): what a learning policy trains on.

use crate::compaction::JobStats;
pub use crate::compaction::hooks::{CompactionContext, EntryHooks, KeptEntry, ListenOnly};
use crate::key::SeqNo;
use crate::value::HandlePayload;
use crate::version::{ValueTableMeta, Version};

use super::job::GcJobStats;
use super::oracle::Validity;

/// A GC job's verdict on one record it read.
#[derive(Debug, Clone, Copy)]
pub struct GcVerdict<'a> {
    /// The victim holding the record.
    pub table: u64,
    /// The record's user key.
    pub key: &'a [u8],
    /// The record's sequence number.
    pub seq: SeqNo,
    /// The verdict (live records are copied).
    pub validity: Validity,
    /// Writes since the record was written (the database's newest sequence number when the
    /// job started, less the record's): its lifetime so far if live, at least its lifetime if
    /// garbage.
    pub age: SeqNo,
    /// For a live record, the payload of the handle of the version that reads it, when the
    /// oracle looked it up ([`Verdict`](super::oracle::Verdict)).
    pub payload: Option<&'a HandlePayload>,
}

/// A GC job that committed.
#[derive(Debug, Clone, Copy)]
pub struct GcReport<'a> {
    /// Its victims.
    pub victims: &'a [u64],
    /// Its figures.
    pub stats: &'a GcJobStats,
}

impl GcReport<'_> {
    /// Records copied ÷ records read (1 when none was read).
    pub fn valid_ratio(&self) -> f64 {
        if self.stats.records_read == 0 {
            1.0
        } else {
            self.stats.records_written as f64 / self.stats.records_read as f64
        }
    }
}

/// What a policy adds to flushes, compactions and GC jobs. Every method has a default that
/// adds nothing.
pub trait CompactionHooks: Send + Sync + std::fmt::Debug {
    /// The hooks of the flush or compaction `ctx` describes, if the policy has any (they may
    /// keep `ctx`, which outlives them). Default: none.
    fn begin<'a>(&'a self, ctx: &CompactionContext<'a>) -> Option<Box<dyn EntryHooks + 'a>> {
        let _ = ctx;
        None
    }

    /// Whether the trivial move `ctx` describes may go ahead; `false` rewrites the table into
    /// the output level instead, through the hooks. Default: yes.
    fn allows_trivial_move(&self, ctx: &CompactionContext<'_>) -> bool {
        let _ = ctx;
        true
    }

    /// Called once a flush or compaction is installed, with its figures. Default: nothing.
    fn compaction_finished(&self, ctx: &CompactionContext<'_>, stats: &JobStats) {
        let _ = (ctx, stats);
    }

    /// Called once a flush or compaction is installed that deleted value tables because every
    /// record in them had become garbage (no GC job read them), with the tables as they were:
    /// how well a scheme grouped values that die together shows here. Default: nothing.
    fn value_tables_freed(&self, tables: &[ValueTableMeta]) {
        let _ = tables;
    }

    /// Called for each record a GC job judged, possibly from several threads at once (cheap,
    /// thread-safe). Default: nothing.
    fn gc_verdict(&self, verdict: &GcVerdict<'_>) {
        let _ = verdict;
    }

    /// Called once a GC job's result is committed. Default: nothing.
    fn gc_finished(&self, report: &GcReport<'_>) {
        let _ = report;
    }

    /// The figures only this policy has, by name, for `stats().gc.policy_stats` (read at every
    /// `stats()` call: cheap). Default: none.
    fn stats(&self) -> std::collections::BTreeMap<String, u64> {
        std::collections::BTreeMap::new()
    }

    /// Whether flushes and compactions record the identity of every record whose handle they
    /// drop in a drop file attached to its value table (NovKV's collaborative compaction, docs/gc.md), so
    /// GC jobs can tell garbage without index lookups. Default: no.
    fn records_drop_keys(&self) -> bool {
        false
    }

    /// Whether the policy's kept-entry hook may answer [`KeptEntry::Relocate`]: compactions
    /// then prepare to relocate, and GC jobs wait, before their checks, for every compaction
    /// that was running when they claimed their victims (a record such a compaction moves out
    /// of a victim would otherwise be copied by the job too, a second copy no drop counts;
    /// docs/gc.md, "Racing with compaction"). The answer binds: without it, an entry the hook
    /// asks to relocate is kept where it is. Default: no.
    fn relocates_values(&self) -> bool {
        false
    }

    /// Key tables to compact when the tree's shape asks for no compaction (a picker bias),
    /// in the order to try them. Default: none.
    fn marked_for_compaction(&self, version: &Version) -> Vec<u64> {
        let _ = version;
        Vec::new()
    }
}

/// A policy that adds nothing to flushes, compactions and GC jobs.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl CompactionHooks for NoHooks {}
