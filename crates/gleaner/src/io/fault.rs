//! The in-memory fault-injecting file system used by tests.
//!
//! It models what a power loss does to a POSIX file system: file contents survive only up to the
//! last `sync` of the file (optionally with a torn, possibly garbled, piece of the unsynced tail),
//! and directory entries (creations, renames, removals) survive only up to the last `sync_dir`
//! of their directory. Process crashes are not modelled: appends land in the file immediately.
//! Everything random is drawn from one seeded generator in a fixed order, so a test is
//! reproducible from its seed and its sequence of operations.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{
    FileLock, FileSystem, PathKind, RandomAccessFile, ReadFileOptions, WritableFile,
    WriteFileOptions, refuse_direct_reopen,
};
use crate::error::{Error, Result};

/// What happens to the unsynced tail of each file at a simulated crash.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TornMode {
    /// Every unsynced byte is lost.
    #[default]
    None,
    /// A random-length prefix of the unsynced tail survives intact, as when some of the pages
    /// written before the power loss reached the device.
    KeepRandomPrefix,
    /// A random-length prefix of the unsynced tail survives, and a random range of the
    /// surviving unsynced bytes is replaced with random bytes, as when a sector was half written.
    KeepPrefixWithGarbage,
}

/// The operation a [`FaultRule`] applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// [`WritableFile::append`].
    Append,
    /// [`WritableFile::flush`].
    Flush,
    /// [`WritableFile::sync`].
    Sync,
    /// [`RandomAccessFile::read_exact_at`].
    Read,
    /// [`FileSystem::new_writable`] and [`FileSystem::reopen_writable`].
    Create,
    /// [`FileSystem::rename`]; the path filter matches the source or the target.
    Rename,
    /// [`FileSystem::remove_file`].
    Remove,
    /// [`FileSystem::sync_dir`].
    SyncDir,
    /// Every operation above, and also [`FileSystem::create_dir_all`].
    Any,
    /// [`FileSystem::open_readable`]. Only rules naming it exactly match, and the opens are not
    /// counted in [`FaultFs::operations`]: `Any` keeps the operations the simulations place
    /// their faults by.
    Open,
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `EIO` (raw OS error 5): the device reported an I/O error.
    Eio,
    /// `ENOSPC` (raw OS error 28): the device is full.
    Enospc,
    /// Power is lost at this operation: it fails (an append may land partially) and the file
    /// system freezes exactly as at a crash point of [`FaultFs::set_crash_after`]. This targets a
    /// crash at, say, the third sync of a manifest. (An [`FaultOp::Open`] rule fails with `EIO`
    /// instead: opening a file for reading changes nothing a crash could tear.)
    PowerLoss,
    /// `EMFILE` (raw OS error 24): the process has no file descriptor left.
    Emfile,
}

impl FaultKind {
    fn raw_os_error(self) -> i32 {
        match self {
            FaultKind::Eio => 5,
            FaultKind::Enospc => 28,
            FaultKind::Emfile => 24,
            // Never turned into an OS error: a power-loss rule freezes the file system instead.
            FaultKind::PowerLoss => 5,
        }
    }
}

/// Makes matching operations fail: the first `skip` matches succeed, the next `times` matches
/// (all later ones when `None`) fail with `kind` and change nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    /// Which operation fails.
    pub op: FaultOp,
    /// Only operations whose path contains this substring match; `None` matches every path.
    pub path_contains: Option<String>,
    /// Matching operations to let through before failing.
    pub skip: u64,
    /// How many matching operations fail after the skipped ones; `None` means forever.
    pub times: Option<u64>,
    /// The error returned.
    pub kind: FaultKind,
}

impl FaultRule {
    /// A rule that never fires: it only counts the operations of kind `op` (on paths containing
    /// `path_contains`, when given), read back with [`FaultFs::fault_rule_matches`].
    pub fn counter(op: FaultOp, path_contains: Option<String>) -> FaultRule {
        FaultRule {
            op,
            path_contains,
            skip: u64::MAX,
            times: None,
            kind: FaultKind::Eio,
        }
    }
}

/// An in-memory file system for tests that loses unsynced data at a simulated crash, can freeze
/// after a chosen number of mutating operations, and injects `EIO`/`ENOSPC`.
///
/// The handle is cheap to clone; clones share the same file system, so a test keeps one while
/// the database holds another.
#[derive(Clone)]
pub struct FaultFs {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Checked before `state` is locked, so a held operation stops no other.
    gates: super::fault_gate::Gates,
}

/// A file's content. Shared between directory entries (current and durable) and open handles,
/// so that a replaced or removed file lives on for whoever still refers to it.
#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    /// Bytes known to be on the device; the rest is lost or torn at a crash.
    synced_len: usize,
}

#[derive(Clone)]
struct InodeRef {
    /// Creation order; gives crashes a deterministic order in which to draw random numbers.
    id: u64,
    inode: Arc<Mutex<Inode>>,
}

#[derive(Clone)]
enum Entry {
    File(InodeRef),
    Dir,
}

#[derive(Default)]
struct Dir {
    /// What a listing shows now.
    current: BTreeMap<String, Entry>,
    /// What a listing will show after a crash.
    durable: BTreeMap<String, Entry>,
}

struct State {
    /// Every directory by normalized path. Directories themselves are always durable.
    dirs: BTreeMap<PathBuf, Dir>,
    next_inode: u64,
    /// Bumped at every crash; handles from an older generation refuse to work.
    generation: u64,
    rng: u64,
    mutating_ops: u64,
    /// FNV-1a digest of every mutating operation attempted, in order (kind and paths).
    op_digest: u64,
    /// Operations fault rules have seen: reads, and mutating operations before a freeze.
    rule_ops: u64,
    /// Successful mutating operations left before the freeze.
    countdown: Option<u64>,
    frozen: bool,
    /// Whether the first operation refused by the freeze (the one "in flight" at the power
    /// loss) has happened.
    in_flight_seen: bool,
    /// Rules with the number of operations each has matched so far.
    rules: Vec<(FaultRule, u64)>,
    /// Operations failed by a fault rule since creation.
    injected: u64,
    /// Held locks by normalized path: `None` exclusive, `Some(n)` held by `n` shared guards.
    locks: BTreeMap<PathBuf, Option<usize>>,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Folds `bytes` into an FNV-1a 64-bit digest.
fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Why an operation was refused before it did anything.
enum Refusal {
    PowerLoss { in_flight: bool },
    Fault(FaultKind),
}

impl Refusal {
    fn into_error(self, context: String) -> Error {
        match self {
            Refusal::PowerLoss { .. } => Error::io(context, power_loss()),
            Refusal::Fault(kind) => {
                Error::io(context, io::Error::from_raw_os_error(kind.raw_os_error()))
            }
        }
    }
}

fn power_loss() -> io::Error {
    io::Error::other("simulated power loss")
}

fn stale_handle() -> io::Error {
    io::Error::other("handle invalidated by simulated crash")
}

fn not_found() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "no such file or directory")
}

