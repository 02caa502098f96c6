//! Names of the files in a database directory (docs/format.md, "Directory layout").

/// Kinds of files Gleaner creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// A write-ahead log: `NNNNNN.log`.
    Wal(u64),
    /// A key table: `NNNNNN.sst`.
    KeyTable(u64),
    /// A value table: `NNNNNN.vst`.
    ValueTable(u64),
    /// A drop file (drop keys): `NNNNNN.vdk`.
    DropFile(u64),
    /// A manifest: `MANIFEST-NNNNNN`.
    Manifest(u64),
    /// `CURRENT`, naming the live manifest.
    Current,
    /// `LOCK`.
    Lock,
    /// `OPTIONS`.
    Options,
    /// A GC policy's own file, `<policy>.<slot>.pol` (`gc/policy_file.rs`).
    PolicyFile,
    /// The hotness statistics of a partitioned index tree: [`HOTNESS`], their full snapshot,
    /// or [`HOTNESS_LOG`], their incremental log (`partition/persist.rs`).
    Hotness,
    /// A temporary file (`*.tmp`) left by an interrupted atomic replace.
    Temp,
}

/// File name of WAL `n`.
pub fn wal_file_name(n: u64) -> String {
    format!("{n:06}.log")
}

/// File name of key table `n`.
pub fn table_file_name(n: u64) -> String {
    format!("{n:06}.sst")
}

/// File name of value table `n`.
pub fn value_table_file_name(n: u64) -> String {
    format!("{n:06}.vst")
}

/// File name of drop file `n`.
pub fn drop_file_name(n: u64) -> String {
    format!("{n:06}.vdk")
}

/// File name of manifest `n`.
pub fn manifest_file_name(n: u64) -> String {
    format!("MANIFEST-{n:06}")
}

/// Name of the file naming the live manifest.
pub const CURRENT: &str = "CURRENT";
/// Name of the lock file.
pub const LOCK: &str = "LOCK";
/// Name of the options file.
pub const OPTIONS: &str = "OPTIONS";

/// The hotness statistics' full snapshot.
pub const HOTNESS: &str = "HOTNESS";

/// The hotness statistics' incremental log.
pub const HOTNESS_LOG: &str = "HOTNESS.log";

/// Suffix of a GC policy's own files.
pub const POLICY_FILE_SUFFIX: &str = ".pol";

/// Longest name of a GC policy, or of one of its files' slots.
pub const MAX_POLICY_NAME: usize = 64;

/// Whether `name` may name a GC policy or a policy file's slot: 1 to [`MAX_POLICY_NAME`] ASCII
/// letters, digits, `_` or `-` (it is saved in OPTIONS, in the manifest's policy metadata and
/// in file names, so it holds no separator).
pub fn valid_policy_name(name: &str) -> bool {
    (1..=MAX_POLICY_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// File name of policy `policy`'s file `slot`: `<policy>.<slot>.pol`.
pub fn policy_file_name(policy: &str, slot: &str) -> String {
    format!("{policy}.{slot}{POLICY_FILE_SUFFIX}")
}

/// The policy and slot a policy file's name holds, if `name` is one.
pub fn parse_policy_file_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_suffix(POLICY_FILE_SUFFIX)?;
    let (policy, slot) = stem.split_once('.')?;
    (valid_policy_name(policy) && valid_policy_name(slot)).then_some((policy, slot))
}

/// Recognizes a file name created by Gleaner; `None` for anything else (which Gleaner never
/// touches).
pub fn parse_file_name(name: &str) -> Option<FileType> {
    fn number(digits: &str) -> Option<u64> {
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }
    match name {
        CURRENT => return Some(FileType::Current),
        LOCK => return Some(FileType::Lock),
        OPTIONS => return Some(FileType::Options),
        HOTNESS | HOTNESS_LOG => return Some(FileType::Hotness),
        _ => {}
    }
    if let Some(rest) = name.strip_prefix("MANIFEST-") {
        return number(rest).map(FileType::Manifest);
    }
    if let Some(stem) = name.strip_suffix(".log") {
        return number(stem).map(FileType::Wal);
    }
    if let Some(stem) = name.strip_suffix(".sst") {
        return number(stem).map(FileType::KeyTable);
    }
    if let Some(stem) = name.strip_suffix(".vst") {
        return number(stem).map(FileType::ValueTable);
    }
    if let Some(stem) = name.strip_suffix(".vdk") {
        return number(stem).map(FileType::DropFile);
    }
    if matches!(
        name,
        "CURRENT.tmp" | "OPTIONS.tmp" | "IO_PROBE.tmp" | "HOTNESS.tmp"
    ) {
        return Some(FileType::Temp);
    }
    if parse_policy_file_name(name).is_some() {
        return Some(FileType::PolicyFile);
    }
    // A policy file's replacement, interrupted.
    if name
        .strip_suffix(".tmp")
        .and_then(parse_policy_file_name)
        .is_some()
    {
        return Some(FileType::Temp);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_ignored() {
        assert_eq!(parse_file_name(&wal_file_name(7)), Some(FileType::Wal(7)));
        assert_eq!(
            parse_file_name(&table_file_name(1234567)),
            Some(FileType::KeyTable(1234567))
        );
        assert_eq!(
            parse_file_name(&manifest_file_name(3)),
            Some(FileType::Manifest(3))
        );
        assert_eq!(
            parse_file_name(&drop_file_name(42)),
            Some(FileType::DropFile(42))
        );
        assert_eq!(parse_file_name("CURRENT"), Some(FileType::Current));
        assert_eq!(parse_file_name("CURRENT.tmp"), Some(FileType::Temp));
        assert_eq!(parse_file_name("HOTNESS"), Some(FileType::Hotness));
        assert_eq!(parse_file_name("HOTNESS.log"), Some(FileType::Hotness));
        assert_eq!(parse_file_name("HOTNESS.tmp"), Some(FileType::Temp));
        assert_eq!(
            parse_file_name("dumpkv.model.pol"),
            Some(FileType::PolicyFile)
        );
        assert_eq!(
            parse_file_name("dumpkv.model.pol.tmp"),
            Some(FileType::Temp)
        );
        for stranger in [
            "notes.txt",
            "12a.sst",
            ".sst",
            "MANIFEST-",
            "MANIFEST-x1",
            "0001.log.bak",
            "-1.log",
            "x.vdk",
        ] {
            assert_eq!(parse_file_name(stranger), None, "{stranger}");
        }
    }
}
