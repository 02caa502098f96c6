//! The real POSIX file system.
//!
//! Buffered writes go through a user-space buffer and `write(2)`; direct writes (`O_DIRECT`) go
//! through an aligned buffer and positional writes, because the kernel only accepts block-aligned
//! offsets, lengths and memory for them. Reads are positional (`pread`), so one handle serves
//! many threads without a shared cursor.

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

use super::{
    FileLock, FileSystem, PathKind, RandomAccessFile, ReadFileOptions, WritableFile,
    WriteFileOptions, refuse_direct_reopen,
};
use crate::error::{Error, Result};

/// Alignment of offsets, lengths and memory for direct I/O. 4096 covers the logical block size
/// of every device we run on (512 or 4096), and the page size for the memory side.
const DIRECT_ALIGN: usize = 4096;

/// Canonical paths of the lock files held by this process, with how they are held. `flock`
/// already excludes a second open file description, but this map makes the rule independent of
/// how the platform treats locks within one process, and turns a conflicting lock into a clear
/// error without a syscall.
static LOCKED: LazyLock<Mutex<HashMap<PathBuf, Holders>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// How this process holds a lock file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holders {
    Exclusive,
    /// This many shared guards (each with its own open file and shared `flock`).
    Shared(usize),
}

/// The error for a lock file someone else holds: names the directory holding it.
fn locked_error(path: &Path) -> Error {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.display().to_string(),
        _ => ".".to_string(),
    };
    Error::Locked { path: dir }
}

/// The real file system, backed by `std::fs` and, for direct I/O, `O_DIRECT`.
#[derive(Debug, Default, Clone, Copy)]
pub struct PosixFs;

impl PosixFs {
    /// Returns the POSIX file system.
    pub fn new() -> Self {
        PosixFs
    }
}

/// Maps a failed `open` with `O_DIRECT` to the error the user can act on: `EINVAL` means the
/// file system (e.g. an old tmpfs) does not support direct I/O, so the option must be turned off.
fn direct_open_error(path: &Path, option: &str, context: String, err: io::Error) -> Error {
    if err.raw_os_error() == Some(libc::EINVAL) {
        Error::invalid(format!(
            "{option} is set but the file system holding {} does not support direct I/O",
            path.display()
        ))
    } else {
        Error::io(context, err)
    }
}

fn round_up(n: usize) -> usize {
    n.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN
}

/// A heap buffer whose usable region starts at a `DIRECT_ALIGN`-aligned address. It is made by
/// over-allocating and skipping to the first aligned byte, which needs no unsafe code; the Vec
/// is never grown, so its heap block (and thus the alignment) never moves.
struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// A zeroed buffer of `len` usable bytes (`len` is a multiple of `DIRECT_ALIGN`).
    fn new(len: usize) -> Self {
        let storage = vec![0u8; len + DIRECT_ALIGN];
        let start = storage.as_ptr().align_offset(DIRECT_ALIGN);
        // align_offset may give up (usize::MAX) in theory; fall back to 0 so we never panic.
        // The kernel would then reject the I/O with EINVAL, which is reported as an error.
        let start = if start <= DIRECT_ALIGN { start } else { 0 };
        AlignedBuf {
            storage,
            start,
            len,
        }
    }

    fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .finish()
    }
}

/// Opens `path` with `oo` and, on Linux, `O_NOATIME`: the engine never uses a file's access
/// time, and with it the kernel skips deciding at every read whether to update it (1.7 % of
/// the samples in a profile of 8 KiB point reads from the page cache, docs/benchmarks.md,
/// "gleaner-server against Redis: values written once"). The flag is refused
/// (`EPERM`) for a file the process neither owns nor may change the owner of; that file is
/// opened as usual.
fn open_without_atime(oo: &OpenOptions, path: &Path) -> std::io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        let mut no_atime = oo.clone();
        no_atime.custom_flags(libc::O_NOATIME);
        match no_atime.open(path) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
            r => return r,
        }
    }
    oo.open(path)
}