fn is_a_directory() -> io::Error {
    io::Error::new(io::ErrorKind::IsADirectory, "is a directory")
}

/// Resolves `.` and `..` lexically; the model has no symlinks, so this equals canonicalization.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Splits a path into its normalized directory and file name.
fn split(path: &Path) -> Result<(PathBuf, String)> {
    let norm = normalize(path);
    match (norm.parent(), norm.file_name()) {
        (Some(dir), Some(name)) => Ok((dir.to_path_buf(), name.to_string_lossy().into_owned())),
        _ => Err(Error::invalid(format!(
            "{} does not name a file",
            path.display()
        ))),
    }
}

/// Whether `rule` names no path, or one of `paths` contains the part it names.
fn rule_names_any(rule: &FaultRule, paths: &[&Path]) -> bool {
    rule.path_contains.as_ref().is_none_or(|sub| {
        paths
            .iter()
            .any(|p| p.to_string_lossy().contains(sub.as_str()))
    })
}

impl State {
    fn next_u64(&mut self) -> u64 {
        // splitmix64: tiny, fast, and good enough to pick torn lengths deterministically.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    fn check_handle(&self, generation: u64, context: impl FnOnce() -> String) -> Result<()> {
        if generation == self.generation {
            Ok(())
        } else {
            Err(Error::io(context(), stale_handle()))
        }
    }

    /// Advances the rules matching `op` on `paths` and returns the fault of the first one that
    /// fires.
    fn injected_fault(&mut self, op: FaultOp, paths: &[&Path]) -> Option<FaultKind> {
        self.rule_ops += 1;
        self.fire(|rule| (rule.op == op || rule.op == FaultOp::Any) && rule_names_any(rule, paths))
    }

    /// The fault of the first [`FaultOp::Open`] rule that fires for opening `path`, advancing
    /// those rules only.
    fn open_fault(&mut self, path: &Path) -> Option<FaultKind> {
        self.fire(|rule| rule.op == FaultOp::Open && rule_names_any(rule, &[path]))
    }

    /// Advances every rule `applies` accepts and returns the fault of the first one that fires.
    fn fire(&mut self, applies: impl Fn(&FaultRule) -> bool) -> Option<FaultKind> {
        let mut fired = None;
        for (rule, matched) in &mut self.rules {
            if !applies(rule) {
                continue;
            }
            let n = *matched;
            *matched += 1;
            let fails = n >= rule.skip && rule.times.is_none_or(|t| n - rule.skip < t);
            if fails && fired.is_none() {
                fired = Some(rule.kind);
            }
        }
        if fired.is_some() {
            self.injected += 1;
        }
        fired
    }

    /// Counts a mutating operation and decides whether it may proceed.
    fn admit(&mut self, op: FaultOp, paths: &[&Path]) -> std::result::Result<(), Refusal> {
        self.mutating_ops += 1;
        self.op_digest = fnv1a(self.op_digest, &[op as u8]);
        for p in paths {
            self.op_digest = fnv1a(self.op_digest, p.as_os_str().as_encoded_bytes());
            self.op_digest = fnv1a(self.op_digest, &[0]);
        }
        if self.frozen {
            let in_flight = !self.in_flight_seen;
            self.in_flight_seen = true;
            return Err(Refusal::PowerLoss { in_flight });
        }
        match self.injected_fault(op, paths) {
            Some(FaultKind::PowerLoss) => {
                self.frozen = true;
                self.countdown = None;
                self.in_flight_seen = true;
                Err(Refusal::PowerLoss { in_flight: true })
            }
            Some(kind) => Err(Refusal::Fault(kind)),
            None => Ok(()),
        }
    }

    /// Records that an admitted mutating operation succeeded; freezes at the crash point.
    fn succeeded(&mut self) {
        if let Some(left) = self.countdown {
            if left <= 1 {
                self.countdown = None;
                self.frozen = true;
            } else {
                self.countdown = Some(left - 1);
            }
        }
    }

    fn new_inode(&mut self, data: Vec<u8>, synced: bool) -> InodeRef {
        let id = self.next_inode;
        self.next_inode += 1;
        let synced_len = if synced { data.len() } else { 0 };
        InodeRef {
            id,
            inode: Arc::new(Mutex::new(Inode { data, synced_len })),
        }
    }

    fn entry(&self, path: &Path) -> Option<&Entry> {
        let (dir, name) = split(path).ok()?;
        self.dirs.get(&dir)?.current.get(&name)
    }

    /// The file currently named by `path`, or a NotFound / IsADirectory error with `context`.
    fn file(&self, path: &Path, context: impl FnOnce() -> String) -> Result<InodeRef> {
        match self.entry(path) {
            Some(Entry::File(f)) => Ok(f.clone()),
            Some(Entry::Dir) => Err(Error::io(context(), is_a_directory())),
            None => Err(Error::io(context(), not_found())),
        }
    }

    /// Creates missing directories durably (directories are always durable in this model).
    fn make_dirs(&mut self, path: &Path, context: impl Fn() -> String) -> Result<()> {
        let norm = normalize(path);
        let mut chain: Vec<&Path> = norm.ancestors().collect();
        chain.reverse();
        for dir in chain {
            if self.dirs.contains_key(dir) {
                continue;
            }
            let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
                continue;
            };
            let name = name.to_string_lossy().into_owned();
            let Some(p) = self.dirs.get_mut(parent) else {
                return Err(Error::io(context(), not_found()));
            };
            if p.current.contains_key(&name) {
                return Err(Error::io(
                    context(),
                    io::Error::new(io::ErrorKind::AlreadyExists, "a file has that name"),
                ));
            }
            p.current.insert(name.clone(), Entry::Dir);
            p.durable.insert(name, Entry::Dir);
            self.dirs.insert(dir.to_path_buf(), Dir::default());
        }
        Ok(())
    }

    fn crash(&mut self, torn: TornMode) {
        // Files reachable after the crash are exactly those named by durable entries; anything
        // else is unreachable and needs no trimming.
        let mut survivors = BTreeMap::new();
        for dir in self.dirs.values_mut() {
            dir.current = dir.durable.clone();
            for entry in dir.durable.values() {
                if let Entry::File(f) = entry {
                    survivors.insert(f.id, Arc::clone(&f.inode));
                }
            }
        }
        for inode in survivors.values() {
            let mut ino = inode.lock();
            let synced = ino.synced_len.min(ino.data.len());
            let unsynced = ino.data.len() - synced;
            let keep = match torn {
                TornMode::None => 0,
                TornMode::KeepRandomPrefix | TornMode::KeepPrefixWithGarbage => {
                    self.below(unsynced + 1)
                }
            };
            ino.data.truncate(synced + keep);
            if torn == TornMode::KeepPrefixWithGarbage && keep > 0 {
                let start = synced + self.below(keep);
                let end = start + 1 + self.below(synced + keep - start);
                for i in start..end {
                    ino.data[i] = self.next_u64() as u8;
                }
            }
            // Whatever is on the device after power returns is, by definition, durable.
            ino.synced_len = ino.data.len();
        }
        self.generation += 1;
        self.locks.clear();
        self.countdown = None;
        self.frozen = false;
        self.in_flight_seen = false;
        self.rules.clear();
    }
}

