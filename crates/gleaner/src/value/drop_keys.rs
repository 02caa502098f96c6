//! Drop files (`.vdk`): the identities of value-table records that a flush or compaction made
//! garbage, written where a policy asks for them (`CompactionHooks::records_drop_keys`; NovKV's
//! DropBlocks), so a GC job recognises garbage without looking anything up in the index tree
//! (docs/gc.md, "`novkv`").
//!
//! ```text
//! drop file  = drop block* | footer
//! drop block = payload | masked crc32c: u32          (the CRC covers the payload)
//! payload    = named table: varint64 | count: varint64 | count × (key_len: varint32 | key | seq: u64)
//! footer     = format version: u32 (1) | masked crc32c of the version: u32 | magic "GlnrDrop"
//! ```
//!
//! A drop key `(user key, record sequence number)` names exactly one record in the database (every
//! write has its own sequence number, and a GC copy keeps it). A drop file is immutable, written
//! once by the job that dropped the handles and synced before its manifest edit, which attaches
//! each block to the live value table holding its records (manifest field 15). Blocks are only
//! reached through the manifest's `(offset, length)`; the payload is self-delimiting, so tools
//! can also walk a file from its start. docs/format.md ("Drop file") is the byte-level
//! specification.

use std::path::Path;
use std::sync::Arc;

use crate::checksum;
use crate::coding::{
    Decoder, decode_fixed32, put_fixed32, put_fixed64, put_varint32, put_varint64,
};
use crate::error::{Error, Result};
use crate::io::{
    CountedReader, CountedWriter, FileSystem, IoClass, IoStats, WritableFile, WriteFileOptions,
};
use crate::key::{MAX_SEQUENCE, SeqNo};
use crate::options::MAX_KEY_SIZE;

/// Format version written in every drop file's footer.
pub const DROP_FILE_FORMAT_VERSION: u32 = 1;

/// Magic at the end of every drop file.
pub const DROP_FILE_MAGIC: &[u8; 8] = b"GlnrDrop";

/// Bytes of the footer.
pub const DROP_FILE_FOOTER_LEN: u64 = 16;

/// Shortest drop key entry: a 1-byte key length, an empty key and the sequence number.
const MIN_ENTRY_LEN: u64 = 1 + 8;

/// Shortest block: two 1-byte varints and the CRC.
const MIN_BLOCK_LEN: u64 = 2 + 4;

/// Longest block a reader accepts (a bound on what one allocation may take; a job writes one
/// block per value table, and a value table holds far fewer records than this allows).
pub const MAX_DROP_BLOCK_LEN: u64 = 1 << 30;

/// One drop key: a record's user key and sequence number.
pub type DropKey = (Vec<u8>, SeqNo);

/// Where a block was written, as the manifest records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrittenBlock {
    /// The value table the dropped handles named (the manifest attaches the block to the live
    /// table that holds those records, which may be a GC output of this one).
    pub named_table: u64,
    /// First byte of the block.
    pub offset: u64,
    /// Length of the block, CRC included.
    pub len: u64,
    /// Drop keys in it.
    pub keys: u64,
}

/// Appends one block (payload and CRC) for `named_table` to `dst`.
fn encode_block(dst: &mut Vec<u8>, named_table: u64, keys: &[DropKey]) {
    let start = dst.len();
    put_varint64(dst, named_table);
    put_varint64(dst, keys.len() as u64);
    for (key, seq) in keys {
        put_varint32(dst, key.len() as u32);
        dst.extend_from_slice(key);
        put_fixed64(dst, *seq);
    }
    let crc = checksum::mask(checksum::crc32c(&dst[start..]));
    put_fixed32(dst, crc);
}

fn footer() -> [u8; DROP_FILE_FOOTER_LEN as usize] {
    let mut f = Vec::with_capacity(DROP_FILE_FOOTER_LEN as usize);
    put_fixed32(&mut f, DROP_FILE_FORMAT_VERSION);
    let crc = checksum::mask(checksum::crc32c(&f[..4]));
    put_fixed32(&mut f, crc);
    f.extend_from_slice(DROP_FILE_MAGIC);
    f.try_into().expect("16 bytes")
}

