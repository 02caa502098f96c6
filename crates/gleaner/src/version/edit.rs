//! Version edits: the records of the manifest. Each edit is a sequence of fields
//! `tag: varint | length: varint | payload`; see docs/format.md, "Manifest".

use super::file_meta::TableMeta;
use super::routing::{PARTITION_STRIDE, Routing};
use super::run::RunId;
use super::value_set::{
    Dependence, DropBlock, Garbage, Inheritor, MAX_POLICY_TABLE_META, PolicyTableMeta,
    ValueTableMeta,
};
use crate::coding::{Decoder, put_length_prefixed, put_varint64};
use crate::error::{Error, Result};
use crate::key::{self, MAX_SEQUENCE, ParsedKey, SeqNo, compare_internal};

/// Newest manifest format version: 6, where an edit may route key ranges to the hot partition
/// of a partitioned tree (field 18) and name levels of that partition (level numbers from
/// `PARTITION_STRIDE`, `version/routing.rs`). Format 5 let a value table record the latest
/// expiry of its records when all of them expire (field 16) and an edit the database's time
/// (field 17).
/// Format 4 let a key table record its range tombstones
/// (field 7, after the run; its bounds may then be range bounds, `key::range_bound`). Format 3
/// added a value table's GC policy metadata (field 8) and a key table's sorted run other than
/// run 0 (field 7); format 2 a key table's alias count (field 7, absent when 0). A manifest is
/// written in the oldest format that holds what it records ([`VersionEdit::needed_format`]), so
/// a build that does not know a field refuses the manifest by its version; version 1 manifests
/// are read too (see [`VersionEdit::upgrade`]).
pub const MANIFEST_FORMAT_VERSION: u64 = 6;

/// The format version of a manifest without policy metadata, sorted runs other than run 0 and
/// range tombstones.
pub const MANIFEST_FORMAT_WITHOUT_POLICY_META: u64 = 2;

impl VersionEdit {
    /// The oldest manifest format that holds every field of the edit: 6 for a routing or a
    /// level of the hot partition, 5 for a value table's expiry or the database's time, 4 for
    /// a key table with range tombstones, 3 for policy metadata or a table of a run other than
    /// run 0, else 2.
    pub fn needed_format(&self) -> u64 {
        if self.is_partitioned() {
            6
        } else if self.time_floor.is_some() || self.new_value_tables.iter().any(|v| v.max_expiry.is_some())
        {
            5
        } else if self.new_tables.iter().any(|t| t.meta.range_deletions > 0) {
            4
        } else if self
            .new_value_tables
            .iter()
            .any(|v| v.policy_meta.is_some())
            || self.new_tables.iter().any(|t| t.run != 0)
        {
            3
        } else {
            MANIFEST_FORMAT_WITHOUT_POLICY_META
        }
    }
}

/// Format of the policy metadata trailing field 8.
const POLICY_META_FORMAT: u64 = 1;

/// The oldest manifest format version this build reads.
pub const OLDEST_MANIFEST_FORMAT_VERSION: u64 = 1;

/// The alias count of a key table whose count was never recorded (a manifest of format version
/// 1): it may hold aliases, so relocation looks into it (`compaction/relocate.rs`). Kept, and
/// written as such, until a compaction rewrites the table.
pub const ALIASES_UNRECORDED: u64 = u64::MAX;

/// The format version the first edit of a manifest declares, checked to be one this build
/// reads; `name` and `offset` locate the edit for errors.
///
/// Errors: [`Error::Corruption`] when the version is missing or unknown (a manifest of a newer
/// build).
pub fn manifest_format(first: &VersionEdit, name: &str, offset: u64) -> Result<u64> {
    match first.format_version {
        Some(v) if (OLDEST_MANIFEST_FORMAT_VERSION..=MANIFEST_FORMAT_VERSION).contains(&v) => Ok(v),
        Some(v) => Err(Error::corruption(
            name,
            offset,
            format!(
                "unknown manifest format version {v} (this build reads {OLDEST_MANIFEST_FORMAT_VERSION} to {MANIFEST_FORMAT_VERSION})"
            ),
        )),
        None => Err(Error::corruption(
            name,
            offset,
            "first edit lacks the format version",
        )),
    }
}

/// The policy metadata trailing a new-value-table field of table `number` (docs/format.md,
/// field 8): its format, the policy's name, its bytes.
fn decode_policy_meta(
    p: &mut Decoder<'_>,
    number: u64,
) -> std::result::Result<PolicyTableMeta, String> {
    let trunc = || format!("value table {number}: truncated policy metadata");
    let format = p.varint64().ok_or_else(trunc)?;
    if format != POLICY_META_FORMAT {
        return Err(format!(
            "value table {number}: policy metadata of format {format}, unknown to this build \
             (it reads format {POLICY_META_FORMAT})"
        ));
    }
    let tag = p.length_prefixed().ok_or_else(trunc)?;
    let data = p.length_prefixed().ok_or_else(trunc)?;
    let tag = std::str::from_utf8(tag)
        .ok()
        .filter(|t| crate::filename::valid_policy_name(t))
        .ok_or_else(|| {
            format!("value table {number}: policy metadata with a malformed policy name")
        })?;
    if data.len() > MAX_POLICY_TABLE_META {
        return Err(format!(
            "value table {number}: policy metadata of {} bytes (at most {MAX_POLICY_TABLE_META})",
            data.len()
        ));
    }
    Ok(PolicyTableMeta {
        tag: tag.to_string(),
        data: data.to_vec(),
    })
}

