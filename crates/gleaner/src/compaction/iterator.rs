//! The compaction iterator: filters a sorted stream of internal keys down to what some reader
//! can still see, and reports everything it discards as a [`DropEvent`].
//!
//! The versions of one user key are split into *stripes* by the live snapshots: stripe i holds
//! the sequence numbers in `(snapshots[i-1], snapshots[i]]`, and the last stripe everything newer
//! than the newest snapshot. A reader at any snapshot (or at the present) sees the newest version
//! of its stripe, so only that one is kept per stripe. A deletion in the oldest stripe is dropped
//! too when no deeper level can hold an older version of the key.
//!
//! An entry a range tombstone of the input covers, in the entry's own stripe (no snapshot
//! between them), is dropped too ([`DropReason::RangeDeleted`]): every reader that could see it
//! sees the tombstone. The tombstones themselves are the job's to write out (collapsed per
//! stripe, `FragmentedTombstones::collapse`).
//!
//! An entry with an expiry ([`crate::expiry`]) that is the newest version of its stripe and has
//! expired for every reader that can read it ([`ReaderTimes::expired_for_all`]) reads as a
//! deletion to all of them: it is dropped ([`DropReason::Expired`], so its separated value
//! becomes garbage like any dropped handle's) and a deletion at its sequence number takes its
//! place, which hides the older versions as the entry did, and goes as any deletion does (at
//! once, when the entry is in the oldest stripe and nothing deeper holds the key).
//!
//! One exception: when the newest version of a stripe is an *alias* (a handle
//! update on read, a second entry naming a record an older entry already names), the record's
//! *owner* in the stripe is kept too. The alias never makes the record garbage (listeners ignore
//! dropped aliases), so the owner must stay until a version naming another record shadows it:
//! then it is dropped, and its record becomes garbage, exactly once. Both name the same record,
//! so every reader sees the same value whichever it finds.
//!
//! Under a policy that writes no aliases (a database switched from one that does), the
//! iterator drops every alias that is the newest version of its stripe, without a drop event:
//! the owner behind it (in this input or deeper in the tree) names the same record, so every
//! reader then finds the owner and reads the same value; the alias was never counted as a
//! reference, so nothing changes in the accounting. The aliases so go with the first compaction
//! that meets them, and with them the need to keep their records in place.

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::expiry::ReaderTimes;
use crate::key::{ParsedKey, SeqNo, ValueKind, make_internal_key};
use crate::range_del::FragmentedTombstones;
use crate::version::TableMeta;
use std::sync::Arc;
use crate::value::StoredHandle;

/// Why an entry was discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// A newer version of the key is visible to every reader that could see this one
    /// (overwritten or deleted, and no snapshot in between).
    Shadowed,
    /// A deletion that hides nothing any more: no snapshot needs it and no deeper level holds
    /// the key.
    ObsoleteTombstone,
    /// Covered by a newer range tombstone that every reader that could see the entry sees.
    RangeDeleted,
    /// Expired for every reader that could see it: a deletion at its sequence number replaces
    /// it (or nothing, where a deletion would be dropped at once).
    Expired,
}

/// One discarded entry. Drop events are the single source of truth for garbage accounting
/// and hotness (DESIGN.md, "Vocabulary").
#[derive(Debug, Clone, Copy)]
pub struct DropEvent<'a> {
    /// The discarded entry's key.
    pub key: ParsedKey<'a>,
    /// Its value (for a separated value, the handle).
    pub value: &'a [u8],
    /// Why it was discarded.
    pub reason: DropReason,
    /// The sequence number from which on the key's records are not hidden: for a shadowed
    /// entry, the newest version of its snapshot stripe in the input — the record it names when
    /// it is a handle (an alias or a written-back handle names an older record than itself, and
    /// that record is live); for a dropped tombstone, its own (it hides every older version).
    pub hidden_by: SeqNo,
}

/// Consumer of drop events.
pub trait DropListener {
    /// Called once per discarded entry, in key order.
    fn on_drop(&mut self, event: &DropEvent<'_>);

    /// Whether this listener can account for input table `table` dropped whole, without an
    /// event per entry: a compaction does that, without reading the table, when range
    /// tombstones of its input cover every entry of it in the entry's stripe
    /// (`compaction/job.rs`), and only when every listener accepts. Default: no (the table is
    /// read, and every entry dropped with an event).
    fn accepts_whole_table(&self, table: &TableMeta) -> bool {
        let _ = table;
        false
    }

    /// Called for an input table dropped whole instead of [`DropListener::on_drop`] for each
    /// of its entries, after every listener accepted it.
    fn on_whole_table(&mut self, table: &TableMeta) {
        let _ = table;
    }
}

/// Counts drops by reason; the listener used when nothing else listens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounter {
    /// Entries dropped as shadowed.
    pub shadowed: u64,
    /// Tombstones dropped.
    pub tombstones: u64,
    /// Entries dropped because a range tombstone covers them.
    pub range_deleted: u64,
    /// Entries dropped because they had expired for every reader.
    pub expired: u64,
}

