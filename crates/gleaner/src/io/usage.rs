//! Bytes on disk, counted as they are written and removed: a [`FileSystem`] wrapper that keeps
//! the length of every file of the database directory and their sum.
//!
//! The space throttle's budget (`max_disk_bytes`) is about what the directory really holds:
//! key and value tables of every version an iterator or job still pins, tables waiting to be
//! deleted, WALs, manifests, OPTIONS, temporaries. Summing the current version's tables missed
//! all of those, so a long-lived iterator during heavy GC let the directory grow past the budget
//! while the throttle saw it under. Listing the directory instead would cost a `stat` per file
//! at every measurement. Every file operation of the engine goes through its file system, so
//! counting there is exact at the cost of an atomic add per append.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::{
    FileLock, FileSystem, PathKind, RandomAccessFile, ReadFileOptions, WritableFile,
    WriteFileOptions,
};
use crate::error::Result;

/// The byte counts a [`TrackedFs`] keeps.
#[derive(Debug, Default)]
pub struct DiskUsage {
    /// Each file's count, by path.
    files: Mutex<HashMap<PathBuf, Arc<FileCount>>>,
    /// Sum of the lengths of the files in `files`.
    total: AtomicU64,
}

/// The length of one file while it is in the directory.
#[derive(Debug)]
struct FileCount {
    /// Length, and whether the file is still in the directory under its name: a file removed
    /// or replaced while a writer still holds it counts no more, whatever is appended to it.
    /// Changed only under this lock, together with `DiskUsage::total`, so the two agree.
    state: Mutex<(u64, bool)>,
}

impl DiskUsage {
    /// Bytes of every file the engine created, or found at open, that is not removed.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Starts counting `path` at `len` bytes, replacing an earlier file of that name.
    fn insert(&self, path: &Path, len: u64) -> Arc<FileCount> {
        let count = Arc::new(FileCount {
            state: Mutex::new((len, true)),
        });
        self.total.fetch_add(len, Ordering::Relaxed);
        if let Some(old) = self
            .files
            .lock()
            .insert(path.to_path_buf(), Arc::clone(&count))
        {
            self.detach(&old);
        }
        count
    }

