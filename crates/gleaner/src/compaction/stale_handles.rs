//! Key tables worth rewriting for their stale handles.
//!
//! A GC job that commits by inheritance leaves the index tree as it was: every handle naming
//! one of its victims is *stale*, and each read of such a key follows the inheritance record
//! and searches the dense index of the table the record moved to (docs/gc.md, "Inheritance
//! instead of index updates"). Compaction rewrites stale handles as it passes them, so a tree
//! that is written keeps its handles fresh; one that is only read after the writes stop keeps
//! them stale for ever, and every read of most keys pays the extra search (a settled database
//! of 100,000 8 KiB values read 65 % of its keys through inheritance, each point read taking
//! about a quarter longer than with its handles fresh: docs/benchmarks.md). So when the tree's
//! shape asks for nothing, the compaction worker rewrites the key table with the most stale
//! handles among those where they are at least option `stale_handle_share` of its handles.
//!
//! Only handles a rewrite can freshen count: those naming a table collected *after* the key
//! table was written. Compaction already pointed every other stale handle it could at the
//! record's new place when it wrote the table; what it kept names a record a GC job reclaimed
//! early (a version a newer one shadows), which no rewrite can place. File numbers tell the
//! two apart without new metadata: they come from one counter, a key table's number is taken
//! after its job pinned the version it reads, and a GC job's outputs are numbered before its
//! edit commits. A table collected into outputs numbered above the key table was therefore
//! collected after that version (a GC job that started before the key table's job and
//! committed after it is missed: its stale handles wait for the next compaction). A rewrite
//! thus never picks its own output again, and the rule cannot loop.

use crate::version::{ValueSet, Version};

/// The key tables of `version` whose handles are at least `share` freshenable stale handles
/// (see the module comment), most stale handles first (ties: lower number first); none when
/// `share` is 0 (option `stale_handle_share` off). Pure: a function of its arguments alone.
pub(crate) fn tables_with_stale_handles(version: &Version, share: f64) -> Vec<u64> {
    if share <= 0.0 {
        return Vec::new();
    }
    let values = version.values();
    let mut found: Vec<(u64, u64)> = version
        .all_files()
        .filter_map(|(_, f)| {
            let total: u64 = f.dependence.iter().map(|d| d.count).sum();
            let stale: u64 = f
                .dependence
                .iter()
                .filter(|d| collected_after(values, d.value_table, f.number))
                .map(|d| d.count)
                .sum();
            (stale > 0 && stale as f64 >= share * total as f64)
                .then_some((f.number, stale))
        })
        .collect();
    found.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    found.into_iter().map(|(n, _)| n).collect()
}

/// Whether value table `number` has been collected into tables numbered above `key_table`.
/// A live table, a retired one (readable where the handle says) and one without an
/// inheritance record (nothing to follow) are not.
fn collected_after(values: &ValueSet, number: u64, key_table: u64) -> bool {
    if values.readable(number).is_some() {
        return false;
    }
    values
        .inheritance()
        .get(&number)
        .is_some_and(|children| children.iter().any(|c| c.number > key_table))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};
    use crate::version::{Dependence, Inheritor, NewTable, TableMeta, ValueTableMeta, VersionEdit};

    fn value_table(number: u64) -> ValueTableMeta {
        ValueTableMeta {
            number,
            file_size: 200,
            records: 10,
            record_bytes: 100,
            smallest_key: b"a".to_vec(),
            largest_key: b"z".to_vec(),
            smallest_seq: 1,
            largest_seq: 2,
            class: 0,
            policy_meta: None,
            max_expiry: None,
        }
    }

    /// Key table `number` at L1 holding user key `key`, with `handles` (value table, count).
    fn key_table(number: u64, key: &[u8], handles: &[(u64, u64)]) -> NewTable {
        NewTable {
            level: 1,
            run: 0,
            meta: TableMeta {
                number,
                file_size: 100,
                smallest: make_internal_key(key, 2, ValueKind::ValueHandle),
                largest: make_internal_key(key, 1, ValueKind::ValueHandle),
                smallest_seq: 1,
                largest_seq: 2,
                num_entries: handles.iter().map(|h| h.1).sum(),
                num_deletions: 0,
                dependence: handles
                    .iter()
                    .map(|&(value_table, count)| Dependence {
                        value_table,
                        count,
                        bytes: count * 10,
                    })
                    .collect(),
                aliases: 0,
                range_deletions: 0,
            },
        }
    }

    /// Value tables 10 and 20, and key tables 5 (three handles into 20, one into 10), 6 (one
    /// into 20, three into 10) and 40 (four into 20); then a GC job collects 20 into 30.
    /// Table 40 is numbered above 30: it was written after 20 was collected, so its handles
    /// into 20 are what a compaction could not place.
    fn collected() -> Version {
        let first = VersionEdit {
            new_value_tables: vec![value_table(10), value_table(20)],
            new_tables: vec![
                key_table(5, b"a", &[(10, 1), (20, 3)]),
                key_table(6, b"b", &[(10, 3), (20, 1)]),
                key_table(40, b"c", &[(20, 4)]),
            ],
            ..Default::default()
        };
        let gc = VersionEdit {
            new_value_tables: vec![value_table(30)],
            deleted_value_tables: vec![20],
            inheritance: vec![(
                20,
                vec![Inheritor {
                    number: 30,
                    smallest_key: b"a".to_vec(),
                    largest_key: b"z".to_vec(),
                }],
            )],
            ..Default::default()
        };
        Version::new(7)
            .apply(&first, "M", 0)
            .and_then(|v| v.apply(&gc, "M", 0))
            .expect("apply")
    }

    #[test]
    fn tables_qualify_by_their_share_of_freshenable_stale_handles() {
        let v = collected();
        assert_eq!(tables_with_stale_handles(&v, 0.5), vec![5], "3 of 4 stale");
        assert_eq!(
            tables_with_stale_handles(&v, 0.25),
            vec![5, 6],
            "most stale handles first"
        );
        assert_eq!(tables_with_stale_handles(&v, 0.8), Vec::<u64>::new());
        assert!(tables_with_stale_handles(&v, 0.0).is_empty(), "0 is off");
    }

    #[test]
    fn handles_into_tables_collected_before_the_key_table_was_written_never_qualify() {
        // Table 40's four handles all name collected table 20, but its outputs are numbered
        // below 40: a rewrite could place none of them, so it would pick its output again.
        let v = collected();
        assert!(!tables_with_stale_handles(&v, 0.01).contains(&40));
    }

    #[test]
    fn live_tables_and_tables_without_inheritance_are_not_stale() {
        let first = VersionEdit {
            new_value_tables: vec![value_table(10), value_table(20)],
            new_tables: vec![key_table(5, b"a", &[(10, 2), (20, 2)])],
            ..Default::default()
        };
        // Table 20 goes without an inheritance record (every record in it was garbage).
        let freed = VersionEdit {
            deleted_value_tables: vec![20],
            ..Default::default()
        };
        let v = Version::new(7).apply(&first, "M", 0).expect("apply");
        assert!(tables_with_stale_handles(&v, 0.01).is_empty(), "all live");
        let v = v.apply(&freed, "M", 0).expect("apply");
        assert!(
            tables_with_stale_handles(&v, 0.01).is_empty(),
            "nothing to follow"
        );
    }
}
