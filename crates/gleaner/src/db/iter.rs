//! User-facing iterators: [`DbIterator`] (a cursor with seeks in both directions) and
//! [`RangeIter`] (a Rust iterator over a key range, double-ended).
//!
//! Both merge the memtables and the index tree of one super version and show, per user key,
//! the newest version at or below their sequence number, hiding deletions.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::prefetch::{AheadEntry, ReadPool, RecordRef, ValuePrefetcher};
use super::value_fetch::ValueFetcher;
use super::{Counters, DbInner, ReadOptions, SuperVersion};
use crate::cache::{TableCache, ValueTableCache};
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::iter::InternalIterator;
use crate::key::{self, MAX_SEQUENCE, ParsedKey, SeqNo, ValueKind, compare_internal};
use crate::merge::MergingIterator;
use crate::range_del::FragmentedTombstones;
use crate::table::ReadCtx;
use crate::value::{StoredHandle, ValueHandle};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Most bytes a scan reads ahead in one key table: its window starts at one block and doubles
/// while the scan reads the table's blocks in order (RocksDB's iterators ramp up to the same
/// 256 KiB).
const SCAN_BLOCK_READAHEAD: u64 = 256 << 10;

/// Everything needed to build an iterator over one consistent state.
#[derive(Clone)]
struct IterSource {
    sv: Arc<SuperVersion>,
    tables: Arc<TableCache>,
    values: Arc<ValueTableCache>,
    readahead: u64,
    seq: SeqNo,
    /// The time expiry is judged at.
    time: u64,
    /// Where skipped expired versions are counted (`stats().operations.expired_skipped`).
    expired_skipped: Arc<AtomicU64>,
    ctx: ReadCtx,
    lazy: bool,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// Reader threads and reads in flight for prefetching (eager iterators only).
    prefetch: Option<(Arc<ReadPool>, usize)>,
}

impl IterSource {
    fn build(&self) -> Result<DbIterator> {
        // The range tombstones of the memtables and of the tables whose extent meets the
        // bounds: a version they cover is deleted for this reader.
        let mut parts: Vec<Arc<FragmentedTombstones>> = std::iter::once(&self.sv.mem)
            .chain(&self.sv.imm)
            .filter_map(|m| m.range_tombstones())
            .collect();
        parts.extend(self.sv.version.range_tombstones(
            &self.tables,
            self.ctx,
            self.lower.as_deref(),
            self.upper.as_deref(),
        )?);
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        let mut largest_seqs = Vec::new();
        for m in std::iter::once(&self.sv.mem).chain(&self.sv.imm) {
            children.push(Box::new(m.iter()));
            largest_seqs.push(m.largest_seq());
        }
        self.sv
            .version
            .add_iterators(&self.tables, self.ctx, &mut children, &mut largest_seqs)?;
        Ok(DbIterator {
            inner: MergingIterator::new(children, compare_internal),
            detector: None,
            range_tombstones: FragmentedTombstones::union(&parts),
            child_largest_seqs: largest_seqs,
            entries_visited: 0,
            sv: Arc::clone(&self.sv),
            seq: self.seq,
            time: self.time,
            expired_skipped: Arc::clone(&self.expired_skipped),
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            saved_kind: ValueKind::Value,
            saved_seq: 0,
            following: false,
            current_kind: ValueKind::Value,
            lazy: self.lazy,
            fetched: false,
            value_buf: Vec::new(),
            fetcher: ValueFetcher::new(
                Arc::clone(&self.values),
                self.readahead,
                self.ctx.fill_cache,
            ),
            lower: self.lower.clone(),
            upper: self.upper.clone(),
            prefetch: self.prefetch.as_ref().map(|(pool, depth)| {
                let ahead = IterSource {
                    lazy: true,
                    prefetch: None,
                    ..self.clone()
                };
                (
                    ValuePrefetcher::new(
                        Arc::clone(pool),
                        Arc::clone(&self.sv),
                        Arc::clone(&self.values),
                        self.ctx.fill_cache,
                        *depth,
                        self.readahead,
                    ),
                    Box::new(ahead),
                )
            }),
        })
    }
}

