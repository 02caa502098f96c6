//! The memtable: a concurrent skiplist of internal keys, written by the group-commit leader and
//! read lock-free by any number of readers and iterators.
//!
//! Each entry is one allocation holding `internal key | value`; its order is the internal-key
//! order, so versions of a key sit newest first and a lookup is one `lower_bound`.
//!
//! Range tombstones are kept apart, in a list fragmented on demand
//! (`range_del::FragmentedTombstones`), so a point read asks them with one binary search and a
//! memtable without any pays one atomic load.

use crate::batch::{BatchOp, RangeTombstoneLoad};
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use bytes::Bytes;
use crossbeam_skiplist::SkipSet;
use crossbeam_skiplist::set::Entry;
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind, compare_internal};
use crate::lookup::{KeyLookup, Lookup};
use crate::range_del::{FragmentedTombstones, RangeTombstone};
use crate::value::{StoredHandle, ValueTable};

mod filter;

use filter::MemFilter;

/// Estimated bytes of skiplist bookkeeping per entry (node header, tower, allocation slack),
/// added to the entry's own bytes when measuring the memtable against `memtable_size`. (A short
/// key's slot in the node is counted as the key's own bytes: the buffer it would otherwise
/// take on the heap is not allocated.)
const ENTRY_OVERHEAD: u64 = 80;

/// Internal keys up to this many bytes live in the skiplist node itself: a search compares the
/// keys of the nodes it passes, and a key behind a pointer costs a cache miss per node when the
/// values beside it are large (every entry's buffer on its own pages).
const INLINE_KEY: usize = 40;

/// An internal key, in the node when it is short.
enum NodeKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl NodeKey {
    /// The key made of `parts` laid end to end (a user key and its trailer, or a whole
    /// internal key).
    fn new(parts: &[&[u8]]) -> NodeKey {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > INLINE_KEY {
            return NodeKey::Heap(parts.concat().into_boxed_slice());
        }
        let mut bytes = [0u8; INLINE_KEY];
        let mut at = 0;
        for p in parts {
            bytes[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        NodeKey::Inline {
            len: len as u8,
            bytes,
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            NodeKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            NodeKey::Heap(b) => b,
        }
    }
}

struct MemEntry {
    ikey: NodeKey,
    /// Shared with the readers a point lookup hands it to, so that a lookup copies nothing.
    value: Bytes,
}

impl MemEntry {
    fn ikey(&self) -> &[u8] {
        self.ikey.as_slice()
    }
    fn value(&self) -> &[u8] {
        &self.value
    }
    /// A search key: `target` is an internal key.
    fn probe(target: &[u8]) -> Self {
        MemEntry {
            ikey: NodeKey::new(&[target]),
            value: Bytes::new(),
        }
    }
}

impl PartialEq for MemEntry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for MemEntry {}
impl PartialOrd for MemEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for MemEntry {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(self.ikey(), other.ikey())
    }
}

/// Most range tombstones one memtable holds: the write path switches to a new memtable before a
/// write would pass this many (and refuses a batch holding more), so a flood of range deletes
/// costs memtables (and flushes), never unbounded memory or fragmenting time. Nested ranges
/// make fragments quadratic in the tombstones (each fragment lists every tombstone covering
/// it): at 1,024, at most about half a million sequence numbers, 4 MiB.
pub const MAX_RANGE_TOMBSTONES: u64 = 1024;

/// Most bytes of range-tombstone keys (starts and ends) one memtable holds: the write path
/// switches it before a write would pass them (and refuses a batch holding more), whatever
/// `memtable_size` allows: a flush writes them into one table's range-deletion block, which
/// must stay far below the block limit (`table::format::MAX_BLOCK_CONTENTS`) when the 8
/// memtables a flush takes at most are written together (fragments at most double them).
pub const MAX_RANGE_TOMBSTONE_BYTES: u64 = 8 << 20;

/// Estimated bytes of bookkeeping per range tombstone (list slot, fragment, sequence number).
const RANGE_TOMBSTONE_OVERHEAD: u64 = 96;

/// A memtable's range tombstones, and their fragments once a reader asked for them.
#[derive(Default)]
struct RangeTombstones {
    list: Vec<RangeTombstone>,
    fragments: Option<Arc<FragmentedTombstones>>,
}

/// What [`MemTable::find`] found for a key.
enum Found<'a> {
    /// The key's newest version at the lookup's sequence number: its sequence number, kind and
    /// entry.
    Version {
        seq: SeqNo,
        kind: ValueKind,
        entry: Entry<'a, MemEntry>,
    },
    /// A range tombstone at this sequence number, newer than any version of the key here.
    RangeDeleted(SeqNo),
}

