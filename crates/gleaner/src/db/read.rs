//! Point reads: memtable, immutable memtables, then the index tree — newest data first — and,
//! for a separated value, its record in a value table.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{Counters, DbInner, ReadOptions, SuperVersion};
use crate::cache::row_cache::{Row, Ticket};
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::lookup::Lookup;
use crate::options::MAX_KEY_SIZE;
use crate::table::ReadCtx;
use crate::value::ValueHandle;

/// How a point read goes on once begun.
enum PointRead {
    /// The row cache answered: the row, or `None` when it had expired (and was dropped).
    Cached(Option<Row>),
    /// The read looks the key up in `sv` at `seq`, reading key tables as `ctx` says; with a
    /// ticket, it fills the row cache with what it finds.
    Tables {
        sv: Arc<SuperVersion>,
        seq: SeqNo,
        ctx: ReadCtx,
        ticket: Option<Ticket>,
    },
}

/// A key's value and when it expires, as [`Db::get_entry`](crate::Db::get_entry) reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The value. A separated value shares its buffer with the value cache (and with the read
    /// that filled it): neither reading it from the cache nor handing it on copies it, and
    /// [`Bytes::clone`] is a reference count. Keeping it keeps that buffer, about the value's
    /// size, alive; `Vec::from(value)` copies it only when the buffer is shared.
    pub value: Bytes,
    /// When the version read expires (milliseconds since the Unix epoch, by the database's
    /// clock; see [`crate::expiry`]), or `None` when it does not.
    pub expiry_ms: Option<u64>,
}

impl DbInner {
    /// The state a read with `opts` sees: the super version, then the sequence number.
    ///
    /// The super version is loaded first: a compaction installed after that cannot affect the
    /// read (it holds the older tables), and one installed before started from data older than
    /// the sequence number read next, so nothing the read may see was compacted away. A write
    /// that lands in a memtable installed after the load is missed even if its sequence number
    /// is lower; the read then reflects an earlier moment, still a consistent one, and a thread
    /// always sees its own acknowledged writes (their memtable was installed before they ran).
    pub(super) fn read_state(&self, opts: &ReadOptions<'_>) -> (Arc<SuperVersion>, SeqNo) {
        let sv = self.super_version.load_full();
        let seq = match opts.snapshot {
            Some(s) => s.sequence(),
            None => self.visible_seq.load(Ordering::Acquire),
        };
        (sv, seq)
    }

    /// The time a read with `opts` judges expiry at: the snapshot's, or now. Asked after
    /// [`DbInner::read_state`], so every write the read sees was made before it, and no edit
    /// that acted on expiry before the read started judged at a later time.
    pub(super) fn read_time(&self, opts: &ReadOptions<'_>) -> u64 {
        opts.snapshot
            .map_or_else(|| self.time.now(), |s| s.time_ms())
    }

    /// Starts a point read of `key` with `opts`: checks the key, counts the read (and tells
    /// the hotness detector of it), and returns the row cache's answer when it has one (an
    /// expired row reads as absent and is dropped), else
    /// the state the read reads, how it reads key tables, and the ticket a fill of the row
    /// cache needs (taken before the state is loaded: cache/row_cache.rs).
    fn begin_point_read(&self, key: &[u8], opts: &ReadOptions<'_>) -> Result<PointRead> {
        if key.len() > MAX_KEY_SIZE {
            return Err(Error::invalid(format!(
                "key of {} bytes exceeds the key size limit of {MAX_KEY_SIZE} bytes",
                key.len()
            )));
        }
        Counters::add(&self.counters.gets, 1);
        if let Some(d) = &self.detector {
            d.record(key);
        }
        // Only a read of the present may use the row cache: its entries are the newest
        // versions.
        let rows = self.row_cache.as_ref().filter(|_| opts.snapshot.is_none());
        if let Some((rows, row)) = rows.and_then(|r| Some((r, r.get(key)?))) {
            if self.expired_for(row.expiry_ms, opts) {
                rows.forget(key);
                return Ok(PointRead::Cached(None));
            }
            return Ok(PointRead::Cached(Some(row)));
        }
        let ticket = rows.filter(|_| opts.fill_cache).map(|r| r.ticket(key));
        let (sv, seq) = self.read_state(opts);
        if sv.version.is_partitioned() {
            let hot = sv.version.partition_of(key) == crate::version::routing::HOT;
            let c = &self.counters;
            Counters::add(if hot { &c.hot_gets } else { &c.cold_gets }, 1);
        }
        let ctx = ReadCtx {
            class: IoClass::UserRead,
            fill_cache: opts.fill_cache,
            readahead: 0,
            readahead_ramp: false,
        };
        Ok(PointRead::Tables {
            sv,
            seq,
            ctx,
            ticket,
        })
    }