/// Writes drop file `path` with one block per entry of `blocks` (named table, its drop keys),
/// in the given order, and syncs it. Keys longer than [`MAX_KEY_SIZE`] or sequence numbers
/// above [`MAX_SEQUENCE`] are refused before anything is written (they cannot come from a key
/// table). The caller deletes the file if anything fails, and makes its directory entry
/// durable before a manifest edit names it.
///
/// Errors: invalid keys (`InvalidArgument`), I/O.
pub fn write_drop_file(
    fs: &dyn FileSystem,
    path: &Path,
    class: IoClass,
    stats: Arc<IoStats>,
    blocks: &[(u64, Vec<DropKey>)],
) -> Result<Vec<WrittenBlock>> {
    for (_, keys) in blocks {
        if let Some((k, s)) = keys
            .iter()
            .find(|(k, s)| k.len() > MAX_KEY_SIZE || *s > MAX_SEQUENCE)
        {
            return Err(Error::invalid(format!(
                "drop key of {} bytes at sequence {s} exceeds the key size limit ({MAX_KEY_SIZE}) or the sequence limit",
                k.len()
            )));
        }
    }
    let file = fs.new_writable(path, WriteFileOptions::default())?;
    let mut file = CountedWriter::new(file, class, stats);
    let mut written = Vec::with_capacity(blocks.len());
    let mut buf = Vec::new();
    let mut offset = 0u64;
    for (named_table, keys) in blocks {
        buf.clear();
        encode_block(&mut buf, *named_table, keys);
        file.append(&buf)?;
        written.push(WrittenBlock {
            named_table: *named_table,
            offset,
            len: buf.len() as u64,
            keys: keys.len() as u64,
        });
        offset += buf.len() as u64;
    }
    file.append(&footer())?;
    file.sync()?;
    Ok(written)
}

/// An open drop file.
#[derive(Debug, Clone)]
pub struct DropFileReader {
    file: CountedReader,
    name: String,
    /// End of the block region (the footer's offset).
    blocks_end: u64,
}

impl DropFileReader {
    /// Opens `path` (named `name` in errors) and checks its size and footer.
    ///
    /// Errors: I/O; `Corruption` for a file shorter than its footer, a wrong magic, an unknown
    /// version or a footer CRC mismatch.
    pub fn open(fs: &dyn FileSystem, path: &Path, name: &str, stats: Arc<IoStats>) -> Result<Self> {
        let file = CountedReader::new(fs.open_readable(path, Default::default())?, stats);
        let size = file.size()?;
        if size < DROP_FILE_FOOTER_LEN {
            return Err(Error::corruption(
                name,
                0,
                format!("drop file of {size} bytes is shorter than its footer"),
            ));
        }
        let at = size - DROP_FILE_FOOTER_LEN;
        let f = file.read_vec(at, DROP_FILE_FOOTER_LEN as usize, IoClass::Other)?;
        if &f[8..16] != DROP_FILE_MAGIC {
            return Err(Error::corruption(name, at, "not a drop file (bad magic)"));
        }
        let version = decode_fixed32(&f[0..4]);
        if version != DROP_FILE_FORMAT_VERSION {
            return Err(Error::corruption(
                name,
                at,
                format!("unknown drop file format version {version}"),
            ));
        }
        if checksum::unmask(decode_fixed32(&f[4..8])) != checksum::crc32c(&f[0..4]) {
            return Err(Error::corruption(
                name,
                at,
                "drop file footer checksum mismatch",
            ));
        }
        Ok(DropFileReader {
            file,
            name: name.to_string(),
            blocks_end: at,
        })
    }

    /// End of the block region.
    pub fn blocks_end(&self) -> u64 {
        self.blocks_end
    }

