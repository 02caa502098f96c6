//! Key tables: presence and size against the manifest, then the structure of each part (every
//! index entry and block, in both layouts), then every entry in merged order, with the value
//! handles handed to the handle check.

use crate::range_del::table_extent;
use std::sync::Arc;

use super::handles::{HandleCheck, TableHandles};
use super::{Checker, Problem};
use crate::error::Result;
use crate::filename::{manifest_file_name, table_file_name};
use crate::io::IoClass;
use crate::iter::InternalIterator;
use crate::key::{ParsedKey, ValueKind, compare_internal};
use crate::table::{BlockIter, KeyTableLayout, ReadCtx, Table, TablePart};
use crate::tools::text::render;
use crate::version::FileMetaData;
use crate::version::routing::{HOT, Routing, other_partition};

/// How the checker reads blocks: counted as "other", never filling a cache.
const CHECK_CTX: ReadCtx = ReadCtx {
    class: IoClass::Other,
    fill_cache: false,
    readahead: 0,
    readahead_ramp: false,
};

/// A table's partition in a partitioned tree, and the routing its keys must follow.
#[derive(Debug, Clone, Copy)]
pub(super) struct Routed<'a> {
    pub routing: &'a Routing,
    pub partition: usize,
}

/// The name of partition `p`.
fn partition_name(p: usize) -> &'static str {
    if p == HOT { "hot" } else { "cold" }
}

/// What one part's structural walk found.
#[derive(Default)]
struct PartCounts {
    blocks: u64,
    entries: u64,
    bytes: u64,
}

impl Checker {
    /// Verifies a table the manifest lists: presence and size first, then its contents, with
    /// every value handle it holds resolved by `handles`.
    pub(super) fn check_live_table(
        &mut self,
        manifest: u64,
        level: usize,
        meta: &FileMetaData,
        routed: Option<Routed<'_>>,
        handles: &mut HandleCheck,
    ) {
        let name = table_file_name(meta.number);
        let listed = format!("{} lists it in level {level}", manifest_file_name(manifest));
        if !self.present_with_size(&name, meta.file_size, manifest, &listed) {
            handles.complete = false;
            return;
        }
        let mut found = TableHandles::default();
        let complete = match self.verify_table(
            &name,
            meta.number,
            Some(meta),
            routed,
            &mut found,
            Some(handles),
        ) {
            Ok(complete) => complete,
            Err(e) => {
                self.problem(Problem::from_error(&name, e));
                false
            }
        };
        handles.complete &= complete;
        self.report_table_handles(&name, Some(meta), found, complete);
    }

    /// Reads key table `number` completely, without a manifest to compare it with: its handles
    /// are decoded but cannot be resolved.
    pub(super) fn check_table_file(&mut self, number: u64) {
        let name = table_file_name(number);
        let mut found = TableHandles::default();
        if let Err(e) = self.verify_table(&name, number, None, None, &mut found, None) {
            self.problem(Problem::from_error(&name, e));
        }
        self.report_table_handles(&name, None, found, false);
    }

