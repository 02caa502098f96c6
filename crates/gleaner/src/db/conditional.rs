//! The user's conditional write ([`Db::write_if_unchanged`](crate::Db::write_if_unchanged)):
//! a batch applied only if none of a set of keys changed since a snapshot, what a Redis
//! `WATCH` … `EXEC` needs. The check is made by the write queue's leader holding the WAL, as
//! the GC write-back's is (`db/write.rs`), so no other write lands between the check and the
//! write; it reads key-only lookups ([`KeyLookup`]), never a separated value.

use super::write::{Applied, Condition};
use super::{Counters, DbInner, SuperVersion};
use crate::batch::WriteBatch;
use crate::error::Result;
use crate::io::IoClass;
use crate::key::{MAX_SEQUENCE, SeqNo};
use crate::lookup::KeyLookup;
use crate::table::ReadCtx;

/// Most range tombstones a check looks below, one after the other, for a write newer than the
/// snapshot under them; past them the key counts as changed.
pub(super) const RANGE_DELETE_STEPS: usize = 64;

/// The condition of [`Db::write_if_unchanged`](crate::Db::write_if_unchanged): none of `keys`
/// changed since the snapshot at sequence number `seq`, taken at time `time_ms`.
pub(super) struct Unchanged {
    pub(super) seq: SeqNo,
    pub(super) time_ms: u64,
    pub(super) keys: Vec<Vec<u8>>,
}

/// True when `found` is a value that has not expired at `at`.
fn live(found: Option<&KeyLookup>, at: u64) -> bool {
    found.is_some_and(|f| f.is_value() && !crate::expiry::expired(f.expiry(), at))
}

impl DbInner {
    /// Commits `batch` through the write queue if none of `condition`'s keys changed since its
    /// snapshot (an empty batch only checks); returns whether it did. With
    /// `inline_background_work`, then runs the background work the write made due.
    pub(super) fn write_if_unchanged(
        &self,
        batch: WriteBatch,
        sync: bool,
        condition: Unchanged,
    ) -> Result<bool> {
        let applied = self.commit_queued(
            Some(batch),
            sync,
            Some(Condition::Unchanged(condition)),
            true,
        )?;
        Counters::add(&self.counters.conditional_writes, 1);
        if applied == Applied::ConditionFailed {
            Counters::add(&self.counters.conditional_write_conflicts, 1);
        }
        self.run_inline_work();
        Ok(applied == Applied::Yes)
    }

    /// Whether any key of `u` changed since its snapshot. Called by the write queue's leader
    /// holding the WAL: every acknowledged write is in the super version it loads, and none is
    /// half applied.
    pub(super) fn changed_since(&self, u: &Unchanged) -> Result<bool> {
        let sv = self.super_version.load();
        let now = self.time.now();
        let ctx = ReadCtx {
            class: IoClass::UserRead,
            fill_cache: true,
            readahead: 0,
            readahead_ramp: false,
        };
        for key in &u.keys {
            if self.key_changed(&sv, key, u, now, ctx)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether `key` changed since `u`'s snapshot, judged at `now` (Redis's `WATCH`):
    ///
    /// - *live then* means the newest version at the snapshot's sequence number is a value not
    ///   expired at the snapshot's time;
    /// - a write newer than the snapshot (by [`KeyLookup::write_seq`], so the engine's own
    ///   handle rewrites are not writes) changes the key if it is a point write (a put, even of
    ///   the same bytes, or a delete), or a range delete of a key live then; a range delete of
    ///   a key not live then is looked below (up to [`RANGE_DELETE_STEPS`] tombstones) for a
    ///   point write newer than the snapshot;
    /// - without one, the key changed only if it was live then and has expired by `now`.
    ///
    /// One lookup of the key's newest version when nothing newer is there; one more at the
    /// snapshot when something is, and one per range tombstone looked below.
    fn key_changed(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        u: &Unchanged,
        now: u64,
        ctx: ReadCtx,
    ) -> Result<bool> {
        let lookup = |seq: SeqNo| sv.get_key(&self.tables, key, seq, ctx);
        let newest = lookup(MAX_SEQUENCE)?;
        // The newest version is the snapshot's when it is no newer than the snapshot.
        let then = match newest {
            Some(n) if n.seq() > u.seq => lookup(u.seq)?,
            _ => newest,
        };
        let live_then = live(then.as_ref(), u.time_ms);
        let Some(mut found) = newest.filter(|n| n.write_seq() > u.seq) else {
            return Ok(live_then && !live(newest.as_ref(), now));
        };
        if live_then {
            // Whatever was written over it, point or range.
            return Ok(true);
        }
        for _ in 0..RANGE_DELETE_STEPS {
            let KeyLookup::RangeDeleted { seq } = found else {
                // A point write newer than the snapshot.
                return Ok(true);
            };
            match lookup(seq - 1)? {
                Some(below) if below.write_seq() > u.seq => found = below,
                // Only the range deletes are newer: the key was absent, and still is.
                _ => return Ok(false),
            }
        }
        Ok(true)
    }
}
