//! The engines under test, behind one trait, and their command-line specs
//! (`name[:option,name=value,...]`).

#[cfg(feature = "peers")]
mod fjall_engine;
mod gleaner;
mod null;
#[cfg(feature = "peers")]
mod rocks;

use std::fmt;
use std::path::Path;

pub use self::gleaner::GleanerEngine;
pub use null::NullEngine;

/// Errors from an engine.
pub type EngineError = Box<dyn std::error::Error + Send + Sync>;
/// Result of an engine call.
pub type EngineResult<T> = Result<T, EngineError>;

/// Knobs the harness sets identically for every engine (fairness).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommonConfig {
    /// Block-cache bytes.
    pub cache_bytes: u64,
    /// Use direct I/O where the engine supports it.
    pub direct_io: bool,
    /// Memtable / write-buffer bytes.
    pub memtable_bytes: u64,
    /// Target size of a key table / SST / segment.
    pub table_bytes: u64,
    /// Target size of a value table / blob file (engines with key-value separation); an
    /// engine spec's own option (`value_table_size`, `blob_file_size`) wins.
    pub value_file_bytes: u64,
    /// Target size of level 1 (Gleaner `level_base_size`, RocksDB `max_bytes_for_level_base`;
    /// fjall has no such option: its level 1 targets four tables). `None`: each engine's
    /// default. Set by `--shape paper` ([`crate::shape`]).
    pub level_base_bytes: Option<u64>,
    /// Gleaner's `gc_max_input_size` (most bytes of victims one GC job reads); `None`: its
    /// default. Set by `--shape paper`.
    pub gc_max_input_bytes: Option<u64>,
    /// Background threads the engine may use for flushes and compactions.
    pub background_threads: usize,
    /// Block compression of the engines' index trees (`--compression`); see [`Compression`]
    /// for what each engine compresses. Gleaner's own `compression` option in an engine spec
    /// wins.
    pub compression: Compression,
}

/// The block compression the harness asks of every engine (`--compression`): the values every
/// engine of this build has (RocksDB links LZ4 only, Gleaner and fjall 2.11 have no zstd).
/// Each engine maps it onto its own setting:
///
/// - Gleaner: `compression`, its key-table blocks and value tables' index blocks (records, the
///   values, are never compressed).
/// - RocksDB: `compression` (SST blocks, every level). `rocksdb-blob`'s blob files stay
///   uncompressed whatever the setting, as they always were.
/// - fjall: the partition's `compression`, its segments' blocks. fjall ties blob compression to
///   it, so `fjall-blob`'s blob files follow the setting (LZ4 under the default, unlike the
///   other engines' values).
/// - null: stores nothing.
///
/// `lz4`, the default, is what every engine used before the flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Compression {
    /// No block compression.
    None,
    /// LZ4 (the default: what every engine used before the flag).
    #[default]
    Lz4,
}

impl Compression {
    /// The name used on the command line and in results (`none`, `lz4`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a point read found: enough to check it is the value last written without the harness
/// keeping the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Value length in bytes.
    pub len: usize,
    /// CRC32C of the value.
    pub digest: u32,
}

impl Found {
    /// The length and digest of `value`.
    pub fn of(value: &[u8]) -> Found {
        Found {
            len: value.len(),
            digest: crc32c::crc32c(value),
        }
    }
}

/// Garbage-collection counters of an engine (cumulative since open).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GcCounters {
    /// Jobs committed.
    pub jobs: u64,
    /// Bytes read from value tables.
    pub value_bytes_read: u64,
    /// Bytes of value tables' indexes read (a lazy read's first pass).
    pub index_bytes_read: u64,
    /// Bytes read from the index tree for validity checks.
    pub lookup_bytes_read: u64,
    /// Validity checks answered without an index-tree lookup (Gleaner's DropCache).
    pub drop_cache_answers: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Of those, bytes per value class, by the policy's names for the classes (`hot` and
    /// `cold` with hotness-aware writing).
    pub bytes_written_by_class: std::collections::BTreeMap<String, u64>,
    /// Bytes of old records compactions relocated (Gleaner's `blobdb` policy).
    pub relocated_bytes: u64,
    /// Handles written back into the index tree (Gleaner's `titan` policy).
    pub written_back: u64,
    /// Microseconds reading.
    pub read_micros: u64,
    /// Microseconds checking validity.
    pub lookup_micros: u64,
    /// Microseconds writing.
    pub write_micros: u64,
    /// Microseconds background GC waited, yielding to reads (Gleaner's `gc_read_yield_rate`).
    pub paced_micros: u64,
    /// Microseconds GC jobs ran, wall clock (Gleaner's `job_micros`; 0 where unknown).
    pub job_micros: u64,
    /// Of those, microseconds jobs waited for running compactions (Gleaner).
    pub compaction_wait_micros: u64,
    /// The figures only the engine's GC policy has, by its names (Gleaner's
    /// `stats().gc.policy_stats`: DumpKV's trainings and lifetime points, say).
    pub policy: std::collections::BTreeMap<String, u64>,
}

