//! Finding and reading a separated value: the handle's own table when it is live, otherwise the
//! table inheritance records lead to, looked up there by key and sequence number.

use std::sync::Arc;

use bytes::Bytes;

use super::value_set::ValueSet;
use crate::cache::ValueTableCache;
use crate::error::{Error, Result};
use crate::filename::value_table_file_name;
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::lookup::Lookup;
use crate::value::{ValueHandle, ValueTable};

/// A record's current place.
#[derive(Debug, Clone)]
pub struct Located {
    /// The open table holding it.
    pub table: Arc<ValueTable>,
    /// Where the record is in that table.
    pub handle: ValueHandle,
}

impl ValueSet {
    /// Finds where the record `(user_key, seq)` that `handle` was written as lives now: as
    /// [`ValueSet::try_locate`] finds it, or in the value segment still open that `handle`
    /// names (`cache::FileCache::open_table`).
    ///
    /// Errors: [`Error::Corruption`] when no live table can hold it, or the table inheritance
    /// leads to does not have it (a dangling handle).
    pub fn locate(
        &self,
        cache: &ValueTableCache,
        user_key: &[u8],
        seq: SeqNo,
        handle: ValueHandle,
        class: IoClass,
        fill_cache: bool,
    ) -> Result<Located> {
        if let Some(at) = self.try_locate(cache, user_key, seq, handle, class, fill_cache)? {
            return Ok(at);
        }
        // A value segment still open (its memtable not flushed yet, or flushed after the
        // reader took its version): its records are where the write path put them. Asked
        // last: once sealed and collected, the segment's records are found through
        // inheritance, as any table's, while a reader's old memtable may still hold it open.
        match cache.open_table(handle.file_number) {
            Some(table) => Ok(Located { table, handle }),
            None => Err(self.dangling(user_key, seq, handle)),
        }
    }

    /// Like [`ValueSet::locate`], but `Ok(None)` when no live table holds the record: its table
    /// was collected and the record was not copied. For a version the index tree still holds
    /// that is what a GC job does to a record whose key has a newer version no snapshot can
    /// see past (see docs/gc.md, "Reclaiming shadowed versions early"); callers that meet such
    /// a handle decide whether it is shadowed.
    ///
    /// Errors: opening a table or reading its dense index fails.
    pub fn try_locate(
        &self,
        cache: &ValueTableCache,
        user_key: &[u8],
        seq: SeqNo,
        handle: ValueHandle,
        class: IoClass,
        fill_cache: bool,
    ) -> Result<Option<Located>> {
        // A live table holds every record written to it; so does a retired one, which stays
        // readable for the versions that name it.
        if let Some(v) = self
            .live(handle.file_number)
            .or_else(|| self.retired_table(handle.file_number))
        {
            return Ok(Some(Located {
                table: cache.get(v.number, v.file_size, class)?,
                handle,
            }));
        }
        for v in &self.candidates(handle.file_number, user_key) {
            let table = cache.get(v.number, v.file_size, class)?;
            if let Some((offset, len)) = table.find(user_key, seq, class, fill_cache)? {
                return Ok(Some(Located {
                    handle: ValueHandle {
                        file_number: v.number,
                        offset,
                        len,
                    },
                    table,
                }));
            }
        }
        Ok(None)
    }

    /// Whether `found`, a version of `user_key` (typically its newest), names the record written
    /// at `record_seq` that is at `location` — the very copy a read of that version reaches.
    /// See [`ValueSet::reads_record_at`]; anything but a handle naming `record_seq` names no
    /// record.
    ///
    /// Errors: reading a table's dense index fails.
    pub fn names_record(
        &self,
        cache: &ValueTableCache,
        user_key: &[u8],
        found: Option<&Lookup>,
        record_seq: SeqNo,
        location: ValueHandle,
        class: IoClass,
    ) -> Result<bool> {
        match found {
            Some(Lookup::Handle {
                handle,
                record_seq: s,
                ..
            }) if *s == record_seq => {
                self.reads_record_at(cache, user_key, record_seq, *handle, location, class)
            }
            _ => Ok(false),
        }
    }