    /// Reads the block `want` names (as the manifest records it: offset, length, key count and
    /// named table), counted under `class`, and calls `each` for every drop key in it.
    ///
    /// Errors: I/O; `Corruption` for a block outside the block region or longer than
    /// [`MAX_DROP_BLOCK_LEN`], a CRC mismatch, a malformed payload, a key longer than
    /// [`MAX_KEY_SIZE`], a sequence number above [`MAX_SEQUENCE`], a key count other than
    /// `want.keys`, or a named table other than `want.named_table` (the manifest points at
    /// another table's block).
    pub fn read_block(
        &self,
        want: &WrittenBlock,
        class: IoClass,
        mut each: impl FnMut(&[u8], SeqNo),
    ) -> Result<()> {
        let (offset, len) = (want.offset, want.len);
        let bad = |what: String| Error::corruption(&self.name, offset, what);
        if !(MIN_BLOCK_LEN..=MAX_DROP_BLOCK_LEN).contains(&len)
            || offset
                .checked_add(len)
                .is_none_or(|end| end > self.blocks_end)
        {
            return Err(bad(format!(
                "drop block of {len} bytes at {offset} lies outside the block region (0..{})",
                self.blocks_end
            )));
        }
        // Bounded above (at most 1 GiB).
        let buf = self.file.read_vec(offset, len as usize, class)?;
        let (payload, crc) = buf.split_at(buf.len() - 4);
        if checksum::unmask(decode_fixed32(crc)) != checksum::crc32c(payload) {
            return Err(bad("drop block checksum mismatch".into()));
        }
        // The header is checked before any key is handed out: a block of another table must
        // not feed a single key into the caller's set.
        let (named, count) = parse_header(payload).map_err(bad)?;
        if named != want.named_table {
            return Err(bad(format!(
                "drop block is of value table {named}, the manifest says {}",
                want.named_table
            )));
        }
        if count != want.keys {
            return Err(bad(format!(
                "drop block holds {count} keys, the manifest says {}",
                want.keys
            )));
        }
        parse_payload(payload, &mut each).map_err(bad)?;
        Ok(())
    }

