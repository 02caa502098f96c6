//! Versions of the index tree: version edits, the manifest that logs them, the version set that
//! installs them, and the lifetime of the tables they reference.

mod current;
pub mod routing;
pub mod edit;
pub mod file_meta;
pub mod level_iter;
mod run;
pub mod set;
pub mod value_read;
pub mod value_set;
#[expect(
    clippy::module_inception,
    reason = "the version module's central type is Version"
)]
pub mod version;

pub use current::{read_current, set_current};
pub use edit::{NewTable, VersionEdit};
pub use file_meta::{FileKind, FileMetaData, ObsoleteFileSink, TableMeta};
pub use run::RunId;
pub(crate) use run::SortedRun;
pub use set::{RecoveredCounters, VersionSet, VersionSetConfig};
pub use value_read::{Located, check_record};
pub use value_set::{
    Dependence, DropBlock, DropBlockRef, DropFile, Garbage, Inheritor, MAX_POLICY_TABLE_META,
    PolicyTableMeta, Resolved, ValueFile, ValueSet, ValueTableMeta,
};
pub(crate) use version::recorded_tombstones;
pub use version::Version;

/// Most levels any database may have (the upper bound of option `num_levels`).
pub const MAX_LEVELS: usize = 12;

/// For tests: the version of `num_levels` levels holding `tables`.
#[cfg(test)]
pub(crate) fn test_version(num_levels: usize, tables: Vec<NewTable>) -> Version {
    let edit = VersionEdit {
        new_tables: tables,
        ..Default::default()
    };
    Version::new(num_levels)
        .apply(&edit, "test", 0)
        .expect("valid version")
}

/// For tests: key table `number` joining run `run` of `level`, holding user keys `lo..=hi` in
/// `size` bytes at sequence numbers `seqs` (the smallest key at the newest, the largest at the
/// oldest).
#[cfg(test)]
pub(crate) fn test_table(
    level: u32,
    run: RunId,
    number: u64,
    (lo, hi): (&str, &str),
    size: u64,
    seqs: std::ops::RangeInclusive<u64>,
) -> NewTable {
    use crate::key::{ValueKind, make_internal_key};
    NewTable {
        level,
        run,
        meta: TableMeta {
            number,
            file_size: size,
            smallest: make_internal_key(lo.as_bytes(), *seqs.end(), ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), *seqs.start(), ValueKind::Value),
            smallest_seq: *seqs.start(),
            largest_seq: *seqs.end(),
            num_entries: 1,
            num_deletions: 0,
            dependence: Vec::new(),
            aliases: 0,
            range_deletions: 0,
        },
    }
}
