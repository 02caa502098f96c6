//! Value handles held by key tables: every handle resolves (through inheritance when its table
//! was collected) to exactly the record it was written as, each key table's recorded dependence
//! matches the handles it holds, and each value table's garbage matches a from-scratch recount.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{Checker, Problem};
use crate::cache::{BlockCache, TableCache, ValueTableCache};
use crate::filename::{manifest_file_name, value_table_file_name};
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::table::ReadCtx;
use crate::tools::text::render;
use crate::value::StoredHandle;
use crate::version::{FileMetaData, Resolved, ValueSet, Version, check_record};

/// Handle failures reported one by one per key table; the rest are summed up in one line, so a
/// missing value table does not bury the report under one line per key.
const MAX_HANDLE_PROBLEMS_PER_TABLE: usize = 10;

/// Dense index blocks cached while resolving handles: inherited handles are looked up by key,
/// and neighbouring keys share index blocks.
const INDEX_CACHE_BYTES: usize = 8 << 20;

/// Most tables of each kind (key, value) kept open at once (the engine's default
/// `max_open_files`).
const MAX_OPEN_TABLES: usize = 1000;

/// Bytes of a key shown in a finding.
const KEY_SHOWN: usize = 64;

/// A key for a finding: escaped text, cut to [`KEY_SHOWN`] bytes.
pub(super) fn show_key(key: &[u8]) -> String {
    if key.len() <= KEY_SHOWN {
        render(key, false)
    } else {
        format!(
            "{}... ({} bytes)",
            render(&key[..KEY_SHOWN], false),
            key.len()
        )
    }
}

/// Handle checks across all key tables of the recovered version, and the recount they feed.
pub(super) struct HandleCheck<'v> {
    version: &'v Version,
    values: &'v ValueSet,
    cache: ValueTableCache,
    /// Key tables, for the newest version of a key whose handle finds no record.
    keys: TableCache,
    /// Handles of shadowed versions whose record GC reclaimed early (not a problem).
    pub(super) reclaimed_early: u64,
    /// Handles of expired versions whose record is gone (not a problem).
    pub(super) expired: u64,
    /// The time expiry is judged at (offline: no snapshot).
    now: u64,
    /// Records and their bytes that handles reference, per live table they resolve to.
    referenced: BTreeMap<u64, (u64, u64)>,
    /// Live tables some handle resolved to without its record being located (the table does
    /// not open, or its index is damaged): their recount is incomplete.
    incomplete: BTreeSet<u64>,
    /// Value-table numbers handles name as written (before following inheritance).
    pub(super) named: BTreeSet<u64>,
    /// False when some key table could not be walked to its end, so the handles seen are not
    /// all there are: the recount and the reachability of inheritance records mean nothing.
    pub(super) complete: bool,
}

/// The handles of one key table.
#[derive(Default)]
pub(super) struct TableHandles {
    /// Per value-table number the handles name: their count and record bytes (the table's
    /// dependence, as the manifest should record it).
    deps: BTreeMap<u64, (u64, u64)>,
    /// The first failures, in words.
    failures: Vec<String>,
    /// Number of failures.
    failed: u64,
    /// Handles seen.
    pub(super) seen: u64,
}

impl TableHandles {
    fn fail(&mut self, what: String) {
        self.failed += 1;
        if self.failures.len() < MAX_HANDLE_PROBLEMS_PER_TABLE {
            self.failures.push(what);
        }
    }

    /// Decodes the handle of entry `entry` and counts it in the dependence; a malformed handle
    /// is a failure and yields `None`.
    pub(super) fn note(
        &mut self,
        table: &str,
        entry: u64,
        user_key: &[u8],
        seq: SeqNo,
        value: &[u8],
    ) -> Option<StoredHandle> {
        self.seen += 1;
        match StoredHandle::decode(value, table, 0) {
            Ok(h) => {
                let d = self.deps.entry(h.location.file_number).or_default();
                d.0 += 1;
                d.1 += h.location.len;
                Some(h)
            }
            Err(_) => {
                self.fail(format!(
                    "entry {entry} (key {}, seq {seq}) holds a malformed value handle",
                    show_key(user_key)
                ));
                None
            }
        }
    }
}