    /// Walks every block from the start of the file (for tools), calling `each` with every
    /// block (its named table, offset, length and key count) before the drop keys it holds.
    /// Memory stays bounded: the file is read in windows of at most [`WALK_WINDOW`] bytes
    /// that grow only to hold one whole block, and a block longer than
    /// [`MAX_DROP_BLOCK_LEN`] is corruption; every block is checked (CRC, payload) before any
    /// of its keys is handed out.
    ///
    /// Errors: as [`DropFileReader::read_block`], blocks that do not tile the block region,
    /// and those of `each`.
    pub fn walk(
        &self,
        class: IoClass,
        mut each: impl FnMut(WalkItem<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut at = 0u64; // file offset of buf[0]
        let mut buf: Vec<u8> = Vec::new();
        let mut pos = 0usize; // first unparsed byte of buf
        while at + (pos as u64) < self.blocks_end {
            let start = at + pos as u64;
            let rest = &buf[pos..];
            let mut d = Decoder::new(rest);
            let whole = skip_payload(&mut d).filter(|&end| end + 4 <= rest.len());
            let Some(end) = whole else {
                // The block is not all in memory (or is malformed): read further, from the
                // block's start, at least twice as much as before, up to the longest block.
                let held = (buf.len() - pos) as u64;
                let remaining = self.blocks_end - start;
                if held >= remaining || held >= MAX_DROP_BLOCK_LEN {
                    let what = if held >= MAX_DROP_BLOCK_LEN {
                        format!("drop block longer than the limit of {MAX_DROP_BLOCK_LEN} bytes")
                    } else {
                        "malformed drop block, or one running past the block region".into()
                    };
                    return Err(Error::corruption(&self.name, start, what));
                }
                let want = (held.saturating_mul(2))
                    .max(WALK_WINDOW)
                    .min(remaining)
                    .min(MAX_DROP_BLOCK_LEN);
                // Bounded above by MAX_DROP_BLOCK_LEN (1 GiB).
                buf = self.file.read_vec(start, want as usize, class)?;
                at = start;
                pos = 0;
                continue;
            };
            let payload = &rest[..end];
            if checksum::unmask(decode_fixed32(&rest[end..end + 4])) != checksum::crc32c(payload) {
                return Err(Error::corruption(
                    &self.name,
                    start,
                    "drop block checksum mismatch",
                ));
            }
            let (named_table, count) = parse_payload(payload, &mut |_: &[u8], _| {})
                .map_err(|e| Error::corruption(&self.name, start, e))?;
            each(WalkItem::Block(WrittenBlock {
                named_table,
                offset: start,
                len: end as u64 + 4,
                keys: count,
            }))?;
            let mut failed = None;
            parse_payload(payload, &mut |k: &[u8], s| {
                if failed.is_none()
                    && let Err(e) = each(WalkItem::Key(k, s))
                {
                    failed = Some(e);
                }
            })
            .map_err(|e| Error::corruption(&self.name, start, e))?;
            if let Some(e) = failed {
                return Err(e);
            }
            pos += end + 4;
        }
        Ok(())
    }
}

/// What [`DropFileReader::walk`] hands out, in file order: a block, then its drop keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkItem<'a> {
    /// A block (checked whole before this is handed out).
    Block(WrittenBlock),
    /// A drop key of the last block handed out.
    Key(&'a [u8], SeqNo),
}

/// Bytes [`DropFileReader::walk`] reads at a time (more only to hold one longer block).
pub const WALK_WINDOW: u64 = 1 << 20;

/// The named table and key count at the start of a payload.
fn parse_header(payload: &[u8]) -> std::result::Result<(u64, u64), String> {
    let mut d = Decoder::new(payload);
    let named = d.varint64().ok_or("malformed drop block header")?;
    let count = d.varint64().ok_or("malformed drop block header")?;
    Ok((named, count))
}

/// Parses a payload that must be consumed exactly; returns its named table and key count.
fn parse_payload(
    payload: &[u8],
    each: &mut impl FnMut(&[u8], SeqNo),
) -> std::result::Result<(u64, u64), String> {
    let mut d = Decoder::new(payload);
    let named = d.varint64().ok_or("malformed drop block header")?;
    let count = d.varint64().ok_or("malformed drop block header")?;
    // Checked before walking: every entry takes at least `MIN_ENTRY_LEN` bytes.
    if count > payload.len() as u64 / MIN_ENTRY_LEN {
        return Err(format!(
            "drop block claims {count} keys in {} bytes",
            payload.len()
        ));
    }
    for _ in 0..count {
        let key_len = d.varint32().ok_or("malformed drop key")? as usize;
        if key_len > MAX_KEY_SIZE {
            return Err(format!(
                "drop key of {key_len} bytes exceeds {MAX_KEY_SIZE}"
            ));
        }
        let key = d.bytes(key_len).ok_or("drop key runs past its block")?;
        let seq = d.fixed64().ok_or("drop key runs past its block")?;
        if seq > MAX_SEQUENCE {
            return Err(format!("drop key sequence number {seq} is out of range"));
        }
        each(key, seq);
    }
    if !d.is_empty() {
        return Err("bytes left after the last drop key".into());
    }
    Ok((named, count))
}

/// Skips one payload, returning its length, or `None` when it is malformed or truncated.
fn skip_payload(d: &mut Decoder<'_>) -> Option<usize> {
    d.varint64()?;
    let count = d.varint64()?;
    if count > d.remaining().len() as u64 / MIN_ENTRY_LEN {
        return None;
    }
    for _ in 0..count {
        let key_len = d.varint32()? as usize;
        d.bytes(key_len)?;
        d.fixed64()?;
    }
    Some(d.position())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FaultFs;
    use std::path::PathBuf;

    fn setup() -> (Arc<FaultFs>, PathBuf, Arc<IoStats>) {
        let fs = Arc::new(FaultFs::new(1));
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).expect("mkdir");
        (fs, dir, Arc::new(IoStats::default()))
    }

    fn keys(n: u64, prefix: &str) -> Vec<DropKey> {
        (0..n)
            .map(|i| (format!("{prefix}{i:03}").into_bytes(), 100 + i))
            .collect()
    }

