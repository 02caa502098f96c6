//! DumpKV's hooks (§4.3): compactions out of L0 fold each key's write history into the handle
//! of its newest version, learning from the version it replaces; GC verdicts on live records
//! and finished jobs feed the lifetime histograms, the samples and the garbage ratio; the end
//! of each GC job is where a training may run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::features::{Features, MAX_DELTAS};
use super::roles::{CLASS_DEFAULT, TAG, TableLifetime};
use super::state::DumpKv;
use crate::compaction::JobStats;
use crate::compaction::hooks::{CompactionContext, EntryHooks, KeptEntry};
use crate::compaction::iterator::{DropEvent, DropListener};
use crate::gc::hooks::{CompactionHooks, GcReport, GcVerdict};
use crate::gc::oracle::Validity;
use crate::key::{ParsedKey, SeqNo};
use crate::lookup::Lookup;
use crate::value::StoredHandle;
use crate::version::ValueTableMeta;

/// Most older versions one entry's history is read from: versions a compaction out of L0
/// meets before their own history was folded (several versions of a key in L0 at once).
pub const MAX_FOLDED_VERSIONS: usize = MAX_DELTAS + 1;

/// The hooks.
#[derive(Debug)]
pub struct LifetimeHooks {
    pub dk: Arc<DumpKv>,
}

/// Whether a job is a compaction out of L0 (leveled: L0 to L1; tiered: a merge taking L0
/// runs), of either partition of a partitioned tree: where histories are folded.
fn out_of_l0(ctx: &CompactionContext<'_>) -> bool {
    ctx.input_level
        .is_some_and(|l| crate::version::routing::is_l0(l as usize))
}

impl CompactionHooks for LifetimeHooks {
    fn begin<'a>(&'a self, ctx: &CompactionContext<'a>) -> Option<Box<dyn EntryHooks + 'a>> {
        out_of_l0(ctx).then(|| {
            Box::new(Collector {
                dk: &self.dk,
                ctx: *ctx,
                last_key: Vec::new(),
                has_last: false,
            }) as Box<dyn EntryHooks + 'a>
        })
    }

    /// An L0 table moved down whole would keep its flushed (empty) histories: the move is
    /// rewritten so they are folded.
    fn allows_trivial_move(&self, ctx: &CompactionContext<'_>) -> bool {
        !out_of_l0(ctx)
    }

    fn compaction_finished(&self, ctx: &CompactionContext<'_>, _: &JobStats) {
        if out_of_l0(ctx) {
            self.dk.update_points();
        }
    }

    fn gc_verdict(&self, v: &GcVerdict<'_>) {
        self.dk.judged(v.table, v.validity == Validity::Dead);
        if v.validity == Validity::Live {
            self.dk
                .learn_live(v.key, v.seq, Features::of_payload(v.payload), v.age);
        }
    }

    /// Tables compaction freed whole were wholly garbage when they went: counted for their
    /// class as collected with all their records invalid.
    fn value_tables_freed(&self, tables: &[ValueTableMeta]) {
        for t in tables {
            let class = t
                .policy_meta
                .as_ref()
                .filter(|m| m.tag == TAG)
                .and_then(|m| TableLifetime::decode(&m.data))
                .map_or(CLASS_DEFAULT, |l| l.class);
            self.dk.freed(class, t.records);
        }
    }

    fn gc_finished(&self, report: &GcReport<'_>) {
        self.dk.forget(report.victims);
        self.dk
            .job_done(report.stats.records_read, report.stats.records_written);
        self.dk.maybe_train();
    }

    fn stats(&self) -> BTreeMap<String, u64> {
        self.dk.stats()
    }
}

/// The kept-entry hook of one compaction out of L0.
struct Collector<'a> {
    dk: &'a DumpKv,
    ctx: CompactionContext<'a>,
    last_key: Vec<u8>,
    has_last: bool,
}

impl DropListener for Collector<'_> {
    fn on_drop(&mut self, _: &DropEvent<'_>) {}
}

impl Collector<'_> {
    /// The history of the version of `key` written at `seq`: the versions before it, read from
    /// the job's version back to one whose history was folded already (or the key's first
    /// write, or [`MAX_FOLDED_VERSIONS`]), folded forward, each replaced version a lifetime
    /// learned.
    fn fold(&self, key: &[u8], seq: SeqNo) -> Features {
        let figures = &self.dk.figures;
        let unit = self.dk.settings.unit;
        // Older versions, newest first, each with the history it had.
        let mut chain: Vec<SeqNo> = Vec::new();
        let mut base = Features::first_write(true);
        let mut at = seq;
        while chain.len() < MAX_FOLDED_VERSIONS {
            figures.feature_lookups.fetch_add(1, Ordering::Relaxed);
            let found = match self.ctx.version_before(key, at) {
                Ok(found) => found,
                Err(e) => {
                    // The history is a hint: a failed read costs it, never the compaction
                    // (which reads the same tables and reports a real fault itself).
                    log::warn!("dumpkv: reading an older version for a key's history: {e}");
                    figures.feature_lookup_errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            };
            match found {
                None | Some((_, Lookup::Deleted)) => break,
                Some((s, Lookup::Value { .. })) => {
                    chain.push(s);
                    break;
                }
                Some((s, Lookup::Handle { payload, .. })) => {
                    chain.push(s);
                    let f = Features::of_payload(payload.as_ref());
                    if f.collected {
                        base = f;
                        break;
                    }
                    at = s;
                }
            }
        }
        // Fold forward from the oldest version reached: each was replaced by the next.
        let mut f = base;
        let mut newer = chain.iter().rev().skip(1).copied().chain([seq]);
        for &older in chain.iter().rev() {
            let replaced_at = newer.next().expect("one newer per older version");
            let lifetime = replaced_at - older;
            self.dk.learn_lifetime(key, older, &f, lifetime);
            f = f.next_write(lifetime, unit);
        }
        f.collected = true;
        f
    }
}

impl EntryHooks for Collector<'_> {
    fn kept(&mut self, key: &ParsedKey<'_>, handle: &StoredHandle) -> KeptEntry {
        // Only a key's newest version kept here gets a history; older ones a snapshot keeps
        // hold what they had.
        let newest = !self.has_last || key.user_key != self.last_key.as_slice();
        if !newest {
            return KeptEntry::Keep;
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key.user_key);
        self.has_last = true;
        if Features::of_payload(handle.payload.as_ref()).collected {
            return KeptEntry::Keep;
        }
        let f = self.fold(key.user_key, key.seq);
        let payload = f.to_payload();
        let figures = &self.dk.figures;
        figures.features_folded.fetch_add(1, Ordering::Relaxed);
        figures
            .feature_bytes_written
            .fetch_add(payload.as_bytes().len() as u64, Ordering::Relaxed);
        KeptEntry::SetPayload(Some(payload))
    }
}
