use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::io::{
    CountedReader, FaultFs, FileSystem, IoClass, IoStats, ReadFileOptions, WriteFileOptions,
};
use crate::options::WalRecoveryMode;

const PATH: &str = "/db/000001.log";

fn record(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

fn write_log(fs: &FaultFs, records: &[Vec<u8>]) -> Vec<u64> {
    fs.create_dir_all(Path::new("/db")).expect("mkdir");
    let file = fs
        .new_writable(Path::new(PATH), WriteFileOptions::default())
        .expect("create");
    let mut w = LogWriter::new(file);
    let mut ends = Vec::new();
    for r in records {
        w.add_record(r).expect("add");
        ends.push(w.file_size());
    }
    w.sync().expect("sync");
    ends
}

type ReadOutcome = (Vec<Vec<u8>>, Vec<DroppedRegion>);

fn read_log(fs: &FaultFs, mode: WalRecoveryMode) -> crate::Result<ReadOutcome> {
    let file = fs.open_readable(Path::new(PATH), ReadFileOptions::default())?;
    let reader = CountedReader::new(file, Arc::new(IoStats::default()));
    let mut r = LogReader::new(reader, "000001.log".into(), IoClass::Wal, mode, 8 << 20)?;
    let mut out = Vec::new();
    while let Some((_, rec)) = r.read_record()? {
        out.push(rec);
    }
    Ok((out, r.dropped().to_vec()))
}

fn sizes() -> Vec<usize> {
    vec![
        0,
        1,
        100,
        BLOCK_SIZE - HEADER_SIZE,
        BLOCK_SIZE - 2 * HEADER_SIZE - 3,
        BLOCK_SIZE,
        3 * BLOCK_SIZE + 17,
        1000,
        5,
    ]
}

#[test]
fn records_of_every_shape_round_trip() {
    let fs = FaultFs::new(1);
    let records: Vec<Vec<u8>> = sizes()
        .iter()
        .enumerate()
        .map(|(i, &n)| record(i, n))
        .collect();
    write_log(&fs, &records);
    let (back, dropped) = read_log(&fs, WalRecoveryMode::TolerateCorruptedTail).expect("read");
    assert_eq!(back, records);
    assert!(dropped.is_empty());
}

#[test]
fn block_tail_too_short_for_a_header_is_padding() {
    let fs = FaultFs::new(2);
    // First record leaves exactly 6 bytes in the block: the writer must pad.
    let records = vec![
        record(0, BLOCK_SIZE - HEADER_SIZE - 6),
        record(1, 10),
        record(2, 0),
    ];
    let ends = write_log(&fs, &records);
    assert_eq!(ends[1], (BLOCK_SIZE + HEADER_SIZE + 10) as u64);
    let (back, _) = read_log(&fs, WalRecoveryMode::TolerateCorruptedTail).expect("read");
    assert_eq!(back, records);
}

#[test]
fn a_torn_tail_is_cut_at_every_length() {
    let records: Vec<Vec<u8>> = sizes()
        .iter()
        .enumerate()
        .map(|(i, &n)| record(i, n))
        .collect();
    let probe = FaultFs::new(3);
    let ends = write_log(&probe, &records);
    let full = probe.file_bytes(Path::new(PATH)).expect("file");
    // Cut inside the last three records at many points.
    let first_cut = ends[ends.len() - 4] as usize;
    for cut in (first_cut..full.len()).step_by(97).chain([full.len() - 1]) {
        let fs = FaultFs::new(3);
        fs.set_file_bytes(Path::new(PATH), full[..cut].to_vec())
            .expect("set");
        let (back, dropped) = read_log(&fs, WalRecoveryMode::TolerateCorruptedTail)
            .unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let complete = ends.iter().filter(|&&e| e as usize <= cut).count();
        assert_eq!(back, records[..complete].to_vec(), "cut at {cut}");
        let expect_drop = cut > ends[complete - 1] as usize;
        assert_eq!(
            !dropped.is_empty(),
            expect_drop,
            "cut at {cut}: {dropped:?}"
        );
    }
}

#[test]
fn garbage_after_the_last_record_is_a_torn_tail() {
    let fs = FaultFs::new(4);
    let records = vec![record(0, 500), record(1, 70_000)];
    write_log(&fs, &records);
    let mut bytes = fs.file_bytes(Path::new(PATH)).expect("file");
    let valid = bytes.len();
    let mut x: u32 = 12345;
    for _ in 0..5000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        bytes.push((x >> 16) as u8);
    }
    fs.set_file_bytes(Path::new(PATH), bytes).expect("set");
    let (back, dropped) = read_log(&fs, WalRecoveryMode::TolerateCorruptedTail).expect("read");
    assert_eq!(back, records);
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].offset, valid as u64);
    // Zeros (pre-allocated or unwritten extents) are a torn tail too.
    let mut zeros = fs.file_bytes(Path::new(PATH)).expect("file");
    zeros.truncate(valid);
    zeros.extend(std::iter::repeat_n(0u8, 40_000));
    fs.set_file_bytes(Path::new(PATH), zeros).expect("set");
    let (back, _) = read_log(&fs, WalRecoveryMode::TolerateCorruptedTail).expect("read");
    assert_eq!(back, records);
}

