//! Drop keys, where the policy asks for them (`CompactionHooks::records_drop_keys`; NovKV's
//! collaborative compaction, §III-B): the identities of the records whose
//! handles a flush or compaction drops are written to a drop file, and the job's own manifest
//! edit attaches each block to the live value table holding those records (docs/gc.md,
//! "`novkv`"). The counts stay the garbage accounting's (`compaction/garbage.rs`); drop keys
//! only let a GC job recognise the garbage without looking anything up.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::iterator::{DropEvent, DropListener};
use super::pending::PendingFiles;
use crate::error::Result;
use crate::filename::drop_file_name;
use crate::io::{FileSystem, IoClass, IoStats};
use crate::key::ValueKind;
use crate::value::{DropKey, StoredHandle, WrittenBlock, write_drop_file};
use crate::version::{DropBlock, ValueSet, VersionEdit};

/// Collects the drop keys of one flush or compaction, per value table the dropped handles name.
#[derive(Debug, Default)]
pub struct DropKeyCollector {
    keys: BTreeMap<u64, Vec<DropKey>>,
    /// Dropped handles that did not decode (the garbage accounting counts them as unresolved).
    pub undecodable: u64,
}

impl DropListener for DropKeyCollector {
    fn on_drop(&mut self, event: &DropEvent<'_>) {
        if event.key.kind != ValueKind::ValueHandle {
            return;
        }
        let Ok(stored) = StoredHandle::decode(event.value, "compaction input", 0) else {
            self.undecodable += 1;
            return;
        };
        // An alias never makes its record garbage: its owner does, once, when it is dropped.
        if stored.alias {
            return;
        }
        // The record's identity: its key and the sequence number it was written at (a handle
        // written back after the record moved names it by its fourth varint).
        self.keys
            .entry(stored.location.file_number)
            .or_default()
            .push((
                event.key.user_key.to_vec(),
                stored.record_seq(event.key.seq),
            ));
    }
}

/// Where a job writes its drop file.
#[derive(Clone)]
pub struct DropFileConfig {
    /// File system.
    pub fs: Arc<dyn FileSystem>,
    /// Database directory.
    pub dir: PathBuf,
    /// I/O counters.
    pub stats: Arc<IoStats>,
    /// The class the written bytes count under (the job's own).
    pub class: IoClass,
    /// The database's file-number counter.
    pub next_file_number: Arc<AtomicU64>,
}

/// A drop file written by a job, waiting for the job's edit.
#[derive(Debug)]
pub struct WrittenDropKeys {
    /// The drop file's number.
    pub number: u64,
    /// Its blocks, each with the keys it holds (to place the block by key when its named table
    /// was collected meanwhile).
    pub blocks: Vec<(WrittenBlock, Vec<DropKey>)>,
    /// Bytes of the file.
    pub bytes: u64,
    /// The file: keep it once the edit naming it is installed.
    pub pending: PendingFiles,
}

impl WrittenDropKeys {
    /// Drop keys in the file.
    pub fn keys(&self) -> u64 {
        self.blocks.iter().map(|(b, _)| b.keys).sum()
    }
}

impl DropKeyCollector {
    /// True when no handle was dropped.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Writes the collected keys to a new drop file (synced, directory entry durable), one
    /// block per named value table; `None` when no handle was dropped.
    ///
    /// Errors: I/O (the file is deleted).
    pub fn write(self, cfg: &DropFileConfig) -> Result<Option<WrittenDropKeys>> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        let number = cfg.next_file_number.fetch_add(1, Ordering::SeqCst);
        let name = drop_file_name(number);
        let mut pending = PendingFiles::new(Arc::clone(&cfg.fs), cfg.dir.clone());
        pending.add(name.clone());
        let blocks: Vec<(u64, Vec<DropKey>)> = self.keys.into_iter().collect();
        let written = write_drop_file(
            cfg.fs.as_ref(),
            &cfg.dir.join(&name),
            cfg.class,
            Arc::clone(&cfg.stats),
            &blocks,
        )?;
        pending.make_durable()?;
        let bytes = written.iter().map(|b| b.len).sum::<u64>()
            + crate::value::drop_keys::DROP_FILE_FOOTER_LEN;
        Ok(Some(WrittenDropKeys {
            number,
            blocks: written
                .into_iter()
                .zip(blocks)
                .map(|(w, (_, keys))| (w, keys))
                .collect(),
            bytes,
            pending,
        }))
    }
}

