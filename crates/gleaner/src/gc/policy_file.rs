//! Files a GC policy keeps of its own (a learned model, say): named `<policy>.<slot>.pol`
//! (`filename.rs`),
//! written whole and atomically, checksummed (docs/format.md, "Policy file"). A damaged or
//! unreadable one reads as absent: it costs the policy what it had learned, never the open.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::checksum::{crc32c, mask, unmask};
use crate::coding::{decode_fixed32, decode_fixed64, put_fixed32, put_fixed64};
use crate::error::{Error, Result};
#[cfg(test)]
use crate::filename::parse_policy_file_name;
use crate::filename::{policy_file_name, valid_policy_name};
use crate::io::{FileSystem, IoClass, IoStats, write_file_atomically};

/// Most bytes of one policy file's data: checked before writing, and before reading a file.
pub const MAX_POLICY_FILE: u64 = 64 << 20;

/// Footer: data length (u64), masked CRC32C of the data (u32), format version (u32), magic.
const FOOTER_LEN: usize = 24;
const MAGIC: &[u8; 8] = b"GlnrPolF";
const FORMAT: u32 = 1;

/// `data` with its footer: the bytes of a policy file.
pub fn encode_policy_file(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + FOOTER_LEN);
    out.extend_from_slice(data);
    put_fixed64(&mut out, data.len() as u64);
    put_fixed32(&mut out, mask(crc32c(data)));
    put_fixed32(&mut out, FORMAT);
    out.extend_from_slice(MAGIC);
    out
}

/// The data of a policy file's bytes; `name` locates damage.
///
/// Errors: [`Error::Corruption`] for a short file, a wrong magic, format or length, or a
/// checksum mismatch.
pub fn decode_policy_file(name: &str, bytes: &[u8]) -> Result<Vec<u8>> {
    let bad = |what: &str| Error::corruption(name, 0, format!("policy file: {what}"));
    if bytes.len() < FOOTER_LEN {
        return Err(bad("shorter than its footer"));
    }
    let (data, footer) = bytes.split_at(bytes.len() - FOOTER_LEN);
    if &footer[16..] != MAGIC {
        return Err(bad("bad magic"));
    }
    let format = decode_fixed32(&footer[12..16]);
    if format != FORMAT {
        return Err(bad(&format!(
            "format {format}, unknown to this build (it reads {FORMAT})"
        )));
    }
    if decode_fixed64(&footer[..8]) != data.len() as u64 {
        return Err(bad("length does not match the file"));
    }
    if unmask(decode_fixed32(&footer[8..12])) != crc32c(data) {
        return Err(bad("checksum mismatch"));
    }
    Ok(data.to_vec())
}

/// The files of one policy in one database: what its runtime reads and writes. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PolicyFiles {
    inner: Arc<FilesInner>,
}

#[derive(Debug)]
struct FilesInner {
    policy: String,
    dir: PathBuf,
    /// Set once the open holds the directory (a new database's policy is built before).
    fs: OnceLock<Arc<dyn FileSystem>>,
    io: Arc<IoStats>,
    read_only: bool,
    /// Files found damaged or unreadable (each read as absent).
    damaged: AtomicU64,
}

impl PolicyFiles {
    /// The files of `policy` in `dir`, through `fs` once it is given (before, none exists:
    /// the database is new); `read_only` refuses writes.
    pub(crate) fn new(
        policy: &str,
        dir: &Path,
        fs: Option<Arc<dyn FileSystem>>,
        io: Arc<IoStats>,
        read_only: bool,
    ) -> Self {
        let cell = OnceLock::new();
        if let Some(fs) = fs {
            let _ = cell.set(fs);
        }
        PolicyFiles {
            inner: Arc::new(FilesInner {
                policy: policy.to_string(),
                dir: dir.to_path_buf(),
                fs: cell,
                io,
                read_only,
                damaged: AtomicU64::new(0),
            }),
        }
    }

    /// The data of file `slot`, or `None` when there is none or it is damaged or unreadable
    /// (logged as a warning and counted: the policy starts over, the database is unharmed).
    ///
    /// Errors: [`Error::InvalidArgument`] for a slot name that is not 1 to 64 letters,
    /// digits, `_` or `-`.
    pub fn read(&self, slot: &str) -> Result<Option<Vec<u8>>> {
        let name = self.name(slot)?;
        let path = self.inner.dir.join(&name);
        let Some(fs) = self.inner.fs.get() else {
            return Ok(None);
        };
        match fs.path_kind(&path) {
            Ok(None) => return Ok(None),
            Ok(Some(_)) => {}
            Err(e) => return Ok(self.damaged(&name, &e)),
        }
        let read = fs.file_size(&path).and_then(|size| {
            if size > MAX_POLICY_FILE + FOOTER_LEN as u64 {
                return Err(Error::corruption(
                    name.as_str(),
                    0,
                    format!("policy file of {size} bytes, beyond the limit"),
                ));
            }
            let bytes = fs.read_all(&path)?;
            self.inner
                .io
                .record_read(IoClass::Other, bytes.len() as u64);
            decode_policy_file(&name, &bytes)
        });
        match read {
            Ok(data) => Ok(Some(data)),
            Err(e) => Ok(self.damaged(&name, &e)),
        }
    }