    /// True (and counted) when a version with `expiry` has expired for a read with `opts`. The
    /// clock is read only for a version that expires.
    fn expired_for(&self, expiry: Option<u64>, opts: &ReadOptions<'_>) -> bool {
        let expired = expiry.is_some() && crate::expiry::expired(expiry, self.read_time(opts));
        if expired {
            Counters::add(&self.counters.expired_skipped, 1);
        }
        expired
    }

    /// The value of `key` a read with `opts` sees.
    pub(super) fn get(&self, key: &[u8], opts: &ReadOptions<'_>) -> Result<Option<Vec<u8>>> {
        Ok(self.get_entry(key, opts)?.map(|e| Vec::from(e.value)))
    }

    /// The value of `key` a read with `opts` sees, with its expiry: the newest version at the
    /// read's sequence number, unless it is a deletion or has expired at the read's time.
    pub(super) fn get_entry(&self, key: &[u8], opts: &ReadOptions<'_>) -> Result<Option<Entry>> {
        let (sv, seq, ctx, ticket) = match self.begin_point_read(key, opts)? {
            PointRead::Cached(row) => {
                return Ok(row.map(|r| Entry {
                    value: r.value,
                    expiry_ms: r.expiry_ms,
                }));
            }
            PointRead::Tables {
                sv,
                seq,
                ctx,
                ticket,
            } => (sv, seq, ctx, ticket),
        };
        let found = sv.get(&self.tables, key, seq, ctx)?;
        let expiry_ms = found.as_ref().and_then(Lookup::expiry);
        if self.expired_for(expiry_ms, opts) {
            return Ok(None);
        }
        let (value, separated) = match found {
            Some(Lookup::Value { value, .. }) => (value, false),
            Some(Lookup::Handle {
                handle, record_seq, ..
            }) => (
                self.read_separated(sv, key, handle, record_seq, opts)?,
                true,
            ),
            Some(Lookup::Deleted) | None => return Ok(None),
        };
        if let (Some(rows), Some(ticket)) = (&self.row_cache, ticket) {
            // An inline value has a buffer of its own (its memtable entry's, or a copy out of
            // its block) and is shared. A separated value is a view of the record it was read
            // in, header and key included and rounded up by the allocator: kept, that buffer
            // would hold more memory than the cache counts, so the value alone is copied.
            let value = if separated {
                Bytes::copy_from_slice(&value)
            } else {
                value.clone()
            };
            rows.fill(key, ticket, Row { value, expiry_ms });
        }
        Ok(Some(Entry { value, expiry_ms }))
    }

    /// Whether `key` is present for a read with `opts`, and when it expires, from its index
    /// entry alone (or the row cache's entry): a separated value is not read.
    pub(super) fn get_expiry(
        &self,
        key: &[u8],
        opts: &ReadOptions<'_>,
    ) -> Result<Option<Option<u64>>> {
        let (sv, seq, ctx) = match self.begin_point_read(key, opts)? {
            PointRead::Cached(row) => return Ok(row.map(|r| r.expiry_ms)),
            PointRead::Tables { sv, seq, ctx, .. } => (sv, seq, ctx),
        };
        let Some(found) = sv.get_key(&self.tables, key, seq, ctx)? else {
            return Ok(None);
        };
        if !found.is_value() || self.expired_for(found.expiry(), opts) {
            return Ok(None);
        }
        Ok(Some(found.expiry()))
    }

    /// Reads the separated value of `key`'s version whose handle is `handle` (naming the record
    /// written at `record_seq`): from the value cache, else from its value table, and notes a
    /// stale handle for a fix-up when the record had moved.
    fn read_separated(
        &self,
        sv: Arc<SuperVersion>,
        key: &[u8],
        handle: ValueHandle,
        record_seq: SeqNo,
        opts: &ReadOptions<'_>,
    ) -> Result<Bytes> {
        Counters::add(&self.counters.gets_separated, 1);
        let cache = self.value_cache.as_deref();
        if let Some(value) = cache.and_then(|c| c.get(&handle, key, record_seq)) {
            return Ok(value);
        }
        // A handle naming a table still readable is read where it points; only one naming a
        // collected table may have a remembered place.
        let values = sv.version.values();
        let place = cache
            .filter(|_| values.readable(handle.file_number).is_none())
            .and_then(|c| c.place(&handle, record_seq));
        let (value, moved) = values.read_value(
            &self.values,
            key,
            record_seq,
            handle,
            place,
            IoClass::UserRead,
            opts.fill_cache,
        )?;
        drop(sv);
        if let Some(c) = cache.filter(|_| opts.fill_cache) {
            c.insert_read(&handle, key, record_seq, &value);
            if let Some(to) = moved.filter(|to| Some(*to) != place) {
                c.insert_place(&handle, record_seq, to);
            }
        }
        if let Some(to) = moved {
            Counters::add(&self.counters.gets_via_inheritance, 1);
            // Only a read of the present can fix the key's newest version up (the write checks
            // that it still is the one read).
            if opts.snapshot.is_none() {
                self.note_stale_read(key, handle, record_seq, to);
            }
        }
        Ok(value)
    }
}