impl FileSystem for PosixFs {
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path)
            .map_err(|e| Error::io(format!("creating directory {}", path.display()), e))
    }

    fn new_writable(&self, path: &Path, opts: WriteFileOptions) -> Result<Box<dyn WritableFile>> {
        let mut oo = OpenOptions::new();
        oo.write(true).create(true).truncate(true);
        let context = || format!("creating {}", path.display());
        if opts.direct {
            oo.custom_flags(libc::O_DIRECT);
            let file = oo.open(path).map_err(|e| {
                direct_open_error(path, "use_direct_io_for_background_writes", context(), e)
            })?;
            // A buffer smaller than one block cannot be written at all; buffer_size 0 still
            // means "write as soon as possible", handled in append.
            let cap = round_up(opts.buffer_size.max(1));
            Ok(Box::new(DirectWriter {
                file,
                path: path.to_path_buf(),
                buf: AlignedBuf::new(cap),
                buf_len: 0,
                file_off: 0,
                eager: opts.buffer_size == 0,
                tail_on_disk: false,
            }))
        } else {
            let file = oo.open(path).map_err(|e| Error::io(context(), e))?;
            Ok(Box::new(BufferedWriter {
                file,
                path: path.to_path_buf(),
                buf: Vec::with_capacity(opts.buffer_size),
                cap: opts.buffer_size,
                len: 0,
            }))
        }
    }

    fn reopen_writable(
        &self,
        path: &Path,
        len: u64,
        opts: WriteFileOptions,
    ) -> Result<Box<dyn WritableFile>> {
        refuse_direct_reopen(path, opts)?;
        let context = || format!("reopening {} for appending at {len}", path.display());
        let mut file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io(context(), e))?;
        let size = file.metadata().map_err(|e| Error::io(context(), e))?.len();
        if size < len {
            return Err(Error::io(
                context(),
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the file holds only {size} bytes"),
                ),
            ));
        }
        file.set_len(len).map_err(|e| Error::io(context(), e))?;
        file.seek(SeekFrom::Start(len))
            .map_err(|e| Error::io(context(), e))?;
        Ok(Box::new(BufferedWriter {
            file,
            path: path.to_path_buf(),
            buf: Vec::with_capacity(opts.buffer_size),
            cap: opts.buffer_size,
            len,
        }))
    }

    fn open_readable(
        &self,
        path: &Path,
        opts: ReadFileOptions,
    ) -> Result<Arc<dyn RandomAccessFile>> {
        let mut oo = OpenOptions::new();
        oo.read(true);
        let context = || format!("opening {}", path.display());
        if opts.direct {
            oo.custom_flags(libc::O_DIRECT);
            let file = oo
                .open(path)
                .map_err(|e| direct_open_error(path, "use_direct_io_for_reads", context(), e))?;
            Ok(Arc::new(DirectReader {
                file,
                path: path.to_path_buf(),
            }))
        } else {
            let file = open_without_atime(&oo, path).map_err(|e| Error::io(context(), e))?;
            Ok(Arc::new(PosixReader {
                file,
                path: path.to_path_buf(),
            }))
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| {
            Error::io(
                format!("renaming {} to {}", from.display(), to.display()),
                e,
            )
        })
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io(format!("removing {}", path.display()), e))
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let context = || format!("listing directory {}", path.display());
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| Error::io(context(), e))? {
            let entry = entry.map_err(|e| Error::io(context(), e))?;
            // Gleaner's own names are ASCII; a foreign non-UTF-8 name is still reported (lossily)
            // so that callers see the directory is not empty.
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn path_kind(&self, path: &Path) -> Result<Option<PathKind>> {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => Ok(Some(PathKind::Dir)),
            Ok(_) => Ok(Some(PathKind::File)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("inspecting {}", path.display()), e)),
        }
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        std::fs::metadata(path)
            .map(|m| m.len())
            .map_err(|e| Error::io(format!("getting the size of {}", path.display()), e))
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let context = || format!("syncing directory {}", path.display());
        let dir = File::open(path).map_err(|e| Error::io(context(), e))?;
        dir.sync_all().map_err(|e| Error::io(context(), e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(format!("opening lock file {}", path.display()), e))?;
        let canonical = path
            .canonicalize()
            .map_err(|e| Error::io(format!("resolving lock file {}", path.display()), e))?;
        // Hold the map's mutex across the flock so the two guards never disagree.
        let mut held = LOCKED.lock();
        if held.contains_key(&canonical) {
            return Err(locked_error(path));
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(locked_error(path)),
            Err(TryLockError::Error(e)) => {
                return Err(Error::io(format!("locking {}", path.display()), e));
            }
        }
        held.insert(canonical.clone(), Holders::Exclusive);
        Ok(Box::new(PosixLock {
            file,
            path: canonical,
        }))
    }

    fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>> {
        // Read-only and without O_CREAT: a shared holder writes nothing, so this works on
        // read-only media too, and an absent file stays absent.
        let file = match OpenOptions::new().read(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Error::io(
                    format!("opening lock file {}", path.display()),
                    e,
                ));
            }
        };
        let canonical = path
            .canonicalize()
            .map_err(|e| Error::io(format!("resolving lock file {}", path.display()), e))?;
        let mut held = LOCKED.lock();
        let count = match held.get(&canonical) {
            Some(Holders::Exclusive) => return Err(locked_error(path)),
            Some(Holders::Shared(n)) => *n,
            None => 0,
        };
        match file.try_lock_shared() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(locked_error(path)),
            Err(TryLockError::Error(e)) => {
                return Err(Error::io(format!("locking {} (shared)", path.display()), e));
            }
        }
        held.insert(canonical.clone(), Holders::Shared(count + 1));
        Ok(Some(Box::new(PosixLock {
            file,
            path: canonical,
        })))
    }
}

