//! The memtable: a concurrent skiplist of internal keys, written by the group-commit leader and
//! read lock-free by any number of readers and iterators.
//!
//! Each entry is one allocation holding `internal key | value`; its order is the internal-key
//! order, so versions of a key sit newest first and a lookup is one `lower_bound`.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use crossbeam_skiplist::SkipSet;
use crossbeam_skiplist::set::Entry;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind, compare_internal};
use crate::lookup::Lookup;
use crate::value::StoredHandle;

/// Estimated bytes of skiplist bookkeeping per entry (node header, tower, allocation slack),
/// added to the entry's own bytes when measuring the memtable against `memtable_size`.
const ENTRY_OVERHEAD: u64 = 80;

struct MemEntry {
    /// Internal key followed by the value.
    buf: Box<[u8]>,
    key_len: u32,
}

impl MemEntry {
    fn ikey(&self) -> &[u8] {
        &self.buf[..self.key_len as usize]
    }
    fn value(&self) -> &[u8] {
        &self.buf[self.key_len as usize..]
    }
    fn probe(ikey: Vec<u8>) -> Self {
        let key_len = ikey.len() as u32;
        MemEntry {
            buf: ikey.into_boxed_slice(),
            key_len,
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

/// An in-memory sorted buffer of recent writes.
pub struct MemTable {
    set: SkipSet<MemEntry>,
    approx_bytes: AtomicU64,
    entries: AtomicU64,
    /// Smallest sequence number inserted (`u64::MAX` while empty).
    smallest_seq: AtomicU64,
    wal_number: u64,
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
    /// An empty memtable whose writes are logged in WAL `wal_number`.
    pub fn new(wal_number: u64) -> Self {
        MemTable {
            set: SkipSet::new(),
            approx_bytes: AtomicU64::new(0),
            entries: AtomicU64::new(0),
            smallest_seq: AtomicU64::new(u64::MAX),
            wal_number,
        }
    }

    /// The smallest sequence number in the memtable, or `None` while it is empty: every
    /// version below it that the database holds is in an older memtable or a key table.
    pub fn smallest_seq(&self) -> Option<SeqNo> {
        Some(self.smallest_seq.load(AtomicOrdering::Acquire)).filter(|&s| s != u64::MAX)
    }

    /// The WAL that holds this memtable's writes.
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// Inserts one version. `(user_key, seq)` must be new to the memtable.
    pub fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        let key_len = user_key.len() + key::TRAILER_LEN;
        let mut buf = Vec::with_capacity(key_len + value.len());
        key::append_internal_key(&mut buf, user_key, seq, kind as u8);
        buf.extend_from_slice(value);
        let size = buf.len() as u64 + ENTRY_OVERHEAD;
        let entry = MemEntry {
            buf: buf.into_boxed_slice(),
            key_len: key_len as u32,
        };
        self.set.insert(entry);
        self.approx_bytes.fetch_add(size, AtomicOrdering::Relaxed);
        self.entries.fetch_add(1, AtomicOrdering::Relaxed);
        self.smallest_seq.fetch_min(seq, AtomicOrdering::AcqRel);
    }

    /// The newest version of `user_key` with sequence at most `seq`, if the memtable has one.
    pub fn get(&self, user_key: &[u8], seq: SeqNo) -> Result<Option<Lookup>> {
        let probe = MemEntry::probe(key::make_lookup_key(user_key, seq));
        let Some(entry) = self.set.lower_bound(Bound::Included(&probe)) else {
            return Ok(None);
        };
        let found = entry.value();
        let Some(parsed) = key::ParsedKey::parse(found.ikey()) else {
            return Ok(None);
        };
        if parsed.user_key != user_key {
            return Ok(None);
        }
        Ok(Some(match parsed.kind {
            ValueKind::Value => Lookup::Value(found.value().to_vec()),
            ValueKind::Deletion => Lookup::Deleted,
            ValueKind::ValueHandle => {
                let stored = StoredHandle::decode(found.value(), "memtable", 0)?;
                Lookup::Handle {
                    handle: stored.location,
                    seq: parsed.seq,
                    record_seq: stored.record_seq(parsed.seq),
                    payload: stored.payload,
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

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        let probe = MemEntry::probe(target.to_vec());
        self.set_with(|m, _| m.set.lower_bound(Bound::Included(&probe)));
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let probe = MemEntry::probe(target.to_vec());
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
    fn get_sees_the_newest_visible_version() {
        let m = MemTable::new(1);
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(5, ValueKind::Value, b"k", b"v5");
        m.add(7, ValueKind::Deletion, b"k", b"");
        m.add(3, ValueKind::Value, b"j", b"j3");
        let get = |k: &[u8], s| m.get(k, s).expect("get");
        assert_eq!(get(b"k", 0), None);
        assert_eq!(get(b"k", 1), Some(Lookup::Value(b"v1".to_vec())));
        assert_eq!(get(b"k", 6), Some(Lookup::Value(b"v5".to_vec())));
        assert_eq!(get(b"k", 7), Some(Lookup::Deleted));
        assert_eq!(get(b"j", 100), Some(Lookup::Value(b"j3".to_vec())));
        assert_eq!(get(b"ka", 100), None);
        assert_eq!(get(b"", 100), None);
        assert_eq!(m.len(), 4);
        assert!(m.approximate_bytes() >= 4 * ENTRY_OVERHEAD);
    }

    #[test]
    fn iteration_in_both_directions_and_seeks() {
        let m = Arc::new(MemTable::new(1));
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
        let m = Arc::new(MemTable::new(1));
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
        assert_eq!(got, Lookup::Value((30_000u64 + 43).to_le_bytes().to_vec()));
    }
}
