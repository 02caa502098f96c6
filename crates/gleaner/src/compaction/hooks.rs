//! What a flush or compaction lets a GC policy see and decide: the job's context, its drop
//! events, and the fate of every entry a compaction keeps whose value is a handle. The policy
//! hands these out from its `CompactionHooks` role (`gc/hooks.rs`); they live here, beside the
//! jobs that call them, so compaction needs nothing from `gc`.

use super::iterator::{DropEvent, DropListener};
use crate::cache::TableCache;
use crate::error::Result;
use crate::io::IoClass;
use crate::key::{ParsedKey, SeqNo, make_lookup_key};
use crate::lookup::Lookup;
use crate::table::ReadCtx;
use crate::value::{HandlePayload, StoredHandle};
use crate::version::Version;

/// A flush or compaction, as the hooks see it.
#[derive(Debug, Clone, Copy)]
pub struct CompactionContext<'a> {
    /// The version the job reads.
    pub version: &'a Version,
    /// The level whose tables the job merges down; `None` for a flush (memtables).
    pub input_level: Option<u32>,
    /// The level the job writes.
    pub output_level: u32,
    /// No level below the output holds a table overlapping the job's key range: the output is
    /// the oldest data of that range.
    pub bottommost: bool,
    /// The job moves one table down without reading it (no entry passes the hooks).
    pub trivial_move: bool,
    /// The smallest user key of the job's inputs.
    pub smallest_user_key: &'a [u8],
    /// The largest user key of the job's inputs.
    pub largest_user_key: &'a [u8],
    /// The value tables the handles in the job's input tables name, ascending, each once: of a
    /// trivial move, every table the moved handles point into. Empty for a flush.
    pub named_value_tables: &'a [u64],
    /// The key tables of `version`, for [`CompactionContext::version_before`]; `None` where
    /// the job offers no lookups (unit tests of a hook).
    pub tables: Option<&'a TableCache>,
}

impl CompactionContext<'_> {
    /// The newest version of `user_key` older than `seq` in the version the job reads (its
    /// own inputs included), with its sequence number: what a hook that learns from a key's
    /// history reads of the version an entry replaces. A point lookup
    /// counted as compaction reads (`CompactionRead`), through the block cache. `None` when
    /// the version holds none, or the job offers no lookups.
    ///
    /// Errors: reading a key table fails.
    pub fn version_before(&self, user_key: &[u8], seq: SeqNo) -> Result<Option<(SeqNo, Lookup)>> {
        let Some(tables) = self.tables else {
            return Ok(None);
        };
        if seq == 0 {
            return Ok(None);
        }
        let ctx = ReadCtx {
            class: IoClass::CompactionRead,
            fill_cache: true,
            readahead: 0,
            readahead_ramp: false,
        };
        self.version
            .get_seq(tables, &make_lookup_key(user_key, seq - 1), ctx)
    }
}

/// What the kept-entry hook decides for an entry a compaction keeps whose value is a handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptEntry {
    /// Written out as it is (the engine still renames a stale handle to its record's place).
    Keep,
    /// Written out with this payload in place of its own (`None` removes it).
    SetPayload(Option<HandlePayload>),
    /// Its value is read and written again where the policy's router places it
    /// ([`RouteOrigin::Compaction`](super::router::RouteOrigin::Compaction), with the output level):
    /// into a value table of the compaction's own, in the class the router picks, or inline.
    /// The old record becomes garbage in the compaction's edit. The engine leaves in place a
    /// record it cannot move safely (one an alias names, or out of order), and every record
    /// when the policy's hooks do not say they relocate
    /// ([`CompactionHooks::relocates_values`](crate::gc::CompactionHooks::relocates_values)).
    Relocate,
}

/// The hooks of one flush or compaction: drop events (their context is the one
/// [`CompactionHooks::begin`](crate::gc::CompactionHooks::begin) was given) and, in compactions, the kept-entry decision.
pub trait EntryHooks: DropListener {
    /// Whether [`EntryHooks::kept`] decides anything: hooks that only listen say no, and
    /// compactions then neither decode kept handles for them nor prepare to relocate. Default:
    /// yes.
    fn decides_kept_entries(&self) -> bool {
        true
    }

    /// The fate of entry `key`, kept by a compaction, whose value is `handle` (after the engine
    /// renamed a stale one). Not asked in flushes. Default: [`KeptEntry::Keep`].
    fn kept(&mut self, key: &ParsedKey<'_>, handle: &StoredHandle) -> KeptEntry {
        let _ = (key, handle);
        KeptEntry::Keep
    }
}

/// Drop events of a flush or compaction to a listener, for policies whose hooks only listen.
pub struct ListenOnly<L: DropListener>(pub L);

impl<L: DropListener> DropListener for ListenOnly<L> {
    fn on_drop(&mut self, event: &DropEvent<'_>) {
        self.0.on_drop(event);
    }

    fn accepts_whole_table(&self, table: &crate::version::TableMeta) -> bool {
        self.0.accepts_whole_table(table)
    }

    fn on_whole_table(&mut self, table: &crate::version::TableMeta) {
        self.0.on_whole_table(table);
    }
}

impl<L: DropListener> EntryHooks for ListenOnly<L> {
    fn decides_kept_entries(&self) -> bool {
        false
    }
}
