//! The write path: batch validation, group commit (one leader writes the WAL record of a whole
//! group of concurrent writers and applies it to the memtable), and making room — switching
//! memtables and stalling when background work falls behind.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};

use super::{Counters, DbInner, DbState, Wal};
use crate::batch::{BATCH_HEADER_LEN, BatchOp, RangeTombstoneLoad, WriteBatch};
use crate::cache::row_cache::{Row, Ticket};
use crate::error::{Error, Result};
use crate::filename::wal_file_name;
use crate::io::{CountedWriter, IoClass, WriteFileOptions};
use crate::key::{MAX_SEQUENCE, SeqNo};
use crate::lookup::Lookup;
use crate::memtable::{MAX_RANGE_TOMBSTONE_BYTES, MAX_RANGE_TOMBSTONES, MemTable};
use crate::options::MAX_KEY_SIZE;
use crate::table::ReadCtx;
use crate::value::{HandlePayload, StoredHandle, ValueHandle};
use crate::wal::LogWriter;

/// Largest group a leader assembles when its own batch is small: its batch plus 128 KiB.
const SMALL_GROUP_EXTRA: usize = 128 << 10;
/// Largest group otherwise: 1 MiB.
const MAX_GROUP_BYTES: usize = 1 << 20;
/// Delay of one write group when L0 reaches the slowdown trigger.
const SLOWDOWN_DELAY: Duration = Duration::from_millis(1);
/// Longest single wait for background progress before the stall conditions are re-checked.
const STALL_WAIT: Duration = Duration::from_millis(100);

/// One caller waiting in the write queue. `batch == None` asks for a memtable switch.
pub(super) struct Writer {
    batch: Option<WriteBatch>,
    sync: bool,
    /// A conditional write: applied only if its condition holds. Always a group of its own,
    /// checked by its own leader.
    condition: Option<Condition>,
    /// False for a handle update on read: it never waits for room (no delay, no stall, no
    /// memtable switch) and is skipped instead.
    may_wait: bool,
    done: Mutex<Option<Result<()>>>,
    /// With `prepopulate_row_cache`, the tickets of the batch's puts in order, which the
    /// leader took as it ended their keys' writes in the row cache; the writer puts the
    /// values in itself, outside the write queue ([`DbInner::put_rows`]).
    row_tickets: Mutex<Vec<Ticket>>,
}

/// What a conditional write checks before it is applied.
pub(super) enum Condition {
    /// A GC write-back or a handle update on read: the engine's own write.
    Record(RecordCondition),
    /// [`Db::write_if_unchanged`](crate::Db::write_if_unchanged): a user's write.
    Unchanged(super::conditional::Unchanged),
}

/// The condition of a write-back: the newest version of `key` names the record written at
/// `record_seq` that is at `location` (where the GC job, or the read, found it), checked with
/// reads counted under `class`. The handle written carries the payload and the expiry of that
/// newest version (a policy's bytes and the key's lifetime stay with the key, wherever its
/// record moves).
pub(super) struct RecordCondition {
    key: Vec<u8>,
    /// The handle to write, without a payload or an expiry.
    handle: StoredHandle,
    location: ValueHandle,
    class: IoClass,
    /// An alias naming this value table: it must be live and unclaimed by GC, and is pinned
    /// until the memtable is flushed (`DbState::alias_pins`).
    pins: Option<u64>,
}

/// What became of a queued write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Applied {
    /// Written (or, for a switch request, done).
    Yes,
    /// Its condition failed: a newer version of the key names another record.
    ConditionFailed,
    /// A write that may not wait found no room (memtable full, or writes delayed or stopped).
    NoRoom,
}