impl<'v> HandleCheck<'v> {
    /// The value sets of the version checked.
    pub(super) fn values(&self) -> &'v ValueSet {
        self.values
    }

    /// A checker resolving handles against `version`'s value tables, reading tables through
    /// its own caches (counted in `checker`'s I/O statistics, never filling the database's).
    /// Versions expired at `now` are expired for every reader (no snapshot exists offline).
    pub(super) fn new(checker: &Checker, version: &'v Version, now: u64) -> Self {
        let values = version.values();
        let blocks = Arc::new(BlockCache::new(INDEX_CACHE_BYTES));
        let cache = ValueTableCache::new(
            Arc::clone(&checker.fs),
            checker.dir.clone(),
            Arc::clone(&checker.io),
            Some(Arc::clone(&blocks)),
            values.len().clamp(1, MAX_OPEN_TABLES),
            false,
        );
        let keys = TableCache::new(
            Arc::clone(&checker.fs),
            checker.dir.clone(),
            Arc::clone(&checker.io),
            Some(blocks),
            MAX_OPEN_TABLES,
            false,
        );
        HandleCheck {
            version,
            values,
            cache,
            keys,
            reclaimed_early: 0,
            expired: 0,
            now,
            referenced: BTreeMap::new(),
            incomplete: BTreeSet::new(),
            named: BTreeSet::new(),
            complete: true,
        }
    }

    /// Resolves `handle` (entry `entry` of a key table, for `(user_key, seq)`), reads its record
    /// and checks that it is that record; failures go to `found`.
    pub(super) fn resolve(
        &mut self,
        entry: u64,
        user_key: &[u8],
        seq: SeqNo,
        stored: StoredHandle,
        found: &mut TableHandles,
    ) {
        let handle = stored.location;
        // The record the entry names: its own, or the one it was written back for.
        let record_seq = stored.record_seq(seq);
        self.named.insert(handle.file_number);
        let failure = |e: crate::Error| {
            format!(
                "value handle of entry {entry} (key {}, seq {seq}, naming {}) does not resolve: {e}",
                show_key(user_key),
                value_table_file_name(handle.file_number)
            )
        };
        let located = self.values.try_locate(
            &self.cache,
            user_key,
            record_seq,
            handle,
            IoClass::Other,
            true,
        );
        let error = match located {
            Ok(Some(at)) => {
                self.check_located(&at, user_key, record_seq, !stored.alias, found, failure);
                return;
            }
            Ok(None) if crate::expiry::expired(stored.expiry, self.now) => {
                self.expired += 1;
                return;
            }
            Ok(None) => match self.is_shadowed(user_key, seq) {
                // Shadowed: GC reclaimed the record early; nothing reads this version. Offline
                // there are no snapshots, so a newer version anywhere in the tree hides it from
                // every reader (online, `Db::recount_garbage` also asks the live snapshots).
                Ok(true) => {
                    self.reclaimed_early += 1;
                    return;
                }
                Ok(false) => self.values.dangling(user_key, record_seq, handle),
                Err(e) => e,
            },
            Err(e) => e,
        };
        // The table inheritance leads to may be missing a record it should hold: its recount
        // is incomplete, and this failure already reports why.
        if let Resolved::Live(v) = self.values.resolve(handle.file_number, user_key) {
            self.incomplete.insert(v.number);
        }
        found.fail(failure(error));
    }

    /// Counts a located record as referenced when `owner` (an alias names a record its owner
    /// already references), reads it and checks it is the one asked for.
    fn check_located(
        &mut self,
        at: &crate::version::Located,
        user_key: &[u8],
        seq: SeqNo,
        owner: bool,
        found: &mut TableHandles,
        failure: impl Fn(crate::Error) -> String,
    ) {
        // Located: the record is referenced from here, whether or not it reads back intact
        // (a damaged record is the value table's problem, reported with it).
        if owner {
            let r = self.referenced.entry(at.handle.file_number).or_default();
            r.0 += 1;
            r.1 += at.handle.len;
        }
        let read = at
            .table
            .read_record(at.handle.offset, at.handle.len, IoClass::Other)
            .and_then(|rec| check_record(&at.handle, &rec.key, rec.seq, user_key, seq));
        if let Err(e) = read {
            found.fail(failure(e));
        }
    }
}

