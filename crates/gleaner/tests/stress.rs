//! Concurrency stress: writer, reader, snapshot and iterator threads race with flushes,
//! compactions and value-table GC (background threads plus a "chaos" thread that calls
//! `flush`, `compact_range` and `run_gc` at random moments), and every read is checked exactly.
//!
//! Each writer owns a disjoint set of keys, so no global model (and no lock that would
//! serialise the threads) is needed. Per key, the writer numbers its writes 1, 2, 3, ...; what
//! version `n` of a key is (a put of which value, or a delete) is a pure function of the seed,
//! the key and `n`, so any thread can tell what a version should look like. Around each write
//! the writer publishes two numbers per key: `started` (raised before the write is submitted)
//! and `done` (raised after it is acknowledged). A reader loads `done` before it reads and
//! `started` after; whatever it sees must be the state of a version in that window. This is
//! exact: an acknowledged write must be visible to a later read, and a read cannot see a write
//! the writer has not begun.
//!
//! Checked while running:
//! - `get`: the value is well formed, belongs to the key, and is a version in the window.
//! - snapshots: `get_with` at a snapshot is within the window around `snapshot()`, and reading
//!   again (while writes, compactions and GC go on) returns the same bytes each time; a range
//!   scan at the snapshot agrees with those reads.
//! - iterators (full forward walks, bounded forward and reverse walks from a seek, lazy value
//!   fetches, reversed ranges): keys strictly ordered, every key walked past that is missing
//!   may be absent in its window, every value present is a version in its window.
//!
//! At the end: every key's `get` and a full scan equal the final state exactly, the garbage
//! recount finds no mismatch, no dropped handle is unresolved, and after close and reopen (on
//! the same in-memory file system) the state is still exact.
//!
//! `cargo test` runs it briefly (`GLEANER_STRESS_SECS`, default 3 s per variant) under the
//! `scavenger` and `tdb` GC variants, one under leveled and one under tiered compaction (which
//! as the seed says: `common::styles_for`; `GLEANER_STYLES=all` runs each variant under both).
//! The long mode runs every variant:
//!
//! ```text
//! GLEANER_STRESS_SECS=600 GLEANER_STRESS_ALL=1 cargo test --release -p gleaner --test stress -- --nocapture
//! ```
//!
//! A failure names the seed, the variant and the key; `GLEANER_STRESS_SEED=<seed>` replays the
//! same operation sequences (thread interleaving still varies from run to run), and
//! `GLEANER_STRESS_VARIANTS=novkv,titan` runs only the variants named.

use std::fmt::Display;
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gleaner::io::FaultFs;
use gleaner::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;

const WRITERS: usize = 3;
const KEYS_PER_WRITER: usize = 200;
const KEYS: usize = WRITERS * KEYS_PER_WRITER;
/// Keys `0..HOT_KEYS` of each writer get half of its writes, so some keys are overwritten
/// often (garbage for GC, hot keys for hotness-aware writing) and others rarely.
const HOT_KEYS: usize = 20;
const READERS: usize = 2;
const ITERATORS: usize = 1;
/// Longest bounded iterator walk.
const WALK: usize = 60;

fn env_u64(name: &str) -> Option<u64> {
    let s = std::env::var(name).ok()?;
    Some(
        s.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={s:?} is not a number")),
    )
}

/// SplitMix64: mixes the seed, a key and a version into the bits that decide what that version
/// is.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Key `g` (global index): writer `g / KEYS_PER_WRITER`'s key `g % KEYS_PER_WRITER`. The names
/// sort in the order of `g`.
fn key(g: usize) -> String {
    format!("w{}-k{:05}", g / KEYS_PER_WRITER, g % KEYS_PER_WRITER)
}

/// The global index of a key name, or `None` if it is not one of ours.
fn parse_key(k: &[u8]) -> Option<usize> {
    let s = std::str::from_utf8(k).ok()?;
    let (w, i) = s.strip_prefix('w')?.split_once("-k")?;
    if w.len() != 1 || i.len() != 5 {
        return None;
    }
    let (w, i): (usize, usize) = (w.parse().ok()?, i.parse().ok()?);
    (w < WRITERS && i < KEYS_PER_WRITER).then_some(w * KEYS_PER_WRITER + i)
}

