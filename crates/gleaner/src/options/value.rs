//! Text forms of option values, shared by `Options::set`, the OPTIONS file and the CLI.

use std::fmt;

/// A type usable as an option value: parsed from and formatted to text.
pub trait OptionValue: Sized + fmt::Debug {
    /// Parses the text form; the error explains what is expected.
    fn parse_option(text: &str) -> Result<Self, String>;
    /// The text form; `parse_option(format_option(v)) == v`.
    fn format_option(&self) -> String;
}

impl OptionValue for bool {
    fn parse_option(text: &str) -> Result<Self, String> {
        match text.trim() {
            "true" | "1" | "on" | "yes" => Ok(true),
            "false" | "0" | "off" | "no" => Ok(false),
            _ => Err("expected true or false".into()),
        }
    }
    fn format_option(&self) -> String {
        self.to_string()
    }
}

/// Parses an unsigned integer with an optional binary suffix (`K`, `M`, `G`, `T`, also
/// `KiB`/`MiB`/...), e.g. `64MiB`.
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '_')
        .unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() {
        return Err("expected a non-negative whole number, optionally with K/M/G/T suffix".into());
    }
    let n: u64 = digits.parse().map_err(|_| "number too large".to_string())?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("unknown size suffix `{other}`")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| "number too large".to_string())
}

impl OptionValue for u64 {
    fn parse_option(text: &str) -> Result<Self, String> {
        parse_size(text)
    }
    fn format_option(&self) -> String {
        self.to_string()
    }
}

impl OptionValue for u32 {
    fn parse_option(text: &str) -> Result<Self, String> {
        u32::try_from(parse_size(text)?).map_err(|_| "number too large".to_string())
    }
    fn format_option(&self) -> String {
        self.to_string()
    }
}

pub use crate::table::Compression;

impl OptionValue for f64 {
    fn parse_option(text: &str) -> Result<Self, String> {
        let v: f64 = text
            .trim()
            .parse()
            .map_err(|_| "expected a number".to_string())?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err("expected a finite number".into())
        }
    }
    fn format_option(&self) -> String {
        // `{:?}` prints the shortest text that parses back to the same f64.
        format!("{self:?}")
    }
}

/// Which garbage-collection policy reclaims value-table space (DESIGN.md, "GC policies").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GcPolicyKind {
    /// TerarkDB: victims by garbage ratio, every record read and checked by an index lookup,
    /// live records rewritten to new tables, handles left alone (inheritance records).
    Terarkdb,
    /// Scavenger (the default): TerarkDB's scheme with Scavenger's techniques switched on (each
    /// can be switched off by its own option, e.g. `gc_lazy_read=off`).
    #[default]
    Scavenger,
    /// Titan (TiKV): victims by discardable ratio (`titan_discardable_ratio`), every record
    /// read and checked against the key's newest version, live records rewritten and their new
    /// handles written back into the index tree through the write path, unless a user write
    /// got there first; victims are deleted once no snapshot can read them.
    Titan,
    /// RocksDB's integrated BlobDB: no GC job; compactions relocate the values of the entries
    /// they keep that live in the oldest `blobdb_age_cutoff` of the value tables, and a value
    /// table goes once nothing references it; with `blobdb_force_threshold` below 1, key tables
    /// referencing the oldest value table are compacted when the old tables hold that much
    /// garbage.
    Blobdb,
    /// NovKV: flushes and compactions record the identity of every record whose handle they
    /// drop (drop keys); GC collects tables whose valid rate is below `novkv_valid_threshold`
    /// and tells garbage by the drop keys alone, without index lookups; handles naming a
    /// collected table resolve by key in its outputs (inheritance).
    Novkv,
    /// DumpKV: a learned lifetime model. Flushes write values into default-class tables
    /// due after the lifetime `l_d`; compactions out of L0 fold each key's write history into
    /// its handle; GC collects tables whose lifetime (TTL, in writes) has passed, re-predicts
    /// each live record with a gradient-boosted tree model and writes it into a short- or
    /// long-lifetime table; handles stay (inheritance). Options `dumpkv_*`.
    Dumpkv,
    /// DiffKV: values managed by size. Small values stay inline in the index tree
    /// (`diffkv_small_max` replaces `min_separated_value_size`); medium ones go to the vTree,
    /// whose tables compactions into the deepest levels (`diffkv_merge_levels`) merge into
    /// sorted groups of the output level (bounded to `diffkv_max_sorted_runs` over a key); large ones
    /// (`diffkv_large_min`) to vLogs, new and GC-moved apart, collected greedily at
    /// `diffkv_gc_ratio`; vTables no compaction reaches are collected by GC at
    /// `diffkv_vtree_gc_ratio`. Handles stay (inheritance).
    Diffkv,
    /// A policy defined outside the engine: the one
    /// [`Options::with_custom_policy`](crate::Options::with_custom_policy) registers. Saved
    /// in OPTIONS as `custom:NAME` with the factory's name; not in [`GcPolicyKind::ALL`].
    Custom,
}