    /// Adds `n` appended bytes to `file` while it is in the directory.
    fn grow(&self, file: &FileCount, n: u64) {
        let mut st = file.state.lock();
        if st.1 {
            st.0 += n;
            self.total.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Stops counting a file that left the directory.
    fn detach(&self, file: &FileCount) {
        let mut st = file.state.lock();
        self.total.fetch_sub(st.0, Ordering::Relaxed);
        *st = (0, false);
    }

    fn remove(&self, path: &Path) {
        let old = self.files.lock().remove(path);
        if let Some(old) = old {
            self.detach(&old);
        }
    }

    fn rename(&self, from: &Path, to: &Path) {
        let mut files = self.files.lock();
        let Some(moved) = files.remove(from) else {
            return;
        };
        if let Some(replaced) = files.insert(to.to_path_buf(), moved) {
            self.detach(&replaced);
        }
    }
}

/// A file system that counts the bytes of the files it creates, removes and renames in
/// [`DiskUsage`]. Files that exist when it starts are counted by [`TrackedFs::new`].
#[derive(Debug)]
pub struct TrackedFs {
    inner: Arc<dyn FileSystem>,
    usage: Arc<DiskUsage>,
}

impl TrackedFs {
    /// Wraps `inner`, counting the files already in `dir` at their current lengths.
    ///
    /// Errors: listing `dir` or reading a file's size fails.
    pub fn new(inner: Arc<dyn FileSystem>, dir: &Path) -> Result<(TrackedFs, Arc<DiskUsage>)> {
        let usage = Arc::new(DiskUsage::default());
        for name in inner.list_dir(dir)? {
            let path = dir.join(&name);
            if inner.path_kind(&path)? == Some(PathKind::File) {
                usage.insert(&path, inner.file_size(&path)?);
            }
        }
        let fs = TrackedFs {
            inner,
            usage: Arc::clone(&usage),
        };
        Ok((fs, usage))
    }
}

impl FileSystem for TrackedFs {
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.inner.create_dir_all(path)
    }

    fn new_writable(&self, path: &Path, opts: WriteFileOptions) -> Result<Box<dyn WritableFile>> {
        let file = self.inner.new_writable(path, opts)?;
        let count = self.usage.insert(path, 0);
        Ok(Box::new(TrackedWriter {
            inner: file,
            count,
            usage: Arc::clone(&self.usage),
        }))
    }

    fn reopen_writable(
        &self,
        path: &Path,
        len: u64,
        opts: WriteFileOptions,
    ) -> Result<Box<dyn WritableFile>> {
        let file = self.inner.reopen_writable(path, len, opts)?;
        let count = self.usage.insert(path, len);
        Ok(Box::new(TrackedWriter {
            inner: file,
            count,
            usage: Arc::clone(&self.usage),
        }))
    }

    fn open_readable(
        &self,
        path: &Path,
        opts: ReadFileOptions,
    ) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_readable(path, opts)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)?;
        self.usage.rename(from, to);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.inner.remove_file(path)?;
        self.usage.remove(path);
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        self.inner.list_dir(path)
    }

    fn path_kind(&self, path: &Path) -> Result<Option<PathKind>> {
        self.inner.path_kind(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        self.inner.sync_dir(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }

    fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>> {
        self.inner.lock_shared(path)
    }
}

/// A writer whose appends count towards its file's length. Bytes count when appended, even
/// while they wait in a user-space buffer: they reach the file on the next flush.
#[derive(Debug)]
struct TrackedWriter {
    inner: Box<dyn WritableFile>,
    count: Arc<FileCount>,
    usage: Arc<DiskUsage>,
}

impl WritableFile for TrackedWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.inner.append(data)?;
        self.usage.grow(&self.count, data.len() as u64);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.inner.sync()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FaultFs;

    fn real_bytes(fs: &FaultFs) -> u64 {
        fs.list_files()
            .iter()
            .map(|p| fs.file_bytes(p).map_or(0, |b| b.len() as u64))
            .sum()
    }

    #[test]
    fn the_count_follows_creates_appends_renames_and_removals() {
        let raw = FaultFs::new(1);
        let dir = Path::new("/d");
        raw.create_dir_all(dir).unwrap();
        let mut pre = raw
            .new_writable(&dir.join("old"), WriteFileOptions::default())
            .unwrap();
        pre.append(&[1; 300]).unwrap();
        pre.sync().unwrap();
        drop(pre);
        let (fs, usage) = TrackedFs::new(Arc::new(raw.clone()), dir).unwrap();
        assert_eq!(usage.total(), 300, "files present at the start count");
        let mut a = fs
            .new_writable(&dir.join("a"), WriteFileOptions::default())
            .unwrap();
        a.append(&[2; 1000]).unwrap();
        a.sync().unwrap();
        assert_eq!(usage.total(), real_bytes(&raw));
        fs.rename(&dir.join("a"), &dir.join("old")).unwrap();
        assert_eq!(usage.total(), 1000, "the replaced file no longer counts");
        assert_eq!(usage.total(), real_bytes(&raw));
        // A writer whose file was replaced or removed adds nothing the directory holds.
        fs.remove_file(&dir.join("old")).unwrap();
        a.append(&[3; 50]).unwrap();
        assert_eq!(usage.total(), 0);
        drop(a);
        let mut b = fs
            .new_writable(&dir.join("b"), WriteFileOptions::default())
            .unwrap();
        b.append(&[4; 70]).unwrap();
        b.sync().unwrap();
        let mut c = fs
            .new_writable(&dir.join("b"), WriteFileOptions::default())
            .unwrap();
        c.append(&[5; 20]).unwrap();
        c.sync().unwrap();
        b.append(&[6; 5]).unwrap();
        assert_eq!(
            usage.total(),
            20,
            "a recreated file replaces the old one, whose writer counts no more"
        );
        assert_eq!(usage.total(), real_bytes(&raw));
    }
}
