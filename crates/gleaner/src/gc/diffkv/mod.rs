//! DiffKV (Li et al., "Differentiated Key-Value Storage Management for Balanced I/O
//! Performance", USENIX ATC '21), policy `diffkv` (docs/gc.md, "DiffKV"): values managed by
//! size — small ones inline in the index tree, medium ones in the vTree, whose levels mirror
//! the index tree's and whose values compactions merge into sorted groups so scans stay close
//! to a plain LSM-tree, large ones in vLogs collected greedily — for writes close to key-value
//! separation and scans close to no separation.
//!
//! - `classes.rs`: the size classes (the router) and each value table's metadata;
//! - `vtree.rs`: the merge plan as pure functions of the tables (lazy merge, sorted-run tags);
//! - `hooks.rs`: merges in the index tree's compactions;
//! - `picker.rs`: greedy GC of vLogs, and of vTables in ranges no compaction reaches.

mod classes;
mod hooks;
mod picker;
mod vtree;

use std::sync::Arc;

use self::classes::{Placed, SizeRouter};
use self::hooks::{Figures, MergeHooks, MergeSettings};
use self::picker::GreedyPicker;
use super::oracle::{IndexOracle, LookupKind};
use super::policy::{CommitStyle, GcReadMode, PolicySet};
use crate::error::{Error, Result};
use crate::options::Options;

pub use self::classes::{CLASS_VLOG_COLD, CLASS_VLOG_HOT, CLASS_VTREE, TableMeta};

/// The options only `diffkv` reads.
pub const OWN_OPTIONS: &[&str] = &[
    "diffkv_small_max",
    "diffkv_large_min",
    "diffkv_max_sorted_runs",
    "diffkv_merge_levels",
    "diffkv_gc_ratio",
    "diffkv_vtree_gc_ratio",
];

/// What a table's metadata says, for `gleaner dump`: the level of the entries naming its
/// values when it was written, and whether a GC job wrote it.
pub fn describe_meta(data: &[u8]) -> String {
    match TableMeta::decode(data) {
        Some(TableMeta { by_gc: true, .. }) => "(written by GC)".to_string(),
        Some(TableMeta { level, .. }) => format!("(level {level})"),
        None => "(not diffkv metadata of a known format)".to_string(),
    }
}

/// The roles of `diffkv`.
///
/// Errors: option `min_separated_value_size` set to a value other than `diffkv_small_max`,
/// which replaces it under this policy (it would otherwise be silently ignored).
pub fn policy_set(opts: &Options) -> Result<PolicySet> {
    if opts.is_overridden("min_separated_value_size")
        && opts.min_separated_value_size() != opts.diffkv_small_max()
    {
        return Err(Error::invalid(format!(
            "option `min_separated_value_size` is {}, but policy `diffkv` separates by \
             `diffkv_small_max` ({}) instead: leave it unset, or set both alike",
            opts.min_separated_value_size(),
            opts.diffkv_small_max()
        )));
    }
    let router = Arc::new(SizeRouter {
        small_max: opts.diffkv_small_max(),
        large_min: opts.diffkv_large_min(),
        placed: Placed::default(),
    });
    Ok(PolicySet {
        name: opts.gc_policy().name().to_string(),
        picker: Box::new(GreedyPicker {
            vlog_ratio: opts.diffkv_gc_ratio(),
            vtree_ratio: opts.diffkv_vtree_gc_ratio(),
        }),
        read_mode: GcReadMode::Full,
        oracle: Box::new(IndexOracle::new(LookupKind::Get)),
        router: Arc::clone(&router) as Arc<dyn crate::compaction::router::ValueRouter>,
        // Moved records stay reachable through inheritance: no handle is written back, so no
        // user update racing a GC job can be lost (the authors' write-back could lose one).
        commit: CommitStyle::Inheritance,
        hooks: Box::new(MergeHooks {
            settings: MergeSettings {
                max_runs: opts.diffkv_max_sorted_runs() as usize,
                gc_ratio: opts.diffkv_gc_ratio(),
                merge_levels: opts.diffkv_merge_levels(),
            },
            router,
            figures: Figures::default(),
        }),
        updates_handles_on_read: false,
    })
}