    /// Reads every entry of a key table, checking order and counts; with `meta`, also compares
    /// it with the manifest. Handles are noted in `found` and, with `handles`, resolved. False
    /// (after reporting the problem) or an error when the walk stopped before the end.
    fn verify_table(
        &mut self,
        name: &str,
        number: u64,
        meta: Option<&FileMetaData>,
        routed: Option<Routed<'_>>,
        found: &mut TableHandles,
        mut handles: Option<&mut HandleCheck>,
    ) -> Result<bool> {
        let reader = self.reader(name)?;
        let size = match meta {
            Some(m) => m.file_size,
            None => reader.size()?,
        };
        let table = Arc::new(Table::open(
            reader,
            name.to_string(),
            number,
            size,
            None,
            IoClass::Other,
        )?);
        if !self.verify_parts(name, &table)? {
            return Ok(false);
        }
        let mut it = table.iter(CHECK_CTX);
        let mut first: Option<Vec<u8>> = None;
        let mut prev: Vec<u8> = Vec::new();
        let mut entries = 0u64;
        let mut deletions = 0u64;
        // Entries of keys the routing sends to the other partition, and the first of them.
        let mut misrouted: (u64, Option<(u64, String)>) = (0, None);
        it.seek_to_first()?;
        while it.valid() {
            let key = it.key();
            let Some(parsed) = ParsedKey::parse(key) else {
                self.problem(Problem::new(
                    name,
                    None,
                    format!("entry {entries} has a malformed internal key"),
                ));
                return Ok(false);
            };
            if entries > 0 && compare_internal(&prev, key).is_ge() {
                self.problem(Problem::new(
                    name,
                    None,
                    format!("entry {entries} is not after the entry before it"),
                ));
                return Ok(false);
            }
            match parsed.kind {
                ValueKind::Deletion => deletions += 1,
                ValueKind::ValueHandle => {
                    let handle = found.note(name, entries, parsed.user_key, parsed.seq, it.value());
                    if let (Some(h), Some(hc)) = (handle, handles.as_deref_mut()) {
                        hc.resolve(entries, parsed.user_key, parsed.seq, h, found);
                    }
                }
                ValueKind::Value => {}
                ValueKind::ValueWithExpiry => {
                    if crate::expiry::split_inline(it.value()).is_none() {
                        self.problem(Problem::new(
                            name,
                            None,
                            format!("entry {entries}: {}", crate::expiry::BAD_INLINE_EXPIRY),
                        ));
                    }
                }
            }
            if let Some(r) = routed
                && r.routing.partition_of(parsed.user_key) != r.partition
            {
                misrouted.0 += 1;
                misrouted
                    .1
                    .get_or_insert_with(|| (entries, render(parsed.user_key, false)));
            }
            if first.is_none() {
                first = Some(key.to_vec());
            }
            prev.clear();
            prev.extend_from_slice(key);
            entries += 1;
            it.next()?;
        }
        self.report.tables_checked += 1;
        self.report.entries_checked += entries;
        if let (Some(r), (count, Some((at, key)))) = (routed, misrouted) {
            self.problem(Problem::new(
                name,
                None,
                format!(
                    "{count} entries of keys the routing sends to the {} partition, in a table of \
                     the {} one (the first: entry {at}, key {key})",
                    partition_name(other_partition(r.partition)),
                    partition_name(r.partition)
                ),
            ));
        }

        let last = (entries > 0).then_some(prev);
        let props = table.properties();
        let mut mismatch = |what: String| self.report.problems.push(Problem::new(name, None, what));
        if entries != props.num_entries {
            mismatch(format!(
                "holds {entries} entries, its properties say {}",
                props.num_entries
            ));
        }
        if deletions != props.num_deletions {
            mismatch(format!(
                "holds {deletions} deletions, its properties say {}",
                props.num_deletions
            ));
        }
        if first.as_deref().unwrap_or_default() != props.smallest_key.as_slice()
            || last.as_deref().unwrap_or_default() != props.largest_key.as_slice()
        {
            mismatch("first or last key differs from its properties".to_string());
        }
        if let Some(m) = meta {
            // The manifest's bounds are the table's extent: its entries widened by its range
            // tombstones.
            let points = first.as_deref().zip(last.as_deref());
            let extent = table_extent(
                points,
                table
                    .range_tombstones()
                    .into_iter()
                    .flat_map(|t| t.iter().map(|f| (f.start, f.end))),
            );
            let (smallest, largest) = extent.unzip();
            if smallest.as_deref() != Some(m.smallest.as_slice()) {
                mismatch(
                    "first key or range tombstone differs from the manifest's smallest key"
                        .to_string(),
                );
            }
            if largest.as_deref() != Some(m.largest.as_slice()) {
                mismatch(
                    "last key or range tombstone end differs from the manifest's largest key"
                        .to_string(),
                );
            }
            if props.range_deletions != m.range_deletions {
                mismatch(format!(
                    "holds {} range tombstones, the manifest says {}",
                    props.range_deletions, m.range_deletions
                ));
            }
            if entries != m.num_entries || deletions != m.num_deletions {
                mismatch(format!(
                    "holds {entries} entries ({deletions} deletions), the manifest says {} ({})",
                    m.num_entries, m.num_deletions
                ));
            }
        }
        Ok(true)
    }