/// An in-memory sorted buffer of recent writes.
pub struct MemTable {
    set: SkipSet<MemEntry>,
    /// The user keys of the versions in `set`: a lookup of a key not here skips the skiplist.
    filter: MemFilter,
    range_tombstones: Mutex<RangeTombstones>,
    /// How many range tombstones `range_tombstones` holds (read without its lock).
    range_tombstone_count: AtomicU64,
    /// Bytes of their start and end keys.
    range_tombstone_bytes: AtomicU64,
    approx_bytes: AtomicU64,
    entries: AtomicU64,
    /// Smallest sequence number inserted (`u64::MAX` while empty).
    smallest_seq: AtomicU64,
    /// Largest sequence number inserted (0 while empty).
    largest_seq: AtomicU64,
    wal_number: u64,
    /// Views of the open value segments this memtable's handles name (`separate_at=write`):
    /// held as long as the memtable is, so a reader that found a handle here can read its
    /// record (`cache::FileCache::register_open`).
    segments: Mutex<Vec<Arc<ValueTable>>>,
}

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTable")
            .field("wal_number", &self.wal_number)
            .field("entries", &self.len())
            .field("approx_bytes", &self.approximate_bytes())
            .finish()
    }
}

impl MemTable {
    /// An empty memtable whose writes are logged in WAL `wal_number`, with a key filter sized
    /// for `memtable_size` bytes (option `memtable_size`; a memtable may grow past it, and its
    /// filter then rules out fewer keys).
    pub fn new(wal_number: u64, memtable_size: u64) -> Self {
        MemTable {
            set: SkipSet::new(),
            filter: MemFilter::for_memtable_size(memtable_size),
            range_tombstones: Mutex::default(),
            range_tombstone_count: AtomicU64::new(0),
            range_tombstone_bytes: AtomicU64::new(0),
            approx_bytes: AtomicU64::new(0),
            entries: AtomicU64::new(0),
            smallest_seq: AtomicU64::new(u64::MAX),
            largest_seq: AtomicU64::new(0),
            wal_number,
            segments: Mutex::new(Vec::new()),
        }
    }

    /// The smallest sequence number in the memtable, or `None` while it is empty: every
    /// version below it that the database holds is in an older memtable or a key table.
    pub fn smallest_seq(&self) -> Option<SeqNo> {
        Some(self.smallest_seq.load(AtomicOrdering::Acquire)).filter(|&s| s != u64::MAX)
    }

    /// The largest sequence number in the memtable (0 while it is empty). A reader whose
    /// sequence number is at or below it has seen every version up to it: versions are
    /// inserted before the write that made them is visible.
    pub fn largest_seq(&self) -> SeqNo {
        self.largest_seq.load(AtomicOrdering::Acquire)
    }

