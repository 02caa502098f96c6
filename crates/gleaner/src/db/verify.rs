//! A from-scratch recount of value-table garbage, to check the incremental accounting.

use std::collections::BTreeMap;

use super::DbInner;
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::iter::InternalIterator;
use crate::key::{ParsedKey, ValueKind};
use crate::table::ReadCtx;
use crate::value::ValueHandle;

/// Result of [`Db::recount_garbage`](super::Db::recount_garbage).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GarbageRecount {
    /// Value tables compared.
    pub tables: usize,
    /// Handles found in key tables.
    pub handles: u64,
    /// Of those, handles of shadowed versions whose record GC reclaimed early (a newer version
    /// of the key is in the tree; nothing reads them).
    pub reclaimed_early: u64,
    /// Every disagreement between the recount and the recorded garbage, in words.
    pub mismatches: Vec<String>,
}

impl DbInner {
    /// Walks every entry of every key table of the current version, places each handle's record
    /// in its live value table, and compares the references found with each table's records
    /// minus its recorded garbage.
    pub(super) fn recount_garbage(&self) -> Result<GarbageRecount> {
        let version = std::sync::Arc::clone(&self.super_version.load().version);
        let values = version.values();
        let ctx = ReadCtx {
            class: IoClass::Other,
            fill_cache: false,
        };
        let mut referenced: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut report = GarbageRecount::default();
        for (_, f) in version.all_files() {
            let table = self.tables.get(f.number, f.file_size, IoClass::Other)?;
            let mut it = table.iter(ctx);
            it.seek_to_first()?;
            while it.valid() {
                let key = ParsedKey::parse(it.key()).ok_or_else(|| {
                    Error::corruption(
                        crate::filename::table_file_name(f.number),
                        0,
                        "malformed internal key",
                    )
                })?;
                if key.kind == ValueKind::ValueHandle {
                    let handle = ValueHandle::decode(
                        it.value(),
                        &crate::filename::table_file_name(f.number),
                        0,
                    )?;
                    report.handles += 1;
                    match values.try_locate(
                        &self.values,
                        key.user_key,
                        key.seq,
                        handle,
                        IoClass::Other,
                        false,
                    ) {
                        Ok(Some(at)) => {
                            let r = referenced.entry(at.handle.file_number).or_default();
                            r.0 += 1;
                            r.1 += at.handle.len;
                        }
                        Ok(None) => {
                            if version.is_shadowed(&self.tables, key.user_key, key.seq, ctx)? {
                                report.reclaimed_early += 1;
                            } else {
                                let e = values.dangling(key.user_key, key.seq, handle);
                                report.mismatches.push(format!(
                                    "handle in table {} for sequence {} does not resolve: {e}",
                                    f.number, key.seq
                                ));
                            }
                        }
                        Err(e) => report.mismatches.push(format!(
                            "handle in table {} for sequence {} does not resolve: {e}",
                            f.number, key.seq
                        )),
                    }
                }
                it.next()?;
            }
        }
        for v in values.tables() {
            report.tables += 1;
            let g = values.garbage(v.number);
            let (records, bytes) = referenced.remove(&v.number).unwrap_or_default();
            let expect = (v.records - g.records, v.record_bytes - g.bytes);
            if (records, bytes) != expect {
                report.mismatches.push(format!(
                    "value table {}: key tables reference {records} records / {bytes} bytes, but the \
                     accounting says {} / {} are live ({} records, {} garbage)",
                    v.number, expect.0, expect.1, v.records, g.records
                ));
            }
        }
        for (n, (records, _)) in referenced {
            report.mismatches.push(format!(
                "{records} handles resolve to value table {n}, which is not live"
            ));
        }
        Ok(report)
    }
}
