//! The TerarkDB family of GC policies (Scavenger paper §2.2, §3): value tables whose garbage
//! ratio reaches `gc_garbage_ratio` are collected, highest ratio first; live records are
//! rewritten in key order; handles are left as they are and resolved through inheritance
//! records.
//!
//! `terarkdb` is the family with every Scavenger technique off: each record is read in full and
//! checked with an index-tree lookup. `scavenger` turns the techniques on; each has its own
//! switch, so the paper's ablation variants (TDB-R, TDB-L, TDB-W, ...) are the same policy with
//! some switches flipped. Each technique is one role:
//!
//! - lazy read (§3.2, "R"): the read mode;
//! - index-decoupled lookups (§3.3, "L"): the oracle's lookup (GetKey);
//! - hotness-aware writing (§3.4, "W"): a DropCache fed by every drop event (a compaction
//!   hook), which routes values to hot and cold tables (the router), answers validity checks
//!   without a lookup (the oracle's shortcut) and makes the picker take hot tables first at
//!   equal garbage ratio.

pub mod drop_cache;
#[cfg(test)]
mod drop_cache_tests;
mod hot_cold;

pub use drop_cache::{DEFAULT_DROP_CACHE_BYTES, DropCache, DropCacheStats, entry_charge};
pub use hot_cold::{CLASS_COLD, CLASS_HOT, HotCold};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::hooks::{CompactionContext, CompactionHooks, EntryHooks, ListenOnly, NoHooks};
use super::oracle::{IndexOracle, LookupKind, OracleEnv, RecordRef, ValidityOracle};
use super::picker::RatioPicker;
use super::policy::{CommitStyle, GcReadMode, PolicySet};
use crate::compaction::router::{SingleClass, ValueRouter};
use crate::compaction::{DropEvent, DropListener};
use crate::error::Result;
use crate::gc::oracle::Validity;
use crate::options::Options;

/// Feeds compaction and flush drop events into a [`DropCache`]: every dropped version (an
/// overwritten one, or a tombstone that hides nothing any more) marks its key hot, with the
/// sequence number of the version that hides it ([`DropEvent::hidden_by`]), so a GC check can
/// declare any older record of the key garbage.
pub struct DropCacheFeeder<'a>(pub &'a DropCache);

impl DropListener for DropCacheFeeder<'_> {
    fn on_drop(&mut self, event: &DropEvent<'_>) {
        self.0.insert(event.key.user_key, event.hidden_by);
    }

    /// The DropCache is a shortcut: a record whose key it does not know is checked by an index
    /// lookup, which finds the key deleted.
    fn accepts_whole_table(&self, _: &crate::version::TableMeta) -> bool {
        true
    }
}

/// The index oracle with the DropCache's shortcut: a record whose key the DropCache knows a
/// newer version of, which every reader that could read the record sees, is garbage without a
/// lookup (§3.4); any other is checked by the index oracle.
#[derive(Debug)]
struct DropCacheOracle {
    cache: Arc<DropCache>,
    index: IndexOracle,
    /// Checks answered without a lookup, reported by [`HotnessHooks`].
    answers: Arc<AtomicU64>,
}

impl ValidityOracle for DropCacheOracle {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity> {
        let newest = self.cache.newest_seq(record.user_key);
        if env.validity.dead_by_newer_version(record.seq, newest) {
            self.answers.fetch_add(1, Ordering::Relaxed);
            return Ok(Validity::Dead);
        }
        self.index.check(record, env)
    }

    /// The DropCache's answers are shortcuts to what the index oracle would find: a newer
    /// version every reader sees, which compaction keeps.
    fn reads_index_tree(&self) -> bool {
        self.index.reads_index_tree()
    }
}

/// Feeds every drop event of flushes and compactions into the DropCache, and reports what
/// hotness did.
#[derive(Debug)]
struct HotnessHooks {
    cache: Arc<DropCache>,
    /// Validity checks the DropCache answered (counted by [`DropCacheOracle`]).
    answers: Arc<AtomicU64>,
}

/// Name in `stats().gc.policy_stats` of the validity checks the DropCache answered without an
/// index-tree lookup (counted since the open; jobs that were then abandoned included).
pub const DROP_CACHE_ANSWERS: &str = "drop_cache_answers";

impl CompactionHooks for HotnessHooks {
    /// Every drop event of every flush and compaction feeds the DropCache.
    fn begin<'a>(&'a self, _: &CompactionContext<'a>) -> Option<Box<dyn EntryHooks + 'a>> {
        Some(Box::new(ListenOnly(DropCacheFeeder(&self.cache))))
    }

