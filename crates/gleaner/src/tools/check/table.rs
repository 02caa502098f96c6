//! Key tables: presence and size against the manifest, then every entry, with the value handles
//! handed to the handle check.

use std::sync::Arc;

use super::handles::{HandleCheck, TableHandles};
use super::{Checker, Problem};
use crate::error::Result;
use crate::filename::{manifest_file_name, table_file_name};
use crate::io::IoClass;
use crate::iter::InternalIterator;
use crate::key::{ParsedKey, ValueKind, compare_internal};
use crate::table::{ReadCtx, Table};
use crate::version::FileMetaData;

impl Checker {
    /// Verifies a table the manifest lists: presence and size first, then its contents, with
    /// every value handle it holds resolved by `handles`.
    pub(super) fn check_live_table(
        &mut self,
        manifest: u64,
        level: usize,
        meta: &FileMetaData,
        handles: &mut HandleCheck,
    ) {
        let name = table_file_name(meta.number);
        let listed = format!("{} lists it in level {level}", manifest_file_name(manifest));
        if !self.present_with_size(&name, meta.file_size, manifest, &listed) {
            handles.complete = false;
            return;
        }
        let mut found = TableHandles::default();
        let complete =
            match self.verify_table(&name, meta.number, Some(meta), &mut found, Some(handles)) {
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
        if let Err(e) = self.verify_table(&name, number, None, &mut found, None) {
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
        let mut it = table.iter(ReadCtx {
            class: IoClass::Other,
            fill_cache: false,
        });
        let mut first: Option<Vec<u8>> = None;
        let mut prev: Vec<u8> = Vec::new();
        let mut entries = 0u64;
        let mut deletions = 0u64;
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
            if first.as_deref() != Some(m.smallest.as_slice()) {
                mismatch("first key differs from the manifest's smallest key".to_string());
            }
            if last.as_deref() != Some(m.largest.as_slice()) {
                mismatch("last key differs from the manifest's largest key".to_string());
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
}