impl DropListener for DropCounter {
    fn on_drop(&mut self, event: &DropEvent<'_>) {
        match event.reason {
            DropReason::Shadowed => self.shadowed += 1,
            DropReason::ObsoleteTombstone => self.tombstones += 1,
            DropReason::RangeDeleted => self.range_deleted += 1,
            DropReason::Expired => self.expired += 1,
        }
    }

    fn accepts_whole_table(&self, _: &TableMeta) -> bool {
        true
    }

    fn on_whole_table(&mut self, table: &TableMeta) {
        self.range_deleted += table.num_entries;
    }
}

/// Fans one event out to two listeners.
pub struct TeeListener<'a, A: DropListener + ?Sized, B: DropListener + ?Sized>(
    pub &'a mut A,
    pub &'a mut B,
);

impl<A: DropListener + ?Sized, B: DropListener + ?Sized> DropListener for TeeListener<'_, A, B> {
    fn on_drop(&mut self, event: &DropEvent<'_>) {
        self.0.on_drop(event);
        self.1.on_drop(event);
    }

    fn accepts_whole_table(&self, table: &TableMeta) -> bool {
        self.0.accepts_whole_table(table) && self.1.accepts_whole_table(table)
    }

    fn on_whole_table(&mut self, table: &TableMeta) {
        self.0.on_whole_table(table);
        self.1.on_whole_table(table);
    }
}

/// Fans one event out to any number of listeners, in order.
pub struct FanOut<'a>(pub Vec<&'a mut dyn DropListener>);

impl DropListener for FanOut<'_> {
    fn on_drop(&mut self, event: &DropEvent<'_>) {
        for l in &mut self.0 {
            l.on_drop(event);
        }
    }

    fn accepts_whole_table(&self, table: &TableMeta) -> bool {
        self.0.iter().all(|l| l.accepts_whole_table(table))
    }

    fn on_whole_table(&mut self, table: &TableMeta) {
        for l in &mut self.0 {
            l.on_whole_table(table);
        }
    }
}

/// Answers whether a deletion of a user key may be dropped (no deeper level holds the key).
pub type BottommostCheck = Box<dyn FnMut(&[u8]) -> bool + Send>;

/// Filters a forward stream of internal keys. Call [`CompactionIterator::seek_to_first`], then
/// read `key`/`value` while `valid`, calling `next` to advance.
pub struct CompactionIterator<I: InternalIterator> {
    input: I,
    /// Live snapshots, ascending.
    snapshots: Vec<SeqNo>,
    /// Whether a tombstone of this user key may be dropped (no deeper data).
    bottommost: BottommostCheck,
    /// Name of the input for corruption errors.
    source: String,
    current_user_key: Vec<u8>,
    has_current: bool,
    last_stripe: usize,
    /// Sequence number of the newest entry of the current key's current stripe.
    stripe_newest: SeqNo,
    /// When that entry is an alias, the sequence number of the record it names.
    stripe_alias: Option<SeqNo>,
    /// When that entry is a handle, the sequence number of the record it names: its own, or
    /// for a written-back handle or an alias, the older record's.
    stripe_record: Option<SeqNo>,
    /// Drop aliases that are the newest version of their stripe (see the module comment).
    drop_aliases: bool,
    /// Aliases dropped so.
    aliases_dropped: u64,
    /// The input's range tombstones (`with_range_tombstones`).
    range_tombstones: Option<Arc<FragmentedTombstones>>,
    /// The readers' times, which expiry is judged against (`with_reader_times`; without them,
    /// nothing expires).
    readers: Option<ReaderTimes>,
    /// The deletion standing in for the expired entry the iterator is on, if it is on one.
    replaced: Option<Vec<u8>>,
    /// Expired entries replaced so (each is dropped and its deletion kept).
    replacements: u64,
    valid: bool,
}

/// The record an entry's value names when the entry is a value handle: `(record sequence,
/// alias)`; `None` for other entries and for handles that do not decode (the listeners count
/// those).
fn handle_record(kind: ValueKind, seq: SeqNo, value: &[u8]) -> Option<(SeqNo, bool)> {
    if kind != ValueKind::ValueHandle {
        return None;
    }
    let stored = StoredHandle::decode(value, "compaction input", 0).ok()?;
    Some((stored.record_seq(seq), stored.alias))
}