/// Guard of a lock file: holds the `flock` (exclusive or shared) and its share of the
/// process-wide map's entry.
#[derive(Debug)]
struct PosixLock {
    file: File,
    path: PathBuf,
}

impl FileLock for PosixLock {}

impl Drop for PosixLock {
    fn drop(&mut self) {
        let mut held = LOCKED.lock();
        // Release the flock before the map entry, under the map's mutex, so a concurrent locker
        // never finds the map free while the flock is still held. Closing the file would release
        // it too; an explicit unlock makes the order certain. An unlock error leaves nothing to
        // do: the close that follows releases the lock anyway.
        let _ = self.file.unlock();
        match held.get_mut(&self.path) {
            Some(Holders::Shared(n)) if *n > 1 => *n -= 1,
            _ => {
                held.remove(&self.path);
            }
        }
    }
}

/// A reader using positional reads through the page cache.
#[derive(Debug)]
struct PosixReader {
    file: File,
    path: PathBuf,
}

impl PosixReader {
    fn error(&self, len: usize, offset: u64, e: io::Error) -> Error {
        Error::io(
            format!(
                "reading {len} bytes of {} at offset {offset}",
                self.path.display()
            ),
            e,
        )
    }
}

impl RandomAccessFile for PosixReader {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| self.error(buf.len(), offset, e))
    }

    fn read_vec_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        // The kernel writes into the buffer's spare capacity, and the length grows by what it
        // reports: no zeroing first. A point read of a large value otherwise zeroes it only to
        // overwrite it (a twentieth of a server's CPU per 8 KiB read from the page cache).
        let mut buf = Vec::with_capacity(len);
        while buf.len() < len {
            let at = offset + buf.len() as u64;
            // Fills spare capacity, which `with_capacity` may make larger than asked for: the
            // extra bytes are cut below.
            match rustix::io::pread(&self.file, rustix::buffer::spare_capacity(&mut buf), at) {
                Ok(0) => {
                    let e =
                        io::Error::new(io::ErrorKind::UnexpectedEof, "failed to fill whole buffer");
                    return Err(self.error(len, offset, e));
                }
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(self.error(len, offset, e.into())),
            }
        }
        buf.truncate(len);
        Ok(buf)
    }

    fn size(&self) -> Result<u64> {
        file_len(&self.file, &self.path)
    }
}

fn file_len(file: &File, path: &Path) -> Result<u64> {
    file.metadata()
        .map(|m| m.len())
        .map_err(|e| Error::io(format!("getting the size of {}", path.display()), e))
}

/// A reader with `O_DIRECT`: every read is widened to aligned bounds and goes through an
/// aligned bounce buffer, then the requested range is copied out.
#[derive(Debug)]
struct DirectReader {
    file: File,
    path: PathBuf,
}

/// Largest bounce buffer a thread keeps between direct reads. Point reads of values and blocks
/// fit; a thread that made direct reads holds at most this much (plus the alignment slack)
/// until it ends, and a larger read allocates a buffer of its own.
const KEPT_BOUNCE_BYTES: usize = 128 << 10;

thread_local! {
    /// This thread's bounce buffer for direct reads. Reused, a read neither allocates nor
    /// zeroes one: the kernel overwrites what it reads, and only bytes it read are copied out.
    static BOUNCE: std::cell::RefCell<Option<AlignedBuf>> = const { std::cell::RefCell::new(None) };
}