impl GcPolicyKind {
    /// Every policy, for error messages.
    pub const ALL: [GcPolicyKind; 7] = [
        GcPolicyKind::Terarkdb,
        GcPolicyKind::Scavenger,
        GcPolicyKind::Titan,
        GcPolicyKind::Blobdb,
        GcPolicyKind::Novkv,
        GcPolicyKind::Dumpkv,
        GcPolicyKind::Diffkv,
    ];

    /// The policy whose roles a read-only open uses for a database saved under a custom policy
    /// whose factory it was not given: such an open runs no GC and writes nothing, so the
    /// plainest roles serve (one value class, no hooks, no handle updates on read).
    pub const READ_ONLY_FALLBACK: GcPolicyKind = GcPolicyKind::Terarkdb;

    /// The policy's name in options.
    pub fn name(self) -> &'static str {
        match self {
            GcPolicyKind::Terarkdb => "terarkdb",
            GcPolicyKind::Scavenger => "scavenger",
            GcPolicyKind::Titan => "titan",
            GcPolicyKind::Blobdb => "blobdb",
            GcPolicyKind::Novkv => "novkv",
            GcPolicyKind::Dumpkv => "dumpkv",
            GcPolicyKind::Diffkv => "diffkv",
            GcPolicyKind::Custom => "custom",
        }
    }

    /// Whether the policy turns Scavenger's techniques on when their switches say `auto`.
    pub fn scavenger_techniques(self) -> bool {
        matches!(self, GcPolicyKind::Scavenger)
    }
}

/// A feature switch whose default follows the GC policy: `auto` takes the policy's choice,
/// `on` and `off` override it (the ablation study's TDB-R, TDB-L, ... are `terarkdb` with some
/// switches `on`, or `scavenger` with some `off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Switch {
    /// Follow the GC policy.
    #[default]
    Auto,
    /// On whatever the policy.
    On,
    /// Off whatever the policy.
    Off,
}

impl Switch {
    /// The effective setting when the policy's choice is `policy_default`.
    pub fn resolve(self, policy_default: bool) -> bool {
        match self {
            Switch::Auto => policy_default,
            Switch::On => true,
            Switch::Off => false,
        }
    }
}

impl OptionValue for Switch {
    fn parse_option(text: &str) -> Result<Self, String> {
        match text.trim() {
            "auto" => Ok(Switch::Auto),
            t => bool::parse_option(t)
                .map(|on| if on { Switch::On } else { Switch::Off })
                .map_err(|_| "expected auto, on or off".to_string()),
        }
    }
    fn format_option(&self) -> String {
        match self {
            Switch::Auto => "auto",
            Switch::On => "on",
            Switch::Off => "off",
        }
        .to_string()
    }
}

