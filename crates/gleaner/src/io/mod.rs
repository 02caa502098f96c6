//! The file-system interface through which every file access of Gleaner goes.
//!
//! Two implementations exist: [`PosixFs`] (the real one, with optional `O_DIRECT`) and
//! [`FaultFs`] (in memory, for tests: simulates crashes that lose unsynced data, torn writes,
//! and injects `EIO`/`ENOSPC` on chosen operations). Byte accounting per [`IoClass`] happens one
//! layer up, in [`accounting`], so both implementations are counted the same way.

pub mod accounting;
pub mod fault;
mod fault_gate;
pub mod posix;
mod usage;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::error::Result;

pub use accounting::{CountedReader, CountedWriter, IoClass, IoCounters, IoStats};
pub use fault::{FaultFs, FaultKind, FaultOp, FaultRule, TornMode};
pub use fault_gate::FaultGate;
pub use posix::PosixFs;
pub(crate) use usage::{DiskUsage, TrackedFs};

/// Options for opening a file for reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadFileOptions {
    /// Bypass the OS page cache (`O_DIRECT`). Implementations that cannot honour it return an
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `use_direct_io_for_reads`.
    pub direct: bool,
}

/// Options for creating a file for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteFileOptions {
    /// Bypass the OS page cache (`O_DIRECT`); writes go through an aligned buffer.
    pub direct: bool,
    /// Size of the user-space write buffer in bytes; appends are coalesced into writes of at
    /// most this size. 0 means unbuffered (every append is one write call).
    pub buffer_size: usize,
}

impl Default for WriteFileOptions {
    fn default() -> Self {
        WriteFileOptions {
            direct: false,
            buffer_size: 1 << 20,
        }
    }
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

/// The refusal every [`FileSystem::reopen_writable`] gives `opts.direct`: a reopened file's
/// kept bytes need not end on a block boundary, where direct writes must start.
pub(crate) fn refuse_direct_reopen(path: &Path, opts: WriteFileOptions) -> Result<()> {
    if opts.direct {
        return Err(crate::error::Error::invalid(format!(
            "{} cannot be reopened for appending with direct I/O",
            path.display()
        )));
    }
    Ok(())
}

/// A file-system implementation. All paths are absolute or relative to the process's working
/// directory; Gleaner only ever uses paths inside the database directory.
pub trait FileSystem: Send + Sync + fmt::Debug + 'static {
    /// Creates a directory and its parents; succeeds when it already exists.
    fn create_dir_all(&self, path: &Path) -> Result<()>;

    /// Creates a new file for writing, replacing any file of that name (the old content is no
    /// longer reachable by the name). The directory entry is durable only after
    /// [`FileSystem::sync_dir`].
    fn new_writable(&self, path: &Path, opts: WriteFileOptions) -> Result<Box<dyn WritableFile>>;

    /// Opens the existing file `path` for appending after its first `len` bytes, cutting off
    /// whatever follows them (the cut is durable once the file is synced). What resumes a value
    /// segment after a crash: its valid records stay, a torn tail goes. Writes are buffered as
    /// `opts.buffer_size` says; `Error::InvalidArgument` when `opts.direct` is set (a reopened
    /// file's tail need not be block-aligned), `Error::Io` when the file does not exist or holds
    /// fewer than `len` bytes.
    fn reopen_writable(
        &self,
        path: &Path,
        len: u64,
        opts: WriteFileOptions,
    ) -> Result<Box<dyn WritableFile>>;

    /// Opens an existing file for positional reads.
    fn open_readable(
        &self,
        path: &Path,
        opts: ReadFileOptions,
    ) -> Result<Arc<dyn RandomAccessFile>>;

    /// Atomically renames `from` to `to`, replacing `to` if it exists. Durable after
    /// [`FileSystem::sync_dir`] of the parent directory.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;

    /// Removes a file. Durable after [`FileSystem::sync_dir`].
    fn remove_file(&self, path: &Path) -> Result<()>;

