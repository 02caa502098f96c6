//! The value router: which class, and so which stream of value tables, a separated value goes
//! to, at flush, in a GC job and (for schemes that relocate values there) in compaction.
//!
//! Classes belong to the router: it names them, numbers them from 0 and tags every value table
//! it routes to with the number (`ValueTableMeta::class`, docs/format.md). A job writes one
//! sorted run of tables per class it uses; stats count bytes per class by the router's names.
//! Victim pickers of the same policy may prefer some classes (Scavenger's hot tables).

use std::sync::Arc;

use crate::hotness::DropCache;
use crate::key::SeqNo;

/// Most classes one router may have: value-table class tags are below this, which keeps
/// per-class figures in fixed arrays.
pub const MAX_VALUE_CLASSES: usize = 8;

/// Where a value is being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteOrigin {
    /// A flush of memtables (the value's first time in a value table).
    Flush,
    /// A GC job copying a live record.
    Gc,
    /// A compaction relocating the value of an entry it keeps.
    Compaction,
}

/// Chooses the class of each separated value. Implementations are cheap to call (once per
/// value) and thread-safe.
pub trait ValueRouter: Send + Sync + std::fmt::Debug {
    /// The classes' names, indexed by class number (at most [`MAX_VALUE_CLASSES`]).
    fn class_names(&self) -> &'static [&'static str];

    /// The class of the value of `user_key` written at `seq`, `value_len` bytes long.
    fn class_for(&self, user_key: &[u8], seq: SeqNo, value_len: u64, origin: RouteOrigin) -> u32;
}

/// Every value in one class, `default` (class 0): TerarkDB and every policy that does not
/// separate values by kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct SingleClass;

/// The class of [`SingleClass`].
pub const CLASS_DEFAULT: u32 = 0;

impl ValueRouter for SingleClass {
    fn class_names(&self) -> &'static [&'static str] {
        &["default"]
    }

    fn class_for(&self, _: &[u8], _: SeqNo, _: u64, _: RouteOrigin) -> u32 {
        CLASS_DEFAULT
    }
}

/// Scavenger's hotness-aware writing (§3.4): values of keys the [`DropCache`] knows as recently
/// overwritten or deleted go to *hot* tables, the rest to *cold* ones. Class 0 stays unused, so
/// tables written before hotness was switched on keep their meaning.
#[derive(Debug, Clone)]
pub struct HotCold {
    cache: Arc<DropCache>,
}

/// Class of hot tables.
pub const CLASS_HOT: u32 = 1;
/// Class of cold tables.
pub const CLASS_COLD: u32 = 2;

impl HotCold {
    /// Routes by `cache`.
    pub fn new(cache: Arc<DropCache>) -> Self {
        HotCold { cache }
    }
}

impl ValueRouter for HotCold {
    fn class_names(&self) -> &'static [&'static str] {
        &["default", "hot", "cold"]
    }

    fn class_for(&self, user_key: &[u8], _: SeqNo, _: u64, _: RouteOrigin) -> u32 {
        if self.cache.is_hot(user_key) {
            CLASS_HOT
        } else {
            CLASS_COLD
        }
    }
}

/// The name of class `class` under `router`, or `class-N` for a tag the router does not know
/// (a table written under another policy).
pub fn class_name(router: &dyn ValueRouter, class: u32) -> String {
    router
        .class_names()
        .get(class as usize)
        .map_or_else(|| format!("class-{class}"), |n| (*n).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_cold_routes_by_the_drop_cache() {
        let cache = Arc::new(DropCache::new(1 << 20));
        let r = HotCold::new(Arc::clone(&cache));
        assert_eq!(r.class_for(b"k", 1, 10, RouteOrigin::Flush), CLASS_COLD);
        cache.insert(b"k", 5);
        assert_eq!(r.class_for(b"k", 6, 10, RouteOrigin::Gc), CLASS_HOT);
        assert_eq!(class_name(&r, CLASS_HOT), "hot");
        assert_eq!(class_name(&r, 7), "class-7");
        assert_eq!(SingleClass.class_for(b"k", 1, 1, RouteOrigin::Flush), 0);
        assert!(r.class_names().len() <= MAX_VALUE_CLASSES);
    }
}