    /// The WAL that holds this memtable's writes.
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// Inserts one version. `(user_key, seq)` must be new to the memtable.
    pub fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        let size = (user_key.len() + key::TRAILER_LEN + value.len()) as u64 + ENTRY_OVERHEAD;
        let entry = MemEntry {
            ikey: NodeKey::new(&[user_key, &key::pack_trailer(seq, kind as u8).to_le_bytes()]),
            value: Bytes::copy_from_slice(value),
        };
        // Before the skiplist: a reader that can see the version has seen its filter bits.
        self.filter.insert(user_key);
        self.set.insert(entry);
        self.approx_bytes.fetch_add(size, AtomicOrdering::Relaxed);
        self.entries.fetch_add(1, AtomicOrdering::Relaxed);
        self.smallest_seq.fetch_min(seq, AtomicOrdering::AcqRel);
        self.largest_seq.fetch_max(seq, AtomicOrdering::AcqRel);
    }

    /// Applies one op of a write batch at `seq` (new to the memtable): a version, or a range
    /// tombstone. What the write path and WAL replay both do with each op.
    pub(crate) fn apply(&self, seq: SeqNo, op: &BatchOp<'_>) {
        match *op {
            BatchOp::Put {
                key,
                value,
                expiry: None,
            } => self.add(seq, ValueKind::Value, key, value),
            BatchOp::Put {
                key,
                value,
                expiry: Some(e),
            } => {
                let mut stored = Vec::with_capacity(crate::expiry::INLINE_EXPIRY_LEN + value.len());
                crate::expiry::encode_inline(&mut stored, e, value);
                self.add(seq, ValueKind::ValueWithExpiry, key, &stored);
            }
            BatchOp::Delete { key } => self.add(seq, ValueKind::Deletion, key, &[]),
            BatchOp::PutHandle { key, handle } => {
                self.add(seq, ValueKind::ValueHandle, key, handle);
            }
            BatchOp::DeleteRange { start, end } => self.add_range_tombstone(seq, start, end),
        }
    }

    /// Counts `bytes` written elsewhere for this memtable's entries (values appended to its
    /// value segments) against `memtable_size`, so that a memtable is flushed after as many
    /// user bytes whichever way values are written.
    pub(crate) fn charge(&self, bytes: u64) {
        self.approx_bytes.fetch_add(bytes, AtomicOrdering::Relaxed);
    }

    /// Keeps `segment`, a view of an open value segment its handles name, readable while
    /// this memtable is held.
    pub(crate) fn hold_segment(&self, segment: Arc<ValueTable>) {
        self.segments.lock().push(segment);
    }

    /// Inserts range tombstone `[start, end)` at `seq` (`start < end`; the write path checks).
    /// `seq` must be new to the memtable.
    pub fn add_range_tombstone(&self, seq: SeqNo, start: &[u8], end: &[u8]) {
        debug_assert!(start < end, "an empty range tombstone");
        let size = (start.len() + end.len()) as u64 + RANGE_TOMBSTONE_OVERHEAD;
        let mut rt = self.range_tombstones.lock();
        rt.list.push(RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        });
        rt.fragments = None;
        self.range_tombstone_count
            .store(rt.list.len() as u64, AtomicOrdering::Release);
        drop(rt);
        self.range_tombstone_bytes
            .fetch_add((start.len() + end.len()) as u64, AtomicOrdering::Relaxed);
        self.approx_bytes.fetch_add(size, AtomicOrdering::Relaxed);
        self.smallest_seq.fetch_min(seq, AtomicOrdering::AcqRel);
        self.largest_seq.fetch_max(seq, AtomicOrdering::AcqRel);
    }

    /// How many range tombstones the memtable holds (at most [`MAX_RANGE_TOMBSTONES`] once the
    /// write path switches memtables at that count).
    pub fn range_tombstone_count(&self) -> u64 {
        self.range_tombstone_count.load(AtomicOrdering::Acquire)
    }

    /// The memtable's range tombstones, fragmented (built on the first call after a change,
    /// then shared); `None` when it has none.
    pub(crate) fn range_tombstones(&self) -> Option<Arc<FragmentedTombstones>> {
        if self.range_tombstone_count() == 0 {
            return None;
        }
        let mut rt = self.range_tombstones.lock();
        if rt.fragments.is_none() {
            rt.fragments = Some(Arc::new(FragmentedTombstones::new(rt.list.iter().cloned())));
        }
        rt.fragments.clone()
    }

    /// What the memtable holds for `user_key` at `seq`: its newest version there, unless a range
    /// tombstone of the memtable at most `seq` covering the key is newer than that version (or
    /// covers it with no version here), which answers instead. Every version in older
    /// memtables and key tables is older than such a tombstone.
    fn find(&self, user_key: &[u8], seq: SeqNo) -> Option<Found<'_>> {
        let deleted_at = self
            .range_tombstones()
            .and_then(|f| f.newest_covering(user_key, seq));
        if !self.filter.may_contain(user_key) {
            return deleted_at.map(Found::RangeDeleted);
        }
        let trailer = key::pack_trailer(seq, key::KIND_FOR_SEEK).to_le_bytes();
        let probe = MemEntry {
            ikey: NodeKey::new(&[user_key, &trailer]),
            value: Bytes::new(),
        };
        let found = self
            .set
            .lower_bound(Bound::Included(&probe))
            .and_then(|entry| {
                let parsed = key::ParsedKey::parse(entry.value().ikey())?;
                (parsed.user_key == user_key).then_some((parsed.seq, parsed.kind, entry))
            });
        let Some((version_seq, kind, entry)) = found else {
            return deleted_at.map(Found::RangeDeleted);
        };
        if let Some(t) = deleted_at.filter(|&t| t > version_seq) {
            return Some(Found::RangeDeleted(t));
        }
        Some(Found::Version {
            seq: version_seq,
            kind,
            entry,
        })
    }

    /// The newest version of `user_key` with sequence at most `seq`, if the memtable has one. A
    /// range tombstone of the memtable at most `seq` covering the key and newer than that
    /// version (or covering it with no version here) answers `Deleted`: every version in older
    /// memtables and key tables is older than the tombstone.
    pub fn get(&self, user_key: &[u8], seq: SeqNo) -> Result<Option<Lookup>> {
        let (version_seq, kind, entry) = match self.find(user_key, seq) {
            None => return Ok(None),
            Some(Found::RangeDeleted(_)) => return Ok(Some(Lookup::Deleted)),
            Some(Found::Version { seq, kind, entry }) => (seq, kind, entry),
        };
        let stored = &entry.value().value;
        Ok(Some(match kind {
            ValueKind::Value => Lookup::value(stored.clone()),
            ValueKind::ValueWithExpiry => {
                let (expiry, value) = crate::expiry::split_inline(stored).ok_or_else(|| {
                    Error::corruption("memtable", 0, crate::expiry::BAD_INLINE_EXPIRY)
                })?;
                Lookup::Value {
                    value: stored.slice_ref(value),
                    expiry: Some(expiry),
                }
            }
            ValueKind::Deletion => Lookup::Deleted,
            ValueKind::ValueHandle => {
                let stored = StoredHandle::decode(stored, "memtable", 0)?;
                Lookup::Handle {
                    handle: stored.location,
                    seq: version_seq,
                    record_seq: stored.record_seq(version_seq),
                    payload: stored.payload,
                    expiry: stored.expiry,
                }
            }
        }))
    }

    /// [`MemTable::get`] without the value: the kind, sequence number and expiry of the version
    /// found (or of the range tombstone that answers), copying no value.
    pub fn get_key(&self, user_key: &[u8], seq: SeqNo) -> Result<Option<KeyLookup>> {
        let (version_seq, kind, entry) = match self.find(user_key, seq) {
            None => return Ok(None),
            Some(Found::RangeDeleted(t)) => return Ok(Some(KeyLookup::RangeDeleted { seq: t })),
            Some(Found::Version { seq, kind, entry }) => (seq, kind, entry),
        };
        let stored = entry.value().value();
        Ok(Some(match kind {
            ValueKind::Value | ValueKind::ValueWithExpiry => KeyLookup::Inline {
                seq: version_seq,
                expiry: crate::expiry::entry_expiry(kind, stored, "memtable")?,
            },
            ValueKind::Deletion => KeyLookup::Deleted { seq: version_seq },
            ValueKind::ValueHandle => {
                let stored = StoredHandle::decode(stored, "memtable", 0)?;
                KeyLookup::Handle {
                    handle: stored.location,
                    seq: version_seq,
                    record_seq: stored.record_seq(version_seq),
                    expiry: stored.expiry,
                }
            }
        }))
    }

    /// Bytes used, including estimated overhead.
    pub fn approximate_bytes(&self) -> u64 {
        self.approx_bytes.load(AtomicOrdering::Relaxed)
    }

    /// Number of entries.
    pub fn len(&self) -> u64 {
        self.entries.load(AtomicOrdering::Relaxed)
    }

    /// True when nothing was inserted (no entry, no range tombstone).
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.range_tombstone_count() == 0
    }

    /// True when the memtable should be switched for a new one: it holds `memtable_size` bytes
    /// (option `memtable_size`), [`MAX_RANGE_TOMBSTONES`] range tombstones or
    /// [`MAX_RANGE_TOMBSTONE_BYTES`] of their keys.
    pub fn is_full(&self, memtable_size: u64) -> bool {
        self.approximate_bytes() >= memtable_size
            || self.range_tombstone_count() >= MAX_RANGE_TOMBSTONES
            || self.range_tombstone_bytes.load(AtomicOrdering::Relaxed) >= MAX_RANGE_TOMBSTONE_BYTES
    }

    /// Whether the range tombstones of `load` fit in the memtable under its bounds
    /// ([`MAX_RANGE_TOMBSTONES`], [`MAX_RANGE_TOMBSTONE_BYTES`]); the write path switches it
    /// first when they do not.
    pub(crate) fn has_room_for(&self, load: RangeTombstoneLoad) -> bool {
        load.count == 0
            || (self.range_tombstone_count() + load.count <= MAX_RANGE_TOMBSTONES
                && self.range_tombstone_bytes.load(AtomicOrdering::Relaxed) + load.bytes
                    <= MAX_RANGE_TOMBSTONE_BYTES)
    }

    /// A cursor over every version in internal-key order. Entries inserted after it was created
    /// may or may not be seen; readers filter by sequence number.
    pub fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            cell: Cursor::new(Arc::clone(self), |_| None),
        }
    }
}