/// Most entries one list inside a field may claim (dependences of a key table, children of an
/// inheritance record); a larger count is corruption, checked before allocating.
const MAX_LIST_LEN: u64 = 1 << 20;

mod tag {
    pub const FORMAT_VERSION: u64 = 1;
    pub const LOG_NUMBER: u64 = 2;
    pub const NEXT_FILE_NUMBER: u64 = 3;
    pub const LAST_SEQUENCE: u64 = 4;
    pub const COMPACT_POINTER: u64 = 5;
    pub const DELETED_FILE: u64 = 6;
    pub const NEW_KEY_TABLE: u64 = 7;
    pub const NEW_VALUE_TABLE: u64 = 8;
    pub const DELETED_VALUE_TABLE: u64 = 9;
    pub const VALUE_GARBAGE: u64 = 10;
    pub const INHERITANCE: u64 = 11;
    pub const RETIRED_VALUE_TABLE: u64 = 12;
    pub const RELEASED_VALUE_TABLE: u64 = 13;
    pub const WRITE_BACK: u64 = 14;
    pub const DROP_BLOCK: u64 = 15;
    pub const VALUE_TABLE_EXPIRY: u64 = 16;
    pub const TIME_FLOOR: u64 = 17;
    pub const ROUTING: u64 = 18;
}

/// A key table added by an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTable {
    /// Level the table joins.
    pub level: u32,
    /// Sorted run of that level the table joins (0 in L0, where each table is a run of its own,
    /// and for the one run of a level under leveled compaction). Recorded only when not 0, so
    /// a manifest with one run per level is written as before runs existed.
    pub run: RunId,
    /// The table.
    pub meta: TableMeta,
}

/// A change to the set of live files and the database's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Manifest format version (present in the first edit of a manifest).
    pub format_version: Option<u64>,
    /// WALs numbered below this are no longer needed.
    pub log_number: Option<u64>,
    /// Next unused file number.
    pub next_file_number: Option<u64>,
    /// Last sequence number durable in key tables or logs.
    pub last_sequence: Option<SeqNo>,
    /// Per level, the largest internal key of the last compaction (round-robin cursor).
    pub compact_pointers: Vec<(u32, Vec<u8>)>,
    /// `(level, number)` of removed key tables.
    pub deleted_files: Vec<(u32, u64)>,
    /// Added key tables.
    pub new_tables: Vec<NewTable>,
    /// Added value tables.
    pub new_value_tables: Vec<ValueTableMeta>,
    /// Value tables removed from the live set (collected, or entirely garbage).
    pub deleted_value_tables: Vec<u64>,
    /// Garbage to add to live value tables.
    pub value_garbage: Vec<(u64, Garbage)>,
    /// Inheritance records: a collected value table and the tables its records went to.
    pub inheritance: Vec<(u64, Vec<Inheritor>)>,
    /// Live value tables a write-back GC job collected, with the sequence number below which
    /// readers may still read them (they stay readable, no longer live).
    pub retired_value_tables: Vec<(u64, SeqNo)>,
    /// Retired value tables no reader can reach any more.
    pub released_value_tables: Vec<u64>,
    /// Live value tables a write-back GC job installed (`true`: their write-back is under way)
    /// or finished writing back (`false`).
    pub write_back: Vec<(u64, bool)>,
    /// Drop blocks attached to live value tables (drop keys): the table, and where the
    /// identities of some of its garbage records are.
    pub drop_blocks: Vec<(u64, DropBlock)>,
    /// The database's time (milliseconds since the Unix epoch) when the edit acted on expired
    /// data (field 17): a later open starts its time no earlier, so what expired stays expired
    /// when the clock went back meanwhile.
    pub time_floor: Option<u64>,
    /// The key ranges of the hot partition from this edit on (field 18), replacing the
    /// routing before: set only by an edit that also moves the keys whose partition changes.
    pub routing: Option<Routing>,
}

fn emit(out: &mut Vec<u8>, tag: u64, payload: &[u8]) {
    put_varint64(out, tag);
    put_length_prefixed(out, payload);
}