/// A value for a failure message: its head and its length.
fn describe(v: Option<&[u8]>) -> String {
    match v {
        None => "nothing".to_string(),
        Some(b) => format!(
            "{:?} ({} bytes)",
            String::from_utf8_lossy(&b[..b.len().min(24)]),
            b.len()
        ),
    }
}

/// The per-key publication of one key (see the file comment).
#[derive(Default)]
struct Published {
    /// Highest version whose write has been submitted (or is about to be).
    started: AtomicU64,
    /// Highest version whose write has been acknowledged.
    done: AtomicU64,
}

/// What one thread did, to show the run was not vacuous.
#[derive(Default)]
struct Counts {
    writes: AtomicU64,
    gets: AtomicU64,
    snapshots: AtomicU64,
    walks: AtomicU64,
    chaos: AtomicU64,
}

/// Sets the stop flag when a thread panics, so the others end now rather than at the deadline.
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

struct Run<'a> {
    seed: u64,
    variant: &'a str,
    db: &'a Db,
    keys: Vec<Published>,
    stop: AtomicBool,
    counts: Counts,
}

impl Run<'_> {
    fn fail(&self, msg: impl Display) -> ! {
        self.stop.store(true, Ordering::SeqCst);
        panic!(
            "stress failure (seed {seed}, variant {variant}; replay with \
             GLEANER_STRESS_SEED={seed}): {msg}",
            seed = self.seed,
            variant = self.variant
        )
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// A thread's RNG: its own stream of the run's seed.
    fn rng(&self, thread: u64) -> StdRng {
        StdRng::seed_from_u64(mix(self.seed ^ mix(thread)))
    }

    fn bits(&self, g: usize, version: u64) -> u64 {
        mix(self.seed ^ mix(((g as u64) << 32) ^ version))
    }

    /// Whether version `version` of key `g` is a delete (about one in six; 0, never written,
    /// counts as absent too).
    fn is_absent(&self, g: usize, version: u64) -> bool {
        version == 0 || self.bits(g, version).is_multiple_of(6)
    }

    /// The value version `version` of key `g` puts: `key:version:` padded with a byte of the
    /// version, a third inline-sized (under `min_separated_value_size`), the rest separated.
    fn value(&self, g: usize, version: u64) -> Vec<u8> {
        let bits = self.bits(g, version) >> 8;
        let len = if bits.is_multiple_of(3) {
            20 + (bits >> 4) % 80
        } else {
            300 + (bits >> 4) % 2700
        } as usize;
        let mut v = format!("{}:{version}:", key(g)).into_bytes();
        v.resize(len.max(v.len()), b'a' + (version % 26) as u8);
        v
    }

    /// What a reader may see of key `g`: the state of version `v`.
    fn state(&self, g: usize, v: u64) -> Option<Vec<u8>> {
        (!self.is_absent(g, v)).then(|| self.value(g, v))
    }

    fn lows(&self) -> Vec<u64> {
        self.keys
            .iter()
            .map(|p| p.done.load(Ordering::SeqCst))
            .collect()
    }

    fn highs(&self) -> Vec<u64> {
        self.keys
            .iter()
            .map(|p| p.started.load(Ordering::SeqCst))
            .collect()
    }

    /// Checks that `got`, read from key `g`, is the state of some version in `lo..=hi`.
    fn check_read(&self, what: &str, g: usize, got: Option<&[u8]>, lo: u64, hi: u64) {
        let k = key(g);
        match got {
            None => {
                if !(lo..=hi).any(|v| self.is_absent(g, v)) {
                    self.fail(format_args!(
                        "{what}: key {k} is missing, but every version in {lo}..={hi} is a put \
                         (a lost write)"
                    ));
                }
            }
            Some(bytes) => {
                let prefix = format!("{k}:");
                let version = bytes
                    .strip_prefix(prefix.as_bytes())
                    .and_then(|rest| {
                        let end = rest.iter().position(|&b| b == b':')?;
                        std::str::from_utf8(&rest[..end]).ok()?.parse::<u64>().ok()
                    })
                    .unwrap_or_else(|| {
                        self.fail(format_args!(
                            "{what}: key {k} has a value that is not its own: {}",
                            describe(Some(bytes))
                        ))
                    });
                if !(lo..=hi).contains(&version) {
                    self.fail(format_args!(
                        "{what}: key {k} shows version {version}, outside the window {lo}..={hi}"
                    ));
                }
                if self.is_absent(g, version) {
                    self.fail(format_args!(
                        "{what}: key {k} shows version {version}, which is a delete"
                    ));
                }
                if bytes != self.value(g, version).as_slice() {
                    self.fail(format_args!(
                        "{what}: key {k} version {version}: value damaged ({} bytes, expected {})",
                        bytes.len(),
                        self.value(g, version).len()
                    ));
                }
            }
        }
    }

    /// Checks an ascending walk `view` that covered exactly the keys `span`: keys strictly
    /// ascending and all in the span, every key present within its window, every key missing
    /// possibly absent in its window.
    fn check_view(
        &self,
        what: &str,
        view: &[(Vec<u8>, Vec<u8>)],
        span: RangeInclusive<usize>,
        lows: &[u64],
        highs: &[u64],
    ) {
        let mut prev: Option<usize> = None;
        for (k, _) in view {
            let g = parse_key(k).unwrap_or_else(|| {
                self.fail(format_args!(
                    "{what}: unknown key {:?}",
                    String::from_utf8_lossy(k)
                ))
            });
            if prev.is_some_and(|p| p >= g) || !span.contains(&g) {
                self.fail(format_args!(
                    "{what}: key {} out of order or outside {}..={} (after {:?})",
                    key(g),
                    key(*span.start()),
                    key(*span.end()),
                    prev.map(key)
                ));
            }
            prev = Some(g);
        }
        let mut rest = view.iter().peekable();
        for g in span {
            let got = rest
                .next_if(|(k, _)| parse_key(k) == Some(g))
                .map(|(_, v)| v.as_slice());
            self.check_read(what, g, got, lows[g], highs[g]);
        }
    }

    fn writer(&self, w: usize) {
        let _guard = StopOnPanic(&self.stop);
        let mut rng = self.rng(w as u64);
        let base = w * KEYS_PER_WRITER;
        let mut version = [0u64; KEYS_PER_WRITER];
        while !self.stopped() {
            let n = if rng.random_bool(0.25) {
                rng.random_range(2..=6)
            } else {
                1
            };
            // Distinct keys: a batch's versions are published per key.
            let mut picked: Vec<usize> = Vec::with_capacity(n);
            while picked.len() < n {
                let i = if rng.random_bool(0.5) {
                    rng.random_range(0..HOT_KEYS)
                } else {
                    rng.random_range(0..KEYS_PER_WRITER)
                };
                if !picked.contains(&i) {
                    picked.push(i);
                }
            }
            let mut batch = WriteBatch::new();
            for &i in &picked {
                let g = base + i;
                version[i] += 1;
                let v = version[i];
                // Before the write: a reader that sees this version must find it allowed.
                self.keys[g].started.store(v, Ordering::SeqCst);
                match self.state(g, v) {
                    Some(value) => batch.put(key(g), value),
                    None => batch.delete(key(g)),
                }
            }
            let opts = if rng.random_bool(0.02) {
                WriteOptions::sync()
            } else {
                WriteOptions::default()
            };
            if let Err(e) = self.db.write(batch, &opts) {
                self.fail(format_args!(
                    "writer {w}: write of {:?} failed: {e}",
                    picked.iter().map(|&i| key(base + i)).collect::<Vec<_>>()
                ));
            }
            // After the acknowledgement: every later read must see at least this version.
            for &i in &picked {
                self.keys[base + i].done.store(version[i], Ordering::SeqCst);
            }
            self.counts.writes.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn reader(&self, r: usize) {
        let _guard = StopOnPanic(&self.stop);
        let mut rng = self.rng(100 + r as u64);
        while !self.stopped() {
            if rng.random_bool(0.05) {
                self.snapshot_check(&mut rng);
                continue;
            }
            let g = rng.random_range(0..KEYS);
            let lo = self.keys[g].done.load(Ordering::SeqCst);
            let got = self
                .db
                .get(key(g))
                .unwrap_or_else(|e| self.fail(format_args!("get {}: {e}", key(g))));
            let hi = self.keys[g].started.load(Ordering::SeqCst);
            self.check_read("get", g, got.as_deref(), lo, hi);
            self.counts.gets.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes a snapshot, reads a run of keys at it, and reads them again a few times over the
    /// next milliseconds while writes, compactions and GC go on: the bytes must not change.
    fn snapshot_check(&self, rng: &mut StdRng) {
        let len = rng.random_range(1..=10);
        let first = rng.random_range(0..=KEYS - len);
        let span = first..=first + len - 1;
        let lows = self.lows();
        let snap = self.db.snapshot();
        let highs = self.highs();
        let opts = ReadOptions::default().at(&snap);
        let read = |g: usize| {
            self.db
                .get_with(key(g), &opts)
                .unwrap_or_else(|e| self.fail(format_args!("get_with {} at snapshot: {e}", key(g))))
        };
        let seen: Vec<Option<Vec<u8>>> = span.clone().map(read).collect();
        for (g, got) in span.clone().zip(&seen) {
            self.check_read("get at snapshot", g, got.as_deref(), lows[g], highs[g]);
        }
        for round in 0..4 {
            std::thread::sleep(Duration::from_millis(rng.random_range(1..=3)));
            for (g, first_read) in span.clone().zip(&seen) {
                let again = read(g);
                if &again != first_read {
                    self.fail(format_args!(
                        "snapshot at sequence {}: key {} read {} first, then {} in round \
                         {round}",
                        snap.sequence(),
                        key(g),
                        describe(first_read.as_deref()),
                        describe(again.as_deref())
                    ));
                }
            }
        }
        // A scan at the same snapshot must agree with the point reads exactly.
        let (lo_key, hi_key) = (key(*span.start()), key(*span.end()));
        let scanned: Vec<(Vec<u8>, Vec<u8>)> = self
            .db
            .range(lo_key.as_bytes()..=hi_key.as_bytes(), &opts)
            .unwrap_or_else(|e| self.fail(format_args!("range at snapshot: {e}")))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| self.fail(format_args!("range at snapshot: {e}")));
        let expected: Vec<(Vec<u8>, Vec<u8>)> = span
            .zip(seen)
            .filter_map(|(g, v)| Some((key(g).into_bytes(), v?)))
            .collect();
        if scanned != expected {
            self.fail(format_args!(
                "snapshot at sequence {}: range {lo_key}..={hi_key} returned keys {:?}, point \
                 reads {:?} (or values differ)",
                snap.sequence(),
                scanned
                    .iter()
                    .map(|(k, _)| String::from_utf8_lossy(k))
                    .collect::<Vec<_>>(),
                expected
                    .iter()
                    .map(|(k, _)| String::from_utf8_lossy(k))
                    .collect::<Vec<_>>()
            ));
        }
        self.counts.snapshots.fetch_add(1, Ordering::Relaxed);
    }

    fn iterator(&self, t: usize) {
        let _guard = StopOnPanic(&self.stop);
        let mut rng = self.rng(200 + t as u64);
        let err = |what: &str, e: gleaner::Error| -> ! { self.fail(format_args!("{what}: {e}")) };
        while !self.stopped() {
            // The window opens before the iterator takes its state and closes after the walk.
            let lows = self.lows();
            let (what, view, span) = match rng.random_range(0..4) {
                0 => {
                    let mut it = self
                        .db
                        .iter(&ReadOptions::default())
                        .unwrap_or_else(|e| err("iter", e));
                    it.seek_to_first()
                        .unwrap_or_else(|e| err("seek_to_first", e));
                    let mut view = Vec::new();
                    while it.valid() {
                        view.push((it.key().to_vec(), it.value().to_vec()));
                        it.next().unwrap_or_else(|e| err("next", e));
                    }
                    ("full forward walk", view, 0..=KEYS - 1)
                }
                1 => {
                    let start = rng.random_range(0..KEYS);
                    let lazy = rng.random_bool(0.5);
                    let opts = ReadOptions {
                        lazy_values: lazy,
                        ..ReadOptions::default()
                    };
                    let mut it = self.db.iter(&opts).unwrap_or_else(|e| err("iter", e));
                    it.seek(key(start).as_bytes())
                        .unwrap_or_else(|e| err("seek", e));
                    let mut view = Vec::new();
                    while it.valid() && view.len() < WALK {
                        let k = it.key().to_vec();
                        let v = it.fetch_value().unwrap_or_else(|e| err("fetch_value", e));
                        view.push((k, v.to_vec()));
                        it.next().unwrap_or_else(|e| err("next", e));
                    }
                    // Exhausted: the walk covered everything from `start`.
                    let end = if it.valid() {
                        parse_key(&view[view.len() - 1].0).unwrap_or(KEYS - 1)
                    } else {
                        KEYS - 1
                    };
                    let what = if lazy {
                        "bounded forward walk (lazy values)"
                    } else {
                        "bounded forward walk"
                    };
                    (what, view, start..=end)
                }
                2 => {
                    let start = rng.random_range(0..KEYS);
                    let mut it = self
                        .db
                        .iter(&ReadOptions::default())
                        .unwrap_or_else(|e| err("iter", e));
                    it.seek_for_prev(key(start).as_bytes())
                        .unwrap_or_else(|e| err("seek_for_prev", e));
                    let mut view = Vec::new();
                    while it.valid() && view.len() < WALK {
                        view.push((it.key().to_vec(), it.value().to_vec()));
                        it.prev().unwrap_or_else(|e| err("prev", e));
                    }
                    let end = if it.valid() {
                        parse_key(&view[view.len() - 1].0).unwrap_or(0)
                    } else {
                        0
                    };
                    view.reverse();
                    ("bounded reverse walk", view, end..=start)
                }
                _ => {
                    let a = rng.random_range(0..KEYS);
                    let b = rng.random_range(a..KEYS.min(a + 2 * WALK));
                    let (ka, kb) = (key(a), key(b));
                    let mut view: Vec<(Vec<u8>, Vec<u8>)> = self
                        .db
                        .range(ka.as_bytes()..=kb.as_bytes(), &ReadOptions::default())
                        .unwrap_or_else(|e| err("range", e))
                        .rev()
                        .collect::<Result<_, _>>()
                        .unwrap_or_else(|e| err("range", e));
                    view.reverse();
                    ("reversed range", view, a..=b)
                }
            };
            let highs = self.highs();
            // Reverse walks were turned around above: a misordered one shows as out of order.
            self.check_view(what, &view, span, &lows, &highs);
            self.counts.walks.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Flushes, compacts and collects at random moments, racing the writers on purpose.
    fn chaos(&self) {
        let _guard = StopOnPanic(&self.stop);
        let mut rng = self.rng(300);
        while !self.stopped() {
            std::thread::sleep(Duration::from_millis(rng.random_range(5..40)));
            let (what, r) = match rng.random_range(0..10) {
                0..=2 => ("flush", self.db.flush()),
                3..=4 => ("compact_range(all)", self.db.compact_range(None, None)),
                5..=6 => {
                    let a = rng.random_range(0..KEYS);
                    let b = rng.random_range(a..KEYS);
                    let (ka, kb) = (key(a), key(b));
                    (
                        "compact_range(part)",
                        self.db
                            .compact_range(Some(ka.as_bytes()), Some(kb.as_bytes())),
                    )
                }
                _ => ("run_gc", self.db.run_gc().map(|_| ())),
            };
            if let Err(e) = r {
                self.fail(format_args!("{what}: {e}"));
            }
            self.counts.chaos.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Checks that every `get` and a full scan equal the final published state exactly.
    fn check_final(&self, when: &str) {
        let finals: Vec<u64> = self
            .keys
            .iter()
            .enumerate()
            .map(|(g, p)| {
                let (s, d) = (
                    p.started.load(Ordering::SeqCst),
                    p.done.load(Ordering::SeqCst),
                );
                if s != d {
                    self.fail(format_args!(
                        "{when}: key {}: write of version {s} started, {d} acknowledged",
                        key(g)
                    ));
                }
                d
            })
            .collect();
        for (g, &v) in finals.iter().enumerate() {
            let got = self
                .db
                .get(key(g))
                .unwrap_or_else(|e| self.fail(format_args!("{when}: get {}: {e}", key(g))));
            self.check_read(&format!("{when}: get"), g, got.as_deref(), v, v);
        }
        let view: Vec<(Vec<u8>, Vec<u8>)> = self
            .db
            .range(.., &ReadOptions::default())
            .unwrap_or_else(|e| self.fail(format_args!("{when}: scan: {e}")))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| self.fail(format_args!("{when}: scan: {e}")));
        self.check_view(
            &format!("{when}: full scan"),
            &view,
            0..=KEYS - 1,
            &finals,
            &finals,
        );
    }

    fn check_garbage(&self, when: &str) {
        let recount = self
            .db
            .recount_garbage()
            .unwrap_or_else(|e| self.fail(format_args!("{when}: recount_garbage: {e}")));
        if !recount.mismatches.is_empty() {
            self.fail(format_args!(
                "{when}: garbage accounting drifted: {:#?}",
                recount.mismatches
            ));
        }
        let unresolved = self.db.stats().values.unresolved_drops;
        if unresolved != 0 {
            self.fail(format_args!(
                "{when}: {unresolved} dropped handles could not be placed"
            ));
        }
    }
}

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .with_file_system(Arc::new(fs.clone()))
        .with_memtable_size(64 << 10)
        .with_key_table_size(16 << 10)
        .with_level_base_size(64 << 10)
        .with_value_table_size(64 << 10)
        .with_min_separated_value_size(256)
        .with_gc_garbage_ratio(0.2)
}

fn stress(variant: &str, tune: &dyn Fn(Options) -> Options, seed: u64, secs: u64) {
    let fs = FaultFs::new(seed);
    let dir = Path::new("/stress");
    // Every failure names the seed and the variant, not only those of `Run::fail`.
    let label = format!("seed {seed}, variant {variant}; replay with GLEANER_STRESS_SEED={seed}");
    eprintln!("stress: {label}");
    let db = Db::open(dir, tune(options(&fs))).unwrap_or_else(|e| panic!("{label}: open: {e}"));
    assert!(
        db.options().gc_threads() > 0,
        "{label}: the stress test wants background GC threads"
    );
    let run = Run {
        seed,
        variant,
        db: &db,
        keys: (0..KEYS).map(|_| Published::default()).collect(),
        stop: AtomicBool::new(false),
        counts: Counts::default(),
    };

    // A hang in the engine would otherwise hold the test forever: past a generous deadline,
    // report the seed and abort.
    let (alive, watch) = std::sync::mpsc::channel::<()>();
    let limit = Duration::from_secs(secs + 300);
    let watched = label.clone();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(limit) {
            eprintln!("stress: no progress after {limit:?} ({watched}): aborting");
            std::process::abort();
        }
    });

    let started = Instant::now();
    std::thread::scope(|s| {
        let run = &run;
        for w in 0..WRITERS {
            s.spawn(move || run.writer(w));
        }
        for r in 0..READERS {
            s.spawn(move || run.reader(r));
        }
        for t in 0..ITERATORS {
            s.spawn(move || run.iterator(t));
        }
        s.spawn(move || run.chaos());
        let deadline = started + Duration::from_secs(secs);
        while !run.stopped() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        run.stop.store(true, Ordering::SeqCst);
    });
    let c = &run.counts;
    let count = |a: &AtomicU64| a.load(Ordering::Relaxed);
    eprintln!(
        "stress {variant}: {:.1?}: {} writes, {} gets, {} snapshot checks, {} walks, {} chaos \
         calls",
        started.elapsed(),
        count(&c.writes),
        count(&c.gets),
        count(&c.snapshots),
        count(&c.walks),
        count(&c.chaos)
    );
    // Each kind of thread must have done its work, or the run proved nothing.
    for (what, a) in [
        ("writes", &c.writes),
        ("gets", &c.gets),
        ("snapshot checks", &c.snapshots),
        ("walks", &c.walks),
        ("chaos calls", &c.chaos),
    ] {
        assert!(
            count(a) > 0,
            "seed {seed}, variant {variant}: no {what} in {secs} s"
        );
    }
    let stats = db.stats();
    eprintln!(
        "stress {variant}: {} flushes, {} compactions, {} GC jobs ({} records dropped, {} \
         rewritten), {} value tables freed without GC, {} GC errors (last: {:?})",
        stats.compaction.flushes,
        stats.compaction.compactions,
        stats.gc.jobs,
        stats.gc.records_dropped,
        stats.gc.records_written,
        stats.values.tables_freed_without_gc,
        stats.gc.errors,
        stats.gc.last_error
    );
    // The point is to race GC with everything else: a run in which it never ran proved little
    // (under `blobdb`, GC is compactions relocating values).
    assert!(
        stats.values.records > 0 && (stats.gc.jobs > 0 || stats.gc.relocated_values > 0),
        "seed {seed}, variant {variant}: no value separated or no GC ran: {} records, {} \
         jobs, {} relocated",
        stats.values.records,
        stats.gc.jobs,
        stats.gc.relocated_values
    );

    // Under a partitioned tree, keys moved while everything else ran.
    assert!(
        !stats.partitions.partitioned || stats.partitions.moves > 0,
        "seed {seed}, variant {variant}: no move between the partitions: {:?}",
        stats.partitions
    );

    // Nothing here injects a fault: a background GC job that failed (stats only, nothing else
    // would tell) is a bug, such as a drop set that disagrees with the garbage it names.
    assert!(
        stats.gc.errors == 0,
        "seed {seed}, variant {variant}: {} GC jobs failed, the last with {:?}",
        stats.gc.errors,
        stats.gc.last_error
    );
    run.check_final("after the run");
    // Settle background work so the recount sees a quiet tree, then check the accounting.
    db.compact_range(None, None)
        .unwrap_or_else(|e| run.fail(format_args!("final compact: {e}")));
    db.run_gc()
        .unwrap_or_else(|e| run.fail(format_args!("final gc: {e}")));
    run.check_final("after the final compaction and GC");
    run.check_garbage("after the run");
    db.close()
        .unwrap_or_else(|e| run.fail(format_args!("close: {e}")));

    // The closed handle stays in scope (it only lends `run` its lifetime); the reopened one
    // reads the same files.
    let reopened =
        Db::open(dir, tune(options(&fs))).unwrap_or_else(|e| panic!("{label}: reopen: {e}"));
    let run = Run {
        db: &reopened,
        ..run
    };
    run.check_final("after reopen");
    run.check_garbage("after reopen");
    run.db
        .close()
        .unwrap_or_else(|e| run.fail(format_args!("close after reopen: {e}")));
    drop(alive);
}

/// Seconds per run (`GLEANER_STRESS_SECS`, default 3) and the seed (`GLEANER_STRESS_SEED`, or
/// the clock's nanoseconds).
fn secs_and_seed() -> (u64, u64) {
    let secs = env_u64("GLEANER_STRESS_SECS").unwrap_or(3);
    let seed = env_u64("GLEANER_STRESS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos() as u64
    });
    (secs, seed)
}

#[test]
fn stress_gc_variants() {
    let (secs, seed) = secs_and_seed();
    let all = std::env::var("GLEANER_STRESS_ALL").is_ok_and(|v| v != "0" && !v.is_empty());
    // A comma-separated list of variant names runs just those (to repeat one variant's run).
    let only: Option<Vec<String>> = std::env::var("GLEANER_STRESS_VARIANTS")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.split(',').map(|n| n.trim().to_string()).collect());
    eprintln!("stress: seed {seed} (replay with GLEANER_STRESS_SEED={seed}), {secs} s per variant");
    let variants: Vec<_> = common::gc_variants()
        .into_iter()
        .filter(|(name, _)| match &only {
            Some(names) => names.contains(name),
            None => all || name == "scavenger" || name == "tdb",
        })
        .collect();
    match &only {
        Some(names) => assert_eq!(
            variants.len(),
            names.len(),
            "GLEANER_STRESS_VARIANTS={names:?} names a variant gc_variants() does not have"
        ),
        None => assert!(
            all || variants.len() == 2,
            "the scavenger and tdb variants are gone from gc_variants()"
        ),
    }
    for (i, (name, tune)) in variants.iter().enumerate() {
        for (style, style_tune) in common::styles_for(seed, i) {
            let tuned = |o| style_tune(tune(o));
            stress(&format!("{name}@{style}"), &tuned, seed, secs);
        }
    }
}

/// The row cache under the same races, in every run whatever the seed deals out: readers fill
/// it while writers overwrite and delete their keys, so a fill that raced a write must never
/// leave the older answer behind (it would show a version below the window of a later read),
/// nor a write's own put (`prepopulate_row_cache`) lose to a fill of the version before it. The
/// cache holds less than half of the keys' values, so it evicts too.
#[test]
fn stress_row_cache() {
    let (secs, seed) = secs_and_seed();
    eprintln!("stress_row_cache: seed {seed} (replay with GLEANER_STRESS_SEED={seed})");
    let (_, scavenger) = common::gc_variants()
        .into_iter()
        .find(|(name, _)| name == "scavenger")
        .expect("the scavenger variant");
    for warm in [false, true] {
        let tuned = |o: Options| {
            scavenger(o)
                .with_row_cache_size(common::ROW_CACHE_BYTES)
                .with_prepopulate_row_cache(warm)
        };
        let name = if warm {
            "scavenger+warmrows"
        } else {
            "scavenger+rows"
        };
        stress(name, &tuned, seed, secs);
    }
}