type CursorEntry<'a> = Option<Entry<'a, MemEntry>>;

self_cell::self_cell!(
    struct Cursor {
        owner: Arc<MemTable>,
        #[covariant]
        dependent: CursorEntry,
    }
);

/// Iterator over a memtable; keeps the memtable alive.
pub struct MemTableIter {
    cell: Cursor,
}

impl MemTableIter {
    fn set_with(
        &mut self,
        f: impl for<'a> FnOnce(&'a MemTable, &CursorEntry<'a>) -> CursorEntry<'a>,
    ) {
        self.cell.with_dependent_mut(|owner, dep| {
            let next = f(owner, dep);
            *dep = next;
        });
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.cell.borrow_dependent().is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.set_with(|m, _| m.set.front());
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.set_with(|m, _| m.set.back());
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let probe = MemEntry::probe(target);
        self.set_with(|m, _| m.set.lower_bound(Bound::Included(&probe)));
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let probe = MemEntry::probe(target);
        self.set_with(|m, _| m.set.upper_bound(Bound::Included(&probe)));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.set_with(|_, cur| cur.as_ref().and_then(|e| e.next()));
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        self.set_with(|_, cur| cur.as_ref().and_then(|e| e.prev()));
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.cell
            .borrow_dependent()
            .as_ref()
            .map(|e| e.value().ikey())
            .unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.cell
            .borrow_dependent()
            .as_ref()
            .map(|e| e.value().value())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;

    #[test]
    fn range_tombstones_delete_older_versions_for_readers_that_see_them() {
        let m = MemTable::new(1, 1 << 20);
        m.add(1, ValueKind::Value, b"b", b"b1");
        m.add(2, ValueKind::Value, b"c", b"c2");
        assert!(m.range_tombstones().is_none(), "none yet: no fragments built");
        m.add_range_tombstone(3, b"a", b"c");
        m.add(4, ValueKind::Value, b"b", b"b4");
        assert_eq!(m.range_tombstone_count(), 1);
        assert_eq!(m.smallest_seq(), Some(1));
        let get = |k: &[u8], s| m.get(k, s).expect("get");
        // Covered and older than the tombstone: deleted for readers at or above it.
        assert_eq!(get(b"b", 3), Some(Lookup::Deleted));
        assert_eq!(get(b"b", 2), Some(Lookup::value(b"b1".to_vec())), "a snapshot before it");
        // A version written after the tombstone is live.
        assert_eq!(get(b"b", 10), Some(Lookup::value(b"b4".to_vec())));
        // The end is exclusive.
        assert_eq!(get(b"c", 10), Some(Lookup::value(b"c2".to_vec())));
        // A covered key with no version here: deleted, so older tables are not asked.
        assert_eq!(get(b"a", 10), Some(Lookup::Deleted));
        assert_eq!(get(b"a", 2), None);
        // A second tombstone rebuilds the fragments.
        m.add_range_tombstone(5, b"b", b"d");
        assert_eq!(get(b"b", 10), Some(Lookup::Deleted));
        assert_eq!(get(b"c", 10), Some(Lookup::Deleted));
        assert_eq!(m.range_tombstones().map(|f| f.len()), Some(3));
        // A memtable of range tombstones alone is not empty, and fills up by their count.
        let r = MemTable::new(2, 1 << 20);
        for i in 0..MAX_RANGE_TOMBSTONES {
            assert!(!r.is_full(u64::MAX), "{i} tombstones");
            r.add_range_tombstone(i + 1, b"a", b"b");
            assert!(!r.is_empty());
        }
        assert!(r.is_full(u64::MAX));
        assert_eq!(r.len(), 0, "no point entry");
        // And by the bytes of their keys, long before a table's block would be too large.
        let long = MemTable::new(3, 1 << 20);
        let key = |c: u8| vec![c; 64 << 10];
        let mut n = 0;
        while !long.is_full(u64::MAX) {
            long.add_range_tombstone(n + 1, &key(b'a'), &key(b'b'));
            n += 1;
        }
        assert_eq!(n, MAX_RANGE_TOMBSTONE_BYTES / (128 << 10), "switched by bytes");
        assert!(n < MAX_RANGE_TOMBSTONES);
    }

    /// The key filter rules out keys the memtable does not hold, and never one it does, even
    /// when the memtable holds far more than the filter was sized for.
    #[test]
    fn the_key_filter_never_hides_a_version() {
        for memtable_size in [0, 64 << 10, 64 << 20] {
            let m = MemTable::new(1, memtable_size);
            for i in 0..5_000u64 {
                m.add(i + 1, ValueKind::Value, format!("k{i}").as_bytes(), b"v");
            }
            for i in 0..5_000u64 {
                let k = format!("k{i}");
                assert!(m.get(k.as_bytes(), u64::MAX >> 8).unwrap().is_some(), "{k}");
            }
            assert_eq!(m.get(b"absent", u64::MAX >> 8).unwrap(), None);
        }
        let m = MemTable::new(1, 64 << 20);
        m.add(1, ValueKind::Value, b"k", b"v");
        let absent = (0..1_000).filter(|i| m.filter.may_contain(format!("a{i}").as_bytes()));
        assert!(absent.count() < 10, "a sparse filter rules out almost every absent key");
    }

    /// A lookup hands out the entry's own buffer: two reads of one version share it, and an
    /// expiring value is a view of it past the expiry.
    #[test]
    fn a_lookup_shares_the_entry_buffer() {
        let m = MemTable::new(1, 1 << 20);
        m.add(1, ValueKind::Value, b"k", &[7u8; 8192]);
        let mut with_expiry = 1234u64.to_le_bytes().to_vec();
        with_expiry.extend_from_slice(b"soon");
        m.add(2, ValueKind::ValueWithExpiry, b"e", &with_expiry);
        let value = |k: &[u8]| match m.get(k, 10).expect("get") {
            Some(Lookup::Value { value, expiry }) => (value, expiry),
            other => panic!("{other:?}"),
        };
        let (a, b) = (value(b"k"), value(b"k"));
        assert_eq!((&a.0[..], a.1), (&[7u8; 8192][..], None));
        assert_eq!(a.0.as_ptr(), b.0.as_ptr(), "one buffer, not a copy per read");
        let (e1, e2) = (value(b"e"), value(b"e"));
        assert_eq!((&e1.0[..], e1.1), (&b"soon"[..], Some(1234)));
        assert_eq!(e1.0.as_ptr(), e2.0.as_ptr());
    }

    #[test]
    fn get_sees_the_newest_visible_version() {
        let m = MemTable::new(1, 1 << 20);
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(5, ValueKind::Value, b"k", b"v5");
        m.add(7, ValueKind::Deletion, b"k", b"");
        m.add(3, ValueKind::Value, b"j", b"j3");
        let get = |k: &[u8], s| m.get(k, s).expect("get");
        assert_eq!(get(b"k", 0), None);
        assert_eq!(get(b"k", 1), Some(Lookup::value(b"v1".to_vec())));
        assert_eq!(get(b"k", 6), Some(Lookup::value(b"v5".to_vec())));
        assert_eq!(get(b"k", 7), Some(Lookup::Deleted));
        assert_eq!(get(b"j", 100), Some(Lookup::value(b"j3".to_vec())));
        assert_eq!(get(b"ka", 100), None);
        assert_eq!(get(b"", 100), None);
        assert_eq!(m.len(), 4);
        assert!(m.approximate_bytes() >= 4 * ENTRY_OVERHEAD);
    }

    #[test]
    fn iteration_in_both_directions_and_seeks() {
        let m = Arc::new(MemTable::new(1, 1 << 20));
        m.add(2, ValueKind::Value, b"b", b"b2");
        m.add(1, ValueKind::Value, b"a", b"a1");
        m.add(4, ValueKind::Value, b"b", b"b4");
        m.add(3, ValueKind::Deletion, b"c", b"");
        let mut it = m.iter();
        assert!(!it.valid());
        it.seek_to_first().expect("seek");
        let mut fwd = Vec::new();
        while it.valid() {
            fwd.push(it.key().to_vec());
            it.next().expect("next");
        }
        let expect = vec![
            make_internal_key(b"a", 1, ValueKind::Value),
            make_internal_key(b"b", 4, ValueKind::Value),
            make_internal_key(b"b", 2, ValueKind::Value),
            make_internal_key(b"c", 3, ValueKind::Deletion),
        ];
        assert_eq!(fwd, expect);
        it.seek_to_last().expect("seek");
        let mut back = Vec::new();
        while it.valid() {
            back.push(it.key().to_vec());
            it.prev().expect("prev");
        }
        back.reverse();
        assert_eq!(back, expect);
        it.seek(&key::make_lookup_key(b"b", 3)).expect("seek");
        assert_eq!(it.key(), &expect[2][..]);
        assert_eq!(it.value(), b"b2");
        it.seek_for_prev(&key::make_lookup_key(b"b", 3))
            .expect("seek");
        assert_eq!(it.key(), &expect[1][..]);
        it.seek(&key::make_lookup_key(b"d", 9)).expect("seek");
        assert!(!it.valid());
    }

    #[test]
    fn concurrent_writers_and_readers() {
        let m = Arc::new(MemTable::new(1, 1 << 20));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        let seq = t * 10_000 + i + 1;
                        m.add(
                            seq,
                            ValueKind::Value,
                            format!("k{i:05}").as_bytes(),
                            &seq.to_le_bytes(),
                        );
                        if i % 100 == 0 {
                            let mut it = m.iter();
                            it.seek_to_first().expect("seek");
                            let mut prev: Option<Vec<u8>> = None;
                            while it.valid() {
                                if let Some(p) = &prev {
                                    assert!(compare_internal(p, it.key()).is_lt());
                                }
                                prev = Some(it.key().to_vec());
                                it.next().expect("next");
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(m.len(), 8000);
        let got = m
            .get(b"k00042", u64::MAX >> 8)
            .expect("get")
            .expect("present");
        assert_eq!(got, Lookup::value((30_000u64 + 43).to_le_bytes().to_vec()));
    }
}