impl DbInner {
    /// Checks a batch against the limits before anything is written.
    pub(super) fn validate_batch(&self, batch: &WriteBatch) -> Result<()> {
        let max_batch = self.opts.max_batch_size();
        if batch.encoded_size() as u64 > max_batch {
            return Err(Error::invalid(format!(
                "write batch of {} bytes exceeds option `max_batch_size` ({max_batch} bytes)",
                batch.encoded_size()
            )));
        }
        let load = batch.range_tombstones();
        if load.count > MAX_RANGE_TOMBSTONES || load.bytes > MAX_RANGE_TOMBSTONE_BYTES {
            return Err(Error::invalid(format!(
                "write batch holds {} range deletes with {} bytes of keys; a batch holds at most \
                 {MAX_RANGE_TOMBSTONES} (`memtable::MAX_RANGE_TOMBSTONES`) with at most \
                 {MAX_RANGE_TOMBSTONE_BYTES} bytes (`memtable::MAX_RANGE_TOMBSTONE_BYTES`): \
                 split it",
                load.count, load.bytes
            )));
        }
        let max_value = self.opts.max_value_size();
        for op in batch.iter() {
            let op = op.map_err(|e| Error::invalid(format!("malformed write batch: {e}")))?;
            let key = op.key();
            if key.len() > MAX_KEY_SIZE {
                return Err(Error::invalid(format!(
                    "key of {} bytes exceeds the key size limit of {MAX_KEY_SIZE} bytes",
                    key.len()
                )));
            }
            if let BatchOp::DeleteRange { start, end } = op {
                if end.len() > MAX_KEY_SIZE {
                    return Err(Error::invalid(format!(
                        "range end key of {} bytes exceeds the key size limit of \
                         {MAX_KEY_SIZE} bytes",
                        end.len()
                    )));
                }
                if start >= end {
                    return Err(Error::invalid(
                        "delete_range: the start key must sort before the end key (the range \
                         [start, end) is empty otherwise)",
                    ));
                }
            }
            if let BatchOp::Put { value, expiry, .. } = op {
                if value.len() as u64 > max_value {
                    return Err(Error::invalid(format!(
                        "value of {} bytes exceeds option `max_value_size` ({max_value} bytes)",
                        value.len()
                    )));
                }
                if let Some(e) = expiry {
                    crate::expiry::check_expiry(e)?;
                }
            }
        }
        Ok(())
    }

