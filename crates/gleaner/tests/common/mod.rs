//! Shared by the integration tests: the GC technique combinations every GC-related test runs
//! under, and the compaction styles (and DP-KV's partitioned tree) the model, crash, fault and
//! stress suites rotate through.

pub mod custom;
pub mod dump;
pub mod reads;

use std::sync::Arc;

use gleaner::{CompactionStyle, GcPolicyKind, Options, Partitioning, SeparateAt, Switch};

/// Sets one technique's switch.
type SetSwitch = fn(Options, Switch) -> Options;

/// Turns base options into one GC variant's options.
pub type Tune = Box<dyn Fn(Options) -> Options>;

/// Scavenger's techniques with the option switch of each, by the letter the paper's ablation
/// names use (`tdb-r`, ...).
const TECHNIQUES: &[(char, SetSwitch)] = &[
    ('r', |o, s| o.with_gc_lazy_read(s)),
    ('l', |o, s| o.with_index_decoupled_tables(s)),
    ('w', |o, s| o.with_hotness_aware_writes(s)),
];

/// Every GC policy and ablation variant, as `(name, options transformer)`: every combination of
/// the techniques, `tdb` (the `terarkdb` policy with every switch off), `tdb-r`, ...,
/// `scavenger` (the policy with its defaults), `titan`, `blobdb`, `novkv`, and `custom`, the
/// scheme of `common/custom.rs` defined through the public policy API.
pub fn gc_variants() -> Vec<(String, Tune)> {
    let mut out: Vec<(String, Tune)> = Vec::new();
    for mask in 0..(1u32 << TECHNIQUES.len()) {
        let on: Vec<usize> = (0..TECHNIQUES.len())
            .filter(|i| mask & (1 << i) != 0)
            .collect();
        let name = if on.is_empty() {
            "tdb".to_string()
        } else {
            format!(
                "tdb-{}",
                on.iter().map(|&i| TECHNIQUES[i].0).collect::<String>()
            )
        };
        out.push((
            name,
            Box::new(move |o: Options| {
                let mut o = o.with_gc_policy(GcPolicyKind::Terarkdb);
                for (i, (_, set)) in TECHNIQUES.iter().enumerate() {
                    let s = if mask & (1 << i) != 0 {
                        Switch::On
                    } else {
                        Switch::Off
                    };
                    o = set(o, s);
                }
                o
            }),
        ));
    }
    out.push((
        "scavenger".to_string(),
        Box::new(|o: Options| o.with_gc_policy(GcPolicyKind::Scavenger)),
    ));
    // Titan collects at its own threshold; the tests' option sets tune `gc_garbage_ratio` to
    // make GC frequent, so Titan gets the same.
    out.push((
        "titan".to_string(),
        Box::new(|o: Options| {
            let ratio = o.gc_garbage_ratio().max(0.01);
            o.with_gc_policy(GcPolicyKind::Titan)
                .with_titan_discardable_ratio(ratio)
        }),
    ));
    // BlobDB relocates in compaction; its forced compactions are on, so they are tested too.
    out.push((
        "blobdb".to_string(),
        Box::new(|o: Options| {
            o.with_gc_policy(GcPolicyKind::Blobdb)
                .with_blobdb_force_threshold(0.5)
        }),
    ));
    // NovKV collects below its valid rate; the tests' option sets tune `gc_garbage_ratio` to
    // make GC frequent, so NovKV gets the same (a valid rate below 1 − that ratio).
    out.push((
        "novkv".to_string(),
        Box::new(|o: Options| {
            let valid = (1.0 - o.gc_garbage_ratio()).min(0.99);
            o.with_gc_policy(GcPolicyKind::Novkv)
                .with_novkv_valid_threshold(valid)
        }),
    ));
    // DumpKV collects tables whose lifetime has passed; the suites' databases take thousands of
    // writes, not millions, so lifetimes are counted in units of 64 writes and the model trains
    // every 64 samples; a table is collected early at the suites' garbage ratio, as the others.
    out.push((
        "dumpkv".to_string(),
        Box::new(|o: Options| {
            let force = o.gc_garbage_ratio();
            o.with_gc_policy(GcPolicyKind::Dumpkv)
                .with_dumpkv_time_unit(64)
                .with_dumpkv_train_samples(64)
                .with_dumpkv_force_ratio(force)
        }),
    ));
    // DiffKV: the suites' separation threshold is its small-value limit, values of four times
    // that go to vLogs (the suites' longer values: every suite writes all three classes), its GC ratios are the suites' garbage
    // ratio, and two sorted runs per key are allowed so the scan-optimised merge runs.
    out.push((
        "diffkv".to_string(),
        Box::new(|o: Options| {
            let small = o.min_separated_value_size();
            let large = small.saturating_mul(4).min(o.max_value_size());
            let ratio = o.gc_garbage_ratio().max(0.01);
            o.with_gc_policy(GcPolicyKind::Diffkv)
                .with_diffkv_small_max(small)
                .with_diffkv_large_min(large)
                .with_diffkv_gc_ratio(ratio)
                .with_diffkv_vtree_gc_ratio(ratio)
                .with_diffkv_max_sorted_runs(2)
        }),
    ));
    out.push(("custom".to_string(), Box::new(|o: Options| o)));
    // Every variant registers the custom scheme, and all but `custom` then choose their own
    // policy: a database the scheme wrote holds its table metadata, which an open that does not
    // know the scheme refuses (the crash simulation reopens under other variants).
    out.into_iter()
        .map(|(name, tune)| {
            let known: Tune = Box::new(move |o: Options| {
                tune(o.with_custom_policy(Arc::new(custom::inheritance())))
            });
            (name, known)
        })
        .collect()
}