#[test]
fn damage_before_intact_records_is_corruption_or_skipped_by_mode() {
    let records: Vec<Vec<u8>> = (0..20).map(|i| record(i, 3000)).collect();
    let fs = FaultFs::new(5);
    let ends = write_log(&fs, &records);
    // Flip a payload byte of record 3.
    let at = ends[2] + HEADER_SIZE as u64 + 10;
    fs.corrupt_byte(Path::new(PATH), at, 0x40).expect("corrupt");
    let err = read_log(&fs, WalRecoveryMode::TolerateCorruptedTail).expect_err("must fail");
    match &err {
        crate::Error::Corruption { file, offset, .. } => {
            assert_eq!(file, "000001.log");
            assert_eq!(*offset, ends[2]);
        }
        other => panic!("expected corruption, got {other}"),
    }
    let (back, dropped) = read_log(&fs, WalRecoveryMode::SkipAnyCorruptedRecords).expect("skip");
    let mut expect = records.clone();
    expect.remove(3);
    assert_eq!(back, expect);
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].offset, ends[2]);
}

#[test]
fn damage_inside_a_multi_block_record_drops_only_that_record_when_skipping() {
    let records = vec![record(0, 10), record(1, 3 * BLOCK_SIZE), record(2, 10)];
    let fs = FaultFs::new(6);
    write_log(&fs, &records);
    // Corrupt the MIDDLE fragment at the start of the second block's payload.
    fs.corrupt_byte(Path::new(PATH), (BLOCK_SIZE + HEADER_SIZE + 5) as u64, 0x01)
        .expect("corrupt");
    assert!(read_log(&fs, WalRecoveryMode::TolerateCorruptedTail).is_err());
    let (back, dropped) = read_log(&fs, WalRecoveryMode::SkipAnyCorruptedRecords).expect("skip");
    assert_eq!(back, vec![records[0].clone(), records[2].clone()]);
    assert!(!dropped.is_empty());
}

#[test]
fn records_over_the_limit_are_damage() {
    let fs = FaultFs::new(7);
    write_log(&fs, &[record(0, 9 << 20), record(1, 10)]);
    let err = read_log(&fs, WalRecoveryMode::TolerateCorruptedTail).expect_err("limit");
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn an_empty_log_has_no_records() {
    let fs = FaultFs::new(8);
    write_log(&fs, &[]);
    let (back, dropped) = read_log(&fs, WalRecoveryMode::TolerateCorruptedTail).expect("read");
    assert!(back.is_empty() && dropped.is_empty());
}

#[test]
fn a_record_written_in_parts_reads_back_as_their_concatenation() {
    let fs = FaultFs::new(9);
    fs.create_dir_all(Path::new("/db")).expect("mkdir");
    let file = fs
        .new_writable(Path::new(PATH), WriteFileOptions::default())
        .expect("create");
    let mut w = LogWriter::new(file);
    let a = record(1, 12);
    let b = record(2, 0);
    let c = record(3, 2 * BLOCK_SIZE + 5);
    let d = record(4, 40);
    w.add_record_parts(&[&a, &b, &c, &d]).expect("parts");
    w.add_record_parts(&[]).expect("empty");
    w.add_record_parts(&[&d]).expect("one part");
    w.sync().expect("sync");
    let (back, _) = read_log(&fs, WalRecoveryMode::TolerateCorruptedTail).expect("read");
    assert_eq!(back, vec![[a, b, c, d.clone()].concat(), Vec::new(), d]);
}

/// Writes records whose payload starts with the log's synced size, as the WAL does.
fn write_wal_style(fs: &FaultFs, records: &[Vec<u8>], sync_after: &[usize]) -> Vec<u64> {
    fs.create_dir_all(Path::new("/db")).expect("mkdir");
    let file = fs
        .new_writable(Path::new(PATH), WriteFileOptions::default())
        .expect("create");
    let mut w = LogWriter::new(file);
    let mut ends = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let sp = w.synced_size().to_le_bytes();
        w.add_record_parts(&[&sp, r]).expect("add");
        ends.push(w.file_size());
        if sync_after.contains(&i) {
            w.sync().expect("sync");
        }
    }
    ends
}

