//! A GC policy is a composition of roles (DESIGN.md, "GC policies"), built once at open into one
//! [`PolicySet`] that the engine consults wherever schemes differ:
//!
//! - **victim selection** ([`VictimPicker`], `gc/picker.rs`): which value tables a job collects;
//! - **read mode** ([`GcReadMode`]): how a job reads its victims;
//! - **validity oracle** ([`ValidityOracle`], `gc/oracle.rs`): which records are live;
//! - **value router** ([`ValueRouter`], `compaction/router.rs`): which class, and so which run of value
//!   tables, a value goes to at flush, in GC and in compaction;
//! - **commit style** ([`CommitStyle`]): how references to moved records stay valid;
//! - **hooks** ([`CompactionHooks`], `gc/hooks.rs`): what a policy adds to flushes,
//!   compactions (the kept-entry hook, drop events, trivial moves, finished jobs) and GC jobs
//!   (per-record verdicts, finished jobs);
//! - **handle updates on read** ([`PolicySet::updates_handles_on_read`]): whether reads that
//!   resolve a stale handle write an alias.
//!
//! Each policy's folder builds its own set (`gc/scavenger/` for `terarkdb`, `scavenger` and the
//! ablation variants); `gc/registry.rs` maps option `gc_policy` to those builders, the one place
//! that names every policy.

use std::sync::Arc;

use super::hooks::CompactionHooks;
pub use super::job::GcReadMode;
use super::oracle::ValidityOracle;
use super::picker::VictimPicker;
use super::runtime::PolicyContext;
use crate::compaction::router::ValueRouter;

/// How references to records a GC job moved stay valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitStyle {
    /// The index tree is not touched: inheritance records map each victim to the job's
    /// outputs, handles naming a victim resolve through them, and compaction rewrites stale
    /// handles as it passes them.
    Inheritance,
    /// The new handle of each moved record is written back into the index tree through the
    /// write path, if the key's newest version still names the record (Titan); the victims are
    /// retired, readable until no snapshot can read the versions naming them.
    WriteBack,
}

/// Builds the roles of a GC policy defined outside the engine, registered with
/// [`Options::with_custom_policy`](crate::Options::with_custom_policy). **Unstable**: the roles change as the schemes that use them
/// arrive (docs/architecture.md, "Adding a GC scheme").
pub trait PolicyFactory: Send + Sync + std::fmt::Debug {
    /// The policy's name, saved in OPTIONS as `gc_policy=custom:NAME`: 1 to
    /// [`MAX_POLICY_NAME`](crate::options::MAX_POLICY_NAME) letters, digits, `_` or `-`.
    fn name(&self) -> &str;

    /// The roles for the database `ctx` describes (its options, directory, recovered version,
    /// the policy's own files and tasks), called once per open.
    ///
    /// Errors: whatever the factory refuses; the open fails with it.
    fn build(&self, ctx: &PolicyContext<'_>) -> crate::error::Result<PolicySet>;
}

/// The roles of the policy a database runs, built once at open.
#[derive(Debug)]
pub struct PolicySet {
    /// The policy's name (as in option `gc_policy`; a custom policy's own name).
    pub name: String,
    /// Victim selection.
    pub picker: Box<dyn VictimPicker>,
    /// How victims are read.
    pub read_mode: GcReadMode,
    /// Which records are live.
    pub oracle: Box<dyn ValidityOracle>,
    /// Which class a value goes to.
    pub router: Arc<dyn ValueRouter>,
    /// How moved records stay reachable.
    pub commit: CommitStyle,
    /// What the policy adds to flushes and compactions.
    pub hooks: Box<dyn CompactionHooks>,
    /// Selective handle updating on reads (NovKV §III-D): a point read whose handle named a
    /// collected table writes an alias naming the record's current place, so the next read of
    /// the key needs no search (`db/handle_updates.rs`, docs/gc.md).
    pub updates_handles_on_read: bool,
}

impl PolicySet {
    /// Whether a GC job must wait, before its checks, for the compactions running when it
    /// claimed its victims: unless its oracle reads the index tree alone and no compaction
    /// relocates values (docs/gc.md, "Racing with compaction", rule 2).
    pub(crate) fn jobs_wait_for_older_compactions(&self) -> bool {
        !self.oracle.reads_index_tree() || self.hooks.relocates_values()
    }
}

#[cfg(test)]
mod tests {
    use crate::options::{GcPolicyKind, Options, Switch};

    /// Which built-in policies' jobs wait for the compactions running at their claim: those
    /// whose oracle judges from drop keys, and those whose compactions relocate values.
    #[test]
    fn jobs_wait_for_older_compactions_only_where_checks_could_copy_their_drops() {
        let opts = |p: GcPolicyKind| Options::default().with_gc_policy(p);
        let waits = |set: super::PolicySet| set.jobs_wait_for_older_compactions();
        for hotness in [Switch::On, Switch::Off] {
            let o = opts(GcPolicyKind::Scavenger).with_hotness_aware_writes(hotness);
            assert!(!waits(super::super::scavenger::policy_set(&o)), "{hotness:?}");
        }
        let terarkdb = opts(GcPolicyKind::Terarkdb);
        assert!(!waits(super::super::scavenger::policy_set(&terarkdb)));
        assert!(!waits(super::super::titan::policy_set(&opts(
            GcPolicyKind::Titan
        ))));
        assert!(waits(super::super::novkv::policy_set(&opts(
            GcPolicyKind::Novkv
        ))));
        assert!(waits(super::super::blobdb::policy_set(&opts(
            GcPolicyKind::Blobdb
        ))));
        assert!(waits(
            super::super::diffkv::policy_set(&opts(GcPolicyKind::Diffkv)).expect("diffkv")
        ));
    }
}