/// True for the policies that run GC jobs (BlobDB's GC happens inside compactions).
#[allow(dead_code, reason = "only the tests about GC jobs use it")]
pub fn runs_gc_jobs(variant: &str) -> bool {
    variant != "blobdb"
}

/// Every compaction style, as `(name, options transformer)`, and `dpkv`, the partitioned tree
/// (a tiered cold and a leveled hot partition), each with values separated at flush and, as
/// `<style>+write`, with values written once (`separate_at=write`). The partitioned tree's
/// detector ticks on a clock of accesses (every 400: a suite's workload ticks many times, and
/// replays), and judges a prefix hot from the average density on: the suites' near-uniform
/// keys then move to the hot partition at the first tick with enough accesses, and back and
/// forth as the counts of their prefixes drift. (The model suite also moves random prefixes
/// itself, both ways.) A suite that reopens under the next entry of the list switches
/// `separate_at` both ways (`dpkv+stale` to `leveled+write+warm+stale`, `dpkv+write+warm` to `leveled`).
///
/// Every other entry (`+warm`) puts values into the value cache as they are separated (option
/// `prepopulate_value_cache`): each shape runs with and without it, once with each
/// `separate_at`, and a reopen under the next entry turns it on or off.
///
/// Two entries (`+stale`, one with each `separate_at`) keep stale handles until a compaction
/// the tree's shape asks for passes them (option `stale_handle_share` 0); the others rewrite
/// key tables for them by default, and a reopen under the next entry turns that off or on.
///
/// Four entries (`+rows`, two with each `separate_at`) answer reads of the present from a
/// small row cache ([`ROW_CACHE_BYTES`], option `row_cache_size`: it evicts), and of those one
/// with each `separate_at` (`+warmrows`) puts every written value in as the write becomes
/// visible (option `prepopulate_row_cache`); a reopen under the next entry turns them on or off.
pub fn compaction_styles() -> Vec<(String, Tune)> {
    let mut out: Vec<(String, Tune)> = Vec::new();
    for write in [false, true] {
        for (i, (name, tune)) in tree_shapes().into_iter().enumerate() {
            let w = usize::from(write);
            let warm = (i + w) % 2 == 1;
            let stale = (i + 2 * w) % 3 == 2;
            let rows = (i + w) % 3 != 0;
            let warm_rows = rows && i % 2 == 0;
            let mut name = name;
            for (on, suffix) in [
                (write, "+write"),
                (warm, "+warm"),
                (stale, "+stale"),
                (rows && !warm_rows, "+rows"),
                (warm_rows, "+warmrows"),
            ] {
                if on {
                    name.push_str(suffix);
                }
            }
            let at = if write {
                SeparateAt::Write
            } else {
                SeparateAt::Flush
            };
            let share = if stale {
                0.0
            } else {
                gleaner::options::DEFAULT_STALE_HANDLE_SHARE
            };
            let tune: Tune = Box::new(move |o: Options| {
                tune(o)
                    .with_separate_at(at)
                    .with_prepopulate_value_cache(warm)
                    .with_stale_handle_share(share)
                    .with_row_cache_size(if rows { ROW_CACHE_BYTES } else { 0 })
                    .with_prepopulate_row_cache(warm_rows)
            });
            out.push((name, tune));
        }
    }
    out
}

/// The row cache of the `+rows` and `+warmrows` shapes: 256 KiB, so that the suites' values
/// overflow it and it evicts.
pub const ROW_CACHE_BYTES: u64 = 256 << 10;

/// The shapes of the index tree: every compaction style, and DP-KV's partitions.
fn tree_shapes() -> Vec<(String, Tune)> {
    let mut out: Vec<(String, Tune)> = CompactionStyle::ALL
        .into_iter()
        .map(|style| {
            let tune: Tune = Box::new(move |o: Options| o.with_compaction_style(style));
            (style.name().to_string(), tune)
        })
        .collect();
    out.push((
        "dpkv".to_string(),
        Box::new(|o: Options| {
            o.with_partitioning(Partitioning::Dpkv)
                .with_dpkv_tick_accesses(400)
                .with_dpkv_hot_density(1.0)
        }),
    ));
    out
}

/// The compaction styles combination `index` of a suite runs under. By default one: the styles
/// are dealt out in turn from an offset the seed picks, so neighbouring combinations run
/// different styles, every style runs in a suite of two combinations or more, and which
/// combination runs which style rotates with the seed (a failure replays from its seed).
/// `GLEANER_STYLES=all` runs every combination under every style (the full cross product);
/// `GLEANER_STYLES=<name>` only under that one (its `+warm`, `+stale`, `+rows` and `+warmrows`
/// may be left off: `tiered` names `tiered+warm+rows`).
#[allow(dead_code, reason = "the suites that rotate styles use it")]
pub fn styles_for(seed: u64, index: usize) -> Vec<(String, Tune)> {
    let mut styles = compaction_styles();
    match std::env::var("GLEANER_STYLES").ok().as_deref() {
        Some("all") => styles,
        Some(name) => {
            styles.retain(|(n, _)| {
                let mut bare = n.as_str();
                for suffix in ["+warmrows", "+rows", "+stale", "+warm"] {
                    if bare == name {
                        break;
                    }
                    bare = bare.strip_suffix(suffix).unwrap_or(bare);
                }
                n == name || bare == name
            });
            assert!(!styles.is_empty(), "no compaction style named {name}");
            styles
        }
        None => {
            let pick = (seed as usize).wrapping_add(index) % styles.len();
            vec![styles.swap_remove(pick)]
        }
    }
}
