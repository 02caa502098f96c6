//! Hotness tracking: which user keys are being overwritten or deleted right now.
//!
//! The [`DropCache`] (Scavenger §3.4) is fed by compaction drop events and answers two questions:
//! flush and GC ask whether a key is *hot* to route its value to a hot or a cold value table
//! (hotness-aware writing), and a GC validity check asks for the newest sequence number known for
//! a key, so a record already shadowed by a newer version needs no index lookup.

pub mod drop_cache;

#[cfg(test)]
mod tests;

pub use drop_cache::{DEFAULT_DROP_CACHE_BYTES, DropCache, DropCacheStats, entry_charge};

use crate::compaction::{DropEvent, DropListener};

/// Feeds compaction and flush drop events into a [`DropCache`]: every dropped version (an
/// overwritten one, or a tombstone that hides nothing any more) marks its key hot, with the
/// sequence number of the version that hides it ([`DropEvent::hidden_by`]), so a GC check can
/// declare any older record of the key garbage.
pub struct DropCacheFeeder<'a>(pub &'a DropCache);

impl DropListener for DropCacheFeeder<'_> {
    fn on_drop(&mut self, event: &DropEvent<'_>) {
        self.0.insert(event.key.user_key, event.hidden_by);
    }
}