impl WrittenDropKeys {
    /// Attaches each block to the live tables of `values` (the version the edit applies to)
    /// that hold its records: its named table when that is live or `edit` adds it; otherwise
    /// every live table inheritance leads to for one of its keys (a GC job collected the named
    /// table after the handles were dropped). A block may so reach a table that holds only some
    /// of its records; the other keys never match a record there, since a `(key, seq)` names
    /// one record in the whole database. Tables `edit` deletes (every record garbage) get
    /// nothing. Returns how many blocks found no table (their records are all gone).
    pub fn attach(&self, values: &ValueSet, edit: &mut VersionEdit) -> u64 {
        let mut unplaced = 0;
        for (b, keys) in &self.blocks {
            // A table the edit adds (a value segment a flush seals) is live once it applies.
            let added = edit
                .new_value_tables
                .iter()
                .any(|v| v.number == b.named_table);
            let mut targets: Vec<u64> = if values.live(b.named_table).is_some() || added {
                vec![b.named_table]
            } else {
                let mut t: Vec<u64> = keys
                    .iter()
                    .flat_map(|(k, _)| values.candidates(b.named_table, k))
                    .filter(|v| values.live(v.number).is_some())
                    .map(|v| v.number)
                    .collect();
                t.sort_unstable();
                t.dedup();
                t
            };
            targets.retain(|t| !edit.deleted_value_tables.contains(t));
            if targets.is_empty() {
                unplaced += 1;
            }
            for t in targets {
                edit.drop_blocks.push((
                    t,
                    DropBlock {
                        file: self.number,
                        offset: b.offset,
                        len: b.len,
                        keys: b.keys,
                        named_table: b.named_table,
                    },
                ));
            }
        }
        unplaced
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::DropReason;
    use crate::io::FaultFs;
    use crate::key::ParsedKey;
    use crate::value::{DropFileReader, ValueHandle};
    use crate::version::{Inheritor, ValueTableMeta, Version};

    fn handle(file: u64, record_seq: Option<u64>) -> Vec<u8> {
        let mut v = Vec::new();
        StoredHandle {
            location: ValueHandle {
                file_number: file,
                offset: 0,
                len: 20,
            },
            record_seq,
            alias: false,
            payload: None,
            expiry: None,
        }
        .encode_to(&mut v);
        v
    }

    fn dropped(c: &mut DropKeyCollector, key: &[u8], seq: u64, kind: ValueKind, value: &[u8]) {
        c.on_drop(&DropEvent {
            key: ParsedKey {
                user_key: key,
                seq,
                kind,
            },
            value,
            reason: DropReason::Shadowed,
            hidden_by: seq + 1,
        });
    }

    fn vt(number: u64, lo: &str, hi: &str) -> ValueTableMeta {
        ValueTableMeta {
            number,
            file_size: 100,
            records: 10,
            record_bytes: 1000,
            smallest_key: lo.as_bytes().to_vec(),
            largest_key: hi.as_bytes().to_vec(),
            smallest_seq: 1,
            largest_seq: 99,
            class: 0,
            policy_meta: None,
            max_expiry: None,
        }
    }

    #[test]
    fn drop_keys_name_the_exact_record_and_skip_everything_but_handles() {
        let mut c = DropKeyCollector::default();
        // Two versions of one key in one table: each is its own drop key.
        dropped(&mut c, b"k", 7, ValueKind::ValueHandle, &handle(5, None));
        dropped(&mut c, b"k", 3, ValueKind::ValueHandle, &handle(5, None));
        // A written-back handle names its record by the record's sequence number.
        dropped(
            &mut c,
            b"m",
            40,
            ValueKind::ValueHandle,
            &handle(6, Some(12)),
        );
        // An alias of m's record (a handle update on read) is no drop key.
        let alias = StoredHandle::alias(
            ValueHandle {
                file_number: 6,
                offset: 0,
                len: 20,
            },
            12,
        )
        .encode();
        dropped(&mut c, b"m", 41, ValueKind::ValueHandle, &alias);
        dropped(&mut c, b"n", 8, ValueKind::Value, b"inline");
        dropped(&mut c, b"o", 9, ValueKind::Deletion, b"");
        dropped(&mut c, b"p", 10, ValueKind::ValueHandle, b"\xff");
        assert_eq!(c.undecodable, 1);
        assert_eq!(
            c.keys,
            BTreeMap::from([
                (5, vec![(b"k".to_vec(), 7), (b"k".to_vec(), 3)]),
                (6, vec![(b"m".to_vec(), 12)]),
            ])
        );

        let fs = Arc::new(FaultFs::new(3));
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).expect("mkdir");
        let cfg = DropFileConfig {
            fs: Arc::clone(&fs) as Arc<dyn FileSystem>,
            dir: dir.clone(),
            stats: Arc::new(IoStats::default()),
            class: IoClass::CompactionWrite,
            next_file_number: Arc::new(AtomicU64::new(20)),
        };
        let w = c.write(&cfg).expect("write").expect("some keys");
        assert_eq!(w.number, 20);
        assert_eq!(w.keys(), 3);
        let r = DropFileReader::open(
            fs.as_ref(),
            &dir.join("000020.vdk"),
            "000020.vdk",
            Arc::new(IoStats::default()),
        )
        .expect("open");
        let (b, _) = &w.blocks[0];
        let mut got = Vec::new();
        r.read_block(b, IoClass::GcRead, |k, s| got.push((k.to_vec(), s)))
            .expect("read");
        assert_eq!(got, vec![(b"k".to_vec(), 7), (b"k".to_vec(), 3)]);
        assert!(
            DropKeyCollector::default()
                .write(&cfg)
                .expect("nothing")
                .is_none(),
            "no drops, no file"
        );
        w.pending.keep();
    }

