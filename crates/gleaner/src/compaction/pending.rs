//! Files a job has created but not yet installed: deleted if the job fails or is abandoned, kept
//! once the manifest edit naming them is durable.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::Result;
use crate::io::FileSystem;

/// Output files of a job in flight. Dropping it deletes them (best effort: a file that cannot
/// be deleted now is an orphan the next open removes); [`PendingFiles::keep`] forgets them once
/// they are installed.
pub struct PendingFiles {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    names: Vec<String>,
}

impl std::fmt::Debug for PendingFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingFiles")
            .field("names", &self.names)
            .finish()
    }
}

impl PendingFiles {
    /// No files yet, in `dir`.
    pub fn new(fs: Arc<dyn FileSystem>, dir: PathBuf) -> Self {
        PendingFiles {
            fs,
            dir,
            names: Vec::new(),
        }
    }

    /// Records a file the job created.
    pub fn add(&mut self, name: String) {
        self.names.push(name);
    }

    /// True when the job created nothing.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Takes over `other`'s files.
    pub fn absorb(&mut self, mut other: PendingFiles) {
        self.names.append(&mut other.names);
    }

    /// Makes the files' directory entries durable (they must be before a manifest edit names
    /// them).
    pub fn make_durable(&self) -> Result<()> {
        if self.names.is_empty() {
            Ok(())
        } else {
            self.fs.sync_dir(&self.dir)
        }
    }

    /// The files are installed: stop tracking them.
    pub fn keep(mut self) {
        self.names.clear();
    }

    /// Deletes every file now.
    pub fn abandon(&mut self) {
        for name in self.names.drain(..) {
            let _ = self.fs.remove_file(&self.dir.join(name));
        }
    }
}

impl Drop for PendingFiles {
    fn drop(&mut self) {
        self.abandon();
    }
}