impl DirectReader {
    /// Reads the `len` bytes at `offset` through an aligned bounce buffer and hands them to
    /// `take`, which must copy them out.
    fn read_with<R>(
        &self,
        offset: u64,
        len: usize,
        take: impl FnOnce(&[u8]) -> R,
    ) -> io::Result<R> {
        let align = DIRECT_ALIGN as u64;
        let end = offset
            .checked_add(len as u64)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset overflows"))?;
        let start = offset - offset % align;
        let aligned_end = end.div_ceil(align) * align;
        let total = usize::try_from(aligned_end - start)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "read too large"))?;
        let skip = (offset - start) as usize;
        if total > KEPT_BOUNCE_BYTES {
            let mut bounce = AlignedBuf::new(total);
            let got = self.read_aligned(bounce.as_mut_slice(), start)?;
            return Self::taken(got, skip, len, take);
        }
        let mut take = Some(take);
        let kept = BOUNCE.try_with(|cell| {
            // Never borrowed already: a read does not start another on its thread. Should it
            // ever be, the read makes a buffer of its own below.
            let Ok(mut slot) = cell.try_borrow_mut() else {
                return None;
            };
            if slot.as_ref().is_none_or(|b| b.len < total) {
                // Grown in powers of two, so reads of mixed sizes settle on one buffer.
                *slot = Some(AlignedBuf::new(
                    total.next_power_of_two().min(KEPT_BOUNCE_BYTES),
                ));
            }
            let bounce = slot.as_mut().expect("set above");
            let take = take.take().expect("taken once");
            Some(
                self.read_aligned(&mut bounce.as_mut_slice()[..total], start)
                    .and_then(|got| Self::taken(got, skip, len, take)),
            )
        });
        match kept {
            Ok(Some(result)) => result,
            // The thread's buffer is borrowed, or already gone (a read while the thread ends).
            _ => {
                let mut bounce = AlignedBuf::new(total);
                let got = self.read_aligned(bounce.as_mut_slice(), start)?;
                Self::taken(got, skip, len, take.take().expect("not taken"))
            }
        }
    }

    /// Fills `dst` from aligned offset `start` until it is full or the file ends; returns the
    /// bytes read.
    fn read_aligned<'a>(&self, dst: &'a mut [u8], start: u64) -> io::Result<&'a [u8]> {
        let mut filled = 0usize;
        while filled < dst.len() {
            match self.file.read_at(&mut dst[filled..], start + filled as u64) {
                Ok(0) => break,
                Ok(n) => {
                    filled += n;
                    // A partial block means end of file; another read would start unaligned.
                    if n % DIRECT_ALIGN != 0 {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(&dst[..filled])
    }

    /// Hands `take` the wanted bytes of what was read, or fails if the file ended first.
    fn taken<R>(
        got: &[u8],
        skip: usize,
        len: usize,
        take: impl FnOnce(&[u8]) -> R,
    ) -> io::Result<R> {
        if got.len() < skip + len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            ));
        }
        Ok(take(&got[skip..skip + len]))
    }

    fn error(&self, len: usize, offset: u64, e: io::Error) -> Error {
        Error::io(
            format!(
                "reading {len} bytes of {} at offset {offset} (direct I/O)",
                self.path.display()
            ),
            e,
        )
    }
}

impl RandomAccessFile for DirectReader {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let len = buf.len();
        self.read_with(offset, len, |bytes| buf.copy_from_slice(bytes))
            .map_err(|e| self.error(len, offset, e))
    }

    fn read_vec_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        // Copied straight out of the bounce buffer: the new buffer is never zeroed first.
        self.read_with(offset, len, <[u8]>::to_vec)
            .map_err(|e| self.error(len, offset, e))
    }

    fn size(&self) -> Result<u64> {
        file_len(&self.file, &self.path)
    }
}

/// A writer through the page cache with an optional user-space buffer.
///
/// After a failed write the number of bytes that reached the file is unknown; callers must
/// abandon the file (the database turns read-only), so no attempt is made to resynchronize.
#[derive(Debug)]
struct BufferedWriter {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    cap: usize,
    len: u64,
}

impl BufferedWriter {
    fn write_buffer(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.file
            .write_all(&self.buf)
            .map_err(|e| Error::io(format!("writing to {}", self.path.display()), e))?;
        self.buf.clear();
        Ok(())
    }
}