impl FaultFs {
    /// An empty file system whose randomness (torn writes) is drawn from `seed`.
    pub fn new(seed: u64) -> FaultFs {
        let mut dirs = BTreeMap::new();
        // Both roots exist: "/" for absolute paths, "" for relative ones.
        dirs.insert(PathBuf::from("/"), Dir::default());
        dirs.insert(PathBuf::new(), Dir::default());
        FaultFs {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    dirs,
                    next_inode: 0,
                    generation: 0,
                    rng: seed,
                    mutating_ops: 0,
                    op_digest: FNV_OFFSET,
                    rule_ops: 0,
                    countdown: None,
                    frozen: false,
                    in_flight_seen: false,
                    rules: Vec::new(),
                    injected: 0,
                    locks: BTreeMap::new(),
                }),
                gates: super::fault_gate::Gates::default(),
            }),
        }
    }

    /// Simulates a power loss: directory entries revert to their last `sync_dir`, file contents
    /// to their last `sync` (subject to `torn`), every handle opened before becomes unusable,
    /// locks are released, and the freeze and all fault rules are cleared.
    pub fn crash(&self, torn: TornMode) {
        self.shared.state.lock().crash(torn);
    }

    /// Freezes the file system after `n` more mutating operations (append, flush, sync,
    /// new_writable, rename, remove_file, sync_dir, create_dir_all) have succeeded: later
    /// mutating operations fail with "simulated power loss" and change nothing, except that the
    /// first append refused may leave a random prefix of its data behind. Reads keep working.
    /// `n == 0` freezes at once.
    pub fn set_crash_after(&self, n: u64) {
        let mut st = self.shared.state.lock();
        st.in_flight_seen = false;
        if n == 0 {
            st.countdown = None;
            st.frozen = true;
        } else {
            st.countdown = Some(n);
            st.frozen = false;
        }
    }

    /// Whether the crash point set by [`FaultFs::set_crash_after`] has been reached.
    pub fn is_frozen(&self) -> bool {
        self.shared.state.lock().frozen
    }

    /// Mutating operations attempted since creation (including failed ones), so that a test can
    /// count a workload's operations once and then choose crash points within it.
    pub fn mutating_ops(&self) -> u64 {
        self.shared.state.lock().mutating_ops
    }

    /// A digest of every mutating operation attempted since creation, in order (its kind and
    /// paths): two runs that performed the same operations on the same files in the same order
    /// have the same digest. Tests use it to show that a schedule repeats exactly.
    pub fn operation_digest(&self) -> u64 {
        self.shared.state.lock().op_digest
    }

    /// Operations that fault rules see, counted since creation: every read, and every mutating
    /// operation attempted before a freeze. A rule with `op: FaultOp::Any`, no path filter and
    /// `skip: n` added at the start fails the operation numbered `n` (from 0) in this count, so
    /// a test can count a workload's operations once and then place a fault anywhere in it.
    pub fn operations(&self) -> u64 {
        self.shared.state.lock().rule_ops
    }

    /// Adds a fault rule; rules are checked in the order added.
    pub fn add_fault(&self, rule: FaultRule) {
        self.shared.state.lock().rules.push((rule, 0));
    }

    /// How many operations each fault rule has matched so far (skipped and failed alike), in
    /// the order the rules were added. A rule that never fires (`skip: u64::MAX`) thus counts
    /// a workload's operations of one kind on one kind of file.
    pub fn fault_rule_matches(&self) -> Vec<u64> {
        self.shared
            .state
            .lock()
            .rules
            .iter()
            .map(|(_, n)| *n)
            .collect()
    }

    /// Operations that fault rules have failed since creation (power-loss rules included), so a
    /// test can tell that an injected fault actually struck.
    pub fn injected_faults(&self) -> u64 {
        self.shared.state.lock().injected
    }

    /// Adds a gate: of the operations of kind `op` (any kind for [`FaultOp::Any`]) whose path
    /// contains `path_contains` (every path when `None`), the one numbered `skip` (from 0)
    /// stops there until [`FaultGate::open`](super::FaultGate::open) is called. A test holds a
    /// job at an exact operation this way while another thread acts; every other operation
    /// goes on meanwhile. Gates survive [`FaultFs::crash`].
    pub fn add_gate(
        &self,
        op: FaultOp,
        path_contains: Option<&str>,
        skip: u64,
    ) -> super::FaultGate {
        self.shared
            .gates
            .add(op, path_contains.map(str::to_string), skip)
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.shared.state.lock().rules.clear();
    }

    /// XORs the byte at `offset` of the file with `xor`, in its current and durable content
    /// alike (the corruption is on the device).
    pub fn corrupt_byte(&self, path: &Path, offset: u64, xor: u8) -> Result<()> {
        let st = self.shared.state.lock();
        let context = || format!("corrupting {} at offset {offset}", path.display());
        let f = st.file(path, context)?;
        let mut ino = f.inode.lock();
        let byte = usize::try_from(offset)
            .ok()
            .and_then(|i| ino.data.get_mut(i))
            .ok_or_else(|| {
                Error::io(
                    context(),
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "offset past the end of the file",
                    ),
                )
            })?;
        *byte ^= xor;
        Ok(())
    }

    /// The current content of the file at `path`, or `None` when there is no such file.
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.shared.state.lock();
        match st.entry(path)? {
            Entry::File(f) => Some(f.inode.lock().data.clone()),
            Entry::Dir => None,
        }
    }

    /// Creates or replaces the file at `path` with `data`, durably (content and directory
    /// entry), creating missing parent directories. Not a counted operation; ignores the freeze
    /// and fault rules.
    pub fn set_file_bytes(&self, path: &Path, data: Vec<u8>) -> Result<()> {
        let mut st = self.shared.state.lock();
        let context = || format!("setting the content of {}", path.display());
        let (dir, name) = split(path)?;
        st.make_dirs(&dir, context)?;
        if matches!(st.entry(path), Some(Entry::Dir)) {
            return Err(Error::io(context(), is_a_directory()));
        }
        let f = st.new_inode(data, true);
        if let Some(d) = st.dirs.get_mut(&dir) {
            d.current.insert(name.clone(), Entry::File(f.clone()));
            d.durable.insert(name, Entry::File(f));
        }
        Ok(())
    }

    /// Paths of every file currently present, sorted.
    pub fn list_files(&self) -> Vec<PathBuf> {
        let st = self.shared.state.lock();
        let mut out = Vec::new();
        for (dir, d) in &st.dirs {
            for (name, entry) in &d.current {
                if let Entry::File(_) = entry {
                    out.push(dir.join(name));
                }
            }
        }
        out
    }

    /// Cuts (or extends with zeros) the file at `path` to `len` bytes, as damage on the device:
    /// the new length is what survives a crash, apart from any extension, which is unsynced.
    pub fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let st = self.shared.state.lock();
        let context = || format!("truncating {} to {len} bytes", path.display());
        let f = st.file(path, context)?;
        let len = usize::try_from(len)
            .map_err(|_| Error::invalid(format!("{len} is too large a file length")))?;
        let mut ino = f.inode.lock();
        ino.data.resize(len, 0);
        ino.synced_len = ino.synced_len.min(len);
        Ok(())
    }
}

