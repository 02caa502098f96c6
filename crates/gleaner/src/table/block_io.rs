//! Writing and reading one block with its trailer: compression on the way out, checksum
//! verification, bounds checks and decompression on the way in.

use crate::checksum;
use crate::coding::decode_fixed32;
use crate::error::{Error, Result};
use crate::io::accounting::CountedReader;
use crate::io::{IoClass, WritableFile};

use super::format::{
    BLOCK_TRAILER_LEN, BLOCK_TYPE_LZ4, BLOCK_TYPE_NONE, BlockHandle, Compression,
    MAX_BLOCK_CONTENTS,
};

/// Size of the decompressed-length prefix of an LZ4 block.
const LZ4_SIZE_PREFIX: usize = 4;

/// LZ4 cannot expand data by more than 255× (a match-length extension byte encodes at most 255
/// output bytes), so a claimed decompressed size above this bound is corrupt whatever the
/// absolute limit says. The slack covers the fixed cost of the first sequence.
fn lz4_expansion_bound(compressed_len: usize) -> usize {
    compressed_len.saturating_mul(256).saturating_add(64)
}

/// Compresses `raw` into `scratch` (the stored form: 4-byte size prefix + LZ4 block) and returns
/// true when the result saves at least 12.5% of `raw`, i.e. when it should be stored compressed.
fn compress_lz4(raw: &[u8], scratch: &mut Vec<u8>) -> bool {
    let Ok(len) = u32::try_from(raw.len()) else {
        return false;
    };
    scratch.clear();
    scratch.resize(
        LZ4_SIZE_PREFIX + lz4_flex::block::get_maximum_output_size(raw.len()),
        0,
    );
    scratch[..LZ4_SIZE_PREFIX].copy_from_slice(&len.to_le_bytes());
    match lz4_flex::block::compress_into(raw, &mut scratch[LZ4_SIZE_PREFIX..]) {
        Ok(n) => {
            scratch.truncate(LZ4_SIZE_PREFIX + n);
            scratch.len() <= raw.len() - raw.len() / 8
        }
        Err(_) => false,
    }
}

/// Writes `raw` as one block at `*offset` (which must equal the file's length), compressing it
/// when `compression` asks for it and it pays, and advances `*offset` past the trailer.
/// `scratch` is a reusable compression buffer. Blocks larger than [`MAX_BLOCK_CONTENTS`] are
/// refused with `Error::InvalidArgument` because no reader would accept them.
pub(crate) fn write_block(
    file: &mut dyn WritableFile,
    offset: &mut u64,
    raw: &[u8],
    compression: Compression,
    scratch: &mut Vec<u8>,
) -> Result<BlockHandle> {
    if raw.len() > MAX_BLOCK_CONTENTS {
        return Err(Error::invalid(format!(
            "key-table block of {} bytes exceeds the format limit of {MAX_BLOCK_CONTENTS} bytes \
             (too many or too large entries in one table)",
            raw.len()
        )));
    }
    let (contents, block_type) = match compression {
        Compression::Lz4 if compress_lz4(raw, scratch) => (&scratch[..], BLOCK_TYPE_LZ4),
        _ => (raw, BLOCK_TYPE_NONE),
    };
    let crc = checksum::crc32c_extend(checksum::crc32c(contents), &[block_type]);
    let mut trailer = [0u8; BLOCK_TRAILER_LEN];
    trailer[0] = block_type;
    trailer[1..].copy_from_slice(&checksum::mask(crc).to_le_bytes());
    file.append(contents)?;
    file.append(&trailer)?;
    let handle = BlockHandle {
        offset: *offset,
        size: contents.len() as u64,
    };
    *offset += (contents.len() + BLOCK_TRAILER_LEN) as u64;
    Ok(handle)
}