    /// Replaces file `slot` with `data`, atomically (a crash leaves the old file or the new).
    ///
    /// Errors: [`Error::OpenedReadOnly`] on a read-only database; [`Error::InvalidArgument`]
    /// for a bad slot name or data over [`MAX_POLICY_FILE`]; writing fails.
    pub fn write(&self, slot: &str, data: &[u8]) -> Result<()> {
        let name = self.name(slot)?;
        if self.inner.read_only {
            return Err(self.read_only("write a policy file"));
        }
        if data.len() as u64 > MAX_POLICY_FILE {
            return Err(Error::invalid(format!(
                "policy file {name}: {} bytes, at most {MAX_POLICY_FILE} (MAX_POLICY_FILE)",
                data.len()
            )));
        }
        write_file_atomically(
            self.fs()?.as_ref(),
            &self.inner.dir,
            &name,
            &encode_policy_file(data),
            &self.inner.io,
            IoClass::Other,
        )
    }

    /// Deletes file `slot` if it exists.
    ///
    /// Errors: as [`PolicyFiles::write`], but for the size.
    pub fn remove(&self, slot: &str) -> Result<()> {
        let name = self.name(slot)?;
        if self.inner.read_only {
            return Err(self.read_only("remove a policy file"));
        }
        let path = self.inner.dir.join(&name);
        let fs = self.fs()?;
        if fs.path_kind(&path)?.is_some() {
            fs.remove_file(&path)?;
            fs.sync_dir(&self.inner.dir)?;
        }
        Ok(())
    }

    /// Gives the files their file system, once the open holds the directory.
    pub(crate) fn attach(&self, fs: Arc<dyn FileSystem>) {
        let _ = self.inner.fs.set(fs);
    }

    fn read_only(&self, operation: &'static str) -> Error {
        Error::OpenedReadOnly {
            path: self.inner.dir.display().to_string(),
            operation,
        }
    }

    fn fs(&self) -> Result<&Arc<dyn FileSystem>> {
        self.inner.fs.get().ok_or_else(|| {
            Error::invalid("policy files are written once the open holds the directory, not while the policy is built for a new database")
        })
    }

    /// Files read as absent because they were damaged or unreadable.
    pub fn damaged_count(&self) -> u64 {
        self.inner.damaged.load(Ordering::Relaxed)
    }

    fn name(&self, slot: &str) -> Result<String> {
        if !valid_policy_name(slot) {
            return Err(Error::invalid(format!(
                "policy file slot `{slot}`: 1 to 64 letters, digits, `_` or `-`"
            )));
        }
        Ok(policy_file_name(&self.inner.policy, slot))
    }

    fn damaged(&self, name: &str, e: &Error) -> Option<Vec<u8>> {
        self.inner.damaged.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "{}: policy file {name} is unusable ({e}); the policy starts over without it",
            self.inner.dir.display()
        );
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FaultFs;

    #[test]
    fn names_parse_only_as_written() {
        assert_eq!(policy_file_name("dumpkv", "model"), "dumpkv.model.pol");
        assert_eq!(
            parse_policy_file_name("dumpkv.model.pol"),
            Some(("dumpkv", "model"))
        );
        for stranger in [
            "dumpkv.pol",
            ".model.pol",
            "a b.model.pol",
            "x.y.z.pol",
            "x.y.pol.tmp",
        ] {
            assert_eq!(parse_policy_file_name(stranger), None, "{stranger}");
        }
    }

    #[test]
    fn files_round_trip_and_damage_reads_as_absent() {
        let fs = FaultFs::new(3);
        let dir = Path::new("/db");
        fs.create_dir_all(dir).expect("dir");
        let files = PolicyFiles::new(
            "mine",
            dir,
            Some(Arc::new(fs.clone())),
            Arc::default(),
            false,
        );
        assert_eq!(files.read("model").expect("read"), None);
        files.write("model", b"weights").expect("write");
        assert_eq!(
            files.read("model").expect("read").as_deref(),
            Some(&b"weights"[..])
        );
        assert!(files.write("bad slot", b"").is_err());
        // Every flipped byte and every truncation is damage, read as absent and counted.
        let good = fs.read_all(&dir.join("mine.model.pol")).expect("bytes");
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            assert!(decode_policy_file("f", &bad).is_err(), "byte {i}");
            assert!(decode_policy_file("f", &good[..i]).is_err(), "cut {i}");
        }
        let mut damaged = good.clone();
        damaged[0] ^= 1;
        write_file_atomically(
            &fs,
            dir,
            "mine.model.pol",
            &damaged,
            &Arc::default(),
            IoClass::Other,
        )
        .expect("damage");
        assert_eq!(files.read("model").expect("read"), None);
        assert_eq!(files.damaged_count(), 1);
        files.remove("model").expect("remove");
        assert_eq!(files.read("model").expect("read"), None);
        assert_eq!(files.damaged_count(), 1);
        // Read-only: readable, never written.
        let ro = PolicyFiles::new(
            "mine",
            dir,
            Some(Arc::new(fs.clone())),
            Arc::default(),
            true,
        );
        assert!(matches!(
            ro.write("model", b"x"),
            Err(Error::OpenedReadOnly { .. })
        ));
    }
}