    /// Whether a version whose handle is `handle`, naming the record `(user_key, record_seq)`,
    /// reads the copy of that record at `location`. One record can have two copies in live
    /// tables: a relocation in compaction leaves the old copy behind as garbage, and a write-back job
    /// interrupted between its two edits leaves the victim's copy and the output's. Only the
    /// copy a read reaches is the live one, so a GC check must compare places, not only
    /// sequence numbers:
    ///
    /// - the same handle reaches the same place;
    /// - a handle naming a live (or retired) table reaches the place it names;
    /// - a handle naming a collected table reaches the first table, in inheritance order, that
    ///   holds the record (as [`ValueSet::try_locate`] reads it): `location`'s table when no
    ///   candidate before it holds the record. Only the candidates before it are looked up (a
    ///   dense-index search each, cached), so with one candidate nothing is read.
    ///
    /// `location` must be where the record `(user_key, record_seq)` is (a GC job read it
    /// there), or a handle a read found (the condition of an alias): a place in a table no
    /// longer live is reached by that very handle only. Errors: reading a candidate's dense
    /// index fails.
    pub fn reads_record_at(
        &self,
        cache: &ValueTableCache,
        user_key: &[u8],
        record_seq: SeqNo,
        handle: ValueHandle,
        location: ValueHandle,
        class: IoClass,
    ) -> Result<bool> {
        if handle == location {
            return Ok(true);
        }
        // A place in a collected table holds no copy any more: only the very handle reaches it
        // (the condition of an alias, whose `location` is the stale handle its read found).
        if self.live(location.file_number).is_none()
            && self.retired_table(location.file_number).is_none()
        {
            return Ok(false);
        }
        if self.live(handle.file_number).is_some()
            || self.retired_table(handle.file_number).is_some()
        {
            return Ok(
                handle.file_number == location.file_number && handle.offset == location.offset
            );
        }
        for v in &self.candidates(handle.file_number, user_key) {
            if v.number == location.file_number {
                return Ok(true);
            }
            let table = cache.get(v.number, v.file_size, class)?;
            if table.find(user_key, record_seq, class, true)?.is_some() {
                return Ok(false);
            }
        }
        Ok(false)
    }

    /// The [`Error::Corruption`] for `handle`, written as `(user_key, seq)`, when it resolves
    /// to no record.
    pub fn dangling(&self, user_key: &[u8], seq: SeqNo, handle: ValueHandle) -> Error {
        let candidates = self.candidates(handle.file_number, user_key);
        let why = if candidates.is_empty() {
            "the table is gone and no inheritance record covers the key".to_string()
        } else {
            let names: Vec<String> = candidates.iter().map(|v| v.number.to_string()).collect();
            format!(
                "tables {} inherited the key but none has such a record",
                names.join(", ")
            )
        };
        Error::corruption(
            value_table_file_name(handle.file_number),
            handle.offset,
            format!("value handle for a key at sequence {seq} cannot be resolved: {why}"),
        )
    }

    /// Reads the value of the record `(user_key, seq)` that `handle` was written as, checking that
    /// the record read is that one. Also returns where the record was found when that was
    /// through inheritance (the handle names a table GC collected). The value is a view of the
    /// buffer the record was read into: nothing is copied after the read.
    ///
    /// `place` is where an earlier read found the record (the value cache remembers it): when
    /// the handle's table is gone and `place`'s table is live here, the record is read there
    /// without following inheritance. Any copy of a record holds its value, so the copy
    /// inheritance would reach and this one read the same; a place that does not hold the
    /// record is ignored and inheritance followed.
    #[allow(clippy::too_many_arguments)]
    pub fn read_value(
        &self,
        cache: &ValueTableCache,
        user_key: &[u8],
        seq: SeqNo,
        handle: ValueHandle,
        place: Option<ValueHandle>,
        class: IoClass,
        fill_cache: bool,
    ) -> Result<(Bytes, Option<ValueHandle>)> {
        if let Some((p, v)) = place
            .filter(|_| self.readable(handle.file_number).is_none())
            .and_then(|p| Some((p, self.readable(p.file_number)?)))
        {
            let table = cache.get(v.number, v.file_size, class)?;
            let record = table.read_record(p.offset, p.len, class)?;
            if check_record(&p, &record.key, record.seq, user_key, seq).is_ok() {
                return Ok((record.value, Some(p)));
            }
        }
        let at = self.locate(cache, user_key, seq, handle, class, fill_cache)?;
        let record = at
            .table
            .read_record(at.handle.offset, at.handle.len, class)?;
        check_record(&at.handle, &record.key, record.seq, user_key, seq)?;
        // A live table is read at the handle itself; inheritance leads to another table.
        let moved = (at.handle.file_number != handle.file_number).then_some(at.handle);
        Ok((record.value, moved))
    }
}