    /// Walks each part of `table` through its index: index keys strictly increase, every index
    /// value is a block handle, every block verifies (checksum) and is non-empty, its entries
    /// strictly increase across the whole part, its last key is its index key (what point
    /// lookups rely on), and in an index-decoupled table every entry's kind belongs to its part.
    /// The block, entry and byte counts per part must match the properties. False after
    /// reporting a problem; corruption met on the way is returned as an error.
    fn verify_parts(&mut self, name: &str, table: &Table) -> Result<bool> {
        let decoupled = table.layout() == KeyTableLayout::IndexDecoupled;
        let mut counts = Vec::new();
        for part in [TablePart::Data, TablePart::Handles] {
            let Some(index) = table.part_index(part) else {
                continue;
            };
            let what = part.name();
            let mut c = PartCounts::default();
            let mut ix = BlockIter::internal(index.clone());
            let mut prev_key: Option<Vec<u8>> = None;
            ix.seek_to_first()?;
            while ix.valid() {
                let handle = table.decode_index_value(part, ix.value())?;
                if c.blocks > 0
                    && prev_key
                        .as_deref()
                        .is_some_and(|p| compare_internal(p, ix.key()).is_ge())
                {
                    self.problem(Problem::new(
                        name,
                        Some(index.offset()),
                        format!(
                            "{what} index entry {} is not after the one before it",
                            c.blocks
                        ),
                    ));
                    return Ok(false);
                }
                let mut b = BlockIter::internal(table.part_block(part, handle, CHECK_CTX)?);
                b.seek_to_first()?;
                if !b.valid() {
                    self.problem(Problem::new(
                        name,
                        Some(handle.offset),
                        format!("{what} block {} is empty", c.blocks),
                    ));
                    return Ok(false);
                }
                while b.valid() {
                    let key = b.key();
                    if prev_key
                        .as_deref()
                        .is_some_and(|p| compare_internal(p, key).is_ge())
                    {
                        self.problem(Problem::new(
                            name,
                            Some(handle.offset),
                            format!(
                                "{what} entry {} is not after the entry before it",
                                c.entries
                            ),
                        ));
                        return Ok(false);
                    }
                    let kind = ParsedKey::parse(key).map(|k| k.kind);
                    let misplaced = match kind {
                        None => true,
                        Some(ValueKind::ValueHandle) => decoupled && part == TablePart::Data,
                        Some(_) => part == TablePart::Handles,
                    };
                    if misplaced {
                        self.problem(Problem::new(
                            name,
                            Some(handle.offset),
                            format!(
                                "{what} entry {} has kind {}, which does not belong in the \
                                 {what} part",
                                c.entries,
                                kind.map_or_else(|| "unknown".to_string(), |k| format!("{k:?}"))
                            ),
                        ));
                        return Ok(false);
                    }
                    prev_key = Some(key.to_vec());
                    c.entries += 1;
                    b.next()?;
                }
                if prev_key.as_deref() != Some(ix.key()) {
                    self.problem(Problem::new(
                        name,
                        Some(handle.offset),
                        format!(
                            "{what} block {}: its last key differs from its index key",
                            c.blocks
                        ),
                    ));
                    return Ok(false);
                }
                c.blocks += 1;
                c.bytes += handle.size + crate::table::format::BLOCK_TRAILER_LEN as u64;
                ix.next()?;
            }
            counts.push((part, c));
        }
        let p = table.properties();
        for (part, c) in counts {
            let (blocks, bytes, entries) = match part {
                TablePart::Data => (p.num_data_blocks, p.data_bytes, p.num_data_entries()),
                TablePart::Handles => (p.num_handle_blocks, p.handle_bytes, p.num_handle_entries),
            };
            if (c.blocks, c.bytes, c.entries) != (blocks, bytes, entries) {
                self.problem(Problem::new(
                    name,
                    None,
                    format!(
                        "{} part holds {} blocks ({} bytes, {} entries), its properties say {} \
                         ({} bytes, {} entries)",
                        part.name(),
                        c.blocks,
                        c.bytes,
                        c.entries,
                        blocks,
                        bytes,
                        entries
                    ),
                ));
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{CheckReport, Checker};
    use crate::filename::table_file_name;
    use crate::io::{FileSystem, PosixFs, WriteFileOptions};
    use crate::key::{ValueKind, make_internal_key};
    use crate::table::{Compression, KeyTableLayout, TableBuilder, TableBuilderOptions};
    use crate::value::ValueHandle;

    /// Writes table `number` into `dir` with a mix of inline values, tombstones and handles.
    fn write_table(dir: &std::path::Path, number: u64, layout: KeyTableLayout) -> u64 {
        let fs = PosixFs::new();
        let file = fs
            .new_writable(
                &dir.join(table_file_name(number)),
                WriteFileOptions::default(),
            )
            .expect("create");
        let opts = TableBuilderOptions {
            block_size: 256,
            compression: Compression::None,
            layout,
            ..TableBuilderOptions::default()
        };
        let mut b = TableBuilder::new(file, opts).expect("builder");
        for i in 0..500u64 {
            let user = format!("key{i:05}");
            let (kind, value) = match i % 4 {
                0 => (ValueKind::Deletion, vec![]),
                1 | 2 => (
                    ValueKind::ValueHandle,
                    ValueHandle {
                        file_number: 3,
                        offset: i * 100,
                        len: 100,
                    }
                    .encode(),
                ),
                _ => (ValueKind::Value, format!("value {i}").into_bytes()),
            };
            b.add(&make_internal_key(user.as_bytes(), 10 + i, kind), &value)
                .expect("add");
        }
        b.finish().expect("finish").properties.num_handle_entries
    }

    fn check_file(dir: &std::path::Path, number: u64) -> CheckReport {
        let mut checker = Checker::new(Arc::new(PosixFs::new()), dir, None);
        checker.check_table_file(number);
        checker.report
    }

    #[test]
    fn both_layouts_check_clean_and_damage_in_either_part_is_found() {
        for layout in [KeyTableLayout::Mixed, KeyTableLayout::IndexDecoupled] {
            let dir = tempfile::tempdir().expect("tempdir");
            let handles = write_table(dir.path(), 7, layout);
            assert_eq!(handles > 0, layout == KeyTableLayout::IndexDecoupled);
            let report = check_file(dir.path(), 7);
            assert!(report.is_clean(), "{layout:?}: {report:#?}");
            assert_eq!((report.tables_checked, report.entries_checked), (1, 500));
            assert_eq!(report.handles_checked, 250);

            // Damage every 97th byte in turn: each must be reported, in whichever part or
            // metadata block it lands.
            let path = dir.path().join(table_file_name(7));
            let good = std::fs::read(&path).expect("read");
            for at in (0..good.len()).step_by(97) {
                let mut bad = good.clone();
                bad[at] ^= 0x20;
                std::fs::write(&path, &bad).expect("write");
                let report = check_file(dir.path(), 7);
                assert!(
                    !report.is_clean(),
                    "{layout:?}: damage at {at} went unnoticed"
                );
            }
        }
    }
}