impl VersionEdit {
    /// True when the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == VersionEdit::default()
    }

    /// True when applying the edit may leave an inheritance record no key table reaches, or a
    /// drop file no table lists: it takes key tables (their references) or value tables away, or
    /// records inheritance. An edit that only adds tables, references, garbage or drop blocks
    /// cannot, so a version it makes from a pruned one is pruned too.
    pub(crate) fn may_need_pruning(&self) -> bool {
        !self.deleted_files.is_empty()
            || !self.deleted_value_tables.is_empty()
            || !self.retired_value_tables.is_empty()
            || !self.released_value_tables.is_empty()
            || !self.inheritance.is_empty()
    }

    /// Encodes the edit.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut f = Vec::new();
        for (tag, value) in [
            (tag::FORMAT_VERSION, self.format_version),
            (tag::LOG_NUMBER, self.log_number),
            (tag::NEXT_FILE_NUMBER, self.next_file_number),
            (tag::LAST_SEQUENCE, self.last_sequence),
        ] {
            if let Some(v) = value {
                f.clear();
                put_varint64(&mut f, v);
                emit(&mut out, tag, &f);
            }
        }
        for (level, key) in &self.compact_pointers {
            f.clear();
            put_varint64(&mut f, u64::from(*level));
            put_length_prefixed(&mut f, key);
            emit(&mut out, tag::COMPACT_POINTER, &f);
        }
        for (level, number) in &self.deleted_files {
            f.clear();
            put_varint64(&mut f, u64::from(*level));
            put_varint64(&mut f, *number);
            emit(&mut out, tag::DELETED_FILE, &f);
        }
        for NewTable {
            level,
            run,
            meta: t,
        } in &self.new_tables
        {
            f.clear();
            put_varint64(&mut f, u64::from(*level));
            put_varint64(&mut f, t.number);
            put_varint64(&mut f, t.file_size);
            put_length_prefixed(&mut f, &t.smallest);
            put_length_prefixed(&mut f, &t.largest);
            for v in [
                t.smallest_seq,
                t.largest_seq,
                t.num_entries,
                t.num_deletions,
            ] {
                put_varint64(&mut f, v);
            }
            put_varint64(&mut f, t.dependence.len() as u64);
            for d in &t.dependence {
                put_varint64(&mut f, d.value_table);
                put_varint64(&mut f, d.count);
                put_varint64(&mut f, d.bytes);
            }
            // Optional, so that manifests of databases without aliases, several runs per
            // level or range tombstones stay as they were; each follows the one before, which
            // is then written even when 0.
            let tombstones = t.range_deletions > 0;
            if t.aliases > 0 || *run != 0 || tombstones {
                put_varint64(&mut f, t.aliases);
            }
            if *run != 0 || tombstones {
                put_varint64(&mut f, *run);
            }
            if tombstones {
                put_varint64(&mut f, t.range_deletions);
            }
            emit(&mut out, tag::NEW_KEY_TABLE, &f);
        }
        for v in &self.new_value_tables {
            f.clear();
            for n in [v.number, v.file_size, v.records, v.record_bytes] {
                put_varint64(&mut f, n);
            }
            put_length_prefixed(&mut f, &v.smallest_key);
            put_length_prefixed(&mut f, &v.largest_key);
            put_varint64(&mut f, v.smallest_seq);
            put_varint64(&mut f, v.largest_seq);
            put_varint64(&mut f, u64::from(v.class));
            if let Some(m) = &v.policy_meta {
                put_varint64(&mut f, POLICY_META_FORMAT);
                put_length_prefixed(&mut f, m.tag.as_bytes());
                put_length_prefixed(&mut f, &m.data);
            }
            emit(&mut out, tag::NEW_VALUE_TABLE, &f);
            if let Some(e) = v.max_expiry {
                f.clear();
                put_varint64(&mut f, v.number);
                put_varint64(&mut f, e);
                emit(&mut out, tag::VALUE_TABLE_EXPIRY, &f);
            }
        }
        for number in &self.deleted_value_tables {
            f.clear();
            put_varint64(&mut f, *number);
            emit(&mut out, tag::DELETED_VALUE_TABLE, &f);
        }
        for (number, g) in &self.value_garbage {
            f.clear();
            put_varint64(&mut f, *number);
            put_varint64(&mut f, g.records);
            put_varint64(&mut f, g.bytes);
            emit(&mut out, tag::VALUE_GARBAGE, &f);
        }
        for (victim, children) in &self.inheritance {
            f.clear();
            put_varint64(&mut f, *victim);
            put_varint64(&mut f, children.len() as u64);
            for c in children {
                put_varint64(&mut f, c.number);
                put_length_prefixed(&mut f, &c.smallest_key);
                put_length_prefixed(&mut f, &c.largest_key);
            }
            emit(&mut out, tag::INHERITANCE, &f);
        }
        for (number, seq) in &self.retired_value_tables {
            f.clear();
            put_varint64(&mut f, *number);
            put_varint64(&mut f, *seq);
            emit(&mut out, tag::RETIRED_VALUE_TABLE, &f);
        }
        for number in &self.released_value_tables {
            f.clear();
            put_varint64(&mut f, *number);
            emit(&mut out, tag::RELEASED_VALUE_TABLE, &f);
        }
        for (number, awaiting) in &self.write_back {
            f.clear();
            put_varint64(&mut f, *number);
            put_varint64(&mut f, u64::from(*awaiting));
            emit(&mut out, tag::WRITE_BACK, &f);
        }
        for (number, b) in &self.drop_blocks {
            f.clear();
            for v in [*number, b.file, b.offset, b.len, b.keys, b.named_table] {
                put_varint64(&mut f, v);
            }
            emit(&mut out, tag::DROP_BLOCK, &f);
        }
        if let Some(t) = self.time_floor {
            f.clear();
            put_varint64(&mut f, t);
            emit(&mut out, tag::TIME_FLOOR, &f);
        }
        if let Some(r) = &self.routing {
            f.clear();
            r.encode(&mut f);
            emit(&mut out, tag::ROUTING, &f);
        }
        out
    }

    /// Whether the edit routes keys or names a level of the hot partition (format 6).
    fn is_partitioned(&self) -> bool {
        let hot = |level: u32| level as usize >= PARTITION_STRIDE;
        self.routing.is_some()
            || self.new_tables.iter().any(|t| hot(t.level))
            || self.deleted_files.iter().any(|&(l, _)| hot(l))
            || self.compact_pointers.iter().any(|(l, _)| hot(*l))
    }

    /// Checks that the edit holds no field of a format newer than `format`, the one its manifest
    /// declares, where this build would misread it: fields 16 and 17 need format 5, field 18
    /// and levels of the hot partition format 6. (Older formats' fields are checked where they
    /// are decoded.)
    ///
    /// Errors: the field's name, for the caller's corruption report.
    pub fn check_format(&self, format: u64) -> std::result::Result<(), String> {
        if self.is_partitioned() && format < 6 {
            return Err(format!(
                "a routing or a level of the hot partition (field 18, levels from \
                 {PARTITION_STRIDE}) in a manifest of format {format}: they need format 6"
            ));
        }
        let expiries = self.time_floor.is_some()
            || self.new_value_tables.iter().any(|v| v.max_expiry.is_some());
        if expiries && format < 5 {
            return Err(format!(
                "a value table expiry or time floor (fields 16, 17) in a manifest of format \
                 {format}: they need format 5"
            ));
        }
        Ok(())
    }

    /// Reads an edit of a manifest of format version `format` as this build's: in format 1 a
    /// key table's alias count was not recorded, so a table holding handles may hold aliases
    /// ([`ALIASES_UNRECORDED`]); a table without handles holds none.
    pub fn upgrade(&mut self, format: u64) {
        if format >= 2 {
            return;
        }
        for t in &mut self.new_tables {
            if t.meta.aliases == 0 && !t.meta.dependence.is_empty() {
                t.meta.aliases = ALIASES_UNRECORDED;
            }
        }
    }

    /// Decodes an edit; `file` and `offset` locate it for errors. Unknown tags, truncated
    /// fields, trailing bytes inside a field and malformed keys are all corruption.
    pub fn decode(bytes: &[u8], file: &str, offset: u64) -> Result<VersionEdit> {
        let bad = |what: &str| Error::corruption(file, offset, format!("version edit: {what}"));
        let mut edit = VersionEdit::default();
        let mut d = Decoder::new(bytes);
        // The field before, and the table it added when it was a field 8: a field 16 must
        // follow the field 8 of its table right away.
        let mut after_new_value_table = false;
        while !d.is_empty() {
            let tag = d.varint64().ok_or_else(|| bad("truncated tag"))?;
            let follows_field_8 = std::mem::replace(
                &mut after_new_value_table,
                tag == tag::NEW_VALUE_TABLE,
            );
            let payload = d.length_prefixed().ok_or_else(|| bad("truncated field"))?;
            let mut p = Decoder::new(payload);
            let what = match tag {
                tag::FORMAT_VERSION => "format version",
                tag::LOG_NUMBER => "log number",
                tag::NEXT_FILE_NUMBER => "next file number",
                tag::LAST_SEQUENCE => "last sequence",
                tag::COMPACT_POINTER => "compact pointer",
                tag::DELETED_FILE => "deleted key table",
                tag::NEW_KEY_TABLE => "new key table",
                tag::NEW_VALUE_TABLE => "new value table",
                tag::DELETED_VALUE_TABLE => "deleted value table",
                tag::VALUE_GARBAGE => "value garbage",
                tag::INHERITANCE => "inheritance",
                tag::RETIRED_VALUE_TABLE => "retired value table",
                tag::RELEASED_VALUE_TABLE => "released value table",
                tag::WRITE_BACK => "write-back mark",
                tag::DROP_BLOCK => "drop block",
                tag::VALUE_TABLE_EXPIRY => "value table expiry",
                tag::TIME_FLOOR => "time floor",
                tag::ROUTING => "routing",
                other => return Err(bad(&format!("unknown field tag {other}"))),
            };
            let trunc = || bad(&format!("truncated {what}"));
            let list_len = |p: &mut Decoder<'_>| -> Result<u64> {
                let n = p.varint64().ok_or_else(trunc)?;
                if n > MAX_LIST_LEN {
                    return Err(bad(&format!("{what} lists {n} entries")));
                }
                Ok(n)
            };
            match tag {
                tag::FORMAT_VERSION => edit.format_version = Some(p.varint64().ok_or_else(trunc)?),
                tag::LOG_NUMBER => edit.log_number = Some(p.varint64().ok_or_else(trunc)?),
                tag::NEXT_FILE_NUMBER => {
                    edit.next_file_number = Some(p.varint64().ok_or_else(trunc)?)
                }
                tag::LAST_SEQUENCE => {
                    let s = p.varint64().ok_or_else(trunc)?;
                    if s > MAX_SEQUENCE {
                        return Err(bad("last sequence out of range"));
                    }
                    edit.last_sequence = Some(s);
                }
                tag::COMPACT_POINTER => {
                    let level = p.varint32().ok_or_else(trunc)?;
                    let key = p.length_prefixed().ok_or_else(trunc)?;
                    ParsedKey::parse(key)
                        .ok_or_else(|| bad("compact pointer key is not an internal key"))?;
                    edit.compact_pointers.push((level, key.to_vec()));
                }
                tag::DELETED_FILE => {
                    let level = p.varint32().ok_or_else(trunc)?;
                    let number = p.varint64().ok_or_else(trunc)?;
                    edit.deleted_files.push((level, number));
                }
                tag::NEW_KEY_TABLE => {
                    let level = p.varint32().ok_or_else(trunc)?;
                    let number = p.varint64().ok_or_else(trunc)?;
                    let file_size = p.varint64().ok_or_else(trunc)?;
                    let smallest = p.length_prefixed().ok_or_else(trunc)?.to_vec();
                    let largest = p.length_prefixed().ok_or_else(trunc)?.to_vec();
                    let mut v = [0u64; 4];
                    for x in &mut v {
                        *x = p.varint64().ok_or_else(trunc)?;
                    }
                    let n = list_len(&mut p)?;
                    let mut dependence = Vec::new();
                    for _ in 0..n {
                        dependence.push(Dependence {
                            value_table: p.varint64().ok_or_else(trunc)?,
                            count: p.varint64().ok_or_else(trunc)?,
                            bytes: p.varint64().ok_or_else(trunc)?,
                        });
                    }
                    // Absent when the table holds no alias (and in manifests written before it
                    // was recorded).
                    let aliases = if p.is_empty() {
                        0
                    } else {
                        p.varint64().ok_or_else(trunc)?
                    };
                    // Absent for a level's only run (and in manifests written before runs
                    // were recorded: one run per level).
                    let run = if p.is_empty() {
                        0
                    } else {
                        p.varint64().ok_or_else(trunc)?
                    };
                    // Absent when the table holds no range tombstone (format 4).
                    let range_deletions = if p.is_empty() {
                        0
                    } else {
                        p.varint64().ok_or_else(trunc)?
                    };
                    if range_deletions == 0
                        && (key::is_range_bound(&smallest) || key::is_range_bound(&largest))
                    {
                        return Err(bad(
                            "new key table has a range tombstone's bound but no range tombstone",
                        ));
                    }
                    let handles = dependence
                        .iter()
                        .fold(0u64, |a, d| a.saturating_add(d.count));
                    if aliases > handles && aliases != ALIASES_UNRECORDED {
                        return Err(bad(&format!(
                            "new key table claims {aliases} aliases among {handles} handles"
                        )));
                    }
                    if ParsedKey::parse(&smallest).is_none() || ParsedKey::parse(&largest).is_none()
                    {
                        return Err(bad("new key table bounds are not internal keys"));
                    }
                    if compare_internal(&smallest, &largest).is_gt() {
                        return Err(bad("new key table smallest key is after its largest"));
                    }
                    let meta = TableMeta {
                        number,
                        file_size,
                        smallest,
                        largest,
                        smallest_seq: v[0],
                        largest_seq: v[1],
                        num_entries: v[2],
                        num_deletions: v[3],
                        dependence,
                        aliases,
                        range_deletions,
                    };
                    edit.new_tables.push(NewTable { level, run, meta });
                }
                tag::NEW_VALUE_TABLE => {
                    let mut v = [0u64; 4];
                    for x in &mut v {
                        *x = p.varint64().ok_or_else(trunc)?;
                    }
                    let smallest_key = p.length_prefixed().ok_or_else(trunc)?.to_vec();
                    let largest_key = p.length_prefixed().ok_or_else(trunc)?.to_vec();
                    let smallest_seq = p.varint64().ok_or_else(trunc)?;
                    let largest_seq = p.varint64().ok_or_else(trunc)?;
                    let class = p.varint32().ok_or_else(trunc)?;
                    if smallest_key > largest_key {
                        return Err(bad("new value table smallest key is after its largest"));
                    }
                    let policy_meta = if p.is_empty() {
                        None
                    } else {
                        Some(decode_policy_meta(&mut p, v[0]).map_err(|w| bad(&w))?)
                    };
                    edit.new_value_tables.push(ValueTableMeta {
                        number: v[0],
                        file_size: v[1],
                        records: v[2],
                        record_bytes: v[3],
                        smallest_key,
                        largest_key,
                        smallest_seq,
                        largest_seq,
                        class,
                        policy_meta,
                        max_expiry: None,
                    });
                }
                tag::DELETED_VALUE_TABLE => edit
                    .deleted_value_tables
                    .push(p.varint64().ok_or_else(trunc)?),
                tag::VALUE_GARBAGE => {
                    let number = p.varint64().ok_or_else(trunc)?;
                    let records = p.varint64().ok_or_else(trunc)?;
                    let bytes = p.varint64().ok_or_else(trunc)?;
                    edit.value_garbage
                        .push((number, Garbage { records, bytes }));
                }
                tag::INHERITANCE => {
                    let victim = p.varint64().ok_or_else(trunc)?;
                    let n = list_len(&mut p)?;
                    let mut children = Vec::new();
                    for _ in 0..n {
                        let number = p.varint64().ok_or_else(trunc)?;
                        let smallest_key = p.length_prefixed().ok_or_else(trunc)?.to_vec();
                        let largest_key = p.length_prefixed().ok_or_else(trunc)?.to_vec();
                        children.push(Inheritor {
                            number,
                            smallest_key,
                            largest_key,
                        });
                    }
                    edit.inheritance.push((victim, children));
                }
                tag::RETIRED_VALUE_TABLE => {
                    let number = p.varint64().ok_or_else(trunc)?;
                    let seq = p.varint64().ok_or_else(trunc)?;
                    if seq > MAX_SEQUENCE {
                        return Err(bad("retired value table's sequence out of range"));
                    }
                    edit.retired_value_tables.push((number, seq));
                }
                tag::RELEASED_VALUE_TABLE => edit
                    .released_value_tables
                    .push(p.varint64().ok_or_else(trunc)?),
                tag::WRITE_BACK => {
                    let number = p.varint64().ok_or_else(trunc)?;
                    let awaiting = match p.varint64().ok_or_else(trunc)? {
                        0 => false,
                        1 => true,
                        other => return Err(bad(&format!("write-back mark {other}"))),
                    };
                    edit.write_back.push((number, awaiting));
                }
                tag::DROP_BLOCK => {
                    let mut v = [0u64; 6];
                    for x in &mut v {
                        *x = p.varint64().ok_or_else(trunc)?;
                    }
                    edit.drop_blocks.push((
                        v[0],
                        DropBlock {
                            file: v[1],
                            offset: v[2],
                            len: v[3],
                            keys: v[4],
                            named_table: v[5],
                        },
                    ));
                }
                tag::VALUE_TABLE_EXPIRY => {
                    let number = p.varint64().ok_or_else(trunc)?;
                    let expiry = p.varint64().ok_or_else(trunc)?;
                    if expiry > crate::expiry::MAX_EXPIRY_MS {
                        return Err(bad("value table expiry beyond the latest"));
                    }
                    // It follows the field that adds its table, right away.
                    let Some(t) = edit
                        .new_value_tables
                        .last_mut()
                        .filter(|t| follows_field_8 && t.number == number)
                    else {
                        return Err(bad(&format!(
                            "expiry of value table {number}, which the field before does not add"
                        )));
                    };
                    t.max_expiry = Some(expiry);
                }
                tag::TIME_FLOOR => {
                    let t = p.varint64().ok_or_else(trunc)?;
                    if t > crate::expiry::MAX_EXPIRY_MS || edit.time_floor.is_some() {
                        return Err(bad("time floor beyond the latest, or given twice"));
                    }
                    edit.time_floor = Some(t);
                }
                tag::ROUTING => {
                    let r = Routing::decode(&mut p).map_err(|e| bad(&e))?;
                    if edit.routing.replace(r).is_some() {
                        return Err(bad("routing given twice"));
                    }
                }
                _ => unreachable!("tags were matched above"),
            }
            if !p.is_empty() {
                return Err(bad(&format!("{what} field has trailing bytes")));
            }
        }
        Ok(edit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};

    #[test]
    fn only_an_edit_that_takes_away_or_inherits_needs_pruning() {
        // What a flush writes: new tables, their references, nothing taken away.
        let flush = VersionEdit {
            new_tables: sample().new_tables,
            new_value_tables: sample().new_value_tables,
            log_number: Some(13),
            ..Default::default()
        };
        assert!(!flush.may_need_pruning());
        assert!(!VersionEdit::default().may_need_pruning());
        let takes_away = [
            VersionEdit {
                deleted_files: vec![(1, 5)],
                ..Default::default()
            },
            VersionEdit {
                deleted_value_tables: vec![3],
                ..Default::default()
            },
            VersionEdit {
                retired_value_tables: vec![(3, 9)],
                ..Default::default()
            },
            VersionEdit {
                released_value_tables: vec![3],
                ..Default::default()
            },
            VersionEdit {
                inheritance: vec![(3, Vec::new())],
                ..Default::default()
            },
        ];
        for e in takes_away {
            assert!(e.may_need_pruning(), "{e:?}");
        }
    }

    fn sample() -> VersionEdit {
        VersionEdit {
            format_version: Some(MANIFEST_FORMAT_VERSION),
            log_number: Some(12),
            next_file_number: Some(40),
            last_sequence: Some(9999),
            compact_pointers: vec![(2, make_internal_key(b"m", 7, ValueKind::Value))],
            deleted_files: vec![(1, 5), (2, 6)],
            new_tables: vec![NewTable {
                level: 2,
                run: 17,
                meta: TableMeta {
                    number: 39,
                    file_size: 4096,
                    smallest: make_internal_key(b"a", 10, ValueKind::Value),
                    largest: make_internal_key(b"z", 3, ValueKind::Deletion),
                    smallest_seq: 3,
                    largest_seq: 10,
                    num_entries: 100,
                    num_deletions: 4,
                    dependence: vec![Dependence {
                        value_table: 30,
                        count: 17,
                        bytes: 170_000,
                    }],
                    aliases: 3,
                    range_deletions: 0,
                },
            }],
            new_value_tables: vec![ValueTableMeta {
                number: 30,
                file_size: 1 << 20,
                records: 60,
                record_bytes: 1 << 19,
                smallest_key: b"a".to_vec(),
                largest_key: b"y".to_vec(),
                smallest_seq: 2,
                largest_seq: 90,
                class: 1,
                policy_meta: None,
                max_expiry: None,
            }],
            deleted_value_tables: vec![21, 22],
            value_garbage: vec![(
                30,
                Garbage {
                    records: 3,
                    bytes: 300,
                },
            )],
            inheritance: vec![(
                21,
                vec![Inheritor {
                    number: 30,
                    smallest_key: b"a".to_vec(),
                    largest_key: b"y".to_vec(),
                }],
            )],
            retired_value_tables: vec![(22, 9_000)],
            released_value_tables: vec![23],
            write_back: vec![(31, true), (32, false)],
            drop_blocks: vec![(
                30,
                DropBlock {
                    file: 41,
                    offset: 300,
                    len: 77,
                    keys: 5,
                    named_table: 29,
                },
            )],
            time_floor: None,
            routing: None,
        }
    }

    #[test]
    fn routings_and_hot_levels_round_trip_and_need_format_6() {
        use crate::version::routing::{KeyRange, Routing};
        let mut e = sample();
        assert_eq!(e.needed_format(), 3);
        e.routing = Some(Routing::new(vec![KeyRange {
            start: b"user3".to_vec(),
            end: Some(b"user4".to_vec()),
        }]));
        assert_eq!(e.needed_format(), 6);
        let bytes = e.encode();
        assert_eq!(VersionEdit::decode(&bytes, "M", 0).expect("decode"), e);
        assert!(e.check_format(5).unwrap_err().contains("format 6"));
        assert!(e.check_format(6).is_ok());
        // A table of the hot partition's L0 needs it too, without a routing.
        let mut hot = sample();
        hot.new_tables[0].level = PARTITION_STRIDE as u32;
        assert_eq!(hot.needed_format(), 6);
        assert!(hot.check_format(5).is_err());
        // Twice in one edit is corruption.
        let mut twice = bytes.clone();
        let mut f = Vec::new();
        Routing::default().encode(&mut f);
        emit(&mut twice, tag::ROUTING, &f);
        assert!(VersionEdit::decode(&twice, "M", 0).is_err());
    }

    #[test]
    fn expiries_and_the_time_floor_round_trip_and_need_format_5() {
        let mut e = sample();
        assert_eq!(e.needed_format(), 3, "the sample's run 2");
        e.new_value_tables[0].max_expiry = Some(1_700_000_000_000);
        assert_eq!(e.needed_format(), 5);
        e.time_floor = Some(1_700_000_000_500);
        let bytes = e.encode();
        assert_eq!(VersionEdit::decode(&bytes, "M", 0).expect("decode"), e);
        e.new_value_tables[0].max_expiry = None;
        assert_eq!(e.needed_format(), 5, "the time floor alone");
        // An expiry names the table added by the field before it, once.
        let mut orphan = Vec::new();
        let mut f = Vec::new();
        put_varint64(&mut f, 77);
        put_varint64(&mut f, 5);
        emit(&mut orphan, tag::VALUE_TABLE_EXPIRY, &f);
        let err = VersionEdit::decode(&orphan, "M", 0).expect_err("orphan");
        assert!(err.to_string().contains("value table 77"), "{err}");
        let mut late = Vec::new();
        f.clear();
        put_varint64(&mut f, crate::expiry::MAX_EXPIRY_MS + 1);
        emit(&mut late, tag::TIME_FLOOR, &f);
        assert!(VersionEdit::decode(&late, "M", 0).is_err());
        // Right after its table's field 8, not after another field.
        let one = VersionEdit {
            new_value_tables: vec![ValueTableMeta {
                max_expiry: Some(9),
                ..sample().new_value_tables[0].clone()
            }],
            ..Default::default()
        };
        let bytes = one.encode();
        assert_eq!(VersionEdit::decode(&bytes, "M", 0).expect("decode"), one);
        let mut between = VersionEdit {
            deleted_value_tables: vec![3],
            ..Default::default()
        }
        .encode();
        // Field 8, then a field 9, then the field 16.
        let field_8_len = bytes.len() - 4;
        let mut moved = bytes[..field_8_len].to_vec();
        moved.append(&mut between);
        moved.extend_from_slice(&bytes[field_8_len..]);
        let err = VersionEdit::decode(&moved, "M", 0).expect_err("moved field 16");
        assert!(err.to_string().contains("value table 30"), "{err}");
        // Not in a manifest of an older format.
        assert!(one.check_format(4).unwrap_err().contains("format 5"));
        assert!(one.check_format(5).is_ok());
        assert!(sample().check_format(2).is_ok());
    }

    #[test]
    fn round_trip() {
        let e = sample();
        assert_eq!(
            VersionEdit::decode(&e.encode(), "MANIFEST-000001", 0).expect("decode"),
            e
        );
        let empty = VersionEdit::default();
        assert!(empty.is_empty());
        assert_eq!(
            VersionEdit::decode(&empty.encode(), "M", 0).expect("decode"),
            empty
        );
    }

    #[test]
    fn the_run_is_written_only_when_not_0_and_after_the_alias_count() {
        let mut e = VersionEdit {
            new_tables: sample().new_tables,
            ..Default::default()
        };
        let t = &mut e.new_tables[0];
        (t.run, t.meta.aliases) = (0, 0);
        let plain = e.encode();
        e.new_tables[0].run = 9;
        let with_run = e.encode();
        // Two more payload bytes: the alias count 0, then the run.
        assert_eq!(with_run.len(), plain.len() + 2);
        assert_eq!(with_run[with_run.len() - 2..], [0, 9]);
        let decoded = VersionEdit::decode(&plain, "M", 0).expect("decode");
        assert_eq!(decoded.new_tables[0].run, 0, "absent: the level's only run");
        assert_eq!(VersionEdit::decode(&with_run, "M", 0).expect("decode"), e);
    }

    #[test]
    fn every_truncation_and_unknown_tag_is_corruption() {
        let bytes = sample().encode();
        for cut in 1..bytes.len() {
            // A cut may land on a field boundary and decode as a shorter, valid edit; it must
            // never panic and never decode into the full edit.
            if let Ok(e) = VersionEdit::decode(&bytes[..cut], "M", 0) {
                assert_ne!(e, sample());
            }
        }
        let mut unknown = Vec::new();
        put_varint64(&mut unknown, 99);
        put_length_prefixed(&mut unknown, b"x");
        let err = VersionEdit::decode(&unknown, "M", 8).expect_err("unknown tag");
        assert!(err.to_string().contains("unknown field tag 99"), "{err}");
        let mut trailing = Vec::new();
        put_varint64(&mut trailing, tag::LOG_NUMBER);
        put_length_prefixed(&mut trailing, &[1, 2]);
        assert!(VersionEdit::decode(&trailing, "M", 0).is_err());
        let mut huge_list = Vec::new();
        let mut payload = Vec::new();
        put_varint64(&mut payload, 5);
        put_varint64(&mut payload, u64::MAX);
        emit(&mut huge_list, tag::INHERITANCE, &payload);
        let err = VersionEdit::decode(&huge_list, "M", 0).expect_err("huge list");
        assert!(err.to_string().contains("entries"), "{err}");
        let mut bad_mark = Vec::new();
        let mut payload = Vec::new();
        put_varint64(&mut payload, 5);
        put_varint64(&mut payload, 2);
        emit(&mut bad_mark, tag::WRITE_BACK, &payload);
        let err = VersionEdit::decode(&bad_mark, "M", 0).expect_err("bad mark");
        assert!(err.is_corruption(), "{err}");
    }

    #[test]
    fn each_edit_is_written_in_the_oldest_format_holding_it() {
        // The sample's table joins run 17.
        let mut e = sample();
        assert_eq!(e.needed_format(), 3);
        e.new_tables[0].run = 0;
        assert_eq!(e.needed_format(), 2);
        e.new_value_tables[0].policy_meta = Some(PolicyTableMeta {
            tag: "dumpkv".into(),
            data: Vec::new(),
        });
        assert_eq!(e.needed_format(), 3);
        e.new_tables[0].meta.range_deletions = 2;
        assert_eq!(e.needed_format(), 4);
    }

    #[test]
    fn range_tombstone_extents_round_trip_and_are_checked() {
        let mut e = sample();
        e.new_tables[0].run = 0;
        e.new_tables[0].meta.aliases = 0;
        e.new_tables[0].meta.range_deletions = 5;
        e.new_tables[0].meta.largest = key::range_bound(b"zz");
        let decoded = VersionEdit::decode(&e.encode(), "M", 0).expect("decode");
        assert_eq!(decoded, e);
        e.new_tables[0].meta.range_deletions = 0;
        let err = VersionEdit::decode(&e.encode(), "M", 0).expect_err("bound without tombstone");
        assert!(err.is_corruption(), "{err}");
    }

    #[test]
    fn policy_metadata_round_trips_and_is_checked() {
        let meta = |tag: &str, data: &[u8]| PolicyTableMeta {
            tag: tag.to_string(),
            data: data.to_vec(),
        };
        let mut e = sample();
        let plain = e.encode();
        e.new_value_tables[0].policy_meta = Some(meta("dumpkv", b"ttl=3600"));
        let with = e.encode();
        // The metadata trails the table's fields; without it the bytes are format 2's.
        assert!(with.len() > plain.len());
        assert_eq!(VersionEdit::decode(&with, "M", 0).expect("decode"), e);
        e.new_value_tables[0].policy_meta = Some(meta("x", &[7; MAX_POLICY_TABLE_META]));
        assert_eq!(VersionEdit::decode(&e.encode(), "M", 0).expect("decode"), e);
        // A field 8 of a table with metadata, re-emitted with the metadata varied.
        let field = |format: u64, tag: &[u8], data: &[u8]| {
            let mut f = Vec::new();
            for n in [30u64, 1 << 20, 60, 1 << 19] {
                put_varint64(&mut f, n);
            }
            put_length_prefixed(&mut f, b"a");
            put_length_prefixed(&mut f, b"y");
            put_varint64(&mut f, 2);
            put_varint64(&mut f, 90);
            put_varint64(&mut f, 1);
            put_varint64(&mut f, format);
            put_length_prefixed(&mut f, tag);
            put_length_prefixed(&mut f, data);
            let mut out = Vec::new();
            emit(&mut out, tag::NEW_VALUE_TABLE, &f);
            VersionEdit::decode(&out, "M", 0)
        };
        assert!(field(1, b"dumpkv", b"").is_ok());
        for (format, tag, data, why) in [
            (2u64, &b"dumpkv"[..], &b""[..], "format 2, unknown"),
            (1, b"", b"", "malformed policy name"),
            (1, b"has space", b"", "malformed policy name"),
            (
                1,
                b"ok",
                &[0u8; MAX_POLICY_TABLE_META + 1][..],
                "at most 4096",
            ),
        ] {
            let err = field(format, tag, data).expect_err(why);
            assert!(
                err.is_corruption() && err.to_string().contains(why),
                "{err}"
            );
        }
    }
}
