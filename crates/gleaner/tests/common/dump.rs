//! What `gleaner dump` shows of a database on the real file system, for tests that check where
//! entries and values are: the newest entry of each key, the manifest, the live tables.
#![allow(dead_code, reason = "each test binary uses a part of it")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The newest entry of each key in the key tables, read with `gleaner dump`: for a handle, its
/// value table and payload; `None` for an inline value or a deletion. Tables a compaction
/// replaced may still be in the directory: their entries are older, or the same entries in an
/// older table (a compaction's outputs are numbered after its inputs).
pub fn handles(dir: &Path) -> BTreeMap<String, Option<(u64, Option<String>)>> {
    newest_entries(dir)
        .into_iter()
        .map(|(k, (_, e))| (k, e))
        .collect()
}

/// A key's newest entry: the key table holding it, and for a handle its value table and
/// payload.
pub type Newest = (u64, Option<(u64, Option<String>)>);

/// As [`handles`], with the key table each newest entry is in.
pub fn newest_entries(dir: &Path) -> BTreeMap<String, Newest> {
    type Found = ((u64, u64), Option<(u64, Option<String>)>);
    let mut newest: BTreeMap<String, Found> = BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("dir") {
        let path = e.expect("entry").path();
        if path.extension().is_none_or(|x| x != "sst") {
            continue;
        }
        let table: u64 = path
            .file_stem()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse().ok())
            .expect("table number");
        let mut text = Vec::new();
        gleaner::tools::dump_file(&path, &mut text, false).expect("dump");
        for line in String::from_utf8(text).expect("utf8").lines() {
            let cols: Vec<&str> = line.split('\t').collect();
            let Some(seq) = cols.get(1).and_then(|c| c.strip_prefix("seq=")) else {
                continue;
            };
            let seq: u64 = seq.parse().expect("seq");
            let entry = (cols[2] == "kind=handle").then(|| {
                let field = |name: &str| {
                    cols[3]
                        .split(' ')
                        .find_map(|f| f.strip_prefix(name))
                        .map(str::to_string)
                };
                let file = field("file=").expect("file").parse().expect("number");
                (file, field("payload="))
            });
            let at = (seq, table);
            let slot = newest.entry(cols[0].to_string()).or_insert((at, None));
            if at >= slot.0 {
                *slot = (at, entry);
            }
        }
    }
    newest
        .into_iter()
        .map(|(k, ((_, table), e))| (k, (table, e)))
        .collect()
}

/// `gleaner dump` of the live manifest.
pub fn manifest_dump(dir: &Path) -> String {
    let current = std::fs::read_to_string(dir.join("CURRENT")).expect("CURRENT");
    let name = current.split(' ').next().expect("name");
    let mut text = Vec::new();
    gleaner::tools::dump_file(&dir.join(name), &mut text, false).expect("dump");
    String::from_utf8(text).expect("utf8")
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes from their lowercase hex.
pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A live value table as the manifest describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueTableLine {
    pub class: u32,
    pub smallest: String,
    pub largest: String,
    /// The policy's tag and metadata bytes.
    pub meta: Option<(String, Vec<u8>)>,
}

/// The live tables of a database, from its manifest: key tables by number with their level,
/// value tables by number.
#[derive(Debug, Default)]
pub struct Layout {
    pub key_tables: BTreeMap<u64, u32>,
    pub value_tables: BTreeMap<u64, ValueTableLine>,
}

impl Layout {
    /// The layout of the database in `dir` (closed, or at least with its manifest written).
    pub fn read(dir: &Path) -> Layout {
        let text = manifest_dump(dir);
        let mut layout = Layout::default();
        let mut deleted_values = BTreeSet::new();
        let mut last_value = None;
        let field = |line: &str, name: &str| -> String {
            line.split(' ')
                .find_map(|f| f.strip_prefix(name))
                .unwrap_or_else(|| panic!("{name} in {line}"))
                .to_string()
        };
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("new_table: ") {
                let number = field(rest, "number=").parse().expect("number");
                let level = field(rest, "level=").parse().expect("level");
                layout.key_tables.insert(number, level);
            } else if let Some(rest) = line.strip_prefix("deleted_file: ") {
                let number: u64 = field(rest, "number=").parse().expect("number");
                layout.key_tables.remove(&number);
            } else if let Some(rest) = line.strip_prefix("new_value_table: ") {
                let number: u64 = field(rest, "number=").parse().expect("number");
                layout.value_tables.insert(
                    number,
                    ValueTableLine {
                        class: field(rest, "class=").parse().expect("class"),
                        smallest: field(rest, "smallest="),
                        largest: field(rest, "largest="),
                        meta: None,
                    },
                );
                last_value = Some(number);
                continue;
            } else if let Some(rest) = line.strip_prefix("  policy_meta: ") {
                if let Some(t) = last_value.and_then(|n| layout.value_tables.get_mut(&n)) {
                    t.meta = Some((field(rest, "policy="), unhex(&field(rest, "data="))));
                }
                continue;
            } else if let Some(rest) = line.strip_prefix("deleted_value_table: ") {
                deleted_values.insert(field(rest, "number=").parse::<u64>().expect("number"));
            }
            if !line.starts_with("  ") {
                last_value = None;
            }
        }
        for n in deleted_values {
            layout.value_tables.remove(&n);
        }
        layout
    }
}