/// A key-value engine the harness can drive. Every method may be called from several threads
/// at once.
pub trait Engine: Send + Sync {
    /// The engine kind (`gleaner`, `rocksdb`, ...).
    fn kind(&self) -> &'static str;

    /// Writes `key` → `value` (not synced: the harness measures throughput, not fsync latency).
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()>;

    /// Reads `key`; returns the value's length and digest if present.
    fn get(&self, key: &[u8]) -> EngineResult<Option<Found>>;

    /// Reads up to `count` entries starting at `start`; returns how many and their bytes.
    fn scan(&self, start: &[u8], count: usize) -> EngineResult<(usize, u64)>;

    /// Removes every key in `[start, end)` (bytewise; `end` excluded; the harness always passes
    /// `start` before `end`), not synced, with the engine's own range delete: one operation
    /// whatever the number of keys, which is what the `delete-range` phase measures. An engine
    /// without one returns an error here and `false` from [`Engine::supports_delete_range`]; it
    /// must not emulate the range with a delete per key, which would measure something else.
    fn delete_range(&self, start: &[u8], end: &[u8]) -> EngineResult<()>;

    /// False for engines without a range delete (fjall 2): the harness then skips their
    /// `delete-range` phases, saying so, instead of running them.
    fn supports_delete_range(&self) -> bool {
        true
    }

    /// Writes `key` → `value` expiring `ttl_ms` milliseconds from now, not synced, with the
    /// engine's own per-write TTL (a run's `--ttl-ms`). An engine without one returns an error
    /// here and `false` from [`Engine::supports_ttl`].
    fn put_with_ttl(&self, key: &[u8], value: &[u8], ttl_ms: u64) -> EngineResult<()> {
        let _ = (key, value, ttl_ms);
        Err(format!("{} has no per-write TTL", self.kind()).into())
    }

    /// False for engines without a per-write TTL (RocksDB's TTL is one per database; fjall has
    /// none): the harness skips them in a run with `--ttl-ms`, saying so.
    fn supports_ttl(&self) -> bool {
        false
    }

    /// Writes what the engine buffers in memory to its files (the end of every write phase),
    /// so space and write figures cover the phase's data.
    fn flush(&self) -> EngineResult<()>;

    /// The strongest space-reclaiming action the engine has (asked for when it stays over the
    /// space budget): Gleaner runs GC, RocksDB compacts everything forcing blob GC, fjall runs a
    /// major compaction and blob GC.
    fn reclaim(&self) -> EngineResult<()>;

    /// False for engines that store nothing (`null`): the harness then does not check that
    /// reads return what was written.
    fn keeps_data(&self) -> bool {
        true
    }

    /// Cumulative garbage-collection counters, when the engine reports them.
    fn gc_counters(&self) -> Option<GcCounters> {
        None
    }

    /// Cumulative seconds the engine throttled writers itself, when it reports them.
    fn stall_seconds(&self) -> Option<f64> {
        None
    }

    /// The engine's own I/O counters (free-form JSON), when it has them.
    fn io_counters(&self) -> Option<serde_json::Value> {
        None
    }

    /// Files and bytes per level of the engine's index tree, and its value files, when the
    /// engine reports them (asked at the end of every phase).
    fn tree_shape(&self) -> Option<crate::results::TreeShape> {
        None
    }

    /// Closes the engine (waiting for background work).
    fn close(&self) -> EngineResult<()>;
}

/// A parsed `--engine` spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSpec {
    /// Engine kind.
    pub kind: EngineKind,
    /// Gleaner: the GC policy named first (`gleaner:terarkdb`).
    pub policy: Option<String>,
    /// `name=value` options, in order.
    pub options: Vec<(String, String)>,
    /// The spec as written.
    pub text: String,
}

/// The engines the harness knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// Gleaner.
    Gleaner,
    /// RocksDB without key-value separation.
    Rocksdb,
    /// RocksDB with integrated BlobDB.
    RocksdbBlob,
    /// fjall.
    Fjall,
    /// fjall with key-value separation.
    FjallBlob,
    /// Does nothing: measures the harness itself.
    Null,
}