    #[test]
    fn blocks_attach_to_the_live_table_holding_their_records() {
        // Table 5 is live; table 6 was collected into 8 (a..m) and 9 (n..z); table 7 is gone.
        let base = Version::new(7)
            .apply(
                &VersionEdit {
                    new_value_tables: vec![vt(5, "a", "z"), vt(6, "a", "z"), vt(7, "a", "z")],
                    // A key table still naming 6 keeps its inheritance record.
                    new_tables: vec![crate::version::NewTable {
                        level: 1,
                        run: 0,
                        meta: crate::version::TableMeta {
                            number: 4,
                            file_size: 100,
                            smallest: crate::key::make_internal_key(
                                b"x",
                                2,
                                ValueKind::ValueHandle,
                            ),
                            largest: crate::key::make_internal_key(b"x", 2, ValueKind::ValueHandle),
                            smallest_seq: 2,
                            largest_seq: 2,
                            num_entries: 1,
                            num_deletions: 0,
                            dependence: vec![crate::version::Dependence {
                                value_table: 6,
                                count: 1,
                                bytes: 20,
                            }],
                            aliases: 0,
                            range_deletions: 0,
                        },
                    }],
                    ..Default::default()
                },
                "M",
                0,
            )
            .expect("base");
        let v = base
            .apply(
                &VersionEdit {
                    new_value_tables: vec![vt(8, "a", "m"), vt(9, "n", "z")],
                    deleted_value_tables: vec![6, 7],
                    inheritance: vec![(
                        6,
                        vec![
                            Inheritor {
                                number: 8,
                                smallest_key: b"a".to_vec(),
                                largest_key: b"m".to_vec(),
                            },
                            Inheritor {
                                number: 9,
                                smallest_key: b"n".to_vec(),
                                largest_key: b"z".to_vec(),
                            },
                        ],
                    )],
                    ..Default::default()
                },
                "M",
                0,
            )
            .expect("collected");
        let block = |named: u64, offset: u64| WrittenBlock {
            named_table: named,
            offset,
            len: 30,
            keys: 1,
        };
        let w = WrittenDropKeys {
            number: 50,
            blocks: vec![
                (block(5, 0), vec![(b"c".to_vec(), 1)]),
                (block(6, 30), vec![(b"x".to_vec(), 2)]),
                (block(7, 60), vec![(b"c".to_vec(), 3)]),
            ],
            bytes: 106,
            pending: PendingFiles::new(Arc::new(FaultFs::new(1)), PathBuf::from("/db")),
        };
        let mut edit = VersionEdit::default();
        assert_eq!(w.attach(v.values(), &mut edit), 1, "table 7 left nothing");
        let attached: Vec<(u64, u64)> = edit
            .drop_blocks
            .iter()
            .map(|(t, b)| (*t, b.offset))
            .collect();
        assert_eq!(attached, vec![(5, 0), (9, 30)], "6's key x went to 9");
        // A table the same edit deletes gets nothing.
        let mut edit = VersionEdit {
            deleted_value_tables: vec![5],
            ..Default::default()
        };
        w.attach(v.values(), &mut edit);
        assert_eq!(edit.drop_blocks.len(), 1);
        // And the version accepts the blocks, lists the file, and forgets it with the table.
        let with = v
            .apply(
                &VersionEdit {
                    drop_blocks: vec![(
                        5,
                        DropBlock {
                            file: 50,
                            offset: 0,
                            len: 30,
                            keys: 1,
                            named_table: 5,
                        },
                    )],
                    ..Default::default()
                },
                "M",
                0,
            )
            .expect("attach");
        assert_eq!(with.values().drop_blocks(5).len(), 1);
        assert!(with.values().drop_files().contains_key(&50));
        let again = with.apply(
            &VersionEdit {
                drop_blocks: vec![(
                    5,
                    DropBlock {
                        file: 50,
                        offset: 0,
                        len: 30,
                        keys: 1,
                        named_table: 5,
                    },
                )],
                ..Default::default()
            },
            "M",
            0,
        );
        assert!(again.expect_err("twice").is_corruption());
        let not_live = with.apply(
            &VersionEdit {
                drop_blocks: vec![(
                    6,
                    DropBlock {
                        file: 50,
                        offset: 30,
                        len: 30,
                        keys: 1,
                        named_table: 5,
                    },
                )],
                ..Default::default()
            },
            "M",
            0,
        );
        assert!(not_live.expect_err("collected table").is_corruption());
        let freed = with
            .apply(
                &VersionEdit {
                    deleted_value_tables: vec![5],
                    ..Default::default()
                },
                "M",
                0,
            )
            .expect("free");
        assert!(freed.values().drop_files().is_empty());
        assert_eq!(
            with.snapshot_edit().drop_blocks,
            vec![(
                5,
                DropBlock {
                    file: 50,
                    offset: 0,
                    len: 30,
                    keys: 1,
                    named_table: 5,
                }
            )]
        );
        w.pending.keep();
    }
}