    /// The DropCache's answers and its own figures, each as `drop_cache_<figure>`
    /// ([`DropCacheStats`]).
    fn stats(&self) -> std::collections::BTreeMap<String, u64> {
        let c = self.cache.stats();
        [
            (DROP_CACHE_ANSWERS, self.answers.load(Ordering::Relaxed)),
            ("drop_cache_entries", c.entries),
            ("drop_cache_used_bytes", c.used_bytes),
            ("drop_cache_capacity_bytes", c.capacity_bytes),
            ("drop_cache_inserts", c.inserts),
            ("drop_cache_updates", c.updates),
            ("drop_cache_evictions", c.evictions),
            ("drop_cache_rejected", c.rejected),
            ("drop_cache_hits", c.hits),
            ("drop_cache_misses", c.misses),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

/// Options only the TerarkDB family reads: the switches of Scavenger's techniques that no other
/// policy has (lazy read and its gap, hotness-aware writing and its DropCache). Its ratio
/// (`gc_garbage_ratio`) belongs to the foundation: the space throttle hands it to every policy's
/// picker. So does `index_decoupled_tables`, which decides every policy's key-table layout.
pub const OWN_OPTIONS: &[&str] = &[
    "gc_lazy_read",
    "gc_read_gap",
    "hotness_aware_writes",
    "drop_cache_bytes",
];

/// The roles of `terarkdb` or `scavenger` with the technique switches of `opts` resolved.
pub fn policy_set(opts: &Options) -> PolicySet {
    let drop_cache = opts.hotness_enabled().then(|| {
        Arc::new(DropCache::new(
            usize::try_from(opts.drop_cache_bytes()).unwrap_or(usize::MAX),
        ))
    });
    let answers = Arc::new(AtomicU64::new(0));
    let lookup = if opts.index_decoupled_enabled() {
        LookupKind::GetKey
    } else {
        LookupKind::Get
    };
    let (router, hooks): (Arc<dyn ValueRouter>, Box<dyn CompactionHooks>) = match &drop_cache {
        Some(cache) => (
            Arc::new(HotCold::new(
                Arc::clone(cache),
                opts.min_separated_value_size(),
            )),
            Box::new(HotnessHooks {
                cache: Arc::clone(cache),
                answers: Arc::clone(&answers),
            }),
        ),
        None => (
            Arc::new(SingleClass::new(opts.min_separated_value_size())),
            Box::new(NoHooks),
        ),
    };
    PolicySet {
        name: opts.gc_policy().name().to_string(),
        picker: Box::new(RatioPicker {
            garbage_ratio: opts.gc_garbage_ratio(),
            // Hot tables' garbage keeps growing: at equal ratio they are the better victims
            // (§3.4).
            preferred_class: drop_cache.is_some().then_some(CLASS_HOT),
        }),
        read_mode: if opts.lazy_read_enabled() {
            GcReadMode::Lazy
        } else {
            GcReadMode::Full
        },
        oracle: match &drop_cache {
            Some(cache) => Box::new(DropCacheOracle {
                cache: Arc::clone(cache),
                index: IndexOracle::new(lookup),
                answers,
            }),
            None => Box::new(IndexOracle::new(lookup)),
        },
        router,
        commit: CommitStyle::Inheritance,
        hooks,
        updates_handles_on_read: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::router::RouteOrigin;
    use crate::gc::picker::tests::cand;
    use crate::gc::picker::{PickContext, VictimPicker};
    use crate::options::{GcPolicyKind, Switch};

    fn ctx(max_input: u64, garbage_ratio: Option<f64>) -> PickContext {
        PickContext {
            max_input,
            garbage_ratio,
            latest_seq: 1000,
        }
    }

    #[test]
    fn the_throttles_ratio_overrides_the_policys() {
        let p = RatioPicker {
            garbage_ratio: 0.2,
            preferred_class: None,
        };
        let cands = [cand(1, 100, 10), cand(2, 100, 90), cand(3, 100, 50)];
        assert_eq!(p.pick(&cands, &ctx(1000, None)), vec![2, 3]);
        assert_eq!(p.pick(&cands, &ctx(1000, Some(0.1))), vec![2, 3, 1]);
    }

    #[test]
    fn switches_select_the_roles() {
        let tdb = policy_set(&Options::default().with_gc_policy(GcPolicyKind::Terarkdb));
        assert_eq!(tdb.name, "terarkdb");
        assert_eq!(tdb.read_mode, GcReadMode::Full);
        assert!(tdb.hooks.stats().is_empty());
        let ctx = crate::compaction::router::RouteContext {
            user_key: b"k",
            seq: 1,
            value_len: 1 << 20,
            payload: None,
            origin: RouteOrigin::Flush,
            level: Some(0),
            expiry: None,
            now: 1,
        };
        assert_eq!(
            tdb.router.place(&ctx),
            crate::compaction::router::Placement::Separated {
                class: 0,
                payload: None
            }
        );
        let scav = policy_set(&Options::default());
        assert_eq!(scav.name, "scavenger");
        assert_eq!(scav.read_mode, GcReadMode::Lazy);
        let version = crate::version::Version::new(7);
        let flush = crate::gc::CompactionContext {
            version: &version,
            input_level: None,
            output_level: 0,
            bottommost: true,
            trivial_move: false,
            smallest_user_key: &[],
            largest_user_key: &[],
            named_value_tables: &[],
            tables: None,
        };
        // With hotness, every flush and compaction feeds the DropCache; without, nothing.
        assert!(scav.hooks.stats().contains_key(DROP_CACHE_ANSWERS));
        // They only listen: compactions decode no kept handle for them.
        let hooks = scav.hooks.begin(&flush).expect("hooks");
        assert!(!hooks.decides_kept_entries());
        assert!(tdb.hooks.begin(&flush).is_none());
        assert_eq!(scav.router.class_names(), &["default", "hot", "cold"]);
        let r_only = policy_set(
            &Options::default()
                .with_gc_policy(GcPolicyKind::Terarkdb)
                .with_gc_lazy_read(Switch::On),
        );
        assert_eq!(r_only.read_mode, GcReadMode::Lazy);
        assert!(r_only.hooks.stats().is_empty());
    }
}