impl EngineKind {
    const ALL: [(&'static str, EngineKind); 6] = [
        ("gleaner", EngineKind::Gleaner),
        ("rocksdb", EngineKind::Rocksdb),
        ("rocksdb-blob", EngineKind::RocksdbBlob),
        ("fjall", EngineKind::Fjall),
        ("fjall-blob", EngineKind::FjallBlob),
        ("null", EngineKind::Null),
    ];

    /// The name used in specs and results.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    /// True for engines that come from other projects (built with the `peers` feature).
    pub fn is_peer(self) -> bool {
        !matches!(self, EngineKind::Gleaner | EngineKind::Null)
    }
}

impl fmt::Display for EngineSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for EngineSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        // `name`, `name:POLICY,opt=v`, `name:opt=v` or `name,opt=v`.
        let (name, rest) = match text.find([':', ',']) {
            Some(i) => (&text[..i], Some(&text[i + 1..])),
            None => (text, None),
        };
        let kind = EngineKind::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                let names: Vec<&str> = EngineKind::ALL.iter().map(|(n, _)| *n).collect();
                format!(
                    "unknown engine `{name}` in `{text}`; engines: {}",
                    names.join(", ")
                )
            })?;
        let mut policy = None;
        let mut options = Vec::new();
        for (i, part) in rest.into_iter().flat_map(|r| r.split(',')).enumerate() {
            if part.is_empty() {
                return Err(format!("empty option in engine spec `{text}`"));
            }
            match part.split_once('=') {
                Some((n, v)) if !n.is_empty() => options.push((n.to_string(), v.to_string())),
                Some(_) => return Err(format!("option without a name in engine spec `{text}`")),
                None if i == 0 && kind == EngineKind::Gleaner => policy = Some(part.to_string()),
                None => {
                    return Err(format!(
                        "`{part}` in engine spec `{text}` is not name=value"
                    ));
                }
            }
        }
        Ok(EngineSpec {
            kind,
            policy,
            options,
            text: text.to_string(),
        })
    }
}

/// The value of option `name` in `spec` (the last one given wins), or `default`.
#[cfg_attr(
    not(feature = "peers"),
    expect(dead_code, reason = "only the peer engines take free-form options")
)]
fn option<T: std::str::FromStr>(spec: &EngineSpec, name: &str, default: T) -> Result<T, String> {
    match spec.options.iter().rev().find(|(n, _)| n == name) {
        Some((_, v)) => v
            .parse()
            .map_err(|_| format!("engine `{spec}`: option `{name}` has unusable value `{v}`")),
        None => Ok(default),
    }
}

/// Checks that every option of `spec` is one of `known`, and that an engine of the kind
/// without key-value separation (`plain`) gets only the options in `plain_ok`.
#[cfg_attr(
    not(feature = "peers"),
    expect(dead_code, reason = "only the peer engines take free-form options")
)]
fn check_names(
    spec: &EngineSpec,
    known: &[&str],
    plain: EngineKind,
    plain_ok: &[&str],
) -> Result<(), String> {
    for (name, _) in &spec.options {
        if !known.contains(&name.as_str()) {
            return Err(format!(
                "engine `{spec}`: unknown option `{name}` (known: {})",
                known.join(", ")
            ));
        }
        if spec.kind == plain && !plain_ok.contains(&name.as_str()) {
            return Err(format!(
                "engine `{spec}`: `{name}` applies to {}-blob only",
                plain.name()
            ));
        }
    }
    Ok(())
}

/// True when this binary was built with the peer engines.
pub const PEERS_BUILT: bool = cfg!(feature = "peers");

/// Checks that `spec` can be opened by this binary: peers need the `peers` feature, and options
/// must be ones the engine knows. With `common`, Gleaner's options are checked as they will be
/// opened, the harness's knobs included. Runs before anything is written.
///
/// # Errors
/// A message naming the engine and the option at fault.
pub fn validate(spec: &EngineSpec, common: Option<&CommonConfig>) -> Result<(), String> {
    if spec.kind.is_peer() && !PEERS_BUILT {
        return Err(format!(
            "engine `{}` needs the `peers` feature: cargo build --release -p gleaner-bench --features peers \
             (needs `apt-get install -y libclang-dev`; the first build compiles RocksDB, about 18 minutes)",
            spec.kind.name()
        ));
    }
    match spec.kind {
        EngineKind::Gleaner => self::gleaner::check_options(spec, common),
        EngineKind::Null => {
            if spec.options.is_empty() {
                Ok(())
            } else {
                Err(format!("engine `null` takes no options (`{spec}`)"))
            }
        }
        #[cfg(feature = "peers")]
        EngineKind::Rocksdb | EngineKind::RocksdbBlob => rocks::check_options(spec),
        #[cfg(feature = "peers")]
        EngineKind::Fjall | EngineKind::FjallBlob => fjall_engine::check_options(spec),
        #[cfg(not(feature = "peers"))]
        _ => Ok(()),
    }
}