    /// Admits a validated, non-empty user batch: tells the hotness detector of its keys, then
    /// passes the space throttle (which may delay the caller, or fail the write at the space
    /// budget). The returned guard is held until the write is logged: until then its bytes
    /// count as on disk.
    pub(super) fn admit_write(
        &self,
        batch: &WriteBatch,
    ) -> Result<Option<super::space::AdmittedWrite<'_>>> {
        if let Some(d) = &self.detector {
            // A user batch was validated whole; the engine's own handle writes are not
            // accesses.
            for op in batch.iter().flatten() {
                if !matches!(op, BatchOp::PutHandle { .. }) {
                    d.record(op.key());
                }
            }
        }
        self.throttle_write(batch)
    }

    /// Commits a batch (`None`: switches the memtable) through the write queue; with
    /// `inline_background_work`, then runs the background work it made due.
    pub(super) fn write_impl(&self, batch: Option<WriteBatch>, sync: bool) -> Result<()> {
        self.commit_queued(batch, sync, None, true)?;
        self.run_inline_work();
        Ok(())
    }

    /// Writes `key` → `handle` (a moved record's new place) if the key's newest version still
    /// names the record written at `record_seq`; returns whether it did. The check and the
    /// write are one step of the write queue's leader, so no other write comes in between
    /// (as Titan's `WriteWithCallback`). Not synced: the caller syncs the WAL once it is done.
    pub(super) fn write_back(
        &self,
        key: &[u8],
        from: ValueHandle,
        handle: &StoredHandle,
    ) -> Result<bool> {
        let mut batch = WriteBatch::new();
        batch.put_handle(key, handle);
        let condition = Condition::Record(RecordCondition {
            key: key.to_vec(),
            handle: handle.clone(),
            location: from,
            class: IoClass::GcLookup,
            pins: None,
        });
        Ok(self.commit_queued(Some(batch), false, Some(condition), true)? == Applied::Yes)
    }

    /// Writes the alias `key` → `to` for record `record_seq` (a handle update on read)
    /// if the key's newest version is still the one the read found, whose handle is
    /// `from`, and `to`'s table is still live and not claimed by a GC job (it is then pinned
    /// until the memtable is flushed: `DbState::alias_pins`). Never waits for room
    /// ([`Applied::NoRoom`] when the memtable is full or writes are delayed). Not synced: an
    /// alias lost in a crash only costs a later read the search again.
    pub(super) fn write_alias(
        &self,
        key: &[u8],
        from: ValueHandle,
        record_seq: SeqNo,
        to: ValueHandle,
    ) -> Result<Applied> {
        let alias = StoredHandle::alias(to, record_seq);
        let mut batch = WriteBatch::new();
        batch.put_handle(key, &alias);
        let condition = Condition::Record(RecordCondition {
            key: key.to_vec(),
            handle: alias,
            location: from,
            // Part of serving reads.
            class: IoClass::UserRead,
            pins: Some(to.file_number),
        });
        self.commit_queued(Some(batch), false, Some(condition), false)
    }

    /// Makes every write so far durable: the logs of sealed memtables not yet flushed, then the
    /// active one. A failure poisons the WAL: writes are refused until the database is reopened.
    pub(super) fn sync_wal(&self) -> Result<()> {
        let mut wal = self.wal.lock();
        let Some(w) = wal.as_mut() else {
            return Err(Error::Closed);
        };
        self.sync_logs(w)
    }

    /// Syncs the sealed logs (`DbInner::sealed_logs`), the active log's directory entry, the
    /// active memtable's value segments (the values the log's handles name) and the active log,
    /// in that order: a write is durable only with every write before it. A failure poisons
    /// the WAL.
    pub(super) fn sync_logs(&self, wal: &mut Wal) -> Result<()> {
        self.sync_before_active_log(wal)
            .and_then(|()| match &self.segment_sink {
                Some(sink) => wal.segments.flush(true, sink),
                None => Ok(()),
            })
            .and_then(|()| wal.writer.sync())
            .inspect_err(|e| self.set_bg_error(e.clone()))
    }

    /// What must be durable before the active log is synced: the logs of the memtables sealed
    /// before it (a memtable switch leaves them unsynced: `db/sealed_logs.rs`) and the active
    /// log's directory entry (a switch creates the log without syncing the directory).
    fn sync_before_active_log(&self, wal: &mut Wal) -> Result<()> {
        self.sealed_logs.lock().sync()?;
        if self.wal_dir_durable.load(Ordering::Acquire) < wal.number {
            self.fs.sync_dir(&self.dir)?;
            // The segments' entries too: they were created before this sync.
            wal.segments.entries_durable();
            self.wal_dir_durable.fetch_max(wal.number, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Makes the directory entry of WAL `number` durable, unless it is known to be:
    /// `synced_since` says the directory was synced after the log was created. Called before an
    /// edit makes the log the oldest one needed (an open refuses a database without it).
    pub(super) fn wal_entry_durable(&self, number: u64, synced_since: bool) -> Result<()> {
        if self.wal_dir_durable.load(Ordering::Acquire) >= number {
            return Ok(());
        }
        if !synced_since {
            self.fs.sync_dir(&self.dir)?;
        }
        self.wal_dir_durable.fetch_max(number, Ordering::AcqRel);
        Ok(())
    }

    /// Whether the newest version of `key`, in the memtables or the index tree, names the
    /// record written at `record_seq` at `location`: if it does, `Some` of its payload and
    /// expiry.
    fn names_record(
        &self,
        key: &[u8],
        record_seq: SeqNo,
        location: ValueHandle,
        class: IoClass,
    ) -> Result<Option<(Option<HandlePayload>, Option<u64>)>> {
        let sv = self.super_version.load();
        let ctx = ReadCtx {
            class,
            fill_cache: true,
            readahead: 0,
            readahead_ramp: false,
        };
        let newest = sv.get(&self.tables, key, MAX_SEQUENCE, ctx)?;
        let names = sv.version.values().names_record(
            &self.values,
            key,
            newest.as_ref(),
            record_seq,
            location,
            class,
        )?;
        let carried = match newest {
            Some(Lookup::Handle {
                payload, expiry, ..
            }) => (payload, expiry),
            _ => (None, None),
        };
        Ok(names.then_some(carried))
    }

    /// Queues a writer and either waits for a leader to commit it or becomes the leader.
    /// Returns whether the batch was applied: always, unless `condition` failed or a writer
    /// that may not wait (`may_wait` false, only with a condition) found no room.
    pub(super) fn commit_queued(
        &self,
        batch: Option<WriteBatch>,
        sync: bool,
        condition: Option<Condition>,
        may_wait: bool,
    ) -> Result<Applied> {
        debug_assert!(
            may_wait || condition.is_some(),
            "only conditional writes skip"
        );
        let me = Arc::new(Writer {
            batch,
            sync,
            condition,
            may_wait,
            done: Mutex::new(None),
            row_tickets: Mutex::new(Vec::new()),
        });
        let mut queue = self.writers.lock();
        // A write that may not wait leads at once or not at all.
        if !may_wait && !queue.is_empty() {
            return Ok(Applied::NoRoom);
        }
        queue.push_back(Arc::clone(&me));
        loop {
            if let Some(r) = me.done.lock().take() {
                // Conditional writers lead their own group, so a follower's batch was applied.
                self.put_rows(&me);
                return r.map(|()| Applied::Yes);
            }
            if Arc::ptr_eq(&queue[0], &me) {
                break;
            }
            self.writers_cv.wait(&mut queue);
        }
        let group = Self::build_group(&queue);
        drop(queue);
        let result = self.write_group(&group);
        let mut queue = self.writers.lock();
        for w in &group {
            let front = queue.pop_front();
            debug_assert!(front.is_some_and(|f| Arc::ptr_eq(&f, w)));
            if !Arc::ptr_eq(w, &me) {
                *w.done.lock() = Some(result.clone().map(|_| ()));
            }
        }
        drop(queue);
        self.writers_cv.notify_all();
        self.put_rows(&me);
        result
    }

    /// With `prepopulate_row_cache`, puts the values of `w`'s batch into the row cache once
    /// the batch is applied, before the write returns, and outside the write queue (the
    /// copies and inserts run on the writers' threads, beside the next group's commit). Each
    /// put holds the ticket its leader's end of the key's write returned: a later write of a
    /// key of the same slot moved the slot on, and the put then stays out, so an older value
    /// never replaces a newer one (cache/row_cache.rs).
    fn put_rows(&self, w: &Writer) {
        let (Some(rows), Some(batch)) = (&self.row_cache, &w.batch) else {
            return;
        };
        let tickets = std::mem::take(&mut *w.row_tickets.lock());
        if tickets.is_empty() {
            return;
        }
        let puts = batch.iter().flatten().filter_map(|op| match op {
            BatchOp::Put { key, value, expiry } => Some((key, value, expiry)),
            _ => None,
        });
        for ((key, value, expiry_ms), ticket) in puts.zip(tickets) {
            let value = Bytes::copy_from_slice(value);
            rows.fill(key, ticket, Row { value, expiry_ms });
        }
    }

    /// The leader's group: the writers at the front of the queue, up to a byte budget. A switch
    /// request and a conditional write are always groups of their own.
    fn build_group(queue: &std::collections::VecDeque<Arc<Writer>>) -> Vec<Arc<Writer>> {
        let leader = &queue[0];
        let Some(first) = leader.batch.as_ref().filter(|_| leader.condition.is_none()) else {
            return vec![Arc::clone(leader)];
        };
        let first_size = first.encoded_size();
        let limit = if first_size <= SMALL_GROUP_EXTRA {
            first_size + SMALL_GROUP_EXTRA
        } else {
            MAX_GROUP_BYTES.max(first_size)
        };
        let mut size = first_size;
        let mut load = first.range_tombstones();
        let mut group = vec![Arc::clone(leader)];
        for w in queue.iter().skip(1) {
            let Some(b) = w.batch.as_ref().filter(|_| w.condition.is_none()) else {
                break;
            };
            size += b.encoded_size() - BATCH_HEADER_LEN;
            if size > limit {
                break;
            }
            // A group's range tombstones fit one memtable (each batch's do: validated).
            let with = load + b.range_tombstones();
            if with.count > MAX_RANGE_TOMBSTONES || with.bytes > MAX_RANGE_TOMBSTONE_BYTES {
                break;
            }
            load = with;
            group.push(Arc::clone(w));
        }
        group
    }

    /// Writes the group's batches to the WAL and the memtable; returns whether it did (a
    /// conditional write whose condition fails writes nothing, nor does one that may not wait
    /// and finds no room).
    fn write_group(&self, group: &[Arc<Writer>]) -> Result<Applied> {
        let mut wal_guard = if group[0].may_wait {
            self.wal.lock()
        } else {
            // Held by a WAL sync, say: a write that may not wait does not wait for it.
            match self.wal.try_lock() {
                Some(g) => g,
                None => return Ok(Applied::NoRoom),
            }
        };
        let Some(wal) = wal_guard.as_mut() else {
            return Err(Error::Closed);
        };
        let force_switch = group[0].batch.is_none();
        if let Some(Condition::Unchanged(u)) = &group[0].condition
            && group[0].batch.as_ref().is_some_and(WriteBatch::is_empty)
        {
            // Nothing to write: the check alone, which needs no room in the memtable (holding
            // the WAL, it sees no write half applied).
            return Ok(if self.changed_since(u)? {
                Applied::ConditionFailed
            } else {
                Applied::Yes
            });
        }
        let load = group
            .iter()
            .filter_map(|w| w.batch.as_ref())
            .map(WriteBatch::range_tombstones)
            .fold(RangeTombstoneLoad::default(), |a, b| a + b);
        let Some(mem) = self.make_room(wal, force_switch, group[0].may_wait, load)? else {
            return Ok(Applied::NoRoom);
        };
        if force_switch {
            return Ok(Applied::Yes);
        }
        // Checked holding the WAL, after any memtable switch: no other write can land between
        // the check and this one.
        let mut carried = None;
        match &group[0].condition {
            Some(Condition::Unchanged(u)) if self.changed_since(u)? => {
                return Ok(Applied::ConditionFailed);
            }
            None | Some(Condition::Unchanged(_)) => {}
            Some(Condition::Record(c)) => {
                let record_seq = c.handle.record_seq.unwrap_or_default();
                let Some((payload, expiry)) =
                    self.names_record(&c.key, record_seq, c.location, c.class)?
                else {
                    return Ok(Applied::ConditionFailed);
                };
                if payload.is_some() || expiry.is_some() {
                    let mut b = WriteBatch::new();
                    let handle = c.handle.clone().with_payload(payload).with_expiry(expiry);
                    b.put_handle(&c.key, &handle);
                    carried = Some(b);
                }
                if let Some(table) = c.pins {
                    // Under the state lock, as GC claims victims: the table cannot be claimed
                    // between this check and the pin. The memtable cannot switch: we hold the
                    // WAL.
                    let mut st = self.state.lock();
                    if st.version.values().live(table).is_none() || st.gc_claimed.contains(&table) {
                        return Ok(Applied::ConditionFailed);
                    }
                    st.alias_pins
                        .entry(mem.wal_number())
                        .or_default()
                        .insert(table);
                }
            }
        }
        let batches: Vec<&WriteBatch> = match &carried {
            Some(b) => vec![b],
            None => group.iter().filter_map(|w| w.batch.as_ref()).collect(),
        };
        let count: u64 = batches.iter().map(|b| u64::from(b.count())).sum();
        let last = self.visible_seq.load(Ordering::Acquire);
        let first_seq = last + 1;
        // Real sequence numbers stay below MAX_SEQUENCE: a key table's extent uses it for the
        // bounds range tombstones give it (`key::range_bound`).
        if last + count >= MAX_SEQUENCE {
            return Err(Error::invalid("sequence numbers exhausted"));
        }
        let sync = group.iter().any(|w| w.sync);
        // With `separate_at=write`, values go to the memtable's segments first, and the log
        // and the memtable get their handles.
        let separated = self
            .separate_values(&mut wal.segments, &mem, &batches, first_seq, sync)
            .inspect_err(|e| self.set_bg_error(e.clone()))?;
        // The user bytes of the puts whose values became handles (counted below as the
        // engine's own writes).
        let mut user_bytes = separated.as_ref().map_or(0, |(_, bytes)| *bytes);
        // What the log and the memtable get; `batches` keeps the user's values for the row
        // cache.
        let separated_one;
        let written: &[&WriteBatch] = match &separated {
            Some((b, _)) => {
                separated_one = [b];
                &separated_one
            }
            None => &batches,
        };
        let mut header = [0u8; BATCH_HEADER_LEN];
        header[..8].copy_from_slice(&first_seq.to_le_bytes());
        header[8..].copy_from_slice(&(count as u32).to_le_bytes());
        let sync_point = wal.writer.synced_size().to_le_bytes();
        let mut parts: Vec<&[u8]> = Vec::with_capacity(written.len() + 2);
        parts.push(&sync_point);
        parts.push(&header);
        parts.extend(written.iter().map(|b| &b.encoded()[BATCH_HEADER_LEN..]));
        let logged = wal.writer.add_record_parts(&parts).and_then(|_| {
            if sync {
                self.sync_before_active_log(wal)
                    .and_then(|()| wal.writer.sync())
            } else {
                wal.writer.flush()
            }
        });
        if let Err(e) = logged {
            // The WAL may now hold a partial record; appending after it would turn a torn tail
            // into mid-log damage, so no further write may use it.
            self.set_bg_error(e.clone());
            return Err(e);
        }
        // From here to the publication nothing fails. The row cache drops the group's keys
        // and takes no fill of them until they are published (cache/row_cache.rs).
        if let Some(rows) = &self.row_cache {
            for op in batches.iter().flat_map(|b| b.iter().flatten()) {
                match op {
                    BatchOp::DeleteRange { .. } => rows.begin_write_all(),
                    other => rows.begin_write(other.key()),
                }
            }
        }
        let mut seq = first_seq;
        for b in written {
            for op in b.iter().flatten() {
                mem.apply(seq, &op);
                user_bytes += match op {
                    BatchOp::Put { key, value, .. } => (key.len() + value.len()) as u64,
                    BatchOp::Delete { key } => key.len() as u64,
                    // The engine's own write (a GC write-back, an alias), or a separated value
                    // counted above.
                    BatchOp::PutHandle { .. } => 0,
                    BatchOp::DeleteRange { start, end } => (start.len() + end.len()) as u64,
                };
                seq += 1;
            }
        }
        debug_assert_eq!(seq, first_seq + count);
        self.visible_seq.store(seq - 1, Ordering::Release);
        if let Some(rows) = &self.row_cache {
            // Published: the row cache may take fills of the group's keys again, from reads
            // that began after this. With `prepopulate_row_cache`, each writer then puts its
            // values in with the tickets the ends return ([`DbInner::put_rows`]); a carried
            // batch (a handle update) has no values.
            let fill = self.opts.prepopulate_row_cache() && carried.is_none();
            let writers = group.iter().filter(|w| w.batch.is_some());
            for (b, w) in batches.iter().zip(writers) {
                let mut tickets = Vec::new();
                for op in b.iter().flatten() {
                    match op {
                        BatchOp::DeleteRange { .. } => rows.end_write_all(),
                        BatchOp::Put { key, .. } if fill => tickets.push(rows.end_write(key)),
                        other => {
                            rows.end_write(other.key());
                        }
                    }
                }
                if !tickets.is_empty() {
                    *w.row_tickets.lock() = tickets;
                }
            }
        }
        Counters::add(&self.counters.batches, written.len() as u64);
        Counters::add(&self.counters.write_groups, 1);
        if !matches!(group[0].condition, Some(Condition::Record(_))) {
            Counters::add(&self.counters.user_write_groups, 1);
        }
        Counters::add(&self.counters.user_bytes_written, user_bytes);
        if sync {
            Counters::add(&self.counters.wal_syncs, 1);
        }
        Ok(Applied::Yes)
    }

    /// With `separate_at=write`, appends the values of `batches` (numbered from `first_seq`)
    /// that the router separates to `mem`'s segments, hands the bytes to the operating system
    /// (syncs them, with `sync`: before the log record that names them is synced), and returns
    /// the group's operations as one batch with handles in place of those values, with the
    /// user bytes (key and value) of those puts; `None` when no value was separated (the
    /// batches are written as they are).
    ///
    /// Errors: appending or syncing fails, or the router names an impossible class. Values
    /// may have been appended: the caller makes the database read-only (their sequence
    /// numbers are not used, and the next open cuts them off).
    fn separate_values(
        &self,
        segments: &mut super::segments::MemSegments,
        mem: &MemTable,
        batches: &[&WriteBatch],
        first_seq: SeqNo,
        sync: bool,
    ) -> Result<Option<(WriteBatch, u64)>> {
        let Some(sink) = &self.segment_sink else {
            return Ok(None);
        };
        let now = first_seq - 1;
        let ops = || (first_seq..).zip(batches.iter().flat_map(|b| b.iter().flatten()));
        let mut handles = Vec::new();
        let mut user_bytes = 0;
        for (seq, op) in ops() {
            if let BatchOp::Put { key, value, expiry } = op
                && let Some(h) = segments.place(sink, mem, key, seq, value, expiry, now)?
            {
                handles.push((seq, h));
                user_bytes += (key.len() + value.len()) as u64;
            }
        }
        segments.flush(sync, sink)?;
        if handles.is_empty() {
            return Ok(None);
        }
        let mut out = WriteBatch::new();
        let mut next = handles.iter().peekable();
        for (seq, op) in ops() {
            match next.next_if(|(s, _)| *s == seq) {
                Some((_, h)) => out.put_handle(op.key(), h),
                None => out.push_op(&op),
            }
        }
        Ok(Some((out, user_bytes)))
    }

    /// Ensures the active memtable has room (or, with `force`, switches a non-empty one),
    /// delaying or stalling the writer while L0 or the immutable memtables are over their
    /// limits. Returns the memtable to write into; `None` when `may_wait` is false and the
    /// writer would have to be delayed or stopped (a full memtable it switches when that needs
    /// no wait).
    fn make_room(
        &self,
        wal: &mut Wal,
        force: bool,
        may_wait: bool,
        load: RangeTombstoneLoad,
    ) -> Result<Option<Arc<MemTable>>> {
        // Full, or without room for the group's range tombstones.
        let full =
            |mem: &MemTable| mem.is_full(self.opts.memtable_size()) || !mem.has_room_for(load);
        let mut allow_delay = !force;
        let mut inline_pending = self.opts.inline_background_work();
        let mut st = self.state.lock();
        loop {
            st.check_usable()?;
            let l0 = st.version.l0_backlog();
            if !may_wait {
                if l0 >= self.opts.l0_slowdown_trigger() as usize {
                    return Ok(None);
                }
                if !full(&st.mem) {
                    return Ok(Some(Arc::clone(&st.mem)));
                }
                // A full memtable is switched as any writer would when that needs no wait:
                // with reads alone coming, nothing else would ever make room.
                let imm_full = st.imm.len() >= self.opts.max_immutable_memtables() as usize;
                if imm_full || l0 >= self.opts.l0_stop_trigger() as usize {
                    return Ok(None);
                }
                self.switch_memtable(&mut st, wal)?;
                // Looked at again: the state lock was let go while the new WAL was created.
                continue;
            }
            if allow_delay && l0 >= self.opts.l0_slowdown_trigger() as usize {
                let start = Instant::now();
                MutexGuard::unlocked(&mut st, || std::thread::sleep(SLOWDOWN_DELAY));
                Counters::add(&self.counters.slowdown_count, 1);
                Counters::add(
                    &self.counters.slowdown_micros,
                    start.elapsed().as_micros() as u64,
                );
                allow_delay = false;
                continue;
            }
            let full = full(&st.mem);
            if (!force && !full) || (force && st.mem.is_empty()) {
                return Ok(Some(Arc::clone(&st.mem)));
            }
            let imm_full = st.imm.len() >= self.opts.max_immutable_memtables() as usize;
            let l0_full = l0 >= self.opts.l0_stop_trigger() as usize;
            if imm_full || l0_full {
                if inline_pending {
                    // Inline mode has no workers to wait for: do the work that makes room, then
                    // look again. Only that work: this writer holds the WAL and leads the write
                    // queue, so a GC job's write-backs would wait on it forever.
                    inline_pending = false;
                    MutexGuard::unlocked(&mut st, || self.run_inline_room_work());
                    continue;
                }
                inline_pending = self.opts.inline_background_work();
                let start = Instant::now();
                self.bg_cv.notify_all();
                self.progress_cv.wait_for(&mut st, STALL_WAIT);
                let waited = start.elapsed().as_micros() as u64;
                Counters::add(&self.counters.stop_count, 1);
                Counters::add(&self.counters.stop_micros, waited);
                if l0_full {
                    Counters::add(&self.counters.stop_l0_micros, waited);
                }
                continue;
            }
            self.switch_memtable(&mut st, wal)?;
            if force {
                return Ok(Some(Arc::clone(&st.mem)));
            }
        }
    }

    /// Seals the active memtable and starts a new one with a new WAL. Nothing is synced: the
    /// old log is kept, unsynced, until a later sync needs it durable or its memtable is
    /// flushed (`db/sealed_logs.rs`), and the new log's directory entry is synced by the first
    /// sync of that log or the flush whose edit names it.
    fn switch_memtable(&self, st: &mut MutexGuard<'_, DbState>, wal: &mut Wal) -> Result<()> {
        // Recovery relies on it: every sealed memtable's log holds a write (`db/open.rs`,
        // `LogChain`).
        debug_assert!(!st.mem.is_empty(), "only a memtable with a write is sealed");
        let number = self.next_file_number.fetch_add(1, Ordering::SeqCst);
        // The new log and memtable are made with the state unlocked: the memtable's key filter
        // is zeroed memory (1 MiB at the default `memtable_size`, up to 16 MiB).
        let created = MutexGuard::unlocked(st, || -> Result<(LogWriter, MemTable)> {
            let file = self.fs.new_writable(
                &self.dir.join(wal_file_name(number)),
                WriteFileOptions {
                    direct: false,
                    buffer_size: 64 << 10,
                },
            )?;
            let writer = LogWriter::new(Box::new(CountedWriter::new(
                file,
                IoClass::Wal,
                Arc::clone(&self.io),
            )));
            Ok((writer, MemTable::new(number, self.opts.memtable_size())))
        });
        let (writer, mem) = match created {
            Ok(w) => w,
            Err(e) => {
                if st.bg_error.is_none() {
                    st.bg_error = Some(e.clone());
                }
                self.progress_cv.notify_all();
                return Err(e);
            }
        };
        // Its bytes are with the operating system already: every group flushes or syncs its
        // record.
        let old_writer = std::mem::replace(&mut wal.writer, writer);
        let old_number = std::mem::replace(&mut wal.number, number);
        let segments = std::mem::take(&mut wal.segments);
        let old = std::mem::replace(&mut st.mem, Arc::new(mem));
        debug_assert_eq!(old.wal_number(), old_number);
        let sealing = self.segment_sink.is_some().then(|| {
            let s = Arc::new(Mutex::new(segments));
            st.sealing.insert(old_number, Arc::clone(&s));
            s
        });
        // Closed by the flush of its memtable, off the writers' path (closing the last handle
        // of a deleted log frees its blocks: a millisecond).
        self.sealed_logs
            .lock()
            .push(old_number, old_writer, sealing);
        st.imm.push_back(old);
        self.install_super_version(st);
        self.bg_cv.notify_all();
        Ok(())
    }

    /// Switches the memtable (if it holds anything) and waits until every memtable sealed up
    /// to now is flushed.
    pub(super) fn flush_and_wait(&self) -> Result<()> {
        self.write_impl(None, false)?;
        let mut st = self.state.lock();
        let Some(target) = st.imm.back().cloned() else {
            return Ok(());
        };
        loop {
            st.check_usable()?;
            if !st.imm.iter().any(|m| Arc::ptr_eq(m, &target)) {
                return Ok(());
            }
            if self.opts.inline_background_work() {
                // Normally done by the write above; another thread's turn may have claimed the
                // memtable and still be running.
                MutexGuard::unlocked(&mut st, || self.run_inline_work());
                if !st.imm.iter().any(|m| Arc::ptr_eq(m, &target)) {
                    return Ok(());
                }
            }
            self.bg_cv.notify_all();
            self.progress_cv.wait_for(&mut st, STALL_WAIT);
        }
    }
}