/// Verifies that the record read at `handle` is the one asked for: a handle pointing at another
/// record (a misdirected write, a stale offset) must never return someone else's value.
pub fn check_record(
    handle: &ValueHandle,
    key: &[u8],
    seq: SeqNo,
    want_key: &[u8],
    want_seq: SeqNo,
) -> Result<()> {
    if key != want_key || seq != want_seq {
        return Err(Error::corruption(
            value_table_file_name(handle.file_number),
            handle.offset,
            format!(
                "record at the handle is (key of {} bytes, sequence {seq}), not the one the index names (sequence {want_seq})",
                key.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::io::{FaultFs, IoStats};
    use crate::version::{Inheritor, ValueTableMeta};

    fn meta(number: u64) -> ValueTableMeta {
        ValueTableMeta {
            number,
            file_size: 100,
            records: 10,
            record_bytes: 1000,
            smallest_key: b"a".to_vec(),
            largest_key: b"z".to_vec(),
            smallest_seq: 1,
            largest_seq: 10,
            class: 0,
            policy_meta: None,
            max_expiry: None,
        }
    }

    /// Records that table 1 was collected into table 5 alone.
    fn collected_into_5(s: &mut ValueSet) {
        s.add_inheritance(
            1,
            vec![Inheritor {
                number: 5,
                smallest_key: b"a".to_vec(),
                largest_key: b"z".to_vec(),
            }],
        )
        .expect("inherit");
    }

    fn at(file_number: u64, offset: u64) -> ValueHandle {
        ValueHandle {
            file_number,
            offset,
            len: 10,
        }
    }

    /// A cache over an empty directory: any table it is asked to open fails, so a check that
    /// answers through it read nothing.
    fn no_files() -> ValueTableCache {
        ValueTableCache::new(
            Arc::new(FaultFs::new(1)),
            PathBuf::from("/none"),
            Arc::new(IoStats::default()),
            None,
            4,
            false,
        )
    }

    /// Two copies of one record: only the copy the version's handle reaches is the one it
    /// reads — at the handle's place in a live table, and through inheritance the first
    /// candidate holding it (here the only one, found without a read).
    #[test]
    fn a_version_reads_one_copy_of_its_record() {
        let cache = no_files();
        let mut s = ValueSet::default();
        for n in [2, 5, 9] {
            s.add_table(meta(n)).expect("add");
        }
        let class = IoClass::GcLookup;
        let check = |s: &ValueSet, handle, location| {
            s.reads_record_at(&cache, b"k", 7, handle, location, class)
                .expect("no read needed")
        };
        assert!(check(&s, at(2, 40), at(2, 40)), "the same place");
        assert!(
            !check(&s, at(2, 40), at(5, 0)),
            "a relocated copy's old place"
        );
        assert!(!check(&s, at(2, 40), at(2, 60)), "another record's place");
        // Table 1 was collected into 5 alone: its handles reach 5.
        collected_into_5(&mut s);
        assert!(check(&s, at(1, 0), at(5, 30)));
        // A copy elsewhere is not read either when 5 holds the record; finding that out opens 5.
        assert!(
            s.reads_record_at(&cache, b"k", 7, at(1, 0), at(9, 30), class)
                .is_err(),
            "5 is looked up"
        );
        // The names of a version found: a handle of another record names nothing here.
        let found = Lookup::Handle {
            handle: at(2, 40),
            seq: 8,
            record_seq: 6,
            payload: None,
            expiry: None,
        };
        assert!(
            !s.names_record(&cache, b"k", Some(&found), 7, at(2, 40), class)
                .expect("no read")
        );
        assert!(
            !s.names_record(&cache, b"k", Some(&Lookup::Deleted), 7, at(2, 40), class)
                .expect("no read")
        );
    }

    /// A record a test table holds: key, sequence number, value.
    type Rec<'a> = (&'a [u8], SeqNo, &'a [u8]);

    /// Value tables `numbers` in one in-memory directory, each holding the records `(key, seq,
    /// value)` given for it; returns a cache that opens them, their metas, and where each
    /// record is.
    fn tables(
        numbers: &[(u64, &[Rec<'_>])],
    ) -> (ValueTableCache, Vec<ValueTableMeta>, Vec<ValueHandle>) {
        use crate::io::{FileSystem, WriteFileOptions};
        use crate::value::{ValueTableBuilder, ValueTableBuilderOptions};
        let fs = Arc::new(FaultFs::new(5));
        let dir = PathBuf::from("/v");
        fs.create_dir_all(&dir).expect("dir");
        let (mut metas, mut places) = (Vec::new(), Vec::new());
        for &(number, recs) in numbers {
            let path = dir.join(value_table_file_name(number));
            let file = fs
                .new_writable(&path, WriteFileOptions::default())
                .expect("create");
            let mut b =
                ValueTableBuilder::new(file, ValueTableBuilderOptions::default()).expect("builder");
            for &(key, seq, value) in recs {
                let (offset, len) = b.add(key, seq, value).expect("add");
                places.push(ValueHandle {
                    file_number: number,
                    offset,
                    len,
                });
            }
            let done = b.finish().expect("finish");
            metas.push(ValueTableMeta {
                file_size: done.file_size,
                ..meta(number)
            });
        }
        let cache = ValueTableCache::new(fs, dir, Arc::new(IoStats::default()), None, 8, false);
        (cache, metas, places)
    }

    /// A remembered place is read instead of following inheritance only for a handle naming a
    /// collected table, only while the place's table is readable, and only when it holds the
    /// very record. The two copies of `(k, 7)` here hold different bytes so the test can tell
    /// which one a read took (in a real store every copy of a record holds its value).
    #[test]
    fn a_place_is_used_only_for_a_collected_handle_a_readable_table_and_the_same_record() {
        let (cache, metas, at_) = tables(&[
            (5, &[(b"j", 3, b"j3"), (b"k", 7, b"five")]),
            (9, &[(b"j", 7, b"j7"), (b"k", 7, b"nine")]),
        ]);
        let (j_in_9, k_in_5, k_in_9) = (at_[2], at_[1], at_[3]);
        let mut s = ValueSet::default();
        for m in metas {
            s.add_table(m).expect("add");
        }
        collected_into_5(&mut s);
        let class = IoClass::UserRead;
        let read = |handle, place| {
            let (value, moved) = s
                .read_value(&cache, b"k", 7, handle, place, class, true)
                .expect("read");
            (value.to_vec(), moved)
        };
        let stale = ValueHandle {
            file_number: 1,
            ..k_in_5
        };
        assert_eq!(read(stale, None), (b"five".to_vec(), Some(k_in_5)), "inheritance");
        assert_eq!(read(stale, Some(k_in_9)), (b"nine".to_vec(), Some(k_in_9)), "the place");
        let gone = ValueHandle {
            file_number: 3,
            ..k_in_9
        };
        assert_eq!(read(stale, Some(gone)), (b"five".to_vec(), Some(k_in_5)), "table gone");
        assert_eq!(
            read(stale, Some(j_in_9)),
            (b"five".to_vec(), Some(k_in_5)),
            "another record"
        );
        assert_eq!(read(k_in_5, Some(k_in_9)), (b"five".to_vec(), None), "a live handle");
    }
}
