//! DiffKV's fine-grained separation: values by size into three classes — small ones inline in
//! the index tree, medium ones in the vTree, large ones in vLogs, new (hot) or moved by GC
//! (cold) — and each value table's metadata (docs/format.md, "DiffKV table metadata").

use std::sync::atomic::{AtomicU64, Ordering};

use crate::coding::{decode_varint64, put_varint64};
use crate::compaction::router::{Placement, RouteContext, RouteOrigin, TableOrigin, ValueRouter};
use crate::version::ValueTableMeta;

/// Class of the vTree's tables (medium values).
pub const CLASS_VTREE: u32 = 0;
/// Class of vLogs written by flushes (large values, new).
pub const CLASS_VLOG_HOT: u32 = 1;
/// Class of vLogs written by GC (large values that outlived a collection).
pub const CLASS_VLOG_COLD: u32 = 2;
const CLASS_NAMES: &[&str] = &["vtree", "vlog-hot", "vlog-cold"];

/// The policy's tag on its tables' metadata (its name).
pub const TAG: &str = "diffkv";
/// Format of the table metadata written now (2: with the job's start); format 1 is still read.
const META_FORMAT: u8 = 2;
/// The first format, without the job's start.
const META_FORMAT_1: u8 = 1;

/// A value table's metadata: where it was written and, for a vTable, its vTree level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableMeta {
    /// Written by a GC job (its level is then not a vTree level: such a vTable counts as one of
    /// the deepest level, whose ranges GC collects).
    pub by_gc: bool,
    /// The index-tree level of the entries naming its values when it was written: 0 at a
    /// flush, the output level of the compaction that merged it; 0 when `by_gc`.
    pub level: u32,
    /// The database's newest sequence number when the job that wrote it started: the tables
    /// of one job share it, and it orders the groups of a level by age (the scan-optimised
    /// merge weighs them by it). `None` for a table of format 1, written before it was kept.
    pub written_at: Option<u64>,
}

impl TableMeta {
    /// The bytes: format byte 2, a flags byte (bit 0: written by GC), the level and the job's
    /// start as varints; format 1, without the start, for a table whose `written_at` is unknown.
    pub fn encode(&self) -> Vec<u8> {
        let format = if self.written_at.is_some() {
            META_FORMAT
        } else {
            META_FORMAT_1
        };
        let mut out = vec![format, u8::from(self.by_gc)];
        put_varint64(&mut out, u64::from(self.level));
        if let Some(at) = self.written_at {
            put_varint64(&mut out, at);
        }
        out
    }

    /// The metadata `data` holds; `None` for bytes not of this format.
    pub fn decode(data: &[u8]) -> Option<TableMeta> {
        let (&[format, flags], rest) = data.split_first_chunk::<2>()?;
        if !(format == META_FORMAT || format == META_FORMAT_1) || flags > 1 {
            return None;
        }
        let (level, n) = decode_varint64(rest)?;
        let rest = &rest[n..];
        let (written_at, rest) = if format == META_FORMAT {
            let (at, n) = decode_varint64(rest)?;
            (Some(at), &rest[n..])
        } else {
            (None, rest)
        };
        rest.is_empty().then_some(TableMeta {
            by_gc: flags == 1,
            level: u32::try_from(level).ok()?,
            written_at,
        })
    }

    /// The metadata of `table`, if this policy wrote it.
    pub fn of(table: &ValueTableMeta) -> Option<TableMeta> {
        table
            .policy_meta
            .as_ref()
            .filter(|m| m.tag == TAG)
            .and_then(|m| TableMeta::decode(&m.data))
    }
}

/// Values placed at flushes, by size class (`stats().gc.policy_stats`).
#[derive(Debug, Default)]
pub struct Placed {
    pub small: AtomicU64,
    pub medium: AtomicU64,
    pub large: AtomicU64,
}

/// The router: small values (below `small_max`) inline where the origin allows, medium ones
/// (below `large_min`) into the vTree, large ones into vLogs, hot at a flush and cold from GC.
#[derive(Debug)]
pub struct SizeRouter {
    /// Option `diffkv_small_max`.
    pub small_max: u64,
    /// Option `diffkv_large_min`.
    pub large_min: u64,
    pub placed: Placed,
}

impl SizeRouter {
    /// The class of a separated value of `len` bytes written at `origin`.
    pub fn class_of(&self, len: u64, origin: RouteOrigin) -> u32 {
        if len < self.large_min {
            CLASS_VTREE
        } else if origin == RouteOrigin::Gc {
            CLASS_VLOG_COLD
        } else {
            CLASS_VLOG_HOT
        }
    }
}

