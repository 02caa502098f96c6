//! Selective handle updating on reads (`PolicySet::updates_handles_on_read`; NovKV §III-D;
//! docs/gc.md): a point read
//! whose handle named a table GC collected found the record by key in the table inheritance
//! leads to. It queues a *fix-up*: an alias `key → the record's current place`, written through
//! the write path as a conditional write (the key's newest version must still be the one the
//! read found, checked by the WAL leader, so a newer user write always wins). The next read of
//! the key reads the alias and goes straight to the record.
//!
//! The traffic is bounded and never holds a read up: at most [`MAX_QUEUED`] fix-ups wait (more
//! are dropped), a read applies at most [`MAX_PER_READ`] of them, and a fix-up never waits: when
//! another write is queued, the WAL is busy, the memtable is full or writes are delayed, it stays
//! at the head of the queue for a later turn. With `inline_background_work` reads only queue,
//! and the queue is drained at the fixed points of inline work, so a seeded workload stays
//! deterministic (and a test can put a user write between a read and its fix-up).

use std::collections::VecDeque;

use parking_lot::Mutex;

use super::write::Applied;
use super::{Counters, DbInner};
use crate::key::SeqNo;
use crate::value::ValueHandle;

/// Most fix-ups waiting at once.
pub(super) const MAX_QUEUED: usize = 1024;

/// Most fix-ups one read applies.
pub(super) const MAX_PER_READ: usize = 8;

/// One alias to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FixUp {
    pub(super) key: Vec<u8>,
    /// The handle of the version the read found (naming a collected table).
    pub(super) from: ValueHandle,
    /// The record's sequence number.
    pub(super) record_seq: SeqNo,
    /// Where the read found the record.
    pub(super) to: ValueHandle,
}

/// The waiting fix-ups.
#[derive(Debug, Default)]
pub(super) struct HandleUpdates {
    queue: Mutex<VecDeque<FixUp>>,
}

impl HandleUpdates {
    /// Queues `f`; false (nothing queued) when the queue is full. A fix-up of the same record
    /// already waiting is not queued twice.
    fn push(&self, f: FixUp) -> bool {
        let mut q = self.queue.lock();
        if q.iter()
            .any(|g| g.record_seq == f.record_seq && g.key == f.key)
        {
            return true;
        }
        if q.len() >= MAX_QUEUED {
            return false;
        }
        q.push_back(f);
        true
    }

    fn pop(&self) -> Option<FixUp> {
        self.queue.lock().pop_front()
    }

    /// Puts `f` back at the head of the queue (it found no room); dropped when the queue has
    /// filled up meanwhile.
    fn unpop(&self, f: FixUp) -> bool {
        let mut q = self.queue.lock();
        if q.len() >= MAX_QUEUED {
            return false;
        }
        q.push_front(f);
        true
    }

    /// Empties the queue; returns how many were waiting.
    fn clear(&self) -> u64 {
        let mut q = self.queue.lock();
        let n = q.len() as u64;
        q.clear();
        n
    }

    /// Fix-ups waiting.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.queue.lock().len()
    }
}

impl DbInner {
    /// A point read without a snapshot found record `record_seq` of `key` at `to` by following
    /// the inheritance records from `from` (policy `novkv`): queues the alias, and outside
    /// inline work applies a few waiting ones when no write is queued. Never fails: a fix-up
    /// that cannot be written is dropped, the read has its value already.
    pub(super) fn note_stale_read(
        &self,
        key: &[u8],
        from: ValueHandle,
        record_seq: SeqNo,
        to: ValueHandle,
    ) {
        let Some(updates) = &self.handle_updates else {
            return;
        };
        let queued = updates.push(FixUp {
            key: key.to_vec(),
            from,
            record_seq,
            to,
        });
        if !queued {
            Counters::add(&self.counters.handle_updates_dropped, 1);
        }
        if !self.opts.inline_background_work() {
            self.apply_handle_updates(MAX_PER_READ);
        }
    }

