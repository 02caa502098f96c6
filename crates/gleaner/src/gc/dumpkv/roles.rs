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
use crate::compaction::router::{
    Placement, RouteContext, RouteOrigin, TableOrigin, ValueRouter, by_size,
};
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
            RouteOrigin::Flush
            | RouteOrigin::Recovery
            | RouteOrigin::Write
            | RouteOrigin::Compaction => {
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

    fn table_meta(&self, table: &ValueTableMeta, at: &TableOrigin) -> Option<Vec<u8>> {
        let now = at.now;
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
        // (due, overdue writes or garbage ratio, candidate, class): due ones first.
        let mut eligible: Vec<(bool, f64, &VictimCandidate, u32)> = candidates
            .iter()
            .filter(|c| c.garbage_bytes > 0)
            .filter_map(|c| {
                let life = self.lifetime(c);
                let deadline = life.deadline();
                if ctx.latest_seq >= deadline {
                    Some((true, (ctx.latest_seq - deadline) as f64, c, life.class))
                } else if c.garbage_ratio() >= force {
                    Some((false, c.garbage_ratio(), c, life.class))
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
        for (due, _, c, class) in eligible {
            if !out.is_empty() && total.saturating_add(c.file_size) > ctx.max_input {
                break;
            }
            total = total.saturating_add(c.file_size);
            out.push(c.number);
            self.dk.picked(c.number, class);
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::gc::dumpkv::state::Settings;
    use crate::gc::picker::tests::cand;
    use crate::gc::policy_file::PolicyFiles;
    use crate::version::PolicyTableMeta;

    fn picker(force_ratio: f64) -> LifetimePicker {
        let files = PolicyFiles::new(TAG, Path::new("/db"), None, Default::default(), false);
        let settings = Settings {
            unit: 1000,
            use_model: true,
            train_samples: 64,
            force_ratio,
            learns: true,
        };
        LifetimePicker {
            dk: Arc::new(DumpKv::new(settings, files, None)),
        }
    }

    fn meta(class: u32, ttl: SeqNo, born: SeqNo) -> PolicyTableMeta {
        PolicyTableMeta {
            tag: TAG.to_string(),
            data: TableLifetime { class, ttl, born }.encode(),
        }
    }

    fn ctx(latest_seq: SeqNo, max_input: u64) -> PickContext {
        PickContext {
            max_input,
            garbage_ratio: None,
            latest_seq,
        }
    }

    #[test]
    fn table_lifetimes_round_trip_and_refuse_what_is_not_one() {
        let l = TableLifetime {
            class: CLASS_LONG,
            ttl: 70_000,
            born: 1 << 40,
        };
        assert_eq!(TableLifetime::decode(&l.encode()), Some(l));
        assert_eq!(l.deadline(), (1 << 40) + 70_000);
        let mut trailing = l.encode();
        trailing.push(0);
        for bad in [&[][..], &[2, 0, 1, 1], &[1, 3, 1, 1], &[1, 0, 1], &trailing] {
            assert_eq!(TableLifetime::decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn due_tables_most_overdue_first_then_the_safety_net_and_never_without_garbage() {
        let p = picker(0.8);
        let (m1, m2, m3, m4) = (
            meta(CLASS_SHORT, 100, 1000), // due at 1100
            meta(CLASS_LONG, 500, 1000),  // due at 1500
            meta(CLASS_DEFAULT, 5000, 1000),
            meta(CLASS_SHORT, 10, 0),
        );
        let with = |c: VictimCandidate<'static>, m| VictimCandidate {
            policy_meta: Some(m),
            ..c
        };
        let cands = [
            with(cand(1, 100, 10), &m1),
            with(cand(2, 100, 10), &m2),
            // Not due, but 90 % garbage: the safety net.
            with(cand(3, 100, 90), &m3),
            // Due, but no garbage: collecting it frees nothing.
            with(cand(4, 100, 0), &m4),
        ];
        // At 1600: table 2 is 100 overdue, table 1 is 500: table 1 first; then the net.
        assert_eq!(p.pick(&cands, &ctx(1600, 1000)), vec![1, 2, 3]);
        // The job's input bound, the first always taken.
        assert_eq!(p.pick(&cands, &ctx(1600, 150)), vec![1]);
        // Before any is due: only the net.
        assert_eq!(p.pick(&cands, &ctx(1050, 1000)), vec![3]);
        // A higher net leaves it; the space throttle's lower ratio brings it back.
        let strict = picker(0.95);
        assert!(strict.pick(&cands, &ctx(1050, 1000)).is_empty());
        let pressed = PickContext {
            garbage_ratio: Some(0.05),
            ..ctx(1050, 1000)
        };
        // (tables 1 and 2, 10 % garbage, pass it too, after table 3's 90 %).
        assert_eq!(strict.pick(&cands, &pressed), vec![3, 1, 2]);
        let f = &strict.dk.figures;
        assert_eq!(
            (
                f.picks_ttl.load(Ordering::Relaxed),
                f.picks_forced.load(Ordering::Relaxed)
            ),
            (0, 3)
        );
    }

    #[test]
    fn a_table_of_another_policy_is_a_default_table_born_at_its_largest_sequence() {
        let p = picker(1.0);
        let l_d = p.dk.points().default;
        // cand(5, ..) holds sequence numbers 50 to 59.
        let foreign = PolicyTableMeta {
            tag: "novkv".to_string(),
            data: vec![1, 2, 3],
        };
        let cands = [
            cand(5, 100, 10),
            VictimCandidate {
                policy_meta: Some(&foreign),
                ..cand(6, 100, 10)
            },
        ];
        assert!(p.pick(&cands, &ctx(59 + l_d - 1, 1000)).is_empty());
        assert_eq!(p.pick(&cands, &ctx(59 + l_d, 1000)), vec![5]);
        assert_eq!(p.pick(&cands, &ctx(69 + l_d, 1000)), vec![5, 6]);
    }
}