    #[test]
    fn blocks_round_trip_by_their_manifest_coordinates() {
        let (fs, dir, stats) = setup();
        let path = dir.join("000009.vdk");
        let blocks = vec![(5, keys(3, "a")), (7, keys(0, "b")), (8, keys(40, "c"))];
        let written = write_drop_file(
            fs.as_ref(),
            &path,
            IoClass::CompactionWrite,
            Arc::clone(&stats),
            &blocks,
        )
        .expect("write");
        assert_eq!(written.len(), 3);
        assert_eq!(written[0].offset, 0);
        assert_eq!(written[1].offset, written[0].len);
        let r = DropFileReader::open(fs.as_ref(), &path, "000009.vdk", stats).expect("open");
        for (w, (named, want)) in written.iter().zip(&blocks) {
            assert_eq!(w.named_table, *named);
            let mut got = Vec::new();
            r.read_block(w, IoClass::GcRead, |k, s| got.push((k.to_vec(), s)))
                .expect("read");
            assert_eq!(&got, want);
        }
        let walked = walked(&r);
        assert_eq!(walked.iter().map(|(w, _)| *w).collect::<Vec<_>>(), written);
        assert_eq!(walked[2].1, blocks[2].1);
    }

    fn walked(r: &DropFileReader) -> Vec<(WrittenBlock, Vec<DropKey>)> {
        let mut out: Vec<(WrittenBlock, Vec<DropKey>)> = Vec::new();
        r.walk(IoClass::Other, |item| {
            match item {
                WalkItem::Block(b) => out.push((b, Vec::new())),
                WalkItem::Key(k, s) => out
                    .last_mut()
                    .expect("a block first")
                    .1
                    .push((k.to_vec(), s)),
            }
            Ok(())
        })
        .expect("walk");
        out
    }

    /// The walk reads in bounded windows: blocks larger than a window, and many blocks across
    /// window boundaries, come out whole and in order; damage anywhere is corruption; the
    /// callback's error stops it.
    #[test]
    fn the_walk_reads_in_bounded_windows() {
        let (fs, dir, stats) = setup();
        let path = dir.join("000014.vdk");
        // Keys of 2 KiB: a block of 1000 keys is about 2 MiB, twice the walk window.
        let big: Vec<DropKey> = (0..1000u64)
            .map(|i| {
                let mut k = format!("{i:05}").into_bytes();
                k.resize(2048, b'x');
                (k, i)
            })
            .collect();
        let mut blocks: Vec<(u64, Vec<DropKey>)> =
            (0..300).map(|t| (t, keys(t % 7, "s"))).collect();
        blocks.insert(150, (999, big));
        let written = write_drop_file(
            fs.as_ref(),
            &path,
            IoClass::CompactionWrite,
            Arc::clone(&stats),
            &blocks,
        )
        .expect("write");
        assert!(
            written[150].len > 2 * WALK_WINDOW - (64 << 10),
            "{}",
            written[150].len
        );
        let counted = Arc::new(IoStats::default());
        let r = DropFileReader::open(fs.as_ref(), &path, "w", Arc::clone(&counted)).expect("open");
        let got = walked(&r);
        assert_eq!(got.iter().map(|(w, _)| *w).collect::<Vec<_>>(), written);
        for ((_, k), (_, want)) in got.iter().zip(&blocks) {
            assert_eq!(k, want);
        }
        // Read in windows (the footer, then several reads), not in one read of the whole file;
        // the re-reads that grow a window to hold the big block stay within a few file sizes.
        let size = fs.read_all(&path).expect("read").len() as u64;
        let reads = counted.get(IoClass::Other);
        assert!(reads.read_ops >= 3, "{reads:?}");
        assert!(reads.read_bytes < 3 * size, "{reads:?} for {size} bytes");
        // The callback's error stops the walk.
        let mut seen = 0;
        let e = r
            .walk(IoClass::Other, |_| {
                seen += 1;
                if seen == 10 {
                    Err(Error::invalid("enough"))
                } else {
                    Ok(())
                }
            })
            .expect_err("stopped");
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert_eq!(seen, 10);
        // A flipped bit in the last block, and a block claiming more bytes than the region.
        let good = fs.read_all(&path).expect("read");
        for at in [
            written[299].offset as usize + 1,
            written[150].offset as usize + 9,
        ] {
            let mut bad = good.clone();
            bad[at] ^= 0x04;
            let p = dir.join("000015.vdk");
            let mut f = fs
                .new_writable(&p, WriteFileOptions::default())
                .expect("create");
            f.append(&bad).expect("append");
            f.sync().expect("sync");
            let r = DropFileReader::open(fs.as_ref(), &p, "v", Arc::clone(&stats)).expect("open");
            let e = r.walk(IoClass::Other, |_| Ok(())).expect_err("damage");
            assert!(e.is_corruption(), "{e}");
        }
    }