    /// Writes up to `max` waiting fix-ups, oldest first. Stops at the first that finds no room
    /// (it and the rest wait for a later turn); a failed write (the database is closing or
    /// read-only) drops them all.
    pub(super) fn apply_handle_updates(&self, max: usize) {
        let Some(updates) = &self.handle_updates else {
            return;
        };
        for _ in 0..max {
            let Some(f) = updates.pop() else {
                return;
            };
            match self.write_alias(&f.key, f.from, f.record_seq, f.to) {
                Ok(Applied::Yes) => Counters::add(&self.counters.handle_updates_written, 1),
                Ok(Applied::ConditionFailed) => {
                    Counters::add(&self.counters.handle_updates_skipped, 1);
                }
                Ok(Applied::NoRoom) => {
                    if !updates.unpop(f) {
                        Counters::add(&self.counters.handle_updates_dropped, 1);
                    }
                    return;
                }
                Err(_) => {
                    let n = 1 + updates.clear();
                    Counters::add(&self.counters.handle_updates_dropped, n);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::Arc;

    use crate::io::FaultFs;
    use crate::{Db, GcPolicyKind, Options};

    fn value(i: u32, round: u32) -> Vec<u8> {
        let mut v = format!("{i} {round} ").into_bytes();
        v.resize(400 + (i as usize % 5) * 50, b'a' + (round % 26) as u8);
        v
    }

    fn key(i: u32) -> String {
        format!("key{i:04}")
    }

    /// Inline work (the test decides when jobs run), `novkv`, small separated values; stale
    /// handles stay until a read updates them or the tree's shape asks for a compaction
    /// (`stale_handle_share` 0).
    fn options(fs: &FaultFs) -> Options {
        Options::default()
            .with_file_system(Arc::new(fs.clone()))
            .with_inline_background_work(true)
            .with_stale_handle_share(0.0)
            .with_gc_threads(0)
            .with_gc_policy(GcPolicyKind::Novkv)
            .with_novkv_valid_threshold(0.9)
            .with_memtable_size(1 << 20)
            .with_l0_compaction_trigger(8)
            .with_value_table_size(64 << 10)
            .with_min_separated_value_size(100)
    }

    /// An alias in a memtable is no reference the version knows of: were its table collected,
    /// a compaction rewriting the key tables' handles past it would prune the inheritance
    /// records the alias resolves through, and a read of the key would find its table gone
    /// (the model test once met this). The table is pinned until the memtable is flushed: no
    /// GC job collects it meanwhile, and after the flush the alias's key table references it.
    #[test]
    fn a_table_an_unflushed_alias_names_is_not_collected_before_the_flush() {
        let fs = FaultFs::new(21);
        let opts = options(&fs);
        let db = Db::open(Path::new("/pins"), opts).expect("open");
        const KEYS: u32 = 120;
        let mut latest = vec![0u32; KEYS as usize];
        for i in 0..KEYS {
            db.put(key(i), value(i, 0)).expect("put");
        }
        db.flush().expect("flush");
        for i in (0..KEYS).step_by(3) {
            db.put(key(i), value(i, 1)).expect("put");
            latest[i as usize] = 1;
        }
        db.compact_range(None, None).expect("compact");
        assert!(
            db.run_gc().expect("gc").jobs > 0,
            "the round-0 table collected"
        );
        // Half of the remaining round-0 keys overwritten and flushed to L0, not compacted: the
        // garbage they make in the GC output is counted only by the compaction below.
        for i in (0..KEYS).filter(|i| i % 3 == 1) {
            db.put(key(i), value(i, 2)).expect("put");
            latest[i as usize] = 2;
        }
        db.flush().expect("flush");
        // A key whose handle still names the collected table: its read searches, and the
        // fix-up puts an alias naming the GC output into the (new) memtable.
        let k = 2;
        assert_eq!(db.get(key(k)).expect("get"), Some(value(k, 0)));
        db.put("unrelated", "x")
            .expect("the fixed point writes the alias");
        let s = db.stats().operations;
        assert_eq!(s.handle_updates_written, 1, "{s:?}");
        let inner = &db.inner;
        let pinned: Vec<u64> = inner
            .state
            .lock()
            .alias_pins
            .values()
            .flatten()
            .copied()
            .collect();
        assert_eq!(pinned.len(), 1);
        // Compactions that leave the memtable alone: the first counts the garbage and points
        // the key tables' handles at the output; GC then may not take the output; the second
        // would prune its inheritance record had GC collected it.
        inner.compact_levels(None, None).expect("compact");
        let garbage = db.stats().values.garbage_records;
        assert!(garbage > 0);
        let gc = db.run_gc().expect("gc");
        assert_eq!(gc.jobs, 0, "the pinned output is not collected: {gc:?}");
        inner.compact_levels(None, None).expect("compact");
        for i in 0..KEYS {
            assert_eq!(
                db.get(key(i)).expect("get"),
                Some(value(i, latest[i as usize])),
                "{}",
                key(i)
            );
        }
        // The flush releases the pin; GC then collects the output, and the alias, now in a key
        // table, resolves through the inheritance record its reference keeps.
        db.flush().expect("flush");
        assert!(inner.state.lock().alias_pins.is_empty());
        assert!(db.run_gc().expect("gc").jobs > 0);
        inner.compact_levels(None, None).expect("compact");
        for i in 0..KEYS {
            assert_eq!(
                db.get(key(i)).expect("get"),
                Some(value(i, latest[i as usize])),
                "{}",
                key(i)
            );
        }
        let r = db.recount_garbage().expect("recount");
        assert!(r.mismatches.is_empty(), "{:#?}", r.mismatches);
    }

    /// A handle update is the engine's write, not the user's: GC pacing, which yields to reads
    /// only while no user write comes, must not see one. (It once counted every batch, so under
    /// `novkv` the aliases that reads wrote kept GC at full speed through a read-only phase.)
    #[test]
    fn handle_updates_are_no_user_writes_to_gc_pacing() {
        let fs = FaultFs::new(22);
        let opts = options(&fs);
        let db = Db::open(Path::new("/pacing"), opts).expect("open");
        for i in 0..60 {
            db.put(key(i), value(i, 0)).expect("put");
        }
        db.flush().expect("flush");
        for i in (0..60).step_by(2) {
            db.put(key(i), value(i, 1)).expect("put");
        }
        db.compact_range(None, None).expect("compact");
        assert!(db.run_gc().expect("gc").jobs > 0);
        let inner = &db.inner;
        let now = std::time::Duration::ZERO;
        let before = inner.pacing_activity(now);
        let groups = db.stats().operations.write_groups;
        for i in (1..60).step_by(2) {
            assert_eq!(db.get(key(i)).expect("get"), Some(value(i, 0)));
        }
        inner.apply_handle_updates(MAX_QUEUED);
        let s = db.stats().operations;
        assert_eq!(s.handle_updates_written, 30, "{s:?}");
        assert_eq!(s.write_groups, groups + 30, "each alias is a write group");
        let after = inner.pacing_activity(now);
        assert_eq!(after.writes, before.writes, "no user write for the pacer");
        assert_eq!(after.reads, before.reads + 30);
        db.put("user", "write").expect("put");
        assert_eq!(inner.pacing_activity(now).writes, before.writes + 1);
    }

    fn f(key: &str, record_seq: SeqNo) -> FixUp {
        let h = ValueHandle {
            file_number: 1,
            offset: 0,
            len: 9,
        };
        FixUp {
            key: key.as_bytes().to_vec(),
            from: h,
            record_seq,
            to: h,
        }
    }

    #[test]
    fn the_queue_is_bounded_and_holds_each_record_once() {
        let u = HandleUpdates::default();
        assert!(u.push(f("a", 1)));
        assert!(u.push(f("a", 1)), "already waiting: not refused");
        assert_eq!(u.len(), 1);
        assert!(u.push(f("a", 2)), "another record of the key");
        for i in 0..MAX_QUEUED as u64 - 2 {
            assert!(u.push(f("b", 10 + i)));
        }
        assert_eq!(u.len(), MAX_QUEUED);
        assert!(!u.push(f("c", 1)), "full");
        assert_eq!(u.pop(), Some(f("a", 1)), "oldest first");
        assert!(u.push(f("c", 1)));
        assert!(
            !u.unpop(f("a", 1)),
            "full again: the one put back is dropped"
        );
        assert_eq!(u.pop(), Some(f("a", 2)));
        assert!(u.unpop(f("a", 2)));
        assert_eq!(u.pop(), Some(f("a", 2)), "put back at the head");
        assert!(u.push(f("a", 2)));
        assert_eq!(u.clear(), MAX_QUEUED as u64);
        assert_eq!(u.pop(), None);
    }
}