    /// Names (not paths) of the entries of a directory, in no particular order.
    fn list_dir(&self, path: &Path) -> Result<Vec<String>>;

    /// What `path` names, or `None` when it does not exist.
    fn path_kind(&self, path: &Path) -> Result<Option<PathKind>>;

    /// Size in bytes of the file at `path`.
    fn file_size(&self, path: &Path) -> Result<u64>;

    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> Result<()>;

    /// Takes an exclusive lock on `path` (creating the file if needed). Fails with
    /// [`Error::Locked`](crate::Error::Locked) when another holder, exclusive or shared, in this
    /// process or another, has it. The lock is released when the returned guard is dropped.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;

    /// Takes a shared lock on the existing file `path`, which is opened for reading only and
    /// never created. Any number of shared holders, in this process or others, coexist; it
    /// fails with [`Error::Locked`](crate::Error::Locked) while an exclusive holder
    /// ([`FileSystem::lock`]) has the file, and an exclusive `lock` fails while a shared holder
    /// has it. Returns `Ok(None)` when `path` does not exist (nothing is created, so a caller
    /// that must not write anything can still go on, unprotected). The lock is released when
    /// the returned guard is dropped.
    fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>>;

    /// Reads a whole (small) file into memory.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let file = self.open_readable(path, ReadFileOptions::default())?;
        let size = file.size()?;
        let len = usize::try_from(size).map_err(|_| {
            crate::Error::invalid(format!(
                "{} is too large to read into memory",
                path.display()
            ))
        })?;
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }
}

/// A file opened for positional reads. Reads never move a shared cursor, so one handle serves
/// any number of threads at once.
pub trait RandomAccessFile: Send + Sync + fmt::Debug {
    /// Fills `buf` with the bytes at `offset..offset + buf.len()`. Reading past the end of the
    /// file is an error of kind `UnexpectedEof`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;

    /// The `len` bytes at `offset` in a new buffer; errors as [`RandomAccessFile::read_exact_at`].
    /// A file that reads through a buffer of its own (direct I/O) copies out of it rather than
    /// into a zeroed one.
    fn read_vec_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }

    /// Current size of the file in bytes.
    fn size(&self) -> Result<u64>;
}

/// A file being written sequentially.
pub trait WritableFile: Send + fmt::Debug {
    /// Appends bytes (possibly only into a user-space buffer).
    fn append(&mut self, data: &[u8]) -> Result<()>;

    /// Hands buffered bytes to the operating system, so they survive a process crash (not a
    /// power loss). With direct I/O only whole aligned blocks are written; the tail stays
    /// buffered until [`WritableFile::sync`].
    fn flush(&mut self) -> Result<()>;

    /// Makes every appended byte durable (flush, then `fdatasync`).
    fn sync(&mut self) -> Result<()>;

    /// Bytes appended so far (the file's logical length).
    fn len(&self) -> u64;

    /// True when nothing has been appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Replaces `dir/name` atomically and durably: writes `dir/name.tmp`, syncs it, renames it over
/// `dir/name`, syncs the directory. A crash leaves either the old or the new file (and perhaps
/// the temporary, which open removes). Bytes count under `class`.
pub fn write_file_atomically(
    fs: &dyn FileSystem,
    dir: &Path,
    name: &str,
    bytes: &[u8],
    stats: &Arc<IoStats>,
    class: IoClass,
) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let file = fs.new_writable(
        &tmp,
        WriteFileOptions {
            direct: false,
            buffer_size: 0,
        },
    )?;
    let mut file = CountedWriter::new(file, class, Arc::clone(stats));
    file.append(bytes)?;
    file.sync()?;
    drop(file);
    fs.rename(&tmp, &dir.join(name))?;
    fs.sync_dir(dir)
}

/// Guard of a lock taken with [`FileSystem::lock`]; dropping it releases the lock.
pub trait FileLock: Send + Sync + fmt::Debug {}