    #[test]
    fn damage_is_corruption_never_a_wrong_key() {
        let (fs, dir, stats) = setup();
        let path = dir.join("000009.vdk");
        let written = write_drop_file(
            fs.as_ref(),
            &path,
            IoClass::CompactionWrite,
            Arc::clone(&stats),
            &[(5, keys(4, "k"))],
        )
        .expect("write");
        let w = written[0];
        let r = DropFileReader::open(fs.as_ref(), &path, "x", Arc::clone(&stats)).expect("open");
        // Wrong coordinates and counts.
        for (offset, len, keys, named_table) in [
            (0, w.len + 1, w.keys, 5),
            (1, w.len, w.keys, 5),
            (0, 3, 0, 5),
            (0, w.len, w.keys + 1, 5),
            (u64::MAX - 2, 10, 1, 5),
            // The manifest names another table's block: no key may come out.
            (0, w.len, w.keys, 6),
        ] {
            let want = WrittenBlock {
                named_table,
                offset,
                len,
                keys,
            };
            let mut handed_out = 0;
            let e = r
                .read_block(&want, IoClass::GcRead, |_, _| handed_out += 1)
                .expect_err("bad coordinates");
            assert!(e.is_corruption(), "{e}");
            assert_eq!(handed_out, 0, "{want:?}");
        }
        r.read_block(&w, IoClass::GcRead, |_, _| {})
            .expect("the right block");
        // Every single flipped bit of the block is caught.
        let good = fs.read_all(&path).expect("read");
        for byte in 0..w.len as usize {
            let mut bad = good.clone();
            bad[byte] ^= 0x10;
            let p = dir.join("000010.vdk");
            let mut f = fs
                .new_writable(&p, WriteFileOptions::default())
                .expect("create");
            f.append(&bad).expect("append");
            f.sync().expect("sync");
            let r = DropFileReader::open(fs.as_ref(), &p, "y", Arc::clone(&stats)).expect("open");
            let e = r
                .read_block(&w, IoClass::GcRead, |_, _| {})
                .expect_err("flipped bit");
            assert!(e.is_corruption(), "byte {byte}: {e}");
        }
        // A damaged footer, and a file shorter than one.
        for (at, what) in [
            (good.len() - 1, "magic"),
            (good.len() - 16, "version"),
            (good.len() - 12, "crc"),
        ] {
            let mut bad = good.clone();
            bad[at] ^= 1;
            let p = dir.join("000011.vdk");
            let mut f = fs
                .new_writable(&p, WriteFileOptions::default())
                .expect("create");
            f.append(&bad).expect("append");
            f.sync().expect("sync");
            let e = DropFileReader::open(fs.as_ref(), &p, "z", Arc::clone(&stats)).expect_err(what);
            assert!(e.is_corruption(), "{what}: {e}");
        }
        let p = dir.join("000012.vdk");
        let mut f = fs
            .new_writable(&p, WriteFileOptions::default())
            .expect("create");
        f.append(&good[..10]).expect("append");
        f.sync().expect("sync");
        assert!(
            DropFileReader::open(fs.as_ref(), &p, "w", stats)
                .expect_err("short")
                .is_corruption()
        );
    }

    #[test]
    fn a_payload_claiming_more_keys_than_fit_is_refused_before_allocating() {
        let mut payload = Vec::new();
        put_varint64(&mut payload, 1);
        put_varint64(&mut payload, u64::MAX / 2);
        let e = parse_payload(&payload, &mut |_: &[u8], _| {}).expect_err("too many");
        assert!(e.contains("claims"), "{e}");
    }

    #[test]
    fn oversized_keys_are_refused_before_anything_is_written() {
        let (fs, dir, stats) = setup();
        let path = dir.join("000013.vdk");
        let e = write_drop_file(
            fs.as_ref(),
            &path,
            IoClass::CompactionWrite,
            stats,
            &[(1, vec![(vec![0; MAX_KEY_SIZE + 1], 1)])],
        )
        .expect_err("too long");
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(fs.path_kind(&path).expect("stat").is_none());
    }
}