impl<I: InternalIterator> CompactionIterator<I> {
    /// Filters `input`. `snapshots` must be ascending. `bottommost(user_key)` answers whether a
    /// deletion of that key can be dropped; pass `|_| false` to keep every tombstone (flushes).
    pub fn new(
        input: I,
        snapshots: Vec<SeqNo>,
        bottommost: BottommostCheck,
        source: String,
    ) -> Self {
        debug_assert!(snapshots.windows(2).all(|w| w[0] <= w[1]));
        CompactionIterator {
            input,
            snapshots,
            bottommost,
            source,
            current_user_key: Vec::new(),
            has_current: false,
            last_stripe: 0,
            stripe_newest: 0,
            stripe_alias: None,
            stripe_record: None,
            drop_aliases: false,
            aliases_dropped: 0,
            range_tombstones: None,
            readers: None,
            replaced: None,
            replacements: 0,
            valid: false,
        }
    }

    /// Judges expiry against `readers` (whose snapshots must be the iterator's): see the
    /// module comment.
    #[must_use]
    pub(crate) fn with_reader_times(mut self, readers: ReaderTimes) -> Self {
        debug_assert_eq!(readers.sequences(), self.snapshots);
        self.readers = Some(readers);
        self
    }

    /// True when the entry `parsed` / `value` has expired for every reader that can read it.
    fn expired_for_all(&self, parsed: &ParsedKey<'_>, value: &[u8]) -> Result<bool> {
        let Some(readers) = &self.readers else {
            return Ok(false);
        };
        let expiry = crate::expiry::entry_expiry(parsed.kind, value, &self.source)?;
        Ok(readers.expired_for_all(parsed.seq, expiry))
    }

    /// Drops the entries `tombstones` (the input's range tombstones) cover in their stripe.
    #[must_use]
    pub(crate) fn with_range_tombstones(
        mut self,
        tombstones: Option<Arc<FragmentedTombstones>>,
    ) -> Self {
        self.range_tombstones = tombstones;
        self
    }

    /// The oldest range tombstone newer than the version of `user_key` at `seq` and in its
    /// stripe, which every reader that could see the version sees: it deletes the version.
    fn covering_tombstone(&self, user_key: &[u8], seq: SeqNo, stripe: usize) -> Option<SeqNo> {
        let fragment = self.range_tombstones.as_ref()?.fragment_at(user_key)?;
        // Newest first: the last one above `seq` is the oldest newer one.
        let newer = fragment.seqs.partition_point(|&t| t > seq);
        let t = *fragment.seqs[..newer].last()?;
        (self.stripe(t) == stripe).then_some(t)
    }

    /// Drops every alias that is the newest version of its stripe, without a drop event (for a
    /// policy that writes no aliases; see the module comment).
    #[must_use]
    pub fn dropping_aliases(mut self, drop: bool) -> Self {
        self.drop_aliases = drop;
        self
    }

    /// Expired entries a deletion replaced: each is counted among the drops
    /// ([`DropReason::Expired`]) and its deletion among the kept entries.
    pub fn expired_replaced(&self) -> u64 {
        self.replacements
    }

    /// Aliases dropped as [`CompactionIterator::dropping_aliases`] asks.
    pub fn aliases_dropped(&self) -> u64 {
        self.aliases_dropped
    }

    fn stripe(&self, seq: SeqNo) -> usize {
        crate::range_del::stripe(&self.snapshots, seq)
    }

    /// Positions at the first kept entry.
    pub fn seek_to_first(&mut self, listener: &mut dyn DropListener) -> Result<()> {
        self.input.seek_to_first()?;
        self.has_current = false;
        self.find_kept(listener)
    }

    /// Moves to the next kept entry.
    pub fn next(&mut self, listener: &mut dyn DropListener) -> Result<()> {
        self.input.next()?;
        self.find_kept(listener)
    }

