//! Titan's GC (TiKV's Titan, as the Scavenger paper evaluates it; `blob_gc_job.cc`,
//! `blob_gc_picker.cc`): value tables whose discardable ratio reaches `titan_discardable_ratio`
//! are collected, highest ratio first; every record is read and kept only if the key's newest
//! version, memtables included, still names it; the live records go to one sorted run, and the
//! new place of each is written back into the index tree through the write path, only if the
//! key's newest version still names the record (Titan's `WriteWithCallback`), so a user write
//! that lands between the check and the write-back wins.
//!
//! The roles: a [`RatioPicker`] at `titan_discardable_ratio`, full reads, the
//! [`NewestVersionOracle`], one class of outputs, and [`CommitStyle::WriteBack`]. What the
//! engine does for the write-back (two manifest edits, the conditional writes, retiring the
//! victims until no snapshot reads them) is in `db/gc.rs` and docs/gc.md.

use std::sync::Arc;

use super::hooks::NoHooks;
use super::oracle::{OracleEnv, RecordRef, ValidityOracle};
use super::policy::{CommitStyle, GcReadMode, PolicySet};
use crate::compaction::router::SingleClass;
use crate::error::Result;
use crate::gc::oracle::Validity;
use crate::gc::picker::RatioPicker;
use crate::lookup::newest_version;
use crate::options::Options;

/// Titan's validity check: a record is live only if the key's newest version, in the memtables
/// or the index tree, names it. Snapshots are not asked: the versions they read stay readable in
/// the victims, which are deleted only once no snapshot can read them.
#[derive(Debug, Clone, Copy, Default)]
pub struct NewestVersionOracle;

impl ValidityOracle for NewestVersionOracle {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity> {
        let newest = newest_version(
            env.memtables,
            env.version,
            env.tables,
            record.user_key,
            env.memtable_seq,
            env.ctx,
        )?;
        // Titan compares the newest version's blob index with the record's place; a crash
        // between a job's two edits can leave two live copies of a record, and only the one the
        // newest version names is live.
        let live = env.version.values().names_record(
            env.values,
            record.user_key,
            newest.as_ref(),
            record.seq,
            record.location,
            env.ctx.class,
        )?;
        Ok(if live { Validity::Live } else { Validity::Dead })
    }

    /// The newest version, from the pinned memtables and tree.
    fn reads_index_tree(&self) -> bool {
        true
    }
}

/// Options only `titan` reads: a switch to another policy drops them (docs/gc.md, "Switching
/// policies").
pub const OWN_OPTIONS: &[&str] = &["titan_discardable_ratio"];

/// The roles of `titan`.
pub fn policy_set(opts: &Options) -> PolicySet {
    PolicySet {
        name: opts.gc_policy().name().to_string(),
        picker: Box::new(RatioPicker {
            garbage_ratio: opts.titan_discardable_ratio(),
            preferred_class: None,
        }),
        read_mode: GcReadMode::Full,
        oracle: Box::new(NewestVersionOracle),
        router: Arc::new(SingleClass::new(opts.min_separated_value_size())),
        commit: CommitStyle::WriteBack,
        hooks: Box::new(NoHooks),
        updates_handles_on_read: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gc::picker::PickContext;
    use crate::gc::picker::tests::cand;
    use crate::options::GcPolicyKind;

    #[test]
    fn victims_need_the_discardable_ratio() {
        let p = policy_set(
            &Options::default()
                .with_gc_policy(GcPolicyKind::Titan)
                .with_titan_discardable_ratio(0.5),
        );
        assert_eq!(p.name, "titan");
        assert_eq!(p.commit, CommitStyle::WriteBack);
        let cands = [cand(1, 100, 40), cand(2, 100, 90), cand(3, 100, 60)];
        let ctx = PickContext {
            max_input: 150,
            garbage_ratio: None,
            latest_seq: 100,
        };
        assert_eq!(
            p.picker.pick(&cands, &ctx),
            vec![2],
            "largest ratio first, bounded"
        );
        let wide = PickContext {
            max_input: 1000,
            ..ctx
        };
        assert_eq!(p.picker.pick(&cands, &wide), vec![2, 3], "0.4 is below 0.5");
    }
}