fn read_wal_style(fs: &FaultFs) -> crate::Result<ReadOutcome> {
    let file = fs.open_readable(Path::new(PATH), ReadFileOptions::default())?;
    let reader = CountedReader::new(file, Arc::new(IoStats::default()));
    let mut r = LogReader::new(
        reader,
        "000001.log".into(),
        IoClass::Wal,
        WalRecoveryMode::TolerateCorruptedTail,
        8 << 20,
    )?
    .with_sync_points(wal_sync_point);
    let mut out = Vec::new();
    while let Some((_, rec)) = r.read_record()? {
        out.push(rec[WAL_SYNC_POINT_LEN..].to_vec());
    }
    Ok((out, r.dropped().to_vec()))
}

#[test]
fn damage_in_the_unsynced_tail_followed_by_intact_records_is_a_torn_tail() {
    // Out-of-order write-back before a power loss can leave a hole in the unsynced tail with
    // intact records after it: recovery must stop at the hole, not fail.
    let records: Vec<Vec<u8>> = (0..10).map(|i| record(i, 2000)).collect();
    let fs = FaultFs::new(10);
    let ends = write_wal_style(&fs, &records, &[3]);
    fs.corrupt_byte(Path::new(PATH), ends[5] + 20, 0xff)
        .expect("corrupt");
    let (back, dropped) = read_wal_style(&fs).expect("a torn tail, not corruption");
    assert_eq!(back, records[..6].to_vec());
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].offset, ends[5]);
}

#[test]
fn damage_in_synced_data_is_corruption_even_with_sync_points() {
    let records: Vec<Vec<u8>> = (0..10).map(|i| record(i, 2000)).collect();
    let fs = FaultFs::new(11);
    let ends = write_wal_style(&fs, &records, &[6]);
    // Record 2 was synced (the sync after record 6 covered it); record 8 says so.
    fs.corrupt_byte(Path::new(PATH), ends[1] + 20, 0xff)
        .expect("corrupt");
    let err = read_wal_style(&fs).expect_err("synced data damaged");
    match err {
        crate::Error::Corruption { offset, detail, .. } => {
            assert_eq!(offset, ends[1]);
            assert!(detail.contains("synced"), "{detail}");
        }
        other => panic!("expected corruption, got {other}"),
    }
}

/// The throttle counts a write at `max_wal_record_bytes`; the log must never grow by more, at
/// any offset in a block (a record starting near a block end pays a zero-filled tail and one
/// more header).
#[test]
fn a_record_never_adds_more_than_its_bound() {
    let fs = FaultFs::new(9);
    // Lengths that walk the start offset through every position near block ends.
    let batch_lens: Vec<usize> = (0..400usize)
        .map(|i| (i * 997) % (3 * BLOCK_SIZE) + (i % 13))
        .collect();
    let records: Vec<Vec<u8>> = batch_lens
        .iter()
        .enumerate()
        .map(|(i, &len)| record(i, len + WAL_SYNC_POINT_LEN))
        .collect();
    let ends = write_log(&fs, &records);
    let mut worst_slack = u64::MAX;
    let mut before = 0;
    for (i, (&batch_len, &end)) in batch_lens.iter().zip(&ends).enumerate() {
        let added = end - before;
        before = end;
        let bound = max_wal_record_bytes(batch_len as u64);
        assert!(
            added <= bound,
            "record {i}: {batch_len} batch bytes added {added}, bound {bound}"
        );
        worst_slack = worst_slack.min(bound - added);
    }
    // Not a loose bound: some record comes within a few headers of it.
    assert!(worst_slack < 4 * HEADER_SIZE as u64, "{worst_slack}");
}
