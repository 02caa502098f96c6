//! Relocating values inside compaction (the kept-entry hook's [`KeptEntry::Relocate`]; RocksDB
//! BlobDB's integrated GC asks it for the entries whose handle names one of the oldest value
//! tables): the value is read, written to the compaction's own value tables, and the entry
//! written out with the new handle. The old
//! record is no longer referenced by that entry: it is garbage of its table, counted in the
//! compaction's own edit, and a table whose every record is garbage goes with that edit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[cfg(doc)]
use super::hooks::KeptEntry;
use super::read_ahead::RecordReadAhead;
use super::value_output::{ClassedFinish, ClassedValueOutputs, ValueOutputConfig};
use crate::cache::{TableCache, ValueTableCache};
use crate::compaction::router::{Placement, RouteContext, RouteOrigin, ValueRouter};
use crate::error::{Error, Result};
use crate::filename::value_table_file_name;
use crate::io::IoClass;
use crate::iter::InternalIterator;
use crate::key::{MAX_SEQUENCE, ParsedKey, SeqNo, ValueKind, append_internal_key, make_lookup_key};
use crate::table::ReadCtx;
use crate::value::StoredHandle;
use crate::version::{FileMetaData, Garbage, Version};

/// Figures of one compaction's relocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelocationStats {
    /// Values moved to new value tables.
    pub relocated: u64,
    /// Bytes of their old records.
    pub relocated_bytes: u64,
    /// Values moved inline into the key table instead (the policy's router placed them there:
    /// shorter than option `min_separated_value_size`, as RocksDB does with `min_blob_size`).
    pub inlined: u64,
    /// Values left in place because an alias outside the compaction names their record.
    pub aliased: u64,
    /// Values left in place because a GC job held their table when the compaction started:
    /// the job may be copying the record, and both copies could not be accounted.
    pub claimed: u64,
}

/// What a finished relocation produced.
pub struct RelocationOutput {
    /// The new value tables and their files.
    pub values: ClassedFinish,
    /// The old records, now garbage, per table.
    pub garbage: BTreeMap<u64, Garbage>,
    /// Figures.
    pub stats: RelocationStats,
}

/// Relocates the values of one compaction's kept entries (see the module comment).
pub struct Relocator<'a> {
    version: &'a Version,
    cache: &'a ValueTableCache,
    /// The index-tree level the compaction writes.
    level: u32,
    values: ClassedValueOutputs,
    garbage: BTreeMap<u64, Garbage>,
    stats: RelocationStats,
    /// The last record written, so records stay in internal-key order in the new tables.
    last: Option<(Vec<u8>, SeqNo)>,
    ikey: Vec<u8>,
    value: Vec<u8>,
    /// The last alias met (its key and record): its owner follows it and is not relocated.
    alias_of: Option<(Vec<u8>, SeqNo)>,
    /// Key tables outside the compaction that hold aliases, and where to read them.
    aliases: AliasTables<'a>,
    /// Value tables GC jobs held when the compaction started (see [`Relocator::with_claimed`]).
    claimed: BTreeSet<u64>,
    /// The old records are read ahead per table (entries come in key order).
    read_ahead: RecordReadAhead,
}

/// The key tables outside a compaction that hold aliases (handle updates on
/// read, left behind when a database switched policies): an alias names its record's place
/// directly, so a record one of them names must stay where it is. Tables record their alias
/// count, so a database without aliases looks nothing up.
pub struct AliasTables<'a> {
    /// Those tables, any level.
    files: Vec<Arc<FileMetaData>>,
    tables: &'a TableCache,
}

impl<'a> AliasTables<'a> {
    /// The tables of `version` holding aliases, but for `inputs` (the compaction's own: their
    /// aliases pass through the relocator, which sees them before their owners).
    pub fn new(version: &Version, inputs: &[u64], tables: &'a TableCache) -> Self {
        let files = version
            .all_files()
            .filter(|(_, f)| f.aliases > 0 && !inputs.contains(&f.number))
            .map(|(_, f)| Arc::clone(f))
            .collect();
        AliasTables { files, tables }
    }