/// Reads the block at `handle`, verifies its checksum and returns its uncompressed contents.
///
/// `data_end` is where the footer starts; a handle reaching past it, a size above
/// [`MAX_BLOCK_CONTENTS`], a checksum mismatch, an unknown type byte, or an LZ4 block that does
/// not decompress to exactly its recorded size are `Error::Corruption` at the block's offset.
/// `what` names the block in error messages ("data", "index", ...).
pub(crate) fn read_block(
    file: &CountedReader,
    file_name: &str,
    handle: BlockHandle,
    data_end: u64,
    class: IoClass,
    what: &str,
) -> Result<Vec<u8>> {
    handle.check_within(data_end, file_name, what)?;
    // check_within bounded the size by MAX_BLOCK_CONTENTS, so this fits in memory terms.
    let buf = file.read_vec(
        handle.offset,
        handle.size as usize + BLOCK_TRAILER_LEN,
        class,
    )?;
    decode_block(buf, file_name, handle, what)
}

/// Verifies and unwraps a block read whole (`handle.size` bytes of contents, then the
/// trailer): the checksum, the type byte, and for LZ4 the decompressed size. Errors as
/// [`read_block`]'s. The caller has checked `handle` against the table's data end and made
/// `buf` exactly `handle.size + BLOCK_TRAILER_LEN` bytes long.
pub(crate) fn decode_block(
    mut buf: Vec<u8>,
    file_name: &str,
    handle: BlockHandle,
    what: &str,
) -> Result<Vec<u8>> {
    let size = handle.size as usize;
    debug_assert_eq!(buf.len(), size + BLOCK_TRAILER_LEN);
    let stored = checksum::unmask(decode_fixed32(&buf[size + 1..]));
    let actual = checksum::crc32c(&buf[..size + 1]);
    if stored != actual {
        return Err(Error::corruption(
            file_name,
            handle.offset,
            format!(
                "{what} block checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            ),
        ));
    }
    match buf[size] {
        BLOCK_TYPE_NONE => {
            buf.truncate(size);
            Ok(buf)
        }
        BLOCK_TYPE_LZ4 => decompress_lz4(&buf[..size], file_name, handle.offset, what),
        t => Err(Error::corruption(
            file_name,
            handle.offset,
            format!("{what} block has unknown compression type {t}"),
        )),
    }
}

/// Decompresses a stored LZ4 block (size prefix + LZ4 data), bounding the claimed size before
/// allocating.
pub(crate) fn decompress_lz4(
    stored: &[u8],
    file_name: &str,
    offset: u64,
    what: &str,
) -> Result<Vec<u8>> {
    let corrupt = |detail: String| Error::corruption(file_name, offset, detail);
    if stored.len() < LZ4_SIZE_PREFIX {
        return Err(corrupt(format!(
            "{what} block is LZ4 but too short for its size prefix"
        )));
    }
    let claimed = decode_fixed32(stored) as usize;
    let data = &stored[LZ4_SIZE_PREFIX..];
    if claimed > MAX_BLOCK_CONTENTS || claimed > lz4_expansion_bound(data.len()) {
        return Err(corrupt(format!(
            "{what} block claims an impossible decompressed size of {claimed} bytes from {} \
             compressed bytes (limit {MAX_BLOCK_CONTENTS})",
            data.len()
        )));
    }
    let mut out = vec![0u8; claimed];
    let n = lz4_flex::block::decompress_into(data, &mut out)
        .map_err(|e| corrupt(format!("{what} block failed to decompress: {e}")))?;
    if n != claimed {
        return Err(corrupt(format!(
            "{what} block decompressed to {n} bytes, expected {claimed}"
        )));
    }
    Ok(out)
}

/// Checks that `file` (table `name`) is `expected` bytes long, as the manifest or the builder
/// recorded it: a table opened (or opened again) at another size was truncated or replaced.
///
/// `Error::Corruption` at the shorter of the two sizes when they differ; a failed `stat` is
/// `Error::Io`.
pub(crate) fn check_file_size(file: &CountedReader, name: &str, expected: u64) -> Result<()> {
    let actual = file.size()?;
    if actual != expected {
        return Err(Error::corruption(
            name,
            actual.min(expected),
            format!("file is {actual} bytes, expected {expected} (truncated or replaced)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::test_util::MemFile;

    fn write(raw: &[u8], c: Compression) -> (MemFile, BlockHandle) {
        let file = MemFile::default();
        let mut w = file.writer();
        let mut off = 0;
        let mut scratch = Vec::new();
        let h = write_block(&mut w, &mut off, raw, c, &mut scratch).unwrap();
        assert_eq!(off, h.size + BLOCK_TRAILER_LEN as u64);
        (file, h)
    }

    #[test]
    fn compressible_blocks_are_stored_lz4_and_round_trip() {
        let raw: Vec<u8> = (0..4000u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
        let (file, h) = write(&raw, Compression::Lz4);
        assert!(h.size < raw.len() as u64 * 7 / 8);
        assert_eq!(file.bytes()[h.size as usize], BLOCK_TYPE_LZ4);
        let end = file.bytes().len() as u64;
        let got = read_block(&file.reader(), "t", h, end, IoClass::Other, "data").unwrap();
        assert_eq!(got, raw);
    }

    #[test]
    fn incompressible_blocks_are_stored_plain() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let raw: Vec<u8> = (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let (file, h) = write(&raw, Compression::Lz4);
        assert_eq!(h.size, raw.len() as u64);
        assert_eq!(file.bytes()[raw.len()], BLOCK_TYPE_NONE);
        let end = file.bytes().len() as u64;
        let got = read_block(&file.reader(), "t", h, end, IoClass::Other, "data").unwrap();
        assert_eq!(got, raw);
        // Empty blocks are legal.
        let (file, h) = write(&[], Compression::Lz4);
        let got = read_block(&file.reader(), "t", h, 5, IoClass::Other, "data").unwrap();
        assert!(got.is_empty());
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let raw = b"hello hello hello hello hello hello hello hello".to_vec();
        for c in [Compression::None, Compression::Lz4] {
            let (file, h) = write(&raw, c);
            let len = file.bytes().len();
            for i in 0..len {
                for bit in 0..8 {
                    let bad = MemFile::from_bytes(file.bytes());
                    bad.flip(i, 1 << bit);
                    let err = read_block(&bad.reader(), "t", h, len as u64, IoClass::Other, "x")
                        .unwrap_err();
                    assert!(err.is_corruption(), "{c:?} byte {i} bit {bit}: {err}");
                }
            }
            // A handle past the end is corruption, not an I/O error.
            let err = read_block(&file.reader(), "t", h, len as u64 - 1, IoClass::Other, "x")
                .unwrap_err();
            assert!(err.is_corruption());
        }
    }

    #[test]
    fn bad_lz4_payloads_are_corruption_not_panics() {
        assert!(decompress_lz4(&[1, 0], "t", 0, "x").is_err());
        // Claimed size beyond the limit or the expansion bound: rejected before allocating.
        let mut huge = (u32::MAX).to_le_bytes().to_vec();
        huge.extend_from_slice(&[0u8; 16]);
        assert!(
            decompress_lz4(&huge, "t", 0, "x")
                .unwrap_err()
                .is_corruption()
        );
        let mut big = (1u32 << 20).to_le_bytes().to_vec();
        big.extend_from_slice(&[0x1f, 0, 0, 0]);
        assert!(decompress_lz4(&big, "t", 0, "x").is_err());
        // Valid stream with a wrong recorded size, either way.
        let raw = vec![7u8; 1000];
        let mut scratch = Vec::new();
        assert!(compress_lz4(&raw, &mut scratch));
        assert_eq!(decompress_lz4(&scratch, "t", 0, "x").unwrap(), raw);
        for claimed in [999u32, 1001] {
            let mut s = scratch.clone();
            s[..4].copy_from_slice(&claimed.to_le_bytes());
            assert!(decompress_lz4(&s, "t", 0, "x").unwrap_err().is_corruption());
        }
        // Random garbage after a plausible size prefix.
        let mut x = 99u64;
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (x >> 58) as usize + 1;
            let mut s = ((x >> 40) as u32 % 4096).to_le_bytes().to_vec();
            for j in 0..len {
                s.push((x >> (j % 8 * 8)) as u8 ^ j as u8);
            }
            let _ = decompress_lz4(&s, "t", 0, "x");
        }
    }

    #[test]
    fn lz4_expansion_bound_holds_for_extreme_input() {
        let raw = vec![0u8; 4 << 20];
        let mut scratch = Vec::new();
        assert!(compress_lz4(&raw, &mut scratch));
        assert!(raw.len() <= lz4_expansion_bound(scratch.len() - LZ4_SIZE_PREFIX));
        assert_eq!(decompress_lz4(&scratch, "t", 0, "x").unwrap(), raw);
    }
}

