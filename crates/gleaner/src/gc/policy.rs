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
//! Each policy module builds its own set (`gc/scavenger.rs` for `terarkdb`, `scavenger` and the
//! ablation variants); [`policy_set`] is the registry from option `gc_policy` to those builders,
//! the one place that names every policy.

use std::sync::Arc;

use super::hooks::CompactionHooks;
use super::oracle::ValidityOracle;
use super::picker::VictimPicker;
use super::runtime::PolicyContext;
use crate::compaction::router::ValueRouter;
use crate::options::{GcPolicyKind, Options};

/// How a GC job reads its victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcReadMode {
    /// Every record, value included, in one sequential pass (TerarkDB).
    Full,
    /// The dense index first; only live records' values, adjacent ones coalesced (Scavenger's
    /// lazy read, §3.2).
    Lazy,
}

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
/// [`Options::with_custom_policy`]. **Unstable**: the roles change as the schemes that use them
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

/// The options only `policy` reads (its module's `OWN_OPTIONS`): when a database is reopened
/// under another policy, the values saved in its OPTIONS file for these are not applied (the
/// new policy does not read them, and a later switch back starts from the defaults).
pub fn own_options(policy: GcPolicyKind) -> &'static [&'static str] {
    match policy {
        GcPolicyKind::Terarkdb | GcPolicyKind::Scavenger => super::scavenger::OWN_OPTIONS,
        GcPolicyKind::Titan => super::titan::OWN_OPTIONS,
        GcPolicyKind::Blobdb => super::blobdb::OWN_OPTIONS,
        GcPolicyKind::Novkv => super::novkv::OWN_OPTIONS,
        // A custom policy reads its settings from its factory, none from the options.
        GcPolicyKind::Custom => &[],
    }
}

/// Refuses options the caller set explicitly, to a value other than the default, that only
/// other policies read (their `OWN_OPTIONS`): `gc_policy=titan` with `gc_lazy_read=on` would
/// otherwise be accepted and silently do nothing. Values only remembered in OPTIONS from an
/// earlier open never refuse an open (a switch drops them). An explicit default is accepted: it
/// asks for nothing the policy lacks (tools that run several policies on one database set every
/// switch so, to override what an earlier run saved).
///
/// Errors: [`Error::InvalidArgument`] naming the option, the policies that read it, the policy
/// the open runs, and that policy's own options.
pub fn check_options(opts: &Options) -> crate::error::Result<()> {
    let policy = opts.gc_policy();
    let mine = own_options(policy);
    let defaults = Options::default().persisted_values();
    let values = opts.persisted_values();
    for (name, value) in &values {
        if mine.contains(name) || !opts.is_overridden(name) {
            continue;
        }
        let owners: Vec<&str> = GcPolicyKind::ALL
            .iter()
            .filter(|p| own_options(**p).contains(name))
            .map(|p| p.name())
            .collect();
        if owners.is_empty() || defaults.iter().any(|(n, v)| n == name && v == value) {
            continue;
        }
        let own = if mine.is_empty() {
            "none".to_string()
        } else {
            mine.iter()
                .map(|o| format!("`{o}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let readers = owners
            .iter()
            .map(|o| format!("`{o}`"))
            .collect::<Vec<_>>()
            .join(" or ");
        return Err(crate::error::Error::invalid(format!(
            "option `{name}` is set to {value}, but only policy {readers} reads it and this \
             database runs `{}`: leave the option unset, or choose policy {readers} (the \
             options of `{}` alone: {own})",
            policy.name(),
            policy.name(),
        )));
    }
    Ok(())
}

/// The name of the policy `opts` select: option `gc_policy`'s, or the custom factory's.
pub fn policy_name(opts: &Options) -> String {
    match (opts.gc_policy(), opts.custom_policy()) {
        (GcPolicyKind::Custom, Some(f)) => f.name().to_string(),
        (p, _) => p.name().to_string(),
    }
}

/// The policy `ctx.opts` select (option `gc_policy`, with the technique switches it resolves).
///
/// Errors: a custom policy's factory fails, or none is registered
/// ([`Error::InvalidArgument`](crate::Error::InvalidArgument)).
pub fn policy_set(ctx: &PolicyContext<'_>) -> crate::error::Result<PolicySet> {
    let opts = ctx.opts;
    Ok(match opts.gc_policy() {
        GcPolicyKind::Terarkdb | GcPolicyKind::Scavenger => super::scavenger::policy_set(opts),
        GcPolicyKind::Titan => super::titan::policy_set(opts),
        GcPolicyKind::Blobdb => super::blobdb::policy_set(opts),
        GcPolicyKind::Novkv => super::novkv::policy_set(opts),
        GcPolicyKind::Custom => {
            let factory = opts.custom_policy().ok_or_else(|| {
                crate::error::Error::invalid(
                    "option `gc_policy` is `custom`, but no policy is registered: use \
                     Options::with_custom_policy",
                )
            })?;
            let set = factory.build(ctx)?;
            if set.name != factory.name() {
                return Err(crate::error::Error::invalid(format!(
                    "custom GC policy `{}` built roles named `{}`",
                    factory.name(),
                    set.name
                )));
            }
            set
        }
    })
}
