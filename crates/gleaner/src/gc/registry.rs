//! The registry of GC policies: option `gc_policy` to each policy's builder and own options, the
//! one place that names every policy (docs/architecture.md, "Adding a GC scheme").

use super::policy::PolicySet;
use super::runtime::PolicyContext;
use crate::options::{GcPolicyKind, Options};

/// The options only `policy` reads (its module's `OWN_OPTIONS`): when a database is reopened
/// under another policy, the values saved in its OPTIONS file for these are not applied (the
/// new policy does not read them, and a later switch back starts from the defaults).
pub fn own_options(policy: GcPolicyKind) -> &'static [&'static str] {
    match policy {
        GcPolicyKind::Terarkdb | GcPolicyKind::Scavenger => super::scavenger::OWN_OPTIONS,
        GcPolicyKind::Titan => super::titan::OWN_OPTIONS,
        GcPolicyKind::Blobdb => super::blobdb::OWN_OPTIONS,
        GcPolicyKind::Novkv => super::novkv::OWN_OPTIONS,
        GcPolicyKind::Dumpkv => super::dumpkv::OWN_OPTIONS,
        GcPolicyKind::Diffkv => super::diffkv::OWN_OPTIONS,
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
/// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the option, the policies that read it, the policy
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

/// What a built-in policy says of its own file `slot` (its data, checksum already checked):
/// lines for `gleaner dump`, or why `gleaner check` should warn of it. `None` when the policy
/// does not describe its files (or `policy` is no built-in one).
pub fn describe_policy_file(
    policy: &str,
    slot: &str,
    data: &[u8],
) -> Option<std::result::Result<Vec<String>, String>> {
    let kind = GcPolicyKind::ALL.into_iter().find(|p| p.name() == policy)?;
    match kind {
        GcPolicyKind::Dumpkv => Some(super::dumpkv::describe_file(slot, data)),
        _ => None,
    }
}

/// What a built-in policy says of the metadata it wrote into a value table's manifest record
/// (`data`), for `gleaner dump`; `None` when the policy does not describe it (or `policy` is no
/// built-in one).
pub fn describe_table_meta(policy: &str, data: &[u8]) -> Option<String> {
    let kind = GcPolicyKind::ALL.into_iter().find(|p| p.name() == policy)?;
    match kind {
        GcPolicyKind::Diffkv => Some(super::diffkv::describe_meta(data)),
        _ => None,
    }
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
        GcPolicyKind::Dumpkv => super::dumpkv::policy_set(ctx)?,
        GcPolicyKind::Diffkv => super::diffkv::policy_set(opts)?,
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