impl DbInner {
    fn iter_source(&self, opts: &ReadOptions<'_>) -> Result<IterSource> {
        Counters::add(&self.counters.iterators, 1);
        let (sv, seq) = self.read_state(opts);
        let time = self.read_time(opts);
        let depth = self.opts.scan_prefetch_depth() as usize;
        // Not with `inline_background_work`: that schedule runs no thread of its own, so that a
        // seeded run repeats exactly.
        let prefetch = if depth > 0 && !opts.lazy_values && !self.opts.inline_background_work() {
            let pool = match self.read_pool.get() {
                Some(pool) => Some(Arc::clone(pool)),
                // Threads the system refuses to start only mean no prefetching (and the next
                // iterator tries again); the scan reads its values itself.
                None => ReadPool::new((depth * 2).min(32)).ok().map(|pool| {
                    // Two first scans may race: the loser's threads end with its pool.
                    Arc::clone(self.read_pool.get_or_init(|| Arc::new(pool)))
                }),
            };
            pool.map(|pool| (pool, depth))
        } else {
            None
        };
        Ok(IterSource {
            prefetch,
            sv,
            tables: Arc::clone(&self.tables),
            values: Arc::clone(&self.values),
            readahead: self.opts.value_readahead_size(),
            lazy: opts.lazy_values,
            seq,
            time,
            expired_skipped: Arc::clone(&self.counters.expired_skipped),
            // A scan of many entries reads each table's blocks in order: read ahead, growing
            // while it goes on (one device round trip per block costs a short scan little).
            ctx: ReadCtx {
                class: IoClass::UserRead,
                fill_cache: opts.fill_cache,
                readahead: SCAN_BLOCK_READAHEAD,
                readahead_ramp: true,
            },
            lower: opts.lower_bound.clone(),
            upper: opts.upper_bound.clone(),
        })
    }

    pub(super) fn new_iterator(&self, opts: &ReadOptions<'_>) -> Result<DbIterator> {
        let mut it = self.iter_source(opts)?.build()?;
        // The user's iterator records its seeks (the ones reading ahead for it do not).
        it.detector = self.detector.clone();
        Ok(it)
    }
}

/// A cursor over the user keys of one consistent state of the database, in either direction.
/// It holds the memtables and key tables of that state, so it is unaffected by later writes,
/// flushes and compactions.
///
/// A fresh iterator is not positioned: call a seek first. A movement that fails returns the
/// error and leaves the iterator invalid.
///
/// Separated values are read when the iterator lands on their key (eager, the default), or only
/// when [`fetch_value`](Self::fetch_value) asks for them (`ReadOptions::lazy_values`); scans read
/// ahead within a value table.
pub struct DbIterator {
    inner: MergingIterator,
    /// The hotness detector a seek is recorded in (partitioned trees).
    detector: Option<Arc<crate::partition::detector::HotnessDetector>>,
    /// The range tombstones of every source, when any holds some.
    range_tombstones: Option<Arc<FragmentedTombstones>>,
    /// Per child of `inner`, the largest sequence number it holds: a child older than a
    /// tombstone covering a range has nothing there this reader sees, and skips it whole.
    child_largest_seqs: Vec<SeqNo>,
    /// Entries of `inner` the iterator has stepped over or landed on (the cost of its moves).
    entries_visited: u64,
    sv: Arc<SuperVersion>,
    seq: SeqNo,
    /// The time expiry is judged at: the snapshot's, or when the iterator was made.
    time: u64,
    expired_skipped: Arc<AtomicU64>,
    direction: Direction,
    valid: bool,
    /// Reverse, or following: the current key. Forward: the key being skipped.
    saved_key: Vec<u8>,
    /// Reverse, or following: the current entry's stored value (inline value or encoded
    /// handle).
    saved_value: Vec<u8>,
    /// Reverse, or following: the current entry's kind.
    saved_kind: ValueKind,
    /// Reverse, or following: the current entry's sequence number.
    saved_seq: SeqNo,
    /// Forward: the current entry is one the look-ahead walked (held in the `saved_` fields);
    /// `inner` is not positioned at it.
    following: bool,
    /// Kind of the entry the iterator is positioned at.
    current_kind: ValueKind,
    lazy: bool,
    /// Whether `value_buf` holds the current separated value.
    fetched: bool,
    value_buf: Vec<u8>,
    fetcher: ValueFetcher,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// The look-ahead of an eager iterator (`scan_prefetch_depth` > 0), with the source of its
    /// lazy look-ahead iterator.
    prefetch: Option<(ValuePrefetcher, Box<IterSource>)>,
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("seq", &self.seq)
            .field("valid", &self.valid)
            .finish()
    }
}