impl HandleCheck<'_> {
    /// Whether a newer version of `user_key` than `seq` is in the key tables: with no snapshot
    /// (the checker runs on a closed database) that is exactly when no reader can reach the
    /// version.
    fn is_shadowed(&self, user_key: &[u8], seq: SeqNo) -> crate::Result<bool> {
        let ctx = ReadCtx {
            class: IoClass::Other,
            fill_cache: true,
            readahead: 0,
            readahead_ramp: false,
        };
        self.version.is_shadowed(&self.keys, user_key, seq, ctx)
    }
}

impl Checker {
    /// Reports what one key table's handles showed: failures, and (when the table was read to
    /// its end) a dependence that differs from the manifest's.
    pub(super) fn report_table_handles(
        &mut self,
        name: &str,
        meta: Option<&FileMetaData>,
        found: TableHandles,
        complete: bool,
    ) {
        self.report.handles_checked += found.seen;
        for f in &found.failures {
            self.problem(Problem::new(name, None, f.clone()));
        }
        let more = found.failed - found.failures.len() as u64;
        if more > 0 {
            self.problem(Problem::new(
                name,
                None,
                format!("{more} more value handles fail as above"),
            ));
        }
        let Some(meta) = meta.filter(|_| complete) else {
            return;
        };
        let recorded: BTreeMap<u64, (u64, u64)> = meta
            .dependence
            .iter()
            .map(|d| (d.value_table, (d.count, d.bytes)))
            .collect();
        if recorded != found.deps {
            // The manifest's dependences decide which inheritance records are kept; a wrong one
            // can drop a record that handles still need.
            let show = |m: &BTreeMap<u64, (u64, u64)>| {
                let parts: Vec<String> = m
                    .iter()
                    .map(|(n, (c, b))| format!("{n}: {c} handles / {b} bytes"))
                    .collect();
                format!("[{}]", parts.join(", "))
            };
            self.problem(Problem::new(
                name,
                None,
                format!(
                    "holds value handles {}, but the manifest records its dependence as {}",
                    show(&found.deps),
                    show(&recorded)
                ),
            ));
        }
    }

    /// Compares each live value table's records minus its recorded garbage with the records
    /// the handles of all key tables reference. Tables already found damaged, or that some
    /// handle could not be located in, are skipped: their recount is known to be incomplete.
    pub(super) fn check_garbage(
        &mut self,
        manifest: u64,
        values: &ValueSet,
        handles: &HandleCheck,
        damaged: &BTreeSet<u64>,
    ) {
        if !handles.complete {
            return;
        }
        for v in values.tables() {
            if damaged.contains(&v.number) || handles.incomplete.contains(&v.number) {
                continue;
            }
            if values.awaiting_write_back().contains(&v.number) {
                // A write-back GC job stopped before it finished: the next open counts what
                // the written-back handles reference and settles the garbage from that.
                self.warning(
                    value_table_file_name(v.number),
                    None,
                    "a write-back GC job installed it and stopped before it finished (its \
                     garbage is settled at the next open)",
                );
                continue;
            }
            let g = values.garbage(v.number);
            let (records, bytes) = handles
                .referenced
                .get(&v.number)
                .copied()
                .unwrap_or_default();
            let live = (
                v.records.saturating_sub(g.records),
                v.record_bytes.saturating_sub(g.bytes),
            );
            if (records, bytes) != live {
                self.problem(Problem::new(
                    value_table_file_name(v.number),
                    None,
                    format!(
                        "key tables reference {records} records / {bytes} bytes in it, but {} \
                         records {} records / {} bytes with {} / {} garbage, leaving {} / {} live",
                        manifest_file_name(manifest),
                        v.records,
                        v.record_bytes,
                        g.records,
                        g.bytes,
                        live.0,
                        live.1
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::show_key;

    #[test]
    fn long_keys_are_cut() {
        assert_eq!(show_key(b"abc"), "abc");
        let long = vec![b'k'; 100];
        let shown = show_key(&long);
        assert!(shown.ends_with("... (100 bytes)"), "{shown}");
        assert!(shown.len() < 100);
    }
}