impl OptionValue for GcPolicyKind {
    fn parse_option(text: &str) -> Result<Self, String> {
        let t = text.trim();
        if t == "custom" || t.starts_with("custom:") {
            return Ok(GcPolicyKind::Custom);
        }
        GcPolicyKind::ALL
            .into_iter()
            .find(|p| p.name() == t)
            .ok_or_else(|| {
                let names: Vec<&str> = GcPolicyKind::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "unknown GC policy; known policies: {}, or custom (a policy registered \
                     with Options::with_custom_policy)",
                    names.join(", ")
                )
            })
    }
    fn format_option(&self) -> String {
        self.name().to_string()
    }
}

impl OptionValue for Compression {
    fn parse_option(text: &str) -> Result<Self, String> {
        Compression::from_name(text.trim()).ok_or_else(|| "expected `lz4` or `none`".into())
    }
    fn format_option(&self) -> String {
        self.name().to_string()
    }
}

/// How the index tree is compacted (docs/architecture.md, "Compaction strategies"); chosen
/// per database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompactionStyle {
    /// Leveled compaction (the default): one sorted run per level from L1 down, each level a
    /// multiple of the one above; low read and space amplification, more rewriting.
    #[default]
    Leveled,
    /// Size-tiered compaction (RocksDB's universal compaction): flushes become sorted runs,
    /// and runs of similar size are merged into one; less rewriting, more runs to read, more
    /// space (bounded by `tiered_max_space_amplification`).
    Tiered,
}

impl CompactionStyle {
    /// Every style.
    pub const ALL: [CompactionStyle; 2] = [CompactionStyle::Leveled, CompactionStyle::Tiered];

    /// The style's name in options.
    pub fn name(self) -> &'static str {
        match self {
            CompactionStyle::Leveled => "leveled",
            CompactionStyle::Tiered => "tiered",
        }
    }
}

impl OptionValue for CompactionStyle {
    fn parse_option(text: &str) -> Result<Self, String> {
        let t = text.trim();
        CompactionStyle::ALL
            .into_iter()
            .find(|s| s.name() == t)
            .ok_or_else(|| "expected `leveled` or `tiered`".to_string())
    }
    fn format_option(&self) -> String {
        self.name().to_string()
    }
}

/// When a separated value is first written to a value table (option `separate_at`;
/// docs/architecture.md, "Values written once").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeparateAt {
    /// At the flush of its memtable (the default): the value is written to the write-ahead log
    /// with its key, kept in the memtable, and copied into a value table when the memtable is
    /// flushed: written twice.
    #[default]
    Flush,
    /// As it is written: the value is appended to a value segment of its memtable and the
    /// write-ahead log and the memtable hold its handle; the flush seals the segment into a
    /// value table and writes key tables only: written once.
    Write,
}

impl SeparateAt {
    /// Every setting.
    pub const ALL: [SeparateAt; 2] = [SeparateAt::Flush, SeparateAt::Write];

    /// The setting's name in options.
    pub fn name(self) -> &'static str {
        match self {
            SeparateAt::Flush => "flush",
            SeparateAt::Write => "write",
        }
    }
}

impl OptionValue for SeparateAt {
    fn parse_option(text: &str) -> Result<Self, String> {
        let t = text.trim();
        SeparateAt::ALL
            .into_iter()
            .find(|s| s.name() == t)
            .ok_or_else(|| "expected `flush` or `write`".to_string())
    }
    fn format_option(&self) -> String {
        self.name().to_string()
    }
}

/// Whether the index tree is split into a hot and a cold partition (option `partitioning`;
/// docs/architecture.md, "Partitions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Partitioning {
    /// One tree (the default), compacted as option `compaction_style` says.
    #[default]
    None,
    /// DP-KV's: key ranges found hot live in a leveled partition, the rest in a size-tiered
    /// one.
    Dpkv,
}

impl Partitioning {
    /// Every value.
    pub const ALL: [Partitioning; 2] = [Partitioning::None, Partitioning::Dpkv];