fn malformed() -> Error {
    Error::corruption("iterator input", 0, "malformed internal key")
}

/// The user key, record sequence number and value handle of the entry an iterator is on, whose
/// stored value is a handle: from the saved entry (`saved`: in reverse, or following the
/// look-ahead), else from the inner cursor. A free function over the fields, so the caller can
/// go on to borrow others mutably.
fn current_handle<'a>(
    saved: bool,
    inner: &'a MergingIterator,
    saved_key: &'a [u8],
    saved_seq: SeqNo,
    saved_value: &'a [u8],
) -> Result<(&'a [u8], SeqNo, ValueHandle)> {
    let (user_key, seq, stored) = if saved {
        (saved_key, saved_seq, saved_value)
    } else {
        let p = ParsedKey::parse(inner.key()).ok_or_else(malformed)?;
        (p.user_key, p.seq, inner.value())
    };
    let stored = StoredHandle::decode(stored, "iterator input", 0)?;
    Ok((user_key, stored.record_seq(seq), stored.location))
}

impl DbIterator {
    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// Whether the current entry is held in the `saved_` fields rather than under `inner`.
    fn in_saved(&self) -> bool {
        self.direction == Direction::Reverse || self.following
    }

    /// The current key. Panics when not [`valid`](Self::valid).
    pub fn key(&self) -> &[u8] {
        assert!(self.valid, "DbIterator::key on an invalid iterator");
        if self.in_saved() {
            &self.saved_key
        } else {
            key::user_key(self.inner.key())
        }
    }

    /// The current value. Panics when not [`valid`](Self::valid), and for a separated value of
    /// a lazy iterator that [`fetch_value`](Self::fetch_value) has not read yet.
    pub fn value(&self) -> &[u8] {
        assert!(self.valid, "DbIterator::value on an invalid iterator");
        if self.current_kind == ValueKind::ValueHandle {
            assert!(
                self.fetched,
                "lazy DbIterator: call fetch_value() before value()"
            );
            return &self.value_buf;
        }
        let stored = self.stored_value();
        if self.current_kind == ValueKind::ValueWithExpiry {
            // Landing checked that the expiry is there.
            return &stored[crate::expiry::INLINE_EXPIRY_LEN..];
        }
        stored
    }

    /// The current entry's stored value: the value itself, or an encoded handle.
    fn stored_value(&self) -> &[u8] {
        if self.in_saved() {
            &self.saved_value
        } else {
            self.inner.value()
        }
    }

    /// When the current entry expires (milliseconds since the Unix epoch, by the database's
    /// clock), or `None` when it does not: from its index entry, so a lazy iterator need not
    /// read a separated value for it. Panics when not [`valid`](Self::valid).
    ///
    /// Errors: [`Error::Corruption`] when the stored entry is malformed (landing on it checked
    /// it already, so only a bug could make this fail).
    pub fn expiry(&self) -> Result<Option<u64>> {
        assert!(self.valid, "DbIterator::expiry on an invalid iterator");
        crate::expiry::entry_expiry(self.current_kind, self.stored_value(), "iterator input")
    }

    /// True when the current value lives in a value table (it is read on landing for eager
    /// iterators, by [`fetch_value`](Self::fetch_value) for lazy ones).
    pub fn value_is_separated(&self) -> bool {
        self.valid && self.current_kind == ValueKind::ValueHandle
    }

    /// The current value, reading it from its value table first if a lazy iterator has not yet.
    /// Panics when not [`valid`](Self::valid).
    pub fn fetch_value(&mut self) -> Result<&[u8]> {
        assert!(self.valid, "DbIterator::fetch_value on an invalid iterator");
        if self.current_kind == ValueKind::ValueHandle
            && !self.fetched
            && let Err(e) = self.read_separated()
        {
            return self.fail(e);
        }
        Ok(self.value())
    }

    /// Reads the separated value of the current entry into `value_buf`.
    fn read_separated(&mut self) -> Result<()> {
        let (user_key, record_seq, handle) = current_handle(
            self.in_saved(),
            &self.inner,
            &self.saved_key,
            self.saved_seq,
            &self.saved_value,
        )?;
        self.fetcher.fetch(
            self.sv.version.values(),
            user_key,
            record_seq,
            handle,
            &mut self.value_buf,
        )?;
        self.fetched = true;
        Ok(())
    }

