//! Scavenger's hotness-aware writing (§3.4): the value router that sends values of keys the
//! DropCache knows as recently overwritten or deleted to *hot* value tables, the rest to *cold*
//! ones.

use std::sync::Arc;

use super::drop_cache::DropCache;
use crate::compaction::router::{
    CLASS_DEFAULT, Placement, RouteContext, RouteOrigin, ValueRouter, by_size,
};

/// Scavenger's hotness-aware writing (§3.4): values of keys the [`DropCache`] knows as recently
/// overwritten or deleted go to *hot* tables, the rest to *cold* ones, separated by size. Class 0
/// stays for values replayed at open, before the cache knows anything, so tables written before
/// hotness was switched on keep their meaning.
#[derive(Debug, Clone)]
pub struct HotCold {
    cache: Arc<DropCache>,
    min_size: u64,
}

/// Class of hot tables.
pub const CLASS_HOT: u32 = 1;
/// Class of cold tables.
pub const CLASS_COLD: u32 = 2;

impl HotCold {
    /// Routes by `cache`; separates values of at least `min_size` bytes.
    pub fn new(cache: Arc<DropCache>, min_size: u64) -> Self {
        HotCold { cache, min_size }
    }
}

impl ValueRouter for HotCold {
    fn class_names(&self) -> &'static [&'static str] {
        &["default", "hot", "cold"]
    }

    fn place(&self, ctx: &RouteContext<'_>) -> Placement {
        let class = if ctx.origin == RouteOrigin::Recovery {
            CLASS_DEFAULT
        } else if self.cache.is_hot(ctx.user_key) {
            CLASS_HOT
        } else {
            CLASS_COLD
        };
        by_size(ctx, self.min_size, class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::router::tests::{class, ctx};
    use crate::compaction::router::{MAX_VALUE_CLASSES, class_name};

    #[test]
    fn hot_cold_routes_by_the_drop_cache_and_separates_by_size() {
        let cache = Arc::new(DropCache::new(1 << 20));
        let r = HotCold::new(Arc::clone(&cache), 100);
        assert_eq!(
            class(r.place(&ctx(b"k", 100, RouteOrigin::Flush))),
            Some(CLASS_COLD)
        );
        cache.insert(b"k", 5);
        assert_eq!(
            class(r.place(&ctx(b"k", 100, RouteOrigin::Gc))),
            Some(CLASS_HOT)
        );
        // Replayed values, and short ones, as the engine's rule says.
        assert_eq!(
            class(r.place(&ctx(b"k", 100, RouteOrigin::Recovery))),
            Some(CLASS_DEFAULT)
        );
        assert_eq!(class(r.place(&ctx(b"k", 99, RouteOrigin::Flush))), None);
        assert_eq!(class_name(&r, CLASS_HOT), "hot");
        assert_eq!(class_name(&r, 7), "class-7");
        assert!(r.class_names().len() <= MAX_VALUE_CLASSES);
    }
}