    fn find_kept(&mut self, listener: &mut dyn DropListener) -> Result<()> {
        self.valid = false;
        self.replaced = None;
        while self.input.valid() {
            let ikey = self.input.key();
            let parsed = ParsedKey::parse(ikey).ok_or_else(|| {
                Error::corruption(
                    &self.source,
                    0,
                    "malformed internal key in compaction input",
                )
            })?;
            let stripe = self.stripe(parsed.seq);
            let same_key = self.has_current && parsed.user_key == self.current_user_key.as_slice();
            if !same_key {
                self.current_user_key.clear();
                self.current_user_key.extend_from_slice(parsed.user_key);
                self.has_current = true;
            } else if stripe > self.last_stripe {
                return Err(Error::corruption(
                    &self.source,
                    0,
                    "compaction input versions out of sequence order",
                ));
            }
            let shadowed = same_key && stripe == self.last_stripe;
            let record = handle_record(parsed.kind, parsed.seq, self.input.value());
            if !shadowed {
                self.stripe_newest = parsed.seq;
                self.stripe_alias = record.and_then(|(r, alias)| alias.then_some(r));
                self.stripe_record = record.map(|(r, _)| r);
            }
            self.last_stripe = stripe;
            if self.drop_aliases && !shadowed && self.stripe_alias.is_some() {
                // Readers find the owner instead, which names the same record. The stripe's
                // state stays the alias's, so the owner behind it in this input is kept and
                // older versions are hidden by the alias's record, as when it is kept.
                self.aliases_dropped += 1;
                self.input.next()?;
                continue;
            }
            // The owner of the record the stripe's newest version is an alias of.
            let owner_of_alias =
                shadowed && record.is_some_and(|(r, alias)| !alias && self.stripe_alias == Some(r));
            let covering = self.covering_tombstone(parsed.user_key, parsed.seq, stripe);
            let expired = covering.is_none()
                && !shadowed
                && parsed.kind != ValueKind::Deletion
                && self.expired_for_all(&parsed, self.input.value())?;
            if expired {
                // Its record is garbage now, owner or alias: the alias's owner behind it is
                // hidden by the deletion and dropped, which makes the record garbage once.
                self.stripe_alias = None;
            }
            let reason = if covering.is_some() {
                Some(DropReason::RangeDeleted)
            } else if expired {
                Some(DropReason::Expired)
            } else if owner_of_alias {
                None
            } else if shadowed {
                Some(DropReason::Shadowed)
            } else if parsed.kind == ValueKind::Deletion
                && stripe == 0
                && (self.bottommost)(parsed.user_key)
            {
                Some(DropReason::ObsoleteTombstone)
            } else {
                None
            };
            match reason {
                Some(reason) => {
                    listener.on_drop(&DropEvent {
                        key: parsed,
                        value: self.input.value(),
                        reason,
                        // What hides the dropped version is the newest version's record: behind
                        // an alias or a written-back handle that record is older than the
                        // version naming it, and a record at or after it is not hidden (a
                        // cache of dropped keys that took the write-back's own number had GC reclaim the
                        // record the write-back names).
                        // A range tombstone hides every version older than itself.
                        // An expired entry hides everything older: its deletion replaces it. Its own
                        // record is not hidden by any newer version (a cache of dropped keys
                        // must not call it dead before the deletion is in; GC judges it by its
                        // expiry, recording the time it did).
                        hidden_by: match covering {
                            Some(t) => t,
                            None if expired => parsed.seq,
                            None => self.stripe_record.unwrap_or(self.stripe_newest),
                        },
                    });
                    if expired
                        && !(stripe == 0 && (self.bottommost)(parsed.user_key))
                    {
                        // The deletion that stands in for it (a deletion there would go).
                        self.replaced = Some(make_internal_key(
                            parsed.user_key,
                            parsed.seq,
                            ValueKind::Deletion,
                        ));
                        self.stripe_record = None;
                        self.replacements += 1;
                        self.valid = true;
                        return Ok(());
                    }
                    self.input.next()?;
                }
                None => {
                    self.valid = true;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// True when positioned at a kept entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// Internal key of the kept entry.
    pub fn key(&self) -> &[u8] {
        self.replaced.as_deref().unwrap_or_else(|| self.input.key())
    }

    /// Value of the kept entry.
    pub fn value(&self) -> &[u8] {
        if self.replaced.is_some() {
            return &[];
        }
        self.input.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIterator;
    use crate::key::{compare_internal, make_internal_key};

    type Dropped = (Vec<u8>, SeqNo, DropReason);

    #[derive(Default)]
    struct Record(Vec<Dropped>);
    impl DropListener for Record {
        fn on_drop(&mut self, e: &DropEvent<'_>) {
            self.0.push((e.key.user_key.to_vec(), e.key.seq, e.reason));
        }
    }

    fn input(entries: &[(&str, SeqNo, ValueKind)]) -> VecIterator {
        let mut v: Vec<(Vec<u8>, Vec<u8>)> = entries
            .iter()
            .map(|&(k, s, kind)| {
                (
                    make_internal_key(k.as_bytes(), s, kind),
                    format!("{k}{s}").into_bytes(),
                )
            })
            .collect();
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        VecIterator::new(v, compare_internal)
    }

    fn run(
        entries: &[(&str, SeqNo, ValueKind)],
        snapshots: Vec<SeqNo>,
        bottom: bool,
    ) -> (Vec<(String, SeqNo)>, Vec<Dropped>) {
        let mut it = CompactionIterator::new(
            input(entries),
            snapshots,
            Box::new(move |_| bottom),
            "t".into(),
        );
        let mut rec = Record::default();
        let mut kept = Vec::new();
        it.seek_to_first(&mut rec).expect("seek");
        while it.valid() {
            let p = ParsedKey::parse(it.key()).expect("key");
            kept.push((String::from_utf8(p.user_key.to_vec()).expect("utf8"), p.seq));
            it.next(&mut rec).expect("next");
        }
        (kept, rec.0)
    }

    use ValueKind::{Deletion as D, Value as V};

    #[test]
    fn entries_expired_for_every_reader_become_deletions() {
        // Inline values expiring at 100 + seq (the value is `expiry || key`).
        let expiring = |k: &str, s: SeqNo| {
            let mut v = Vec::new();
            crate::expiry::encode_inline(&mut v, 100 + s, k.as_bytes());
            (make_internal_key(k.as_bytes(), s, ValueKind::ValueWithExpiry), v)
        };
        let plain = |k: &str, s: SeqNo| (make_internal_key(k.as_bytes(), s, V), b"p".to_vec());
        let mut entries = vec![
            expiring("a", 9),
            plain("a", 3),
            expiring("b", 4),
            plain("b", 2),
            expiring("c", 8),
            expiring("d", 20),
            plain("e", 1),
        ];
        entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
        let drive = |readers: ReaderTimes, bottom: bool| {
            let snapshots = readers.sequences();
            let mut it = CompactionIterator::new(
                VecIterator::new(entries.clone(), compare_internal),
                snapshots,
                Box::new(move |_| bottom),
                "t".into(),
            )
            .with_reader_times(readers);
            let mut rec = Record::default();
            let mut kept = Vec::new();
            it.seek_to_first(&mut rec).expect("seek");
            while it.valid() {
                let p = ParsedKey::parse(it.key()).expect("key");
                kept.push((String::from_utf8(p.user_key.to_vec()).unwrap(), p.seq, p.kind));
                it.next(&mut rec).expect("next");
            }
            (kept, rec.0, it.expired_replaced())
        };
        // The present at 110: a@9 (109), b@4 (104) and c@8 (108) have expired, d@20 (120) not.
        // A snapshot at 5 taken at 103 reads b@4 unexpired, so it stays; a@9 and c@8 are newer
        // than the snapshot and read only by the present.
        let (kept, dropped, replaced) = drive(ReaderTimes::new(vec![(5, 103)], 110), false);
        assert_eq!(
            kept,
            vec![
                ("a".into(), 9, D),
                ("a".into(), 3, V),
                ("b".into(), 4, ValueKind::ValueWithExpiry),
                ("c".into(), 8, D),
                ("d".into(), 20, ValueKind::ValueWithExpiry),
                ("e".into(), 1, V),
            ],
            "a@3 is in the snapshot's stripe, below the deletion; b@2 in b@4's"
        );
        assert_eq!(
            dropped,
            vec![
                (b"a".to_vec(), 9, DropReason::Expired),
                (b"b".to_vec(), 2, DropReason::Shadowed),
                (b"c".to_vec(), 8, DropReason::Expired),
            ]
        );
        assert_eq!(replaced, 2);
        // Without the snapshot, at the bottom: the expired versions and what they hid go, with
        // no deletion left behind.
        let (kept, dropped, replaced) = drive(ReaderTimes::at(110), true);
        assert_eq!(
            kept,
            vec![
                ("d".into(), 20, ValueKind::ValueWithExpiry),
                ("e".into(), 1, V)
            ]
        );
        assert_eq!(
            dropped,
            vec![
                (b"a".to_vec(), 9, DropReason::Expired),
                (b"a".to_vec(), 3, DropReason::Shadowed),
                (b"b".to_vec(), 4, DropReason::Expired),
                (b"b".to_vec(), 2, DropReason::Shadowed),
                (b"c".to_vec(), 8, DropReason::Expired),
            ]
        );
        assert_eq!(replaced, 0);
        // Without reader times nothing expires: only the shadowed a@3 and b@2 go.
        assert_eq!(kept_without_reader_times(&entries), 5);
    }

    fn kept_without_reader_times(entries: &[(Vec<u8>, Vec<u8>)]) -> usize {
        let mut it = CompactionIterator::new(
            VecIterator::new(entries.to_vec(), compare_internal),
            Vec::new(),
            Box::new(|_| true),
            "t".into(),
        );
        let mut rec = Record::default();
        let mut kept = 0;
        it.seek_to_first(&mut rec).expect("seek");
        while it.valid() {
            kept += 1;
            it.next(&mut rec).expect("next");
        }
        kept
    }

    #[test]
    fn entries_a_range_tombstone_covers_in_their_stripe_are_dropped() {
        use crate::range_del::RangeTombstone;
        let tomb = |start: &str, end: &str, seq| RangeTombstone {
            start: start.as_bytes().to_vec(),
            end: end.as_bytes().to_vec(),
            seq,
        };
        let entries = [
            ("a", 3, V),
            ("b", 12, V),
            ("b", 4, V),
            ("c", 6, D),
            ("d", 5, V),
        ];
        let fragments = FragmentedTombstones::new([tomb("b", "d", 10)]);
        let mut it = CompactionIterator::new(
            input(&entries),
            vec![5],
            Box::new(|_| false),
            "t".into(),
        )
        .with_range_tombstones(Some(Arc::new(fragments)));
        let mut rec = Record::default();
        let mut counter = DropCounter::default();
        let mut kept = Vec::new();
        it.seek_to_first(&mut TeeListener(&mut rec, &mut counter))
            .expect("seek");
        while it.valid() {
            let p = ParsedKey::parse(it.key()).expect("key");
            kept.push((String::from_utf8(p.user_key.to_vec()).expect("utf8"), p.seq));
            it.next(&mut TeeListener(&mut rec, &mut counter))
                .expect("next");
        }
        // b@12 is newer than the tombstone, b@4 is below the snapshot at 5 (which still reads
        // it), c@6 is in the tombstone's stripe, "a" and "d" are outside its range.
        assert_eq!(
            kept,
            vec![
                ("a".into(), 3),
                ("b".into(), 12),
                ("b".into(), 4),
                ("d".into(), 5)
            ]
        );
        assert_eq!(rec.0, vec![(b"c".to_vec(), 6, DropReason::RangeDeleted)]);
        assert_eq!(counter.range_deleted, 1);
    }

    /// An entry of key `k` whose value is a stored handle.
    fn h(seq: SeqNo, record_seq: Option<SeqNo>, alias: bool) -> (Vec<u8>, Vec<u8>) {
        let stored = StoredHandle {
            location: crate::value::ValueHandle {
                file_number: 4,
                offset: 0,
                len: 10,
            },
            record_seq,
            alias,
            payload: None,
            expiry: None,
        };
        (
            make_internal_key(b"k", seq, ValueKind::ValueHandle),
            stored.encode(),
        )
    }

    fn run_values(
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        snapshots: Vec<SeqNo>,
    ) -> (Vec<SeqNo>, Vec<(SeqNo, SeqNo)>) {
        let (kept, dropped, _) = run_values_dropping_aliases(entries, snapshots, false);
        (kept, dropped)
    }

    /// Kept sequence numbers, `(seq, hidden_by)` of every drop event, and aliases dropped
    /// without one.
    fn run_values_dropping_aliases(
        mut entries: Vec<(Vec<u8>, Vec<u8>)>,
        snapshots: Vec<SeqNo>,
        drop_aliases: bool,
    ) -> (Vec<SeqNo>, Vec<(SeqNo, SeqNo)>, u64) {
        entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
        let mut it = CompactionIterator::new(
            VecIterator::new(entries, compare_internal),
            snapshots,
            Box::new(|_| true),
            "t".into(),
        )
        .dropping_aliases(drop_aliases);
        struct Hidden(Vec<(SeqNo, SeqNo)>);
        impl DropListener for Hidden {
            fn on_drop(&mut self, e: &DropEvent<'_>) {
                self.0.push((e.key.seq, e.hidden_by));
            }
        }
        let mut rec = Hidden(Vec::new());
        let mut kept = Vec::new();
        it.seek_to_first(&mut rec).expect("seek");
        while it.valid() {
            kept.push(ParsedKey::parse(it.key()).expect("key").seq);
            it.next(&mut rec).expect("next");
        }
        (kept, rec.0, it.aliases_dropped())
    }

    /// A `titan` write-back (version 9 naming record 3) hides the versions behind it from record
    /// 3 on, not from 9: record 3 is what readers read. Taking 9 had the DropCache (a database
    /// switched from `titan` to `scavenger`) declare the written-back record garbage.
    #[test]
    fn a_write_back_hides_older_versions_from_its_record_on() {
        let (kept, dropped) = run_values(
            vec![h(9, Some(3), false), h(3, None, false), h(1, None, false)],
            vec![],
        );
        assert_eq!(kept, vec![9]);
        assert_eq!(dropped, vec![(3, 3), (1, 3)]);
    }

    /// Under a policy that writes no aliases, an alias that is the newest version of its stripe
    /// goes without a drop event (no reference, no overwrite): the owner behind it names the same
    /// record and is kept, in this input or deeper. Versions behind it are hidden as when it is
    /// kept; an alias that something newer shadows is dropped as always, with its event.
    #[test]
    fn a_policy_without_aliases_drops_them_and_keeps_their_owners() {
        let base = vec![
            h(9, Some(3), true),
            h(7, Some(3), true),
            h(3, None, false),
            h(1, None, false),
        ];
        let (kept, dropped, silent) = run_values_dropping_aliases(base.clone(), vec![], true);
        assert_eq!(kept, vec![3], "the owner alone");
        assert_eq!(dropped, vec![(7, 3), (1, 3)], "as when the alias is kept");
        assert_eq!(silent, 1);
        // The owner deeper in the tree: nothing of the key is left here.
        let (kept, dropped, silent) =
            run_values_dropping_aliases(vec![h(9, Some(3), true)], vec![], true);
        assert_eq!((kept, dropped, silent), (vec![], vec![], 1));
        // A snapshot reading the alias: its stripe's alias goes too, the reader finds the owner.
        let (kept, _, silent) = run_values_dropping_aliases(base.clone(), vec![8], true);
        assert_eq!(
            (kept, silent),
            (vec![3], 2),
            "both aliases newest of their stripe"
        );
        // Shadowed by a newer version: dropped with an event, silently nothing.
        let mut overwritten = base;
        overwritten.push((make_internal_key(b"k", 12, V), b"new".to_vec()));
        let (kept, dropped, silent) = run_values_dropping_aliases(overwritten, vec![], true);
        assert_eq!((kept, silent), (vec![12], 0));
        assert_eq!(dropped, vec![(9, 12), (7, 12), (3, 12), (1, 12)]);
    }

    /// An alias that is the newest version of its stripe keeps its record's owner: the alias
    /// never makes the record garbage, so the owner must stay until another record shadows it.
    /// Older aliases of the record and older versions go; a version hidden behind an alias is
    /// hidden by the alias's record (the owner's sequence number), not by the alias itself.
    #[test]
    fn an_alias_keeps_its_owner_until_another_record_shadows_both() {
        let base = vec![
            h(9, Some(3), true),
            h(7, Some(3), true),
            h(3, None, false),
            h(1, None, false),
        ];
        let (kept, dropped) = run_values(base.clone(), vec![]);
        assert_eq!(kept, vec![9, 3]);
        assert_eq!(dropped, vec![(7, 3), (1, 3)]);
        // A written-back (titan) handle of another record is no owner of this one.
        let (kept, _) = run_values(vec![h(9, Some(3), true), h(5, Some(2), false)], vec![]);
        assert_eq!(kept, vec![9]);
        // A newer version of another record shadows the alias and the owner alike.
        let mut overwritten = base.clone();
        overwritten.push((make_internal_key(b"k", 12, V), b"new".to_vec()));
        let (kept, dropped) = run_values(overwritten.clone(), vec![]);
        assert_eq!(kept, vec![12]);
        assert_eq!(dropped, vec![(9, 12), (7, 12), (3, 12), (1, 12)]);
        // Unless a snapshot reads the alias: then its stripe keeps the alias and the owner.
        let (kept, dropped) = run_values(overwritten, vec![10]);
        assert_eq!(kept, vec![12, 9, 3]);
        assert_eq!(dropped, vec![(7, 3), (1, 3)]);
        // A snapshot between owner and alias: each is the newest of its own stripe.
        let (kept, _) = run_values(base, vec![5]);
        assert_eq!(kept, vec![9, 3]);
    }

    #[test]
    fn without_snapshots_only_the_newest_version_survives() {
        let (kept, dropped) = run(
            &[("a", 3, V), ("a", 2, V), ("a", 1, V), ("b", 5, V)],
            vec![],
            false,
        );
        assert_eq!(kept, vec![("a".into(), 3), ("b".into(), 5)]);
        assert_eq!(
            dropped,
            vec![
                (b"a".to_vec(), 2, DropReason::Shadowed),
                (b"a".to_vec(), 1, DropReason::Shadowed)
            ]
        );
    }

    /// `(seq, hidden_by)` of every drop of a bottommost compaction of `entries`.
    fn hidden_by(
        entries: &[(&str, SeqNo, ValueKind)],
        snapshots: Vec<SeqNo>,
    ) -> Vec<(SeqNo, SeqNo)> {
        #[derive(Default)]
        struct HiddenBy(Vec<(SeqNo, SeqNo)>);
        impl DropListener for HiddenBy {
            fn on_drop(&mut self, e: &DropEvent<'_>) {
                self.0.push((e.key.seq, e.hidden_by));
            }
        }
        let mut it =
            CompactionIterator::new(input(entries), snapshots, Box::new(|_| true), "t".into());
        let mut rec = HiddenBy::default();
        it.seek_to_first(&mut rec).expect("seek");
        while it.valid() {
            it.next(&mut rec).expect("next");
        }
        rec.0
    }

    #[test]
    fn each_drop_names_the_version_that_hides_it() {
        // Snapshots at 5 and 8: a@9 alone above 8, a@7 alone in 6..=8, so both stay; a@4
        // hides a@2 and a@1 (the snapshot at 5 reads a@4). The tombstone b@6 is above the
        // snapshot at 5, so it stays and b@3 stays for that snapshot.
        let a = [
            ("a", 9, V),
            ("a", 7, V),
            ("a", 4, V),
            ("a", 2, V),
            ("a", 1, V),
        ];
        let b = [("b", 6, D), ("b", 3, V)];
        assert_eq!(
            hidden_by(&[&a[..], &b[..]].concat(), vec![5, 8]),
            vec![(2, 4), (1, 4)]
        );
        // Without snapshots a@9 hides a@7; the tombstone b@6 at the bottom hides b@3 and is
        // dropped itself, hiding everything older (its own number).
        assert_eq!(
            hidden_by(&[&a[..2], &b[..]].concat(), vec![]),
            vec![(7, 9), (6, 6), (3, 6)]
        );
    }

    #[test]
    fn a_snapshot_keeps_the_version_it_sees() {
        // Snapshot at 2 sees a@2; the present sees a@4; a@1 is invisible to both.
        let (kept, dropped) = run(&[("a", 4, V), ("a", 2, V), ("a", 1, V)], vec![2], false);
        assert_eq!(kept, vec![("a".into(), 4), ("a".into(), 2)]);
        assert_eq!(dropped, vec![(b"a".to_vec(), 1, DropReason::Shadowed)]);
        // Snapshots at 1 and 3: a@1 (stripe 0), a@2 (stripe 1, newest ≤ 3), a@4 (top).
        let (kept, _) = run(&[("a", 4, V), ("a", 2, V), ("a", 1, V)], vec![1, 3], false);
        assert_eq!(kept.len(), 3);
    }

    #[test]
    fn tombstones_drop_only_at_the_bottom_and_below_every_snapshot() {
        let entries = [("a", 5, D), ("a", 3, V), ("b", 2, V)];
        let (kept, dropped) = run(&entries, vec![], false);
        assert_eq!(
            kept,
            vec![("a".into(), 5), ("b".into(), 2)],
            "not bottommost: tombstone stays"
        );
        assert_eq!(dropped, vec![(b"a".to_vec(), 3, DropReason::Shadowed)]);
        let (kept, dropped) = run(&entries, vec![], true);
        assert_eq!(kept, vec![("b".into(), 2)]);
        assert_eq!(
            dropped,
            vec![
                (b"a".to_vec(), 5, DropReason::ObsoleteTombstone),
                (b"a".to_vec(), 3, DropReason::Shadowed)
            ]
        );
        // A snapshot at 4 still sees a@3, so the tombstone (above the snapshot) must stay.
        let (kept, dropped) = run(&entries, vec![4], true);
        assert_eq!(
            kept,
            vec![("a".into(), 5), ("a".into(), 3), ("b".into(), 2)]
        );
        assert!(dropped.is_empty());
    }

    #[test]
    fn the_counter_and_tee_see_every_event() {
        let mut it = CompactionIterator::new(
            input(&[("a", 3, D), ("a", 2, V), ("a", 1, V)]),
            vec![],
            Box::new(|_| true),
            "t".into(),
        );
        let mut counter = DropCounter::default();
        let mut rec = Record::default();
        it.seek_to_first(&mut TeeListener(&mut counter, &mut rec))
            .expect("seek");
        assert!(!it.valid());
        assert_eq!(
            counter,
            DropCounter {
                shadowed: 2,
                tombstones: 1,
                range_deleted: 0,
                expired: 0
            }
        );
        assert_eq!(rec.0.len(), 3);
    }
}