    /// The current entry, and its record when its value is separated (for the look-ahead of a
    /// prefetching iterator). Only when [`valid`](Self::valid).
    pub(super) fn ahead_entry(&self) -> Result<(AheadEntry, Option<RecordRef>)> {
        debug_assert!(self.valid);
        let saved = self.in_saved();
        let (user_key, seq) = if saved {
            (self.saved_key.clone(), self.saved_seq)
        } else {
            let p = ParsedKey::parse(self.inner.key()).ok_or_else(malformed)?;
            (p.user_key.to_vec(), p.seq)
        };
        let record = if self.current_kind == ValueKind::ValueHandle {
            let (_, record_seq, handle) = current_handle(
                saved,
                &self.inner,
                &self.saved_key,
                self.saved_seq,
                &self.saved_value,
            )?;
            Some(RecordRef {
                user_key: user_key.clone(),
                seq: record_seq,
                handle,
            })
        } else {
            None
        };
        let entry = AheadEntry {
            user_key,
            seq,
            kind: self.current_kind,
            stored: self.stored_value().to_vec(),
        };
        Ok((entry, record))
    }

    /// Moving forward with a look-ahead: starts it over where `position` puts a fresh lazy
    /// iterator over the same state, and lands on its first entry.
    fn follow(&mut self, position: impl FnOnce(&mut DbIterator) -> Result<()>) -> Result<()> {
        self.direction = Direction::Forward;
        self.following = false;
        self.saved_key.clear();
        let Some((prefetcher, source)) = self.prefetch.as_mut() else {
            return self.fail(Error::InvalidArgument(
                "an iterator without a look-ahead cannot follow one".into(),
            ));
        };
        let ahead = source.build().and_then(|mut ahead| {
            position(&mut ahead)?;
            Ok(ahead)
        });
        match ahead {
            Ok(ahead) => prefetcher.start(ahead),
            Err(e) => {
                prefetcher.reset();
                return self.fail(e);
            }
        }
        self.step_ahead()
    }

    /// Following: lands on the next entry the look-ahead walked, with its value when the
    /// look-ahead read it (else reads it here).
    fn step_ahead(&mut self) -> Result<()> {
        let Some((prefetcher, _)) = self.prefetch.as_mut() else {
            return self.fail(Error::InvalidArgument(
                "an iterator without a look-ahead cannot follow one".into(),
            ));
        };
        match prefetcher.next_entry() {
            None => {
                self.valid = false;
                self.following = false;
                Ok(())
            }
            Some(Err(e)) => {
                self.following = false;
                self.fail(e)
            }
            Some(Ok((entry, value))) => {
                self.direction = Direction::Forward;
                self.following = true;
                self.valid = true;
                self.saved_key = entry.user_key;
                self.saved_value = entry.stored;
                self.saved_kind = entry.kind;
                self.saved_seq = entry.seq;
                match value {
                    Some(value) => {
                        self.current_kind = entry.kind;
                        self.value_buf = value;
                        self.fetched = true;
                        Ok(())
                    }
                    None => self.landed(),
                }
            }
        }
    }

    /// Stops following the look-ahead: forgets it.
    fn unfollow(&mut self) {
        self.following = false;
        if let Some((prefetcher, _)) = self.prefetch.as_mut() {
            prefetcher.reset();
        }
    }

    /// Called whenever the iterator lands on an entry: notes its kind and, for an eager
    /// iterator, reads a separated value.
    fn landed(&mut self) -> Result<()> {
        self.fetched = false;
        self.current_kind = if self.in_saved() {
            self.saved_kind
        } else {
            ParsedKey::parse(self.inner.key())
                .ok_or_else(malformed)?
                .kind
        };
        if self.current_kind == ValueKind::ValueHandle
            && !self.lazy
            && let Err(e) = self.read_separated()
        {
            return self.fail(e);
        }
        Ok(())
    }

    fn fail<T>(&mut self, e: Error) -> Result<T> {
        self.valid = false;
        Err(e)
    }

    /// Positions at the first key (at or after the lower bound).
    pub fn seek_to_first(&mut self) -> Result<()> {
        match self.lower.clone() {
            Some(lower) => self.seek(&lower),
            None if self.prefetch.is_some() => self.follow(|ahead| ahead.seek_to_first()),
            None => {
                self.direction = Direction::Forward;
                self.saved_key.clear();
                if let Err(e) = self.inner.seek_to_first() {
                    return self.fail(e);
                }
                self.find_next_user_entry(false)
            }
        }
    }