impl WritableFile for BufferedWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.buf.len() + data.len() > self.cap {
            self.write_buffer()?;
        }
        // Data that would not fit even an empty buffer is written in one call rather than
        // chopped into buffer-sized pieces.
        if data.len() >= self.cap {
            self.file
                .write_all(data)
                .map_err(|e| Error::io(format!("writing to {}", self.path.display()), e))?;
        } else {
            self.buf.extend_from_slice(data);
        }
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.write_buffer()
    }

    fn sync(&mut self) -> Result<()> {
        self.write_buffer()?;
        self.file
            .sync_data()
            .map_err(|e| Error::io(format!("syncing {}", self.path.display()), e))
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for BufferedWriter {
    fn drop(&mut self) {
        // Closing without a flush would silently lose appended bytes; durability still needs
        // sync, so an error here has no one to report to and is ignored.
        let _ = self.write_buffer();
    }
}

/// A writer with `O_DIRECT`. `buf` holds the bytes from `file_off` (always aligned) onwards;
/// only whole blocks leave it, except that `sync` also writes the zero-padded partial tail block
/// and trims the file back to its logical length. The tail stays buffered, so the next write
/// rewrites that block from its aligned start with the appended bytes in place of the padding.
#[derive(Debug)]
struct DirectWriter {
    file: File,
    path: PathBuf,
    buf: AlignedBuf,
    buf_len: usize,
    file_off: u64,
    /// Buffer size 0 was requested: write whole blocks as soon as an append completes them.
    eager: bool,
    /// The file on disk holds every appended byte at its logical length: the tail was written
    /// and the file cut, with no append since. Closing after `sync` then writes nothing (a second
    /// tail write and truncate per file cost a flush about 0.5 ms on the benchmark VM).
    tail_on_disk: bool,
}

impl DirectWriter {
    fn io_err(&self, what: &str, e: io::Error) -> Error {
        Error::io(format!("{what} {} (direct I/O)", self.path.display()), e)
    }

    /// Writes the whole blocks of the buffer and keeps the partial tail.
    fn write_blocks(&mut self) -> Result<()> {
        let whole = self.buf_len / DIRECT_ALIGN * DIRECT_ALIGN;
        if whole == 0 {
            return Ok(());
        }
        self.file
            .write_all_at(&self.buf.as_slice()[..whole], self.file_off)
            .map_err(|e| self.io_err("writing to", e))?;
        self.buf.as_mut_slice().copy_within(whole..self.buf_len, 0);
        self.buf_len -= whole;
        self.file_off += whole as u64;
        Ok(())
    }

    /// Writes the partial tail block padded with zeros, then cuts the file to its logical length.
    fn write_tail(&mut self) -> Result<()> {
        if self.buf_len == 0 || self.tail_on_disk {
            return Ok(());
        }
        let padded = round_up(self.buf_len);
        self.buf.as_mut_slice()[self.buf_len..padded].fill(0);
        self.file
            .write_all_at(&self.buf.as_slice()[..padded], self.file_off)
            .map_err(|e| self.io_err("writing to", e))?;
        self.file
            .set_len(self.file_off + self.buf_len as u64)
            .map_err(|e| self.io_err("truncating", e))?;
        self.tail_on_disk = true;
        Ok(())
    }
}

impl WritableFile for DirectWriter {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        if !data.is_empty() {
            self.tail_on_disk = false;
        }
        while !data.is_empty() {
            let room = self.buf.len - self.buf_len;
            let n = room.min(data.len());
            self.buf.as_mut_slice()[self.buf_len..self.buf_len + n].copy_from_slice(&data[..n]);
            self.buf_len += n;
            data = &data[n..];
            if self.buf_len == self.buf.len {
                self.write_blocks()?;
            }
        }
        if self.eager {
            self.write_blocks()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.write_blocks()
    }

    fn sync(&mut self) -> Result<()> {
        self.write_blocks()?;
        self.write_tail()?;
        self.file.sync_data().map_err(|e| self.io_err("syncing", e))
    }

    fn len(&self) -> u64 {
        self.file_off + self.buf_len as u64
    }
}

impl Drop for DirectWriter {
    fn drop(&mut self) {
        // As for buffered files: do not lose appended bytes on close; errors have no receiver.
        if self.write_blocks().is_ok() {
            let _ = self.write_tail();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// Where this thread's kept bounce buffer is, if it keeps one.
    fn kept_bounce() -> Option<(*const u8, usize)> {
        BOUNCE.with(|c| c.borrow().as_ref().map(|b| (b.storage.as_ptr(), b.len)))
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn reads_leave_the_access_time_alone() {
        use std::fs::FileTimes;
        use std::time::{Duration, SystemTime};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, pattern(10_000, 3)).unwrap();
        // An access time well before the modification time: under `relatime` (and
        // `strictatime`) the next read of a file opened as usual updates it.
        let long_ago = SystemTime::now() - Duration::from_secs(10 * 86_400);
        let set_old_atime = || {
            File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_times(FileTimes::new().set_accessed(long_ago))
                .unwrap();
        };
        // Compared with what the file system kept, which may be coarser than what was set.
        let atime = || std::fs::metadata(&path).unwrap().accessed().unwrap();
        set_old_atime();
        let before = atime();
        let _ = std::fs::read(&path).unwrap();
        if atime() == before {
            eprintln!(
                "skipped: this file system does not update access times on reads (noatime), \
                 so there is nothing to leave alone"
            );
            return;
        }
        set_old_atime();
        let before = atime();
        let r = PosixFs::new()
            .open_readable(&path, ReadFileOptions { direct: false })
            .unwrap();
        assert_eq!(r.read_vec_at(0, 10_000).unwrap(), pattern(10_000, 3));
        assert_eq!(atime(), before, "the read updated the access time");
    }

    #[test]
    fn direct_reads_reuse_one_bounce_buffer_per_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        // Ends inside a block, so the last block reads short.
        let expected = pattern(300_000, 9);
        std::fs::write(&path, &expected).unwrap();
        let r = PosixFs::new()
            .open_readable(&path, ReadFileOptions { direct: true })
            .unwrap();
        // A thread of its own, so the kept buffer starts out absent.
        std::thread::spawn(move || {
            assert_eq!(kept_bounce(), None);
            assert_eq!(
                r.read_vec_at(1000, 100_000).unwrap(),
                expected[1000..101_000]
            );
            let kept = kept_bounce().expect("kept after a read");
            assert_eq!(kept.1, KEPT_BOUNCE_BYTES);
            for (off, len) in [
                (0usize, 1usize),
                (4095, 2),
                (70_000, 20_000),
                (123, 4096),
                (0, 0),
            ] {
                assert_eq!(
                    r.read_vec_at(off as u64, len).unwrap(),
                    expected[off..off + len]
                );
                let mut b = vec![0u8; len];
                r.read_exact_at(&mut b, off as u64).unwrap();
                assert_eq!(b, expected[off..off + len]);
            }
            // Larger than a thread keeps: a buffer of its own, the kept one stays.
            assert_eq!(r.read_vec_at(7, 200_000).unwrap(), expected[7..200_007]);
            assert_eq!(
                kept_bounce(),
                Some(kept),
                "one buffer for every read that fits"
            );
            // The kept buffer still holds bytes of earlier reads beyond the file's end: a read
            // past it fails rather than return them.
            assert_eq!(r.read_vec_at(299_990, 10).unwrap(), expected[299_990..]);
            let err = r.read_vec_at(299_995, 10).unwrap_err();
            assert_eq!(err.io_kind(), Some(io::ErrorKind::UnexpectedEof), "{err}");
            let mut b = vec![0u8; 10];
            let err = r.read_exact_at(&mut b, 299_995).unwrap_err();
            assert_eq!(err.io_kind(), Some(io::ErrorKind::UnexpectedEof), "{err}");
        })
        .join()
        .unwrap();
    }

    fn write_read_round_trip(direct: bool, buffer_size: usize) -> Result<()> {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("f");
        let opts = WriteFileOptions {
            direct,
            buffer_size,
        };
        let mut w = fs.new_writable(&path, opts)?;
        assert!(w.is_empty());
        let mut expected = Vec::new();
        for (i, size) in [1usize, 7, 4096, 100, 10_000, 3, 8192, 4095]
            .iter()
            .enumerate()
        {
            let chunk = pattern(*size, i as u8);
            w.append(&chunk)?;
            expected.extend_from_slice(&chunk);
            if i % 3 == 1 {
                w.flush()?;
            }
            if i % 4 == 2 {
                // A sync at a non-aligned length, then more appends, exercises the direct
                // writer's rewrite of the tail block.
                w.sync()?;
                assert_eq!(fs.file_size(&path)?, expected.len() as u64);
            }
        }
        assert_eq!(w.len(), expected.len() as u64);
        w.sync()?;
        assert_eq!(fs.file_size(&path)?, expected.len() as u64);
        let r = fs.open_readable(&path, ReadFileOptions { direct })?;
        assert_eq!(r.size()?, expected.len() as u64);
        let mut all = vec![0u8; expected.len()];
        r.read_exact_at(&mut all, 0)?;
        assert_eq!(all, expected);
        for (off, len) in [(0usize, 1usize), (4095, 2), (4097, 5000), (9000, 1234)] {
            let mut b = vec![0u8; len];
            r.read_exact_at(&mut b, off as u64)?;
            assert_eq!(b, expected[off..off + len]);
        }
        let mut b = vec![0u8; 2];
        let err = r
            .read_exact_at(&mut b, expected.len() as u64 - 1)
            .unwrap_err();
        assert_eq!(err.io_kind(), Some(io::ErrorKind::UnexpectedEof));
        drop(r);
        // Appending after a sync and then dropping without sync keeps the bytes (flush on drop).
        w.append(b"tail")?;
        drop(w);
        expected.extend_from_slice(b"tail");
        assert_eq!(fs.read_all(&path)?, expected);
        Ok(())
    }

    #[test]
    fn buffered_round_trip_with_various_buffer_sizes() {
        for size in [0, 5, 4096, 1 << 20] {
            write_read_round_trip(false, size).unwrap();
        }
    }

    #[test]
    fn direct_round_trip_or_clear_error() {
        for size in [0, 5, 4096, 1 << 20] {
            match write_read_round_trip(true, size) {
                Ok(()) => {}
                Err(Error::InvalidArgument(msg)) => {
                    // The temp dir's file system rejects O_DIRECT (e.g. old tmpfs).
                    assert!(msg.contains("use_direct_io_for_background_writes"), "{msg}");
                    assert!(msg.contains("does not support direct I/O"), "{msg}");
                    return;
                }
                Err(e) => panic!("direct I/O round trip failed: {e}"),
            }
        }
    }

    /// Closing a direct writer right after `sync` writes nothing more: the tail is on disk. The
    /// file is cut to nothing behind the writer's back after the sync, so a second tail write at
    /// close would show as bytes reappearing. Appending after the sync still rewrites the tail.
    #[test]
    fn direct_close_after_sync_writes_no_tail_again() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("t");
        let opts = WriteFileOptions {
            direct: true,
            buffer_size: 1 << 20,
        };
        let mut w = match fs.new_writable(&path, opts) {
            Ok(w) => w,
            // The temp dir's file system rejects O_DIRECT: nothing to check here.
            Err(Error::InvalidArgument(_)) => return,
            Err(e) => panic!("{e}"),
        };
        w.append(&pattern(5000, 1)).unwrap();
        w.sync().unwrap();
        assert_eq!(fs.file_size(&path).unwrap(), 5000);
        let cut = |len| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(len)
                .unwrap()
        };
        cut(0);
        drop(w);
        assert_eq!(fs.file_size(&path).unwrap(), 0, "close rewrote the tail");

        // After a sync, a later append makes the tail dirty again: close must write it.
        let mut w = fs.new_writable(&path, opts).unwrap();
        w.append(&pattern(5000, 2)).unwrap();
        w.sync().unwrap();
        w.append(b"more").unwrap();
        drop(w);
        let mut expected = pattern(5000, 2);
        expected.extend_from_slice(b"more");
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn direct_read_error_names_the_read_option_when_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("r");
        std::fs::write(&path, b"hello").unwrap();
        match fs.open_readable(&path, ReadFileOptions { direct: true }) {
            Ok(r) => {
                let mut b = [0u8; 3];
                r.read_exact_at(&mut b, 2).unwrap();
                assert_eq!(&b, b"llo");
                let err = r.read_exact_at(&mut b, 4).unwrap_err();
                assert_eq!(err.io_kind(), Some(io::ErrorKind::UnexpectedEof));
            }
            Err(Error::InvalidArgument(msg)) => {
                assert!(msg.contains("use_direct_io_for_reads"), "{msg}");
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    #[test]
    fn positional_reads_from_many_threads() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("shared");
        let data = pattern(64 * 1024, 9);
        let mut w = fs.new_writable(&path, WriteFileOptions::default()).unwrap();
        w.append(&data).unwrap();
        w.sync().unwrap();
        let r = fs.open_readable(&path, ReadFileOptions::default()).unwrap();
        std::thread::scope(|s| {
            for t in 0..4usize {
                let r = Arc::clone(&r);
                let data = &data;
                s.spawn(move || {
                    for i in 0..200usize {
                        let off = (i * 977 + t * 131) % (data.len() - 300);
                        let mut b = [0u8; 300];
                        r.read_exact_at(&mut b, off as u64).unwrap();
                        assert_eq!(&b[..], &data[off..off + 300]);
                    }
                });
            }
        });
    }

    #[test]
    fn buffered_vector_reads_return_exactly_the_range() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let expected = pattern(300_000, 5);
        std::fs::write(&path, &expected).unwrap();
        let r = PosixFs::new()
            .open_readable(&path, ReadFileOptions::default())
            .unwrap();
        for (off, len) in [
            (0usize, 0usize),
            (0, 1),
            (4095, 2),
            (8191, 8223),
            (70_000, 200_000),
            (0, 300_000),
            (299_999, 1),
            (300_000, 0),
        ] {
            let got = r.read_vec_at(off as u64, len).unwrap();
            assert_eq!(got.len(), len, "at {off}");
            assert_eq!(got, expected[off..off + len], "at {off}");
        }
        for (off, len) in [(299_995u64, 10usize), (300_000, 1)] {
            let err = r.read_vec_at(off, len).unwrap_err();
            assert_eq!(
                err.io_kind(),
                Some(io::ErrorKind::UnexpectedEof),
                "at {off}: {err}"
            );
            assert!(
                err.to_string().contains(&format!("at offset {off}")),
                "{err}"
            );
        }
        // An offset the kernel refuses (beyond `i64::MAX`) is an error, as with `read_exact_at`.
        let err = r.read_vec_at(u64::MAX - 4, 8).unwrap_err();
        let mut b = [0u8; 8];
        let exact = r.read_exact_at(&mut b, u64::MAX - 4).unwrap_err();
        assert_eq!(err.io_kind(), exact.io_kind(), "{err} / {exact}");
    }

    #[test]
    fn read_past_eof_is_unexpected_eof_and_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("short");
        std::fs::write(&path, b"abc").unwrap();
        let r = fs.open_readable(&path, ReadFileOptions::default()).unwrap();
        let mut b = [0u8; 4];
        let err = r.read_exact_at(&mut b, 0).unwrap_err();
        assert_eq!(err.io_kind(), Some(io::ErrorKind::UnexpectedEof));
        assert!(err.to_string().contains("short"), "{err}");
        let missing = fs
            .open_readable(&dir.path().join("nope"), ReadFileOptions::default())
            .unwrap_err();
        assert_eq!(missing.io_kind(), Some(io::ErrorKind::NotFound));
        assert!(missing.to_string().contains("nope"), "{missing}");
    }

    #[test]
    fn lock_excludes_a_second_holder_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("LOCK");
        let guard = fs.lock(&path).unwrap();
        match fs.lock(&path) {
            Err(Error::Locked { path: p }) => assert_eq!(p, dir.path().display().to_string()),
            other => panic!("expected Locked, got {other:?}"),
        }
        // A different spelling of the same file is the same lock.
        let dotted = dir.path().join(".").join("LOCK");
        assert!(matches!(fs.lock(&dotted), Err(Error::Locked { .. })));
        // The flock alone excludes too: a second open file description cannot take it.
        let other = File::open(&path).unwrap();
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        drop(other);
        drop(guard);
        let again = fs.lock(&path).unwrap();
        drop(again);
    }

    #[test]
    fn shared_locks_coexist_and_exclude_the_exclusive_one() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("LOCK");
        // An absent lock file is neither locked nor created.
        assert!(fs.lock_shared(&path).unwrap().is_none());
        assert!(!path.exists(), "a shared lock never creates the file");
        drop(fs.lock(&path).unwrap());
        let a = fs.lock_shared(&path).unwrap().expect("file exists");
        let b = fs
            .lock_shared(&dir.path().join(".").join("LOCK"))
            .unwrap()
            .expect("exists");
        assert!(matches!(fs.lock(&path), Err(Error::Locked { .. })));
        // At the flock level too: another open file description can share but not exclude.
        let other = File::open(&path).unwrap();
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        other.try_lock_shared().unwrap();
        other.unlock().unwrap();
        drop(a);
        // One shared holder left: still no exclusive lock.
        assert!(matches!(fs.lock(&path), Err(Error::Locked { .. })));
        drop(b);
        let exclusive = fs.lock(&path).unwrap();
        match fs.lock_shared(&path) {
            Err(Error::Locked { path: p }) => assert_eq!(p, dir.path().display().to_string()),
            other => panic!("expected Locked, got {other:?}"),
        }
        let other = File::open(&path).unwrap();
        assert!(matches!(
            other.try_lock_shared(),
            Err(TryLockError::WouldBlock)
        ));
        drop(exclusive);
        drop(fs.lock_shared(&path).unwrap().expect("free again"));
        // A read-only lock file (read-only media) can still be locked shared.
        let mut perms = std::fs::metadata(&path).unwrap().permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(&path, perms).unwrap();
        drop(fs.lock_shared(&path).unwrap().expect("read-only file"));
    }

    #[test]
    fn directory_operations() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let sub = dir.path().join("a").join("b");
        fs.create_dir_all(&sub).unwrap();
        fs.create_dir_all(&sub).unwrap();
        assert_eq!(fs.path_kind(&sub).unwrap(), Some(PathKind::Dir));
        let f = sub.join("one");
        let mut w = fs.new_writable(&f, WriteFileOptions::default()).unwrap();
        w.append(b"payload").unwrap();
        w.sync().unwrap();
        drop(w);
        assert_eq!(fs.path_kind(&f).unwrap(), Some(PathKind::File));
        assert_eq!(fs.path_kind(&sub.join("missing")).unwrap(), None);
        let g = sub.join("two");
        fs.rename(&f, &g).unwrap();
        fs.sync_dir(&sub).unwrap();
        assert_eq!(fs.path_kind(&f).unwrap(), None);
        assert_eq!(fs.read_all(&g).unwrap(), b"payload");
        assert_eq!(fs.file_size(&g).unwrap(), 7);
        let mut w = fs.new_writable(&f, WriteFileOptions::default()).unwrap();
        w.append(b"x").unwrap();
        drop(w);
        let mut names = fs.list_dir(&sub).unwrap();
        names.sort();
        assert_eq!(names, vec!["one".to_string(), "two".to_string()]);
        // Rename replaces an existing target.
        fs.rename(&f, &g).unwrap();
        assert_eq!(fs.read_all(&g).unwrap(), b"x");
        fs.remove_file(&g).unwrap();
        assert!(fs.list_dir(&sub).unwrap().is_empty());
        let err = fs.remove_file(&g).unwrap_err();
        assert_eq!(err.io_kind(), Some(io::ErrorKind::NotFound));
        assert!(fs.list_dir(&dir.path().join("none")).is_err());
        assert!(fs.sync_dir(&dir.path().join("none")).is_err());
    }

    #[test]
    fn reopen_writable_cuts_the_tail_and_appends_after_the_kept_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("f");
        std::fs::write(&path, b"keep-this|torn tail").unwrap();
        let mut w = fs
            .reopen_writable(&path, 9, WriteFileOptions::default())
            .unwrap();
        assert_eq!(w.len(), 9);
        assert_eq!(fs.read_all(&path).unwrap(), b"keep-this", "cut at open");
        w.append(b"+new").unwrap();
        w.sync().unwrap();
        assert_eq!(w.len(), 13);
        assert_eq!(fs.read_all(&path).unwrap(), b"keep-this+new");
        let err = fs
            .reopen_writable(&path, 14, WriteFileOptions::default())
            .unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert!(
            fs.reopen_writable(&dir.path().join("absent"), 0, WriteFileOptions::default())
                .is_err()
        );
        let direct = WriteFileOptions {
            direct: true,
            ..Default::default()
        };
        assert!(matches!(
            fs.reopen_writable(&path, 0, direct),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(
            fs.read_all(&path).unwrap(),
            b"keep-this+new",
            "refusals cut nothing"
        );
    }

    #[test]
    fn new_writable_truncates_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 10_000]).unwrap();
        let mut w = fs.new_writable(&path, WriteFileOptions::default()).unwrap();
        w.append(b"new").unwrap();
        w.sync().unwrap();
        assert_eq!(fs.read_all(&path).unwrap(), b"new");
    }
}