    /// Whether one of the tables holds an alias of record `(user_key, record_seq)`.
    ///
    /// Errors: reading a table fails.
    fn name(&self, user_key: &[u8], record_seq: SeqNo) -> Result<bool> {
        let ctx = ReadCtx {
            class: IoClass::CompactionRead,
            fill_cache: true,
            readahead: 0,
            readahead_ramp: false,
        };
        let lookup = make_lookup_key(user_key, MAX_SEQUENCE);
        for f in &self.files {
            if user_key < f.smallest_user_key() || user_key > f.largest_user_key() {
                continue;
            }
            let table = self.tables.get(f.number, f.file_size, ctx.class)?;
            if !table.may_contain(user_key) {
                continue;
            }
            let mut it = table.iter(ctx);
            it.seek(&lookup)?;
            while it.valid() {
                let parsed = ParsedKey::parse(it.key()).ok_or_else(|| {
                    Error::corruption(
                        crate::filename::table_file_name(f.number),
                        0,
                        "malformed internal key",
                    )
                })?;
                if parsed.user_key != user_key {
                    break;
                }
                if parsed.kind == ValueKind::ValueHandle {
                    let name = crate::filename::table_file_name(f.number);
                    let stored = StoredHandle::decode(it.value(), &name, 0)?;
                    if stored.alias && stored.record_seq(parsed.seq) == record_seq {
                        return Ok(true);
                    }
                }
                it.next()?;
            }
        }
        Ok(false)
    }
}

impl<'a> Relocator<'a> {
    /// A relocator for a compaction reading `version` and writing `level`, writing new value
    /// tables as `cfg` says where `router` places the values, leaving in place the records
    /// `aliases` name.
    pub fn new(
        version: &'a Version,
        cache: &'a ValueTableCache,
        level: u32,
        cfg: ValueOutputConfig,
        router: Arc<dyn ValueRouter>,
        aliases: AliasTables<'a>,
    ) -> Self {
        Relocator {
            version,
            cache,
            level,
            values: ClassedValueOutputs::new(cfg, router, RouteOrigin::Compaction).at_level(level),
            garbage: BTreeMap::new(),
            stats: RelocationStats::default(),
            last: None,
            ikey: Vec::new(),
            value: Vec::new(),
            alias_of: None,
            aliases,
            claimed: BTreeSet::new(),
            read_ahead: RecordReadAhead::default(),
        }
    }

    /// Leaves in place the records of `claimed`, the value tables GC jobs held when the
    /// compaction started. A job may be copying such a record: were the compaction to move it
    /// too, the entry would name the compaction's copy, and the job's copy, which its
    /// inheritance makes reachable, would be garbage no drop ever counts. A job that claims a
    /// table later waits for this compaction before it checks a record (`garbage.rs`).
    #[must_use]
    pub fn with_claimed(mut self, claimed: BTreeSet<u64>) -> Self {
        self.claimed = claimed;
        self
    }

    /// Notes kept entry `key`, whose value is `stored`, which the policy does not relocate:
    /// an alias among them protects its owner, which follows it. Entries arrive in internal-key
    /// order, relocated or not.
    pub fn keep(&mut self, key: &ParsedKey<'_>, stored: &StoredHandle) {
        self.aliased(key, stored);
    }

    /// Whether the record `stored` names must stay where it is for an alias. An alias (policy
    /// a handle update on read) and its owner, which compaction keeps behind it, name
    /// one record: relocating either would count the old record as garbage while the other
    /// still names it, and the table could go from under it. The record stays where it is
    /// until a newer version of the key shadows both.
    fn aliased(&mut self, key: &ParsedKey<'_>, stored: &StoredHandle) -> bool {
        let record_seq = stored.record_seq(key.seq);
        if stored.alias {
            self.alias_of = Some((key.user_key.to_vec(), record_seq));
            return true;
        }
        self.alias_of
            .as_ref()
            .is_some_and(|(k, s)| k.as_slice() == key.user_key && *s == record_seq)
    }