    /// Positions at the last key (before the upper bound).
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.unfollow();
        self.direction = Direction::Reverse;
        self.saved_key.clear();
        let r = match &self.upper {
            Some(upper) => self
                .inner
                .seek_for_prev(&key::make_lookup_key(upper, MAX_SEQUENCE)),
            None => self.inner.seek_to_last(),
        };
        if let Err(e) = r {
            return self.fail(e);
        }
        self.find_prev_user_entry()
    }

    /// Positions at the first key at or after `target` (clamped to the bounds).
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        if let Some(d) = &self.detector {
            d.record(target);
        }
        let target = match &self.lower {
            Some(lower) if target < lower.as_slice() => lower.clone(),
            _ => target.to_vec(),
        };
        if self.prefetch.is_some() {
            return self.follow(|ahead| ahead.seek(&target));
        }
        self.direction = Direction::Forward;
        self.saved_key.clear();
        if let Err(e) = self.inner.seek(&key::make_lookup_key(&target, self.seq)) {
            return self.fail(e);
        }
        self.find_next_user_entry(false)
    }

    /// Positions at the last key at or before `target` (clamped to the bounds).
    pub fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        if self.upper.as_deref().is_some_and(|u| target >= u) {
            return self.seek_to_last();
        }
        self.unfollow();
        self.direction = Direction::Reverse;
        self.saved_key.clear();
        let probe = key::make_internal_key(target, 0, ValueKind::Deletion);
        if let Err(e) = self.inner.seek_for_prev(&probe) {
            return self.fail(e);
        }
        self.find_prev_user_entry()
    }

    /// Moves to the next key. Does nothing when not positioned.
    #[expect(
        clippy::should_implement_trait,
        reason = "a cursor whose moves return Result; RangeIter is the std Iterator"
    )]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        if self.following {
            return self.step_ahead();
        }
        if self.direction == Direction::Reverse && self.prefetch.is_some() {
            // The first key after the current one (`saved_key`).
            let target = successor(&self.saved_key);
            return self.follow(|ahead| ahead.seek(&target));
        }
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // To the current key's entries (`saved_key` is the current key), which the search
            // below steps over. The inner cursor cannot simply step forward: it sits before
            // them, but where a range tombstone's skip moved children past a deleted range it
            // sits before that range.
            let target = key::make_lookup_key(&self.saved_key, MAX_SEQUENCE);
            if let Err(e) = self.inner.seek(&target) {
                return self.fail(e);
            }
        } else {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.inner.key()));
            if let Err(e) = self.inner.next() {
                return self.fail(e);
            }
        }
        self.find_next_user_entry(true)
    }

    /// Moves to the previous key. Does nothing when not positioned.
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        if self.following {
            // `inner` is not at the current key: put it right before the key's entries, as
            // a reverse move leaves it.
            self.unfollow();
            self.direction = Direction::Reverse;
            let target = key::make_lookup_key(&self.saved_key, MAX_SEQUENCE);
            if let Err(e) = self.inner.seek_for_prev(&target) {
                return self.fail(e);
            }
            return self.find_prev_user_entry();
        }
        if self.direction == Direction::Forward {
            // Step back past every entry of the current key.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.inner.key()));
            loop {
                if let Err(e) = self.inner.prev() {
                    return self.fail(e);
                }
                if !self.inner.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    return Ok(());
                }
                if key::user_key(self.inner.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry()
    }

    /// True when the version the inner cursor is on, of `kind`, has expired for this reader
    /// (counted in `stats().operations.expired_skipped`).
    fn expired(&self, kind: ValueKind, stored: &[u8]) -> Result<bool> {
        let expiry = crate::expiry::entry_expiry(kind, stored, "iterator input")?;
        let expired = crate::expiry::expired(expiry, self.time);
        if expired {
            self.expired_skipped.fetch_add(1, Ordering::Relaxed);
        }
        Ok(expired)
    }

    /// True when a range tombstone this reader sees deletes version `seq` of `user_key`.
    fn covered(&self, user_key: &[u8], seq: SeqNo) -> bool {
        self.range_tombstones
            .as_ref()
            .is_some_and(|t| t.covers(user_key, seq, self.seq))
    }

    /// At a version of `user_key` a tombstone deletes: moves every child older than the
    /// newest tombstone this reader sees there past the rest of its fragment (forward: to the
    /// fragment's end; backward: to before its start), so a deleted range costs a seek per
    /// child rather than a step per key. Returns whether any child moved (the current entry may
    /// then have changed).
    fn skip_covered(&mut self, user_key: &[u8]) -> Result<bool> {
        let Some(tombstones) = self.range_tombstones.as_ref() else {
            return Ok(false);
        };
        let Some(fragment) = tombstones.fragment_at(user_key) else {
            return Ok(false);
        };
        let Some(newest) = fragment.newest_visible(self.seq) else {
            return Ok(false);
        };
        let target = match self.direction {
            Direction::Forward => key::make_lookup_key(fragment.end, key::MAX_SEQUENCE),
            Direction::Reverse => key::make_lookup_key(fragment.start, key::MAX_SEQUENCE),
        };
        let seqs = &self.child_largest_seqs;
        let moved = self.inner.skip_children(&target, |i| seqs[i] < newest)?;
        Ok(moved > 0)
    }

    /// Entries of the merged sources this iterator has stepped over or landed on.
    pub(crate) fn entries_visited(&self) -> u64 {
        self.entries_visited
            + self
                .prefetch
                .as_ref()
                .map_or(0, |(prefetcher, _)| prefetcher.entries_visited())
    }

    /// Forward: from the inner cursor, finds the first visible, non-deleted key (skipping
    /// `saved_key` when `skipping`).
    fn find_next_user_entry(&mut self, mut skipping: bool) -> Result<()> {
        loop {
            if !self.inner.valid() {
                self.valid = false;
                return Ok(());
            }
            self.entries_visited += 1;
            let Some(p) = ParsedKey::parse(self.inner.key()) else {
                return self.fail(malformed());
            };
            if self.upper.as_deref().is_some_and(|u| p.user_key >= u) {
                self.valid = false;
                return Ok(());
            }
            if p.seq <= self.seq {
                match p.kind {
                    ValueKind::Deletion => {
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(p.user_key);
                        skipping = true;
                    }
                    ValueKind::Value | ValueKind::ValueHandle | ValueKind::ValueWithExpiry => {
                        if !(skipping && p.user_key <= self.saved_key.as_slice()) {
                            // The key's newest visible version: absent if it has expired for
                            // this reader (its older versions stay hidden).
                            match self.expired(p.kind, self.inner.value()) {
                                Ok(false) => {}
                                Ok(true) => {
                                    self.saved_key.clear();
                                    self.saved_key.extend_from_slice(p.user_key);
                                    skipping = true;
                                    if let Err(e) = self.inner.next() {
                                        return self.fail(e);
                                    }
                                    continue;
                                }
                                Err(e) => return self.fail(e),
                            }
                            // Deleted if a tombstone this reader sees covers it (then so are
                            // its older versions).
                            if self.covered(p.user_key, p.seq) {
                                self.saved_key.clear();
                                self.saved_key.extend_from_slice(p.user_key);
                                skipping = true;
                                let key = self.saved_key.clone();
                                match self.skip_covered(&key) {
                                    // Look at where the children are now.
                                    Ok(true) => continue,
                                    Ok(false) => {}
                                    Err(e) => return self.fail(e),
                                }
                            } else {
                                self.valid = true;
                                return self.landed();
                            }
                        }
                    }
                }
            }
            if let Err(e) = self.inner.next() {
                return self.fail(e);
            }
        }
    }

    /// Reverse: walks back over the entries of the previous user key and settles on its newest
    /// visible version, skipping keys whose newest visible version is a deletion.
    fn find_prev_user_entry(&mut self) -> Result<()> {
        let mut kind = ValueKind::Deletion;
        while self.inner.valid() {
            self.entries_visited += 1;
            let Some(p) = ParsedKey::parse(self.inner.key()) else {
                return self.fail(malformed());
            };
            if self.lower.as_deref().is_some_and(|l| p.user_key < l) {
                break;
            }
            if p.seq <= self.seq {
                if kind != ValueKind::Deletion && p.user_key < self.saved_key.as_slice() {
                    // The key after this one is settled on its newest visible version: it is
                    // the answer unless that has expired for this reader (then the key reads
                    // as deleted, and the walk goes on with this one).
                    match self.expired(self.saved_kind, &self.saved_value) {
                        Ok(false) => break,
                        // `kind` is this version's just below.
                        Ok(true) => {}
                        Err(e) => return self.fail(e),
                    }
                }
                kind = p.kind;
                // A version a tombstone this reader sees covers is deleted.
                let covered = kind != ValueKind::Deletion && self.covered(p.user_key, p.seq);
                if covered {
                    kind = ValueKind::Deletion;
                }
                self.saved_key.clear();
                self.saved_value.clear();
                if kind != ValueKind::Deletion {
                    self.saved_key.extend_from_slice(p.user_key);
                    self.saved_value.extend_from_slice(self.inner.value());
                    self.saved_kind = kind;
                    self.saved_seq = p.seq;
                }
                if covered {
                    let key = p.user_key.to_vec();
                    match self.skip_covered(&key) {
                        // Look at where the children are now.
                        Ok(true) => continue,
                        Ok(false) => {}
                        Err(e) => return self.fail(e),
                    }
                }
            }
            if let Err(e) = self.inner.prev() {
                return self.fail(e);
            }
        }
        // The last key settled on (no key before it in range): absent if expired.
        if kind != ValueKind::Deletion {
            match self.expired(self.saved_kind, &self.saved_value) {
                Ok(false) => {}
                Ok(true) => kind = ValueKind::Deletion,
                Err(e) => return self.fail(e),
            }
        }
        if kind == ValueKind::Deletion {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
            Ok(())
        } else {
            self.valid = true;
            self.landed()
        }
    }
}