/// Opens a fresh engine of `spec` in the empty directory `dir`.
pub fn open(spec: &EngineSpec, dir: &Path, common: &CommonConfig) -> EngineResult<Box<dyn Engine>> {
    validate(spec, Some(common))?;
    match spec.kind {
        EngineKind::Gleaner => Ok(Box::new(GleanerEngine::open(spec, dir, common)?)),
        EngineKind::Null => Ok(Box::new(NullEngine)),
        #[cfg(feature = "peers")]
        EngineKind::Rocksdb | EngineKind::RocksdbBlob => {
            Ok(Box::new(rocks::RocksEngine::open(spec, dir, common)?))
        }
        #[cfg(feature = "peers")]
        EngineKind::Fjall | EngineKind::FjallBlob => Ok(Box::new(fjall_engine::FjallEngine::open(
            spec, dir, common,
        )?)),
        #[cfg(not(feature = "peers"))]
        _ => Err("peer engines are not built".into()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The sizes of an 8 MiB dataset with block compression `compression`: what the engines'
    /// compression tests open.
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    pub(crate) fn common(compression: Compression) -> CommonConfig {
        CommonConfig {
            compression,
            ..crate::shape::sizes(crate::shape::Shape::Absolute, 8 << 20).common(1 << 20, false)
        }
    }

    #[test]
    fn specs_parse_with_policy_and_options() {
        let s: EngineSpec = "gleaner:terarkdb,gc_garbage_ratio=0.3"
            .parse()
            .expect("spec");
        assert_eq!(s.kind, EngineKind::Gleaner);
        assert_eq!(s.policy.as_deref(), Some("terarkdb"));
        assert_eq!(
            s.options,
            vec![("gc_garbage_ratio".to_string(), "0.3".to_string())]
        );
        assert_eq!(s.to_string(), "gleaner:terarkdb,gc_garbage_ratio=0.3");
        let r: EngineSpec = "rocksdb-blob:min_blob_size=1024".parse().expect("spec");
        assert_eq!(r.kind, EngineKind::RocksdbBlob);
        assert_eq!(r.policy, None);
        assert!("null".parse::<EngineSpec>().is_ok());
        let plain: EngineSpec = "fjall-blob,gc_staleness=0.2".parse().expect("spec");
        assert_eq!(plain.kind, EngineKind::FjallBlob);
        assert_eq!(
            plain.options,
            vec![("gc_staleness".to_string(), "0.2".to_string())]
        );
        let g: EngineSpec = "gleaner,gc_garbage_ratio=0.3".parse().expect("spec");
        assert_eq!((g.policy, g.options.len()), (None, 1));
        for bad in [
            "",
            "mysql",
            "rocksdb,",
            "fjall,x",
            "rocksdb:fast",
            "gleaner:terarkdb,",
            "gleaner:=3",
        ] {
            assert!(bad.parse::<EngineSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn gleaner_options_are_checked_before_running() {
        let ok: EngineSpec = "gleaner:terarkdb,gc_garbage_ratio=0.3"
            .parse()
            .expect("spec");
        validate(&ok, None).expect("valid");
        let bad_policy: EngineSpec = "gleaner:nope".parse().expect("spec");
        assert!(
            validate(&bad_policy, None)
                .expect_err("policy")
                .contains("gc_policy")
        );
        let bad_opt: EngineSpec = "gleaner:terarkdb,memtable_sise=1".parse().expect("spec");
        assert!(
            validate(&bad_opt, None)
                .expect_err("option")
                .contains("memtable_sise")
        );
        let null_opt: EngineSpec = "null:x=1".parse().expect("spec");
        assert!(validate(&null_opt, None).is_err());
        if !PEERS_BUILT {
            let peer: EngineSpec = "rocksdb".parse().expect("spec");
            assert!(validate(&peer, None).expect_err("peers").contains("peers"));
        }
    }
}
