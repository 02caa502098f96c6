//! The CURRENT file: names the live manifest. Format: `MANIFEST-NNNNNN <crc32c hex>\n`, where the
//! CRC covers the manifest name. Replaced atomically: write `CURRENT.tmp`, sync it, rename it over
//! `CURRENT`, sync the directory.

use std::path::Path;

use crate::checksum::crc32c;
use crate::error::{Error, Result};
use crate::filename::{CURRENT, FileType, manifest_file_name, parse_file_name};
use std::sync::Arc;

use crate::io::{FileSystem, IoClass, IoStats, write_file_atomically};

/// Longest CURRENT file accepted: it holds one short line.
const MAX_CURRENT_LEN: u64 = 256;

/// Points CURRENT at manifest `number`, durably.
pub fn set_current(
    fs: &dyn FileSystem,
    dir: &Path,
    stats: &Arc<IoStats>,
    number: u64,
) -> Result<()> {
    let name = manifest_file_name(number);
    let text = format!("{name} {:08x}\n", crc32c(name.as_bytes()));
    write_file_atomically(fs, dir, CURRENT, text.as_bytes(), stats, IoClass::Manifest)
}

/// Reads CURRENT and returns the number of the manifest it names.
pub fn read_current(fs: &dyn FileSystem, dir: &Path, stats: &IoStats) -> Result<u64> {
    let path = dir.join(CURRENT);
    let size = fs.file_size(&path)?;
    if size > MAX_CURRENT_LEN {
        return Err(Error::corruption(
            CURRENT,
            0,
            format!("{size} bytes is too long for CURRENT"),
        ));
    }
    let bytes = fs.read_all(&path)?;
    stats.record_read(IoClass::Manifest, bytes.len() as u64);
    let bad = |what: &str| Error::corruption(CURRENT, 0, what.to_string());
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8"))?;
    let line = text
        .strip_suffix('\n')
        .ok_or_else(|| bad("missing final newline"))?;
    let (name, crc) = line
        .split_once(' ')
        .ok_or_else(|| bad("missing checksum"))?;
    let crc = u32::from_str_radix(crc, 16).map_err(|_| bad("unreadable checksum"))?;
    if crc != crc32c(name.as_bytes()) {
        return Err(bad("checksum mismatch"));
    }
    match parse_file_name(name) {
        Some(FileType::Manifest(n)) => Ok(n),
        _ => Err(bad("does not name a manifest")),
    }
}