    /// The value's name in options.
    pub fn name(self) -> &'static str {
        match self {
            Partitioning::None => "none",
            Partitioning::Dpkv => "dpkv",
        }
    }

    /// Whether the tree has partitions.
    pub fn is_partitioned(self) -> bool {
        self != Partitioning::None
    }
}

impl OptionValue for Partitioning {
    fn parse_option(text: &str) -> Result<Self, String> {
        let t = text.trim();
        Partitioning::ALL
            .into_iter()
            .find(|s| s.name() == t)
            .ok_or_else(|| "expected `none` or `dpkv`".to_string())
    }
    fn format_option(&self) -> String {
        self.name().to_string()
    }
}

/// What WAL recovery does with a damaged record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalRecoveryMode {
    /// Damage at the very end of the last written data (a torn write) is cut off; damage that
    /// is followed by intact records fails the open with `Error::Corruption`.
    #[default]
    TolerateCorruptedTail,
    /// Damaged records are skipped wherever they are; recovery continues with the next intact
    /// record. Acknowledged writes in damaged records are lost.
    SkipAnyCorruptedRecords,
}

impl OptionValue for WalRecoveryMode {
    fn parse_option(text: &str) -> Result<Self, String> {
        match text.trim() {
            "tolerate_corrupted_tail" => Ok(WalRecoveryMode::TolerateCorruptedTail),
            "skip_any_corrupted_records" => Ok(WalRecoveryMode::SkipAnyCorruptedRecords),
            _ => Err("expected `tolerate_corrupted_tail` or `skip_any_corrupted_records`".into()),
        }
    }
    fn format_option(&self) -> String {
        match self {
            WalRecoveryMode::TolerateCorruptedTail => "tolerate_corrupted_tail",
            WalRecoveryMode::SkipAnyCorruptedRecords => "skip_any_corrupted_records",
        }
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(u64::parse_option("4096"), Ok(4096));
        assert_eq!(u64::parse_option("64MiB"), Ok(64 << 20));
        assert_eq!(u64::parse_option("2k"), Ok(2048));
        assert_eq!(u64::parse_option("1_000"), Ok(1000));
        assert!(u64::parse_option("-1").is_err());
        assert!(u64::parse_option("12XB").is_err());
        assert!(u64::parse_option("99999999999T").is_err());
        assert!(u32::parse_option("8G").is_err());
    }

    #[test]
    fn every_value_round_trips_through_text() {
        for v in [true, false] {
            assert_eq!(bool::parse_option(&v.format_option()), Ok(v));
        }
        for f in [0.0, 0.2, 1.0, 0.123_456_789] {
            assert_eq!(f64::parse_option(&f.format_option()), Ok(f));
        }
        assert!(f64::parse_option("NaN").is_err() && f64::parse_option("x").is_err());
        assert_eq!(
            GcPolicyKind::parse_option("terarkdb"),
            Ok(GcPolicyKind::Terarkdb)
        );
        assert!(
            GcPolicyKind::parse_option("titanic")
                .expect_err("unknown")
                .contains("terarkdb")
        );
        for c in [Compression::None, Compression::Lz4] {
            assert_eq!(Compression::parse_option(&c.format_option()), Ok(c));
        }
        for s in SeparateAt::ALL {
            assert_eq!(SeparateAt::parse_option(&s.format_option()), Ok(s));
        }
        assert!(SeparateAt::parse_option("wal").is_err());
        for s in CompactionStyle::ALL {
            assert_eq!(CompactionStyle::parse_option(&s.format_option()), Ok(s));
        }
        assert!(
            CompactionStyle::parse_option("universal")
                .expect_err("unknown")
                .contains("leveled")
        );
        for m in [
            WalRecoveryMode::TolerateCorruptedTail,
            WalRecoveryMode::SkipAnyCorruptedRecords,
        ] {
            assert_eq!(WalRecoveryMode::parse_option(&m.format_option()), Ok(m));
        }
    }
}