    /// The replacement `(internal key, value)` of kept entry `key` / `value`, if its value is
    /// relocated (the policy's kept-entry hook asked for it, and it can move safely). Entries
    /// arrive in internal-key order.
    ///
    /// Errors: reading the old record fails, or it is not the record the handle names
    /// (corruption); writing the new value table fails.
    pub fn relocate(
        &mut self,
        key: &ParsedKey<'_>,
        value: &[u8],
    ) -> Result<Option<(&[u8], &[u8])>> {
        if key.kind != ValueKind::ValueHandle {
            return Ok(None);
        }
        let stored = StoredHandle::decode(value, "compaction input", 0)?;
        let record_seq = stored.record_seq(key.seq);
        if self.aliased(key, &stored) {
            return Ok(None);
        }
        let at = stored.location;
        let Some(table) = self.version.values().live(at.file_number) else {
            // Collected (inheritance) or retired: not an old table of this policy's making.
            return Ok(None);
        };
        if self.claimed.contains(&at.file_number) {
            self.stats.claimed += 1;
            return Ok(None);
        }
        // New tables take records in internal-key order; an entry whose record sequence breaks
        // it (a handle written back by another policy) keeps its old place.
        let in_order = self.last.as_ref().is_none_or(|(k, s)| {
            key.user_key > k.as_slice() || (key.user_key == k.as_slice() && record_seq < *s)
        });
        if !in_order {
            return Ok(None);
        }
        // An alias in a table this compaction does not read names the record at its place: the
        // record stays (relocating it would count it as garbage, and its table could go from
        // under the alias, while the alias still reads it there).
        if self.aliases.name(key.user_key, record_seq)? {
            self.stats.aliased += 1;
            return Ok(None);
        }
        let reader = self
            .cache
            .get(table.number, table.file_size, IoClass::CompactionRead)?;
        let record = self.read_ahead.read(&reader, table.number, at)?;
        if record.key != key.user_key || record.seq != record_seq {
            return Err(Error::corruption(
                value_table_file_name(at.file_number),
                at.offset,
                "record at the handle is not the one the entry names",
            ));
        }
        let g = self.garbage.entry(at.file_number).or_default();
        g.records += 1;
        g.bytes += at.len;
        self.stats.relocated_bytes += at.len;
        self.ikey.clear();
        self.value.clear();
        let ctx = RouteContext {
            user_key: key.user_key,
            seq: record_seq,
            value_len: record.value.len() as u64,
            payload: stored.payload.as_ref(),
            origin: RouteOrigin::Compaction,
            level: Some(self.level),
            expiry: stored.expiry,
            now: self.values.now(),
        };
        match self.values.place(&ctx)? {
            Placement::Inline => {
                self.stats.inlined += 1;
                match stored.expiry {
                    None => {
                        append_internal_key(
                            &mut self.ikey,
                            key.user_key,
                            key.seq,
                            ValueKind::Value as u8,
                        );
                        self.value.extend_from_slice(&record.value);
                    }
                    Some(e) => {
                        append_internal_key(
                            &mut self.ikey,
                            key.user_key,
                            key.seq,
                            ValueKind::ValueWithExpiry as u8,
                        );
                        crate::expiry::encode_inline(&mut self.value, e, &record.value);
                    }
                }
            }
            Placement::Separated { class, payload } => {
                let location =
                    self.values
                        .add_to(
                            class,
                            key.user_key,
                            record_seq,
                            &record.value,
                            stored.expiry,
                        )?;
                self.last = Some((key.user_key.to_vec(), record_seq));
                self.stats.relocated += 1;
                append_internal_key(
                    &mut self.ikey,
                    key.user_key,
                    key.seq,
                    ValueKind::ValueHandle as u8,
                );
                StoredHandle {
                    location,
                    record_seq: stored.record_seq,
                    alias: false,
                    payload,
                    expiry: stored.expiry,
                }
                .encode_to(&mut self.value);
            }
        }
        Ok(Some((&self.ikey, &self.value)))
    }

    /// Finishes the new value tables.
    pub fn finish(self) -> Result<RelocationOutput> {
        Ok(RelocationOutput {
            values: self.values.finish()?,
            garbage: self.garbage,
            stats: self.stats,
        })
    }
}
