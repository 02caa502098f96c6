//! DumpKV's value router and victim picker (§4.5): flushes write into default tables, due
//! after `l_d` writes; GC writes each live record into a short (`l_s`) or long (`l_l`) table
//! as the model predicts; every table keeps its lifetime and the sequence number it was
//! written at (its policy metadata, docs/format.md, "DumpKV table metadata"); a table is due
//! once the database has taken its lifetime in writes since, or once it is mostly garbage.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::features::Features;
use super::state::DumpKv;
use crate::coding::{decode_varint64, put_varint64};
use crate::compaction::router::{Placement, RouteContext, RouteOrigin, ValueRouter, by_size};
use crate::gc::picker::{PickContext, VictimCandidate, VictimPicker};
use crate::key::SeqNo;
use crate::version::ValueTableMeta;

/// Class of the tables flushes write (lifetime `l_d`), and of records GC moves before a model
/// exists.
pub const CLASS_DEFAULT: u32 = 0;
/// Class of records predicted to die soon (lifetime `l_s`).
pub const CLASS_SHORT: u32 = 1;
/// Class of records predicted to live long (lifetime `l_l`), and of every record GC moves with
/// `dumpkv_model=false`.
pub const CLASS_LONG: u32 = 2;
const CLASS_NAMES: &[&str] = &["default", "short", "long"];

/// The policy's tag on its tables' metadata (its name).
pub const TAG: &str = "dumpkv";
/// Format of the table metadata.
const META_FORMAT: u8 = 1;

/// A table's lifetime as its metadata keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableLifetime {
    /// Its class when written.
    pub class: u32,
    /// Its lifetime in writes (the class's point then).
    pub ttl: SeqNo,
    /// The database's newest sequence number when it was written.
    pub born: SeqNo,
}

impl TableLifetime {
    /// The sequence number at which the table is due.
    pub fn deadline(&self) -> SeqNo {
        self.born.saturating_add(self.ttl)
    }

    /// The metadata bytes: format byte 1, the class byte, then lifetime and birth as varints.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![META_FORMAT, self.class as u8];
        put_varint64(&mut out, self.ttl);
        put_varint64(&mut out, self.born);
        out
    }

    /// The lifetime `data` holds; `None` for bytes that are not one of this format.
    pub fn decode(data: &[u8]) -> Option<TableLifetime> {
        let (&[format, class], rest) = data.split_first_chunk::<2>()?;
        if format != META_FORMAT || usize::from(class) >= CLASS_NAMES.len() {
            return None;
        }
        let (ttl, n) = decode_varint64(rest)?;
        let (born, m) = decode_varint64(&rest[n..])?;
        (n + m == rest.len()).then_some(TableLifetime {
            class: u32::from(class),
            ttl,
            born,
        })
    }
}

/// The router: flushes into the default class with a fresh history payload; GC by prediction.
#[derive(Debug)]
pub struct LifetimeRouter {
    pub dk: Arc<DumpKv>,
    /// Option `min_separated_value_size`.
    pub min_size: u64,
}

impl ValueRouter for LifetimeRouter {
    fn class_names(&self) -> &'static [&'static str] {
        CLASS_NAMES
    }

    fn place(&self, ctx: &RouteContext<'_>) -> Placement {
        match ctx.origin {
            RouteOrigin::Flush | RouteOrigin::Recovery | RouteOrigin::Compaction => {
                match by_size(ctx, self.min_size, CLASS_DEFAULT) {
                    Placement::Separated { class, payload } => Placement::Separated {
                        class,
                        // A new value's history is empty until a compaction out of L0 folds in
                        // the versions before it.
                        payload: payload.or_else(|| Some(Features::flushed().to_payload())),
                    },
                    inline => inline,
                }
            }
            RouteOrigin::Gc => Placement::Separated {
                class: self.gc_class(ctx),
                payload: ctx.payload.cloned(),
            },
        }
    }

    fn table_meta(&self, table: &ValueTableMeta, _: RouteOrigin, now: SeqNo) -> Option<Vec<u8>> {
        let points = self.dk.points();
        let ttl = match table.class {
            CLASS_SHORT => points.short,
            CLASS_LONG => points.long,
            _ => points.default,
        };
        Some(
            TableLifetime {
                class: table.class,
                ttl,
                born: now,
            }
            .encode(),
        )
    }
}

impl LifetimeRouter {
    /// The class GC moves a live record to: the model's prediction for its history at its
    /// age; long with `dumpkv_model=false`; default before a model exists.
    fn gc_class(&self, ctx: &RouteContext<'_>) -> u32 {
        let f = &self.dk.figures;
        if !self.dk.settings.use_model {
            f.predicted_long.fetch_add(1, Ordering::Relaxed);
            return CLASS_LONG;
        }
        let features = Features::of_payload(ctx.payload);
        match self.dk.predict(&features, ctx.now.saturating_sub(ctx.seq)) {
            None => {
                f.predicted_default.fetch_add(1, Ordering::Relaxed);
                CLASS_DEFAULT
            }
            Some(true) => {
                f.predicted_long.fetch_add(1, Ordering::Relaxed);
                CLASS_LONG
            }
            Some(false) => {
                f.predicted_short.fetch_add(1, Ordering::Relaxed);
                CLASS_SHORT
            }
        }
    }
}

/// The picker: tables whose lifetime has passed, the most overdue first; then tables past
/// `dumpkv_force_ratio` garbage (or the space throttle's ratio), the most garbage first. A
/// table without garbage is never chosen. A table another policy wrote counts as a default
/// table written at its largest sequence number.
#[derive(Debug)]
pub struct LifetimePicker {
    pub dk: Arc<DumpKv>,
}

impl LifetimePicker {
    fn lifetime(&self, c: &VictimCandidate<'_>) -> TableLifetime {
        c.policy_meta
            .filter(|m| m.tag == TAG)
            .and_then(|m| TableLifetime::decode(&m.data))
            .unwrap_or(TableLifetime {
                class: CLASS_DEFAULT,
                ttl: self.dk.points().default,
                born: c.largest_seq,
            })
    }
}

impl VictimPicker for LifetimePicker {
    fn pick(&self, candidates: &[VictimCandidate], ctx: &PickContext) -> Vec<u64> {
        let force = ctx
            .garbage_ratio
            .map_or(self.dk.settings.force_ratio, |t| t.min(self.dk.settings.force_ratio));
        // (due, overdue writes or garbage ratio, number): due ones first.
        let mut eligible: Vec<(bool, f64, &VictimCandidate)> = candidates
            .iter()
            .filter(|c| c.garbage_bytes > 0)
            .filter_map(|c| {
                let deadline = self.lifetime(c).deadline();
                if ctx.latest_seq >= deadline {
                    Some((true, (ctx.latest_seq - deadline) as f64, c))
                } else if c.garbage_ratio() >= force {
                    Some((false, c.garbage_ratio(), c))
                } else {
                    None
                }
            })
            .collect();
        eligible.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(b.1.total_cmp(&a.1))
                .then(a.2.number.cmp(&b.2.number))
        });
        let mut total = 0u64;
        let mut out = Vec::new();
        for (due, _, c) in eligible {
            if !out.is_empty() && total.saturating_add(c.file_size) > ctx.max_input {
                break;
            }
            total = total.saturating_add(c.file_size);
            out.push(c.number);
            self.dk.picked(c.number, self.lifetime(c).class);
            let counter = if due {
                &self.dk.figures.picks_ttl
            } else {
                &self.dk.figures.picks_forced
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        out
    }
}