impl fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // try_lock: Debug may be called while the state is locked (e.g. from a panic message).
        let mut d = f.debug_struct("FaultFs");
        if let Some(st) = self.shared.state.try_lock() {
            d.field("generation", &st.generation)
                .field("mutating_ops", &st.mutating_ops)
                .field("frozen", &st.frozen)
                .field("rules", &st.rules.len());
        }
        d.finish_non_exhaustive()
    }
}

impl FileSystem for FaultFs {
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.shared.gates.pass(FaultOp::Any, &[path]);
        let mut st = self.shared.state.lock();
        let context = || format!("creating directory {}", path.display());
        // No dedicated FaultOp: passing Any means only rules for every operation match.
        st.admit(FaultOp::Any, &[path])
            .map_err(|r| r.into_error(context()))?;
        st.make_dirs(path, context)?;
        st.succeeded();
        Ok(())
    }

    fn new_writable(&self, path: &Path, _opts: WriteFileOptions) -> Result<Box<dyn WritableFile>> {
        self.shared.gates.pass(FaultOp::Create, &[path]);
        let mut st = self.shared.state.lock();
        let context = || format!("creating {}", path.display());
        st.admit(FaultOp::Create, &[path])
            .map_err(|r| r.into_error(context()))?;
        let (dir, name) = split(path)?;
        if !st.dirs.contains_key(&dir) {
            return Err(Error::io(context(), not_found()));
        }
        if matches!(st.entry(path), Some(Entry::Dir)) {
            return Err(Error::io(context(), is_a_directory()));
        }
        let f = st.new_inode(Vec::new(), false);
        if let Some(d) = st.dirs.get_mut(&dir) {
            d.current.insert(name, Entry::File(f.clone()));
        }
        st.succeeded();
        Ok(Box::new(FaultWriter {
            shared: Arc::clone(&self.shared),
            path: path.to_path_buf(),
            file: f,
            generation: st.generation,
            len: 0,
        }))
    }

    fn reopen_writable(
        &self,
        path: &Path,
        len: u64,
        opts: WriteFileOptions,
    ) -> Result<Box<dyn WritableFile>> {
        refuse_direct_reopen(path, opts)?;
        self.shared.gates.pass(FaultOp::Create, &[path]);
        let mut st = self.shared.state.lock();
        let context = || format!("reopening {} for appending at {len}", path.display());
        st.admit(FaultOp::Create, &[path])
            .map_err(|r| r.into_error(context()))?;
        let f = st.file(path, context)?;
        {
            let mut ino = f.inode.lock();
            let Some(keep) = usize::try_from(len).ok().filter(|&n| n <= ino.data.len()) else {
                return Err(Error::io(
                    context(),
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("the file holds only {} bytes", ino.data.len()),
                    ),
                ));
            };
            // The model drops the cut bytes at once and keeps only what was synced before the
            // cut. A real file system may bring the cut tail back after a crash before the next
            // sync; the one user, a segment's recovery, scans and cuts again then.
            ino.data.truncate(keep);
            ino.synced_len = ino.synced_len.min(keep);
        }
        st.succeeded();
        Ok(Box::new(FaultWriter {
            shared: Arc::clone(&self.shared),
            path: path.to_path_buf(),
            file: f,
            generation: st.generation,
            len,
        }))
    }

    fn open_readable(
        &self,
        path: &Path,
        _opts: ReadFileOptions,
    ) -> Result<Arc<dyn RandomAccessFile>> {
        let mut st = self.shared.state.lock();
        if let Some(kind) = st.open_fault(path) {
            let kind = match kind {
                FaultKind::PowerLoss => FaultKind::Eio,
                k => k,
            };
            return Err(Error::io(
                format!("opening {}", path.display()),
                io::Error::from_raw_os_error(kind.raw_os_error()),
            ));
        }
        let f = st.file(path, || format!("opening {}", path.display()))?;
        Ok(Arc::new(FaultReader {
            shared: Arc::clone(&self.shared),
            path: path.to_path_buf(),
            file: f,
            generation: st.generation,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.shared.gates.pass(FaultOp::Rename, &[from, to]);
        let mut st = self.shared.state.lock();
        let context = || format!("renaming {} to {}", from.display(), to.display());
        st.admit(FaultOp::Rename, &[from, to])
            .map_err(|r| r.into_error(context()))?;
        let f = match st.entry(from) {
            Some(Entry::File(f)) => f.clone(),
            Some(Entry::Dir) => {
                return Err(Error::io(
                    context(),
                    io::Error::new(
                        io::ErrorKind::Unsupported,
                        "FaultFs does not rename directories",
                    ),
                ));
            }
            None => return Err(Error::io(context(), not_found())),
        };
        let (from_dir, from_name) = split(from)?;
        let (to_dir, to_name) = split(to)?;
        if !st.dirs.contains_key(&to_dir) {
            return Err(Error::io(context(), not_found()));
        }
        if matches!(st.entry(to), Some(Entry::Dir)) {
            return Err(Error::io(context(), is_a_directory()));
        }
        if let Some(d) = st.dirs.get_mut(&from_dir) {
            d.current.remove(&from_name);
        }
        if let Some(d) = st.dirs.get_mut(&to_dir) {
            d.current.insert(to_name, Entry::File(f));
        }
        st.succeeded();
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.shared.gates.pass(FaultOp::Remove, &[path]);
        let mut st = self.shared.state.lock();
        let context = || format!("removing {}", path.display());
        st.admit(FaultOp::Remove, &[path])
            .map_err(|r| r.into_error(context()))?;
        st.file(path, context)?;
        let (dir, name) = split(path)?;
        if let Some(d) = st.dirs.get_mut(&dir) {
            d.current.remove(&name);
        }
        st.succeeded();
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let st = self.shared.state.lock();
        match st.dirs.get(&normalize(path)) {
            Some(d) => Ok(d.current.keys().cloned().collect()),
            None => Err(Error::io(
                format!("listing directory {}", path.display()),
                not_found(),
            )),
        }
    }

    fn path_kind(&self, path: &Path) -> Result<Option<PathKind>> {
        let st = self.shared.state.lock();
        if st.dirs.contains_key(&normalize(path)) {
            return Ok(Some(PathKind::Dir));
        }
        Ok(match st.entry(path) {
            Some(Entry::File(_)) => Some(PathKind::File),
            Some(Entry::Dir) => Some(PathKind::Dir),
            None => None,
        })
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let st = self.shared.state.lock();
        let f = st.file(path, || format!("getting the size of {}", path.display()))?;
        let len = f.inode.lock().data.len() as u64;
        Ok(len)
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        self.shared.gates.pass(FaultOp::SyncDir, &[path]);
        let mut st = self.shared.state.lock();
        let context = || format!("syncing directory {}", path.display());
        st.admit(FaultOp::SyncDir, &[path])
            .map_err(|r| r.into_error(context()))?;
        let Some(d) = st.dirs.get_mut(&normalize(path)) else {
            return Err(Error::io(context(), not_found()));
        };
        d.durable = d.current.clone();
        st.succeeded();
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut st = self.shared.state.lock();
        let context = || format!("opening lock file {}", path.display());
        let (dir, name) = split(path)?;
        if !st.dirs.contains_key(&dir) {
            return Err(Error::io(context(), not_found()));
        }
        let norm = normalize(path);
        if st.locks.contains_key(&norm) {
            return Err(locked_error(path));
        }
        match st.entry(path) {
            Some(Entry::File(_)) => {}
            Some(Entry::Dir) => return Err(Error::io(context(), is_a_directory())),
            // Like opening with O_CREAT, the lock file appears; it is empty, so making it
            // durable at once changes nothing a test could observe. A frozen file system
            // changes nothing, but the lock itself is still granted.
            None if !st.frozen => {
                let f = st.new_inode(Vec::new(), true);
                if let Some(d) = st.dirs.get_mut(&dir) {
                    d.current.insert(name.clone(), Entry::File(f.clone()));
                    d.durable.insert(name, Entry::File(f));
                }
            }
            None => {}
        }
        st.locks.insert(norm.clone(), None);
        Ok(Box::new(FaultLock {
            shared: Arc::clone(&self.shared),
            path: norm,
            generation: st.generation,
        }))
    }

    fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>> {
        let mut st = self.shared.state.lock();
        let context = || format!("opening lock file {}", path.display());
        let (dir, _) = split(path)?;
        if !st.dirs.contains_key(&dir) {
            return Err(Error::io(context(), not_found()));
        }
        match st.entry(path) {
            Some(Entry::File(_)) => {}
            Some(Entry::Dir) => return Err(Error::io(context(), is_a_directory())),
            // Opened without O_CREAT: nothing appears, and there is nothing to lock.
            None => return Ok(None),
        }
        let norm = normalize(path);
        let holders = match st.locks.get(&norm) {
            Some(None) => return Err(locked_error(path)),
            Some(Some(n)) => *n,
            None => 0,
        };
        st.locks.insert(norm.clone(), Some(holders + 1));
        Ok(Some(Box::new(FaultLock {
            shared: Arc::clone(&self.shared),
            path: norm,
            generation: st.generation,
        })))
    }
}

/// The error for a lock someone else holds: names the directory holding the lock file.
fn locked_error(path: &Path) -> Error {
    let shown = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.display().to_string(),
        _ => ".".to_string(),
    };
    Error::Locked { path: shown }
}

/// A writer appending straight into its inode.
struct FaultWriter {
    shared: Arc<Shared>,
    path: PathBuf,
    file: InodeRef,
    generation: u64,
    len: u64,
}

impl fmt::Debug for FaultWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultWriter")
            .field("path", &self.path)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl FaultWriter {
    /// Runs a mutating operation other than append: checks the handle, admits, applies `apply`.
    fn simple_op(&mut self, op: FaultOp, what: &str, apply: impl FnOnce(&mut Inode)) -> Result<()> {
        self.shared.gates.pass(op, &[&self.path]);
        let mut st = self.shared.state.lock();
        let context = || format!("{what} {}", self.path.display());
        st.check_handle(self.generation, context)?;
        st.admit(op, &[&self.path])
            .map_err(|r| r.into_error(context()))?;
        apply(&mut self.file.inode.lock());
        st.succeeded();
        Ok(())
    }
}

impl WritableFile for FaultWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.shared.gates.pass(FaultOp::Append, &[&self.path]);
        let mut st = self.shared.state.lock();
        let context = || format!("appending to {}", self.path.display());
        st.check_handle(self.generation, context)?;
        match st.admit(FaultOp::Append, &[&self.path]) {
            Ok(()) => {}
            Err(Refusal::PowerLoss { in_flight: true }) => {
                // The write in flight at the power loss may have partly reached the file.
                let n = st.below(data.len());
                self.file.inode.lock().data.extend_from_slice(&data[..n]);
                return Err(Error::io(context(), power_loss()));
            }
            Err(r) => return Err(r.into_error(context())),
        }
        self.file.inode.lock().data.extend_from_slice(data);
        self.len += data.len() as u64;
        st.succeeded();
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        // Appends are already in the "OS"; flush only counts and can fail.
        self.simple_op(FaultOp::Flush, "flushing", |_| {})
    }

    fn sync(&mut self) -> Result<()> {
        self.simple_op(FaultOp::Sync, "syncing", |ino| {
            ino.synced_len = ino.data.len();
        })
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// A reader of one inode; keeps reading it even after the name is replaced or removed.
struct FaultReader {
    shared: Arc<Shared>,
    path: PathBuf,
    file: InodeRef,
    generation: u64,
}

impl fmt::Debug for FaultReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultReader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl RandomAccessFile for FaultReader {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.shared.gates.pass(FaultOp::Read, &[&self.path]);
        let mut st = self.shared.state.lock();
        let context = || {
            format!(
                "reading {} bytes of {} at offset {offset}",
                buf.len(),
                self.path.display()
            )
        };
        st.check_handle(self.generation, context)?;
        if let Some(kind) = st.injected_fault(FaultOp::Read, &[&self.path]) {
            return Err(Refusal::Fault(kind).into_error(context()));
        }
        let ino = self.file.inode.lock();
        let range = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(buf.len())?))
            .filter(|r| r.end <= ino.data.len());
        let Some(range) = range else {
            let e = io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            );
            return Err(Error::io(context(), e));
        };
        buf.copy_from_slice(&ino.data[range]);
        Ok(())
    }

    fn size(&self) -> Result<u64> {
        let st = self.shared.state.lock();
        st.check_handle(self.generation, || {
            format!("getting the size of {}", self.path.display())
        })?;
        let len = self.file.inode.lock().data.len() as u64;
        Ok(len)
    }
}