/// Key-value pairs of a key range as a Rust iterator; `.rev()` walks it backwards, and both
/// ends can be consumed alternately. Items are `Result`s: after an error the iterator ends.
pub struct RangeIter {
    source: IterSource,
    front: Option<DbIterator>,
    back: Option<DbIterator>,
    front_last: Option<Vec<u8>>,
    back_last: Option<Vec<u8>>,
    done: bool,
}

impl std::fmt::Debug for RangeIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeIter")
            .field("done", &self.done)
            .finish()
    }
}

/// The smallest key strictly greater than `k` in bytewise order.
fn successor(k: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(k.len() + 1);
    v.extend_from_slice(k);
    v.push(0);
    v
}

impl RangeIter {
    pub(super) fn new<'k>(
        inner: &DbInner,
        range: impl std::ops::RangeBounds<&'k [u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<RangeIter> {
        let mut source = inner.iter_source(opts)?;
        let lower = match range.start_bound() {
            Bound::Included(k) => Some(k.to_vec()),
            Bound::Excluded(k) => Some(successor(k)),
            Bound::Unbounded => None,
        };
        let upper = match range.end_bound() {
            Bound::Included(k) => Some(successor(k)),
            Bound::Excluded(k) => Some(k.to_vec()),
            Bound::Unbounded => None,
        };
        if let Some(l) = lower {
            source.lower = Some(source.lower.map_or(l.clone(), |o| o.max(l)));
        }
        if let Some(u) = upper {
            source.upper = Some(source.upper.map_or(u.clone(), |o| o.min(u)));
        }
        Ok(RangeIter {
            source,
            front: None,
            back: None,
            front_last: None,
            back_last: None,
            done: false,
        })
    }

    fn step(&mut self, forward: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if self.done {
            return None;
        }
        let slot = if forward {
            &mut self.front
        } else {
            &mut self.back
        };
        let moved = match slot {
            Some(it) => {
                if forward {
                    it.next()
                } else {
                    it.prev()
                }
            }
            None => match self.source.build() {
                Ok(mut it) => {
                    let r = if forward {
                        it.seek_to_first()
                    } else {
                        it.seek_to_last()
                    };
                    *slot = Some(it);
                    r
                }
                Err(e) => Err(e),
            },
        };
        if let Err(e) = moved {
            self.done = true;
            return Some(Err(e));
        }
        let it = slot.as_ref().expect("built above");
        if !it.valid() {
            self.done = true;
            return None;
        }
        let key = it.key();
        let crossed = if forward {
            self.back_last.as_deref().is_some_and(|b| key >= b)
        } else {
            self.front_last.as_deref().is_some_and(|f| key <= f)
        };
        if crossed {
            self.done = true;
            return None;
        }
        let item = (key.to_vec(), it.value().to_vec());
        if forward {
            self.front_last = Some(item.0.clone());
        } else {
            self.back_last = Some(item.0.clone());
        }
        Some(Ok(item))
    }
}

impl Iterator for RangeIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

impl DoubleEndedIterator for RangeIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}
