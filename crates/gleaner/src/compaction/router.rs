//! The value router: which class, and so which stream of value tables, a separated value goes
//! to, at flush, in a GC job and (for schemes that relocate values there) in compaction.
//!
//! Classes belong to the router: it names them, numbers them from 0 and tags every value table
//! it routes to with the number (`ValueTableMeta::class`, docs/format.md). A job writes one
//! sorted run of tables per class it uses; stats count bytes per class by the router's names.
//! Victim pickers of the same policy may prefer some classes (a hot class, say).

use crate::key::SeqNo;
use crate::value::HandlePayload;
use crate::version::ValueTableMeta;

/// Most classes one router may have: value-table class tags are below this, which keeps
/// per-class figures in fixed arrays.
pub const MAX_VALUE_CLASSES: usize = 8;

/// Where a value is being written. New origins may come (as [`RouteOrigin::Write`] did): a
/// router matching on it keeps an arm for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteOrigin {
    /// A flush of memtables (the value's first time in a value table).
    Flush,
    /// The flush of memtables replayed from the WALs at open: as [`RouteOrigin::Flush`], before
    /// any read or compaction has taught the policy anything.
    Recovery,
    /// A write appending the value to a value segment as it arrives (option
    /// `separate_at=write`): as [`RouteOrigin::Flush`], for the L0 entry the memtable's flush
    /// will write, but once per value as it is written; the segment the class names is the
    /// memtable's, sealed at its flush.
    Write,
    /// A GC job copying a live record.
    Gc,
    /// A compaction relocating the value of an entry it keeps.
    Compaction,
}

impl RouteOrigin {
    /// Whether the value may stay, or become, inline at this origin: at a flush and in
    /// compaction the entry is written anew; a GC job only moves records, and the index
    /// entries naming them must go on finding one.
    pub fn may_inline(self) -> bool {
        !matches!(self, RouteOrigin::Gc)
    }
}

/// What the router is told about a value it places.
#[derive(Debug, Clone, Copy)]
pub struct RouteContext<'a> {
    /// The value's user key.
    pub user_key: &'a [u8],
    /// The sequence number of its record (for a record GC or compaction moves, the one it was
    /// written at).
    pub seq: SeqNo,
    /// The value's length in bytes.
    pub value_len: u64,
    /// The payload the value's handle carries (a value GC or compaction moves), if any.
    pub payload: Option<&'a HandlePayload>,
    /// Where the value is being written.
    pub origin: RouteOrigin,
    /// The index-tree level of the entry written: 0 at a flush, the output level in
    /// compaction; `None` in a GC job (the index is not written).
    pub level: Option<u32>,
    /// When the version expires (milliseconds since the Unix epoch), if it does (a GC job
    /// knows it from the victim's dense index).
    pub expiry: Option<u64>,
    /// The database's newest sequence number when the job started (a flush: once its
    /// memtables were sealed): `now - seq` is the record's age in writes.
    pub now: SeqNo,
}

/// Where and when a value table was written: what [`ValueRouter::table_meta`] is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOrigin {
    /// The job that wrote it.
    pub origin: RouteOrigin,
    /// The index-tree level of the entries naming its values: 0 at a flush, the output level
    /// in compaction; `None` in a GC job (no index entry is written).
    pub level: Option<u32>,
    /// The database's newest sequence number when the job started ([`RouteContext::now`]).
    pub now: SeqNo,
}

/// Where a value goes: the router's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// In the index tree, with its key (only where [`RouteOrigin::may_inline`]).
    Inline,
    /// In a value table of class `class`, its handle carrying `payload` (at a GC job's copy,
    /// where no handle is written, the payload is not used: the index keeps its own).
    Separated {
        /// The class (below [`MAX_VALUE_CLASSES`] and the router's names).
        class: u32,
        /// The handle's payload.
        payload: Option<HandlePayload>,
    },
}