/// Guard of an in-memory lock, exclusive or shared.
struct FaultLock {
    shared: Arc<Shared>,
    path: PathBuf,
    generation: u64,
}

impl fmt::Debug for FaultLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultLock")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl FileLock for FaultLock {}

impl Drop for FaultLock {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock();
        // After a crash the lock was already released and may belong to a new holder.
        if st.generation == self.generation {
            match st.locks.get_mut(&self.path) {
                Some(Some(n)) if *n > 1 => *n -= 1,
                _ => {
                    st.locks.remove(&self.path);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn opts() -> WriteFileOptions {
        WriteFileOptions::default()
    }

    fn setup(seed: u64) -> (FaultFs, PathBuf) {
        let fs = FaultFs::new(seed);
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        (fs, dir)
    }

    fn raw_os_error(err: &Error) -> Option<i32> {
        match err {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    fn is_msg(err: &Error, msg: &str) -> bool {
        matches!(err, Error::Io { source, .. } if source.to_string() == msg)
    }

    #[test]
    fn unsynced_data_is_lost_and_synced_data_kept() {
        let (fs, dir) = setup(1);
        let p = dir.join("a");
        let mut w = fs.new_writable(&p, opts()).unwrap();
        fs.sync_dir(&dir).unwrap();
        w.append(b"durable").unwrap();
        w.sync().unwrap();
        w.append(b"-volatile").unwrap();
        w.flush().unwrap();
        assert_eq!(fs.file_bytes(&p).unwrap(), b"durable-volatile");
        fs.crash(TornMode::None);
        assert_eq!(fs.file_bytes(&p).unwrap(), b"durable");
        assert_eq!(fs.read_all(&p).unwrap(), b"durable");
    }

    #[test]
    fn a_reopened_file_keeps_its_first_bytes_and_appends_after_them() {
        let (fs, dir) = setup(1);
        let p = dir.join("seg");
        fs.set_file_bytes(&p, b"records|torn".to_vec()).unwrap();
        let mut w = fs.reopen_writable(&p, 7, opts()).unwrap();
        assert_eq!(
            (w.len(), fs.file_bytes(&p).unwrap()),
            (7, b"records".to_vec())
        );
        w.append(b"+index").unwrap();
        w.flush().unwrap();
        // Unsynced, the appended bytes are lost at a crash; the kept ones stay.
        fs.crash(TornMode::None);
        assert_eq!(fs.read_all(&p).unwrap(), b"records");
        let mut w = fs.reopen_writable(&p, 7, opts()).unwrap();
        w.append(b"+index").unwrap();
        w.sync().unwrap();
        fs.crash(TornMode::None);
        assert_eq!(fs.read_all(&p).unwrap(), b"records+index");
        assert!(fs.reopen_writable(&p, 100, opts()).is_err(), "past the end");
        assert!(fs.reopen_writable(&dir.join("absent"), 0, opts()).is_err());
        assert_eq!(fs.read_all(&p).unwrap(), b"records+index");
    }

    #[test]
    fn new_file_without_sync_dir_disappears() {
        let (fs, dir) = setup(2);
        let p = dir.join("new");
        let mut w = fs.new_writable(&p, opts()).unwrap();
        w.append(b"x").unwrap();
        w.sync().unwrap();
        assert_eq!(fs.list_dir(&dir).unwrap(), vec!["new".to_string()]);
        fs.crash(TornMode::None);
        assert_eq!(fs.path_kind(&p).unwrap(), None);
        assert!(fs.list_dir(&dir).unwrap().is_empty());
        // The directory itself survives: directories are durable at creation.
        assert_eq!(fs.path_kind(&dir).unwrap(), Some(PathKind::Dir));
    }

    #[test]
    fn rename_and_remove_without_sync_dir_revert() {
        let (fs, dir) = setup(3);
        let (a, b, c) = (dir.join("a"), dir.join("b"), dir.join("c"));
        fs.set_file_bytes(&a, b"A".to_vec()).unwrap();
        fs.set_file_bytes(&c, b"C".to_vec()).unwrap();
        fs.rename(&a, &b).unwrap();
        fs.remove_file(&c).unwrap();
        assert_eq!(fs.list_files(), vec![b.clone()]);
        fs.crash(TornMode::None);
        assert_eq!(fs.list_files(), vec![a.clone(), c.clone()]);
        // With sync_dir the rename sticks.
        fs.rename(&a, &b).unwrap();
        fs.sync_dir(&dir).unwrap();
        fs.crash(TornMode::None);
        assert_eq!(fs.list_files(), vec![b.clone(), c]);
        assert_eq!(fs.file_bytes(&b).unwrap(), b"A");
    }

    #[test]
    fn replaced_file_keeps_old_inode_for_open_readers() {
        let (fs, dir) = setup(4);
        let p = dir.join("f");
        fs.set_file_bytes(&p, b"old".to_vec()).unwrap();
        let r = fs.open_readable(&p, ReadFileOptions::default()).unwrap();
        let mut w = fs.new_writable(&p, opts()).unwrap();
        w.append(b"newer").unwrap();
        w.sync().unwrap();
        let mut b = [0u8; 3];
        r.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(&b, b"old");
        assert_eq!(fs.read_all(&p).unwrap(), b"newer");
        // The replacement was never made durable by sync_dir: the old file comes back.
        fs.crash(TornMode::None);
        assert_eq!(fs.file_bytes(&p).unwrap(), b"old");
    }

    fn torn_result(seed: u64, mode: TornMode) -> Vec<u8> {
        let (fs, dir) = setup(seed);
        let p = dir.join("log");
        let mut w = fs.new_writable(&p, opts()).unwrap();
        fs.sync_dir(&dir).unwrap();
        w.append(&[1u8; 100]).unwrap();
        w.sync().unwrap();
        w.append(&[2u8; 1000]).unwrap();
        fs.crash(mode);
        fs.file_bytes(&p).unwrap()
    }

    #[test]
    fn torn_modes_keep_a_prefix_deterministically() {
        let mut lengths = BTreeSet::new();
        for seed in 0..20 {
            let kept = torn_result(seed, TornMode::KeepRandomPrefix);
            assert_eq!(kept, torn_result(seed, TornMode::KeepRandomPrefix));
            assert!(kept.len() >= 100 && kept.len() <= 1100);
            assert!(kept[..100].iter().all(|&b| b == 1));
            assert!(kept[100..].iter().all(|&b| b == 2));
            lengths.insert(kept.len());

            let garbled = torn_result(seed, TornMode::KeepPrefixWithGarbage);
            assert_eq!(garbled, torn_result(seed, TornMode::KeepPrefixWithGarbage));
            assert!(garbled.len() >= 100 && garbled.len() <= 1100);
            // Synced bytes are never garbled.
            assert!(garbled[..100].iter().all(|&b| b == 1));

            assert_eq!(torn_result(seed, TornMode::None).len(), 100);
        }
        assert!(lengths.len() > 5, "torn lengths do not vary: {lengths:?}");
        // Some seed garbles the kept unsynced bytes.
        assert!((0..20).any(|s| {
            let g = torn_result(s, TornMode::KeepPrefixWithGarbage);
            g[100..].iter().any(|&b| b != 2)
        }));
    }

    /// A small workload; returns how many of its steps succeeded.
    fn workload(fs: &FaultFs) -> usize {
        let dir = Path::new("/w");
        let steps: Vec<Box<dyn Fn() -> Result<()>>> = vec![
            Box::new(|| fs.create_dir_all(dir)),
            Box::new(|| {
                let mut w = fs.new_writable(&dir.join("f"), opts())?;
                w.append(b"hello")?;
                w.append(b" world")?;
                w.flush()?;
                w.sync()
            }),
            Box::new(|| fs.sync_dir(dir)),
            Box::new(|| fs.rename(&dir.join("f"), &dir.join("g"))),
            Box::new(|| fs.remove_file(&dir.join("g"))),
        ];
        steps.iter().take_while(|s| s().is_ok()).count()
    }

    #[test]
    fn crash_after_n_freezes_exactly_at_n() {
        let counter = FaultFs::new(5);
        assert_eq!(workload(&counter), 5);
        let total = counter.mutating_ops();
        assert_eq!(total, 9);
        for n in 0..total {
            let fs = FaultFs::new(5);
            fs.set_crash_after(n);
            assert_eq!(fs.is_frozen(), n == 0);
            workload(&fs);
            assert!(fs.is_frozen());
            // Exactly n operations succeeded: the (n+1)th attempt was the first refused, and
            // the workload stops at its first failure.
            assert_eq!(fs.mutating_ops(), n + 1, "crash point {n}");
            let err = fs.create_dir_all(Path::new("/other")).unwrap_err();
            assert!(is_msg(&err, "simulated power loss"), "{err}");
            assert_eq!(fs.path_kind(Path::new("/other")).unwrap(), None);
        }
        let fs = FaultFs::new(5);
        fs.set_crash_after(total);
        assert_eq!(workload(&fs), 5);
        assert!(fs.is_frozen());
    }

    #[test]
    fn frozen_fs_still_reads_and_crash_unfreezes() {
        let (fs, dir) = setup(6);
        let p = dir.join("f");
        fs.set_file_bytes(&p, b"data".to_vec()).unwrap();
        let mut w = fs.new_writable(&dir.join("g"), opts()).unwrap();
        fs.set_crash_after(1);
        w.append(b"ok").unwrap();
        assert!(fs.is_frozen());
        // The in-flight append leaves at most a strict prefix behind.
        let before = fs.file_bytes(&dir.join("g")).unwrap();
        assert!(w.append(&[9u8; 64]).is_err());
        let after = fs.file_bytes(&dir.join("g")).unwrap();
        assert!(after.len() < before.len() + 64 && after.starts_with(b"ok"));
        // Later appends change nothing.
        assert!(w.append(&[9u8; 64]).is_err());
        assert_eq!(fs.file_bytes(&dir.join("g")).unwrap(), after);
        assert_eq!(fs.read_all(&p).unwrap(), b"data");
        fs.crash(TornMode::None);
        assert!(!fs.is_frozen());
        fs.create_dir_all(Path::new("/again")).unwrap();
    }

    #[test]
    fn fault_rules_skip_then_fail_with_os_errors() {
        let (fs, dir) = setup(7);
        fs.add_fault(FaultRule {
            op: FaultOp::Append,
            path_contains: Some(".log".into()),
            skip: 2,
            times: Some(1),
            kind: FaultKind::Enospc,
        });
        let mut log = fs.new_writable(&dir.join("1.log"), opts()).unwrap();
        let mut other = fs.new_writable(&dir.join("1.sst"), opts()).unwrap();
        for _ in 0..5 {
            other.append(b"x").unwrap();
        }
        log.append(b"a").unwrap();
        log.append(b"b").unwrap();
        let err = log.append(b"c").unwrap_err();
        assert_eq!(raw_os_error(&err), Some(28));
        assert_eq!(err.io_kind(), Some(io::ErrorKind::StorageFull));
        assert!(err.to_string().contains("1.log"), "{err}");
        log.append(b"d").unwrap();
        // The failed append wrote nothing.
        assert_eq!(fs.file_bytes(&dir.join("1.log")).unwrap(), b"abd");
        assert_eq!(fs.injected_faults(), 1, "only the third append failed");

        fs.add_fault(FaultRule {
            op: FaultOp::Sync,
            path_contains: None,
            skip: 0,
            times: None,
            kind: FaultKind::Eio,
        });
        for _ in 0..3 {
            let err = log.sync().unwrap_err();
            assert_eq!(raw_os_error(&err), Some(5));
        }
        assert_eq!(fs.injected_faults(), 4);
        fs.clear_faults();
        fs.sync_dir(&dir).unwrap();
        // The failed syncs left nothing durable; a crash loses the content.
        fs.crash(TornMode::None);
        assert_eq!(fs.file_bytes(&dir.join("1.log")).unwrap(), b"");
    }

    #[test]
    fn fault_rules_for_reads_and_directory_ops() {
        let (fs, dir) = setup(8);
        let p = dir.join("t.sst");
        fs.set_file_bytes(&p, vec![0u8; 10]).unwrap();
        let r = fs.open_readable(&p, ReadFileOptions::default()).unwrap();
        fs.add_fault(FaultRule {
            op: FaultOp::Read,
            path_contains: Some("t.sst".into()),
            skip: 1,
            times: Some(2),
            kind: FaultKind::Eio,
        });
        let mut b = [0u8; 4];
        r.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(
            raw_os_error(&r.read_exact_at(&mut b, 0).unwrap_err()),
            Some(5)
        );
        assert!(r.read_exact_at(&mut b, 0).is_err());
        r.read_exact_at(&mut b, 0).unwrap();
        fs.add_fault(FaultRule {
            op: FaultOp::Rename,
            path_contains: Some("CURRENT".into()),
            skip: 0,
            times: Some(1),
            kind: FaultKind::Eio,
        });
        assert!(fs.rename(&p, &dir.join("CURRENT")).is_err());
        assert_eq!(fs.path_kind(&p).unwrap(), Some(PathKind::File));
        fs.rename(&p, &dir.join("CURRENT")).unwrap();
        fs.add_fault(FaultRule {
            op: FaultOp::Any,
            path_contains: None,
            skip: 0,
            times: Some(1),
            kind: FaultKind::Enospc,
        });
        assert!(fs.sync_dir(&dir).is_err());
        fs.sync_dir(&dir).unwrap();
    }

    #[test]
    fn old_handles_fail_after_crash() {
        let (fs, dir) = setup(9);
        let p = dir.join("f");
        fs.set_file_bytes(&p, b"abc".to_vec()).unwrap();
        let r = fs.open_readable(&p, ReadFileOptions::default()).unwrap();
        let mut w = fs.new_writable(&dir.join("g"), opts()).unwrap();
        fs.crash(TornMode::None);
        let mut b = [0u8; 1];
        let err = r.read_exact_at(&mut b, 0).unwrap_err();
        assert!(
            is_msg(&err, "handle invalidated by simulated crash"),
            "{err}"
        );
        assert_eq!(err.io_kind(), Some(io::ErrorKind::Other));
        assert!(r.size().is_err());
        assert!(w.append(b"x").is_err());
        assert!(w.sync().is_err());
        let r2 = fs.open_readable(&p, ReadFileOptions::default()).unwrap();
        r2.read_exact_at(&mut b, 0).unwrap();
    }

    #[test]
    fn locks_exclude_and_are_released_on_drop_and_crash() {
        let (fs, dir) = setup(10);
        let p = dir.join("LOCK");
        let g = fs.lock(&p).unwrap();
        match fs.lock(&p) {
            Err(Error::Locked { path }) => assert_eq!(path, "/db"),
            other => panic!("expected Locked, got {other:?}"),
        }
        assert!(matches!(
            fs.clone().lock(&dir.join("./LOCK")),
            Err(Error::Locked { .. })
        ));
        drop(g);
        let g = fs.lock(&p).unwrap();
        fs.crash(TornMode::None);
        let g2 = fs.lock(&p).unwrap();
        // Dropping the pre-crash guard must not release the new holder's lock.
        drop(g);
        assert!(matches!(fs.lock(&p), Err(Error::Locked { .. })));
        drop(g2);
        fs.lock(&p).unwrap();
    }

    #[test]
    fn shared_locks_coexist_exclude_the_exclusive_one_and_create_nothing() {
        let (fs, dir) = setup(12);
        let p = dir.join("LOCK");
        let ops = fs.operations();
        assert!(fs.lock_shared(&p).unwrap().is_none());
        assert!(fs.list_dir(&dir).unwrap().is_empty(), "nothing created");
        assert_eq!(fs.operations(), ops, "a shared lock is no file operation");
        drop(fs.lock(&p).unwrap());
        let a = fs.lock_shared(&p).unwrap().expect("file exists");
        let b = fs
            .lock_shared(&dir.join("./LOCK"))
            .unwrap()
            .expect("exists");
        assert!(matches!(fs.lock(&p), Err(Error::Locked { .. })));
        drop(a);
        assert!(
            matches!(fs.lock(&p), Err(Error::Locked { .. })),
            "b still holds it"
        );
        drop(b);
        let g = fs.lock(&p).unwrap();
        match fs.lock_shared(&p) {
            Err(Error::Locked { path }) => assert_eq!(path, "/db"),
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(g);
        let s = fs.lock_shared(&p).unwrap().expect("free");
        fs.crash(TornMode::None);
        let g = fs.lock(&p).unwrap();
        // Dropping the pre-crash shared guard must not release the new holder's lock.
        drop(s);
        assert!(matches!(fs.lock_shared(&p), Err(Error::Locked { .. })));
        drop(g);
        // A frozen file system still grants shared locks (they write nothing).
        fs.set_crash_after(0);
        drop(fs.lock_shared(&p).unwrap().expect("frozen but present"));
    }

    #[test]
    fn corrupt_byte_changes_reads_and_survives_crash() {
        let (fs, dir) = setup(11);
        let p = dir.join("f");
        fs.set_file_bytes(&p, vec![0u8; 8]).unwrap();
        fs.corrupt_byte(&p, 3, 0x40).unwrap();
        let r = fs.open_readable(&p, ReadFileOptions::default()).unwrap();
        let mut b = [0u8; 8];
        r.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(b, [0, 0, 0, 0x40, 0, 0, 0, 0]);
        fs.crash(TornMode::None);
        assert_eq!(fs.file_bytes(&p).unwrap()[3], 0x40);
        assert!(fs.corrupt_byte(&p, 8, 1).is_err());
        assert!(fs.corrupt_byte(&dir.join("none"), 0, 1).is_err());
        fs.truncate(&p, 5).unwrap();
        assert_eq!(fs.file_size(&p).unwrap(), 5);
    }

    #[test]
    fn errors_for_missing_paths_and_eof() {
        let (fs, dir) = setup(12);
        let err = fs
            .open_readable(&dir.join("missing"), ReadFileOptions::default())
            .unwrap_err();
        assert_eq!(err.io_kind(), Some(io::ErrorKind::NotFound));
        assert!(err.to_string().contains("missing"), "{err}");
        let err = fs.new_writable(Path::new("/nodir/f"), opts()).unwrap_err();
        assert_eq!(err.io_kind(), Some(io::ErrorKind::NotFound));
        assert!(fs.remove_file(&dir.join("missing")).is_err());
        assert!(fs.rename(&dir.join("missing"), &dir.join("x")).is_err());
        assert!(fs.list_dir(Path::new("/nodir")).is_err());
        let p = dir.join("f");
        fs.set_file_bytes(&p, b"abc".to_vec()).unwrap();
        let r = fs.open_readable(&p, ReadFileOptions::default()).unwrap();
        let mut b = [0u8; 2];
        let err = r.read_exact_at(&mut b, 2).unwrap_err();
        assert_eq!(err.io_kind(), Some(io::ErrorKind::UnexpectedEof));
        let err = r.read_exact_at(&mut b, u64::MAX).unwrap_err();
        assert_eq!(err.io_kind(), Some(io::ErrorKind::UnexpectedEof));
    }

    #[test]
    fn directories_and_paths_are_normalized() {
        let fs = FaultFs::new(13);
        fs.create_dir_all(Path::new("/a/b/../c")).unwrap();
        assert_eq!(
            fs.path_kind(Path::new("/a/c")).unwrap(),
            Some(PathKind::Dir)
        );
        assert_eq!(fs.path_kind(Path::new("/a/b")).unwrap(), None);
        let mut w = fs.new_writable(Path::new("/a/./c/f"), opts()).unwrap();
        w.append(b"1").unwrap();
        assert_eq!(fs.file_bytes(Path::new("/a/c/f")).unwrap(), b"1");
        assert_eq!(fs.list_dir(Path::new("/a")).unwrap(), vec!["c".to_string()]);
        assert_eq!(
            fs.path_kind(Path::new("/a/c/f")).unwrap(),
            Some(PathKind::File)
        );
        // A file where a directory is wanted is an error, not a panic.
        assert!(fs.create_dir_all(Path::new("/a/c/f/g")).is_err());
        // Relative paths live under their own root.
        fs.create_dir_all(Path::new("rel")).unwrap();
        fs.set_file_bytes(Path::new("rel/x"), b"r".to_vec())
            .unwrap();
        assert_eq!(fs.read_all(Path::new("./rel/x")).unwrap(), b"r");
    }

    #[test]
    fn a_power_loss_rule_freezes_at_the_matching_operation() {
        let (fs, dir) = setup(12);
        let mut a = fs
            .new_writable(&dir.join("a.log"), WriteFileOptions::default())
            .unwrap();
        let mut b = fs
            .new_writable(&dir.join("b.sst"), WriteFileOptions::default())
            .unwrap();
        fs.add_fault(FaultRule {
            op: FaultOp::Sync,
            path_contains: Some(".sst".into()),
            skip: 1,
            times: Some(1),
            kind: FaultKind::PowerLoss,
        });
        a.append(b"log").unwrap();
        a.sync().unwrap();
        b.append(b"first").unwrap();
        b.sync().unwrap();
        b.append(b"second").unwrap();
        assert!(!fs.is_frozen());
        let err = b.sync().unwrap_err();
        assert!(is_msg(&err, "simulated power loss"), "{err}");
        assert!(fs.is_frozen(), "the second .sst sync is the crash point");
        assert!(
            a.append(b"more").is_err(),
            "everything after the crash point fails"
        );
        fs.crash(TornMode::None);
        assert!(!fs.is_frozen());
    }
}
