//! What the harness reads from the operating system: per-process device I/O, directory sizes,
//! free disk space, and a description of the machine.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::results::Machine;

/// Bytes this process has caused to be read from and written to storage devices
/// (`/proc/self/io`). Zero when the file is unavailable.
///
/// The kernel charges `write_bytes` when a page is dirtied and `cancelled_write_bytes` when a
/// dirty page is dropped unwritten (its file truncated or deleted first, as happens to
/// short-lived logs); [`DeviceIo::since`] subtracts the second from the first so that what is
/// reported is what can reach the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceIo {
    /// Bytes read from devices (`read_bytes`: page-cache hits are not reads).
    pub read_bytes: u64,
    /// Bytes written to devices: `write_bytes`, less `cancelled_write_bytes` in differences.
    pub write_bytes: u64,
    /// Dirty bytes dropped before they were written (`cancelled_write_bytes`).
    pub cancelled_write_bytes: u64,
}

impl DeviceIo {
    /// Reads the current counters.
    pub fn now() -> DeviceIo {
        let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        DeviceIo {
            read_bytes: field("read_bytes:"),
            write_bytes: field("write_bytes:"),
            cancelled_write_bytes: field("cancelled_write_bytes:"),
        }
    }

    /// The I/O since `earlier`: bytes read, and bytes written less those cancelled meanwhile
    /// (cancellations of pages dirtied before `earlier` can make a period's writes look
    /// smaller; the total over consecutive periods is exact).
    pub fn since(&self, earlier: &DeviceIo) -> DeviceIo {
        let cancelled = self
            .cancelled_write_bytes
            .saturating_sub(earlier.cancelled_write_bytes);
        DeviceIo {
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self
                .write_bytes
                .saturating_sub(earlier.write_bytes)
                .saturating_sub(cancelled),
            cancelled_write_bytes: cancelled,
        }
    }
}

/// Disk space taken by the regular files under `dir` (recursively): allocated blocks, as `du`
/// counts them, not file lengths. Sparse files (fjall preallocates its journals that way) take
/// only what was written; space reserved with `fallocate` (RocksDB preallocates its files)
/// counts, because it is taken. Files that vanish while being walked (an engine deleting
/// them) are skipped.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut total = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            total += dir_bytes(&entry.path());
        } else if meta.is_file() {
            // st_blocks counts 512-byte units whatever the file system's block size.
            total += meta.blocks() * 512;
        }
    }
    total
}

/// Free bytes on the file system holding `path` (or its nearest existing ancestor), from `df`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let mut p = path;
    while !p.exists() {
        p = p.parent()?;
    }
    let out = std::process::Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(p)
        .output()
        .ok()?;
    String::from_utf8(out.stdout)
        .ok()?
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

/// A description of this machine.
pub fn machine(started_unix: u64) -> Machine {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let memory_bytes = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024);
    Machine {
        hostname: read("/proc/sys/kernel/hostname"),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_bytes,
        kernel: read("/proc/sys/kernel/osrelease"),
        started_unix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_sizes_add_up_recursively_and_count_allocated_space() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a"), vec![1u8; 1 << 20]).expect("write");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/b"), vec![1u8; 1 << 20]).expect("write");
        let written = dir_bytes(dir.path());
        // Allocation rounds up to blocks (and some file systems add metadata blocks).
        assert!(
            (2 << 20..(2 << 20) + (1 << 20)).contains(&written),
            "{written}"
        );
        let sparse = std::fs::File::create(dir.path().join("sparse")).expect("create");
        sparse.set_len(1 << 30).expect("set_len");
        assert!(
            dir_bytes(dir.path()) < written + (1 << 20),
            "a sparse gigabyte takes no space"
        );
        assert_eq!(dir_bytes(&dir.path().join("missing")), 0);
        assert!(free_bytes(dir.path()).is_some_and(|b| b > 0));
        assert!(free_bytes(&dir.path().join("not/yet/there")).is_some());
    }

    #[test]
    fn device_io_is_monotonic() {
        let a = DeviceIo::now();
        let b = DeviceIo::now();
        assert!(b.read_bytes >= a.read_bytes && b.write_bytes >= a.write_bytes);
        assert_eq!(b.since(&b), DeviceIo::default());
        let early = DeviceIo {
            read_bytes: 10,
            write_bytes: 100,
            cancelled_write_bytes: 5,
        };
        let late = DeviceIo {
            read_bytes: 30,
            write_bytes: 400,
            cancelled_write_bytes: 55,
        };
        assert_eq!(
            late.since(&early),
            DeviceIo {
                read_bytes: 20,
                write_bytes: 250,
                cancelled_write_bytes: 50
            }
        );
        let m = machine(0);
        assert!(m.cpus >= 1);
    }
}