/// Chooses, for each value written at a flush, moved by GC or relocated by compaction, whether
/// it is separated, into which class, and with what handle payload. Implementations are cheap
/// to call (once per value) and thread-safe.
///
/// The engine's rule, [`by_size`], separates values of at least `min_separated_value_size`
/// bytes; every shipped router follows it, a custom one may not.
pub trait ValueRouter: Send + Sync + std::fmt::Debug {
    /// The classes' names, indexed by class number (at most [`MAX_VALUE_CLASSES`]).
    fn class_names(&self) -> &'static [&'static str];

    /// Where the value `ctx` describes goes. A class at or beyond [`MAX_VALUE_CLASSES`], or
    /// [`Placement::Inline`] where the origin does not allow it, is a policy bug the writer
    /// refuses with [`Error::InvalidArgument`](crate::Error::InvalidArgument) before writing.
    fn place(&self, ctx: &RouteContext<'_>) -> Placement;

    /// The policy's metadata of value table `table`, just written where and when `at` says
    /// (its class is `table.class`): kept in the manifest with the table, tagged with the
    /// policy's name, and shown to the victim picker and the hooks. At most
    /// [`MAX_POLICY_TABLE_META`](crate::version::MAX_POLICY_TABLE_META) bytes; more is refused
    /// as a policy bug. Default: none.
    fn table_meta(&self, table: &ValueTableMeta, at: &TableOrigin) -> Option<Vec<u8>> {
        let _ = (table, at);
        None
    }
}

/// The engine's separation rule: values of at least `min_size` bytes (option
/// `min_separated_value_size`) are separated, in `class`, keeping the payload they have;
/// shorter ones stay inline where they may.
pub fn by_size(ctx: &RouteContext<'_>, min_size: u64, class: u32) -> Placement {
    if ctx.value_len < min_size && ctx.origin.may_inline() {
        Placement::Inline
    } else {
        Placement::Separated {
            class,
            payload: ctx.payload.cloned(),
        }
    }
}

/// Every value in one class, `default` (class 0), separated by size: every policy
/// that does not separate values by kind.
#[derive(Debug, Clone, Copy)]
pub struct SingleClass {
    min_size: u64,
}

impl SingleClass {
    /// Separates values of at least `min_size` bytes (option `min_separated_value_size`).
    pub fn new(min_size: u64) -> Self {
        SingleClass { min_size }
    }
}

/// The class of [`SingleClass`].
pub const CLASS_DEFAULT: u32 = 0;

impl ValueRouter for SingleClass {
    fn class_names(&self) -> &'static [&'static str] {
        &["default"]
    }

    fn place(&self, ctx: &RouteContext<'_>) -> Placement {
        by_size(ctx, self.min_size, CLASS_DEFAULT)
    }
}

/// The name of class `class` under `router`, or `class-N` for a tag the router does not know
/// (a table written under another policy).
pub fn class_name(router: &dyn ValueRouter, class: u32) -> String {
    router
        .class_names()
        .get(class as usize)
        .map_or_else(|| format!("class-{class}"), |n| (*n).to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A value of `len` bytes of `key`, written at `origin` into L0.
    pub(crate) fn ctx(key: &[u8], len: u64, origin: RouteOrigin) -> RouteContext<'_> {
        RouteContext {
            user_key: key,
            seq: 1,
            value_len: len,
            payload: None,
            origin,
            level: Some(0),
            expiry: None,
            now: 1,
        }
    }

    /// The class of a separated placement; `None` for inline.
    pub(crate) fn class(p: Placement) -> Option<u32> {
        match p {
            Placement::Separated { class, .. } => Some(class),
            Placement::Inline => None,
        }
    }

    #[test]
    fn the_size_rule_keeps_payloads_and_never_inlines_in_gc() {
        let one = SingleClass::new(10);
        assert_eq!(
            class(one.place(&ctx(b"k", 10, RouteOrigin::Flush))),
            Some(0)
        );
        assert_eq!(
            class(one.place(&ctx(b"k", 9, RouteOrigin::Compaction))),
            None
        );
        // A GC job moves records whatever their size (the option may have changed).
        assert_eq!(class(one.place(&ctx(b"k", 9, RouteOrigin::Gc))), Some(0));
        let p = HandlePayload::new(b"x").expect("payload");
        let mut c = ctx(b"k", 10, RouteOrigin::Compaction);
        c.payload = Some(&p);
        assert_eq!(
            one.place(&c),
            Placement::Separated {
                class: 0,
                payload: Some(p.clone())
            }
        );
    }
}