impl ValueRouter for SizeRouter {
    fn class_names(&self) -> &'static [&'static str] {
        CLASS_NAMES
    }

    fn place(&self, ctx: &RouteContext<'_>) -> Placement {
        let small = ctx.value_len < self.small_max;
        if matches!(
            ctx.origin,
            RouteOrigin::Flush | RouteOrigin::Recovery | RouteOrigin::Write
        ) {
            let counter = if small {
                &self.placed.small
            } else if ctx.value_len < self.large_min {
                &self.placed.medium
            } else {
                &self.placed.large
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if small && ctx.origin.may_inline() {
            return Placement::Inline;
        }
        Placement::Separated {
            class: self.class_of(ctx.value_len, ctx.origin),
            payload: ctx.payload.cloned(),
        }
    }

    fn table_meta(&self, _: &ValueTableMeta, at: &TableOrigin) -> Option<Vec<u8>> {
        let by_gc = at.origin == RouteOrigin::Gc;
        let level = if by_gc { 0 } else { at.level.unwrap_or(0) };
        Some(
            TableMeta {
                by_gc,
                level,
                written_at: Some(at.now),
            }
            .encode(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::router::tests::{class, ctx};

    fn router() -> SizeRouter {
        SizeRouter {
            small_max: 128,
            large_min: 8192,
            placed: Placed::default(),
        }
    }

    #[test]
    fn values_go_by_size_and_large_ones_by_origin() {
        let r = router();
        assert_eq!(class(r.place(&ctx(b"k", 127, RouteOrigin::Flush))), None);
        assert_eq!(
            class(r.place(&ctx(b"k", 128, RouteOrigin::Flush))),
            Some(CLASS_VTREE)
        );
        assert_eq!(
            class(r.place(&ctx(b"k", 8191, RouteOrigin::Compaction))),
            Some(CLASS_VTREE)
        );
        assert_eq!(
            class(r.place(&ctx(b"k", 8192, RouteOrigin::Recovery))),
            Some(CLASS_VLOG_HOT)
        );
        assert_eq!(
            class(r.place(&ctx(b"k", 8192, RouteOrigin::Gc))),
            Some(CLASS_VLOG_COLD)
        );
        // GC moves records and never inlines: a small one stays in the vTree.
        assert_eq!(
            class(r.place(&ctx(b"k", 10, RouteOrigin::Gc))),
            Some(CLASS_VTREE)
        );
        // Relocation in compaction may inline (the option was raised).
        assert_eq!(class(r.place(&ctx(b"k", 10, RouteOrigin::Compaction))), None);
        let p = &r.placed;
        assert_eq!(
            [&p.small, &p.medium, &p.large].map(|c| c.load(Ordering::Relaxed)),
            [1, 1, 1],
            "flushes and recovery counted"
        );
    }

    #[test]
    fn metadata_round_trips_and_refuses_what_is_not_one() {
        for m in [
            TableMeta {
                by_gc: false,
                level: 0,
                written_at: Some(0),
            },
            TableMeta {
                by_gc: false,
                level: 6,
                written_at: Some(1 << 40),
            },
            TableMeta {
                by_gc: true,
                level: 0,
                written_at: Some(300),
            },
            TableMeta {
                by_gc: false,
                level: 3,
                written_at: None,
            },
        ] {
            assert_eq!(TableMeta::decode(&m.encode()), Some(m));
        }
        // Format 1, as written before the job's start was kept, still reads.
        assert_eq!(
            TableMeta::decode(&[1, 1, 0]),
            Some(TableMeta {
                by_gc: true,
                level: 0,
                written_at: None
            })
        );
        assert_eq!(
            TableMeta::decode(&[2, 0, 3, 0xac, 0x02]).map(|m| (m.level, m.written_at)),
            Some((3, Some(300)))
        );
        assert_eq!(TableMeta::decode(&[]), None);
        assert_eq!(TableMeta::decode(&[3, 0, 0, 0]), None, "another format");
        assert_eq!(TableMeta::decode(&[1, 2, 0]), None, "unknown flags");
        assert_eq!(TableMeta::decode(&[1, 0, 0, 0]), None, "trailing bytes");
        assert_eq!(TableMeta::decode(&[2, 0, 0, 0, 0]), None, "trailing bytes");
        assert_eq!(TableMeta::decode(&[2, 0, 0]), None, "format 2 without its start");
        assert_eq!(TableMeta::decode(&[1, 0, 0x80]), None, "truncated varint");
        let at = |origin, level| TableOrigin {
            origin,
            level,
            now: 9,
        };
        let table = ValueTableMeta {
            number: 1,
            file_size: 0,
            records: 0,
            record_bytes: 0,
            smallest_key: Vec::new(),
            largest_key: Vec::new(),
            smallest_seq: 0,
            largest_seq: 0,
            class: CLASS_VTREE,
            policy_meta: None,
            max_expiry: None,
        };
        let r = router();
        let meta = |origin, level| {
            TableMeta::decode(&r.table_meta(&table, &at(origin, level)).expect("meta"))
                .expect("decodes")
        };
        assert_eq!(meta(RouteOrigin::Flush, Some(0)).level, 0);
        assert_eq!(meta(RouteOrigin::Compaction, Some(3)).level, 3);
        assert!(meta(RouteOrigin::Gc, None).by_gc);
        assert_eq!(meta(RouteOrigin::Flush, Some(0)).written_at, Some(9));
    }
}
