//! Running one phase against one engine: client threads claim operations in small batches,
//! time each one, and before each one wait while the monitor has paused the workload.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::latency::LatencyRecorder;
use super::live::LiveSet;
use super::monitor::PhaseGauges;
use crate::engine::{Engine, Found};
use crate::workload::delete_range::{RangeStep, key_range, write_bounds};
use crate::workload::{
    KeyChooser, KeyDistSpec, KeyFormat, LoadOrder, Mixgraph, MixgraphSpec, OpKind, OpMix,
    PhaseSpec, ScanLength, ValueGen, WorkloadRng, YcsbWorkload, thread_rng,
};

/// Operations a client claims at a time: few enough that threads finish together, many enough
/// that the shared counter is not contended.
const CLAIM: u64 = 64;

/// The workload that every phase of a run shares.
#[derive(Debug, Clone)]
pub struct Workload {
    /// How keys are formatted.
    pub keys: KeyFormat,
    /// Key choice for updates, reads and scans (YCSB D overrides it with `latest`).
    pub dist: KeyDistSpec,
    /// Keys the load phase writes.
    pub loaded_keys: u64,
    /// Value sizes and contents (each client clones it; the pool is shared).
    pub values: ValueGen,
    /// Consecutive keys each range delete of a `delete-range` phase removes (at least 1).
    pub delete_range_keys: u64,
    /// Parameters of a `mixgraph` phase.
    pub mixgraph: MixgraphSpec,
    /// Random seed of the run.
    pub seed: u64,
    /// Every write's TTL, uniform in this range of milliseconds (`--ttl-ms`): reads then accept
    /// an absent key (it may have expired), never a wrong value.
    pub ttl_ms: Option<(u64, u64)>,
}

/// One phase as the runner executes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhasePlan {
    /// The phase.
    pub spec: PhaseSpec,
    /// Operations to run (for `readwhilewriting`: the reads; the writer runs until they end).
    pub ops: u64,
    /// A number mixed into the seed so phases of one run draw different keys.
    pub index: u64,
}

/// What the client threads of a phase did.
#[derive(Debug, Default)]
pub struct PhaseOutcome {
    /// Operations completed (the measured ones).
    pub ops: u64,
    /// Latencies of the measured operations.
    pub latency: LatencyRecorder,
    /// The same by kind of operation (`get`, `put`, `seek`, `read-modify-write`,
    /// `range-delete`).
    pub by_op: BTreeMap<&'static str, LatencyRecorder>,
    /// Latencies of the range deletes among them (`delete-range` phases; empty otherwise): its
    /// count is the number of range deletes completed.
    pub range_delete_latency: LatencyRecorder,
    /// Keys that held a value when a range delete removed them.
    pub range_keys_removed: u64,
    /// Bytes of keys and values written (a range delete writes its two bound keys).
    pub user_bytes_written: u64,
    /// Bytes of keys and values read.
    pub user_bytes_read: u64,
    /// Longest time one measured client spent waiting for the space budget, in seconds.
    pub stall_seconds: f64,
    /// The first error a client met (the phase stopped there).
    pub error: Option<String>,
    /// CPU ticks the client threads (the background writer included) spent
    /// ([`super::cpu::own_ticks`]).
    pub client_cpu_ticks: u64,
}

/// What one client thread did.
#[derive(Default)]
struct ClientOutcome {
    ops: u64,
    latency: LatencyRecorder,
    /// The kind of the operation under way (set by the operation itself).
    kind: &'static str,
    /// Latencies by kind of operation.
    by_op: BTreeMap<&'static str, LatencyRecorder>,
    range_delete_latency: LatencyRecorder,
    range_keys_removed: u64,
    written: u64,
    read: u64,
    /// Time spent waiting while the workload was paused.
    stalled: Duration,
    /// CPU ticks the thread spent.
    cpu_ticks: u64,
}

struct Ctx<'a> {
    engine: &'a dyn Engine,
    workload: &'a Workload,
    plan: &'a PhasePlan,
    live: &'a LiveSet,
    gauges: &'a PhaseGauges,
    /// Operations claimed so far.
    next: AtomicU64,
    /// Set when the measured clients are done (ends the `readwhilewriting` writer).
    readers_done: AtomicBool,
    /// True when no operation of the phase writes, so reads must see exactly the live sizes.
    verify_reads: bool,
    error: Mutex<Option<String>>,
}

impl Ctx<'_> {
    fn fail(&self, message: String) {
        let mut e = self.error.lock();
        if e.is_none() {
            *e = Some(message);
        }
        self.gauges.stop.store(true, Ordering::Relaxed);
    }

    /// Claims the next batch of operations: positions `start..end`, or `None` when the phase
    /// is complete or must stop. Never waits: a client with nothing left to do must not sit
    /// out a pause.
    fn claim(&self) -> Option<(u64, u64)> {
        if self.gauges.stop.load(Ordering::Relaxed)
            || self.next.load(Ordering::Relaxed) >= self.plan.ops
        {
            return None;
        }
        let start = self.next.fetch_add(CLAIM, Ordering::Relaxed);
        (start < self.plan.ops).then(|| (start, (start + CLAIM).min(self.plan.ops)))
    }

    /// Counts `n` completed operations for the monitor and the hang watchdog.
    fn note_done(&self, n: u64) {
        self.gauges.done.fetch_add(n, Ordering::Relaxed);
        super::watchdog::note_operations(n);
    }

    /// Waits while the workload is paused, adding the wait to `out`; false when the client
    /// must stop (the phase stopped, or `abandon` says the client's work is over).
    fn wait_if_paused(&self, out: &mut ClientOutcome, abandon: impl Fn() -> bool) -> bool {
        if !self.gauges.paused.load(Ordering::Relaxed) {
            return true;
        }
        let (waited, go_on) = self.gauges.wait_while_paused(abandon);
        out.stalled += waited;
        go_on
    }
}

/// Runs `plan` with `threads` client threads and returns what they did.
pub fn run_phase(
    engine: &dyn Engine,
    workload: &Workload,
    plan: &PhasePlan,
    live: &LiveSet,
    gauges: &PhaseGauges,
    threads: usize,
) -> PhaseOutcome {
    let threads = threads.max(1);
    let read_only = match plan.spec {
        PhaseSpec::Read | PhaseSpec::Scan => true,
        PhaseSpec::Ycsb(w) => OpMix::ycsb(w)
            .probabilities()
            .iter()
            .all(|&(kind, p)| p == 0.0 || matches!(kind, OpKind::Read | OpKind::Scan)),
        PhaseSpec::Load
        | PhaseSpec::Update
        | PhaseSpec::ReadWhileWriting
        | PhaseSpec::DeleteRange => false,
        PhaseSpec::Mixgraph => workload.mixgraph.0.mix_put_ratio == 0.0,
    };
    let verify_reads = read_only && engine.keeps_data();
    let ctx = Ctx {
        engine,
        workload,
        plan,
        live,
        gauges,
        next: AtomicU64::new(0),
        readers_done: AtomicBool::new(false),
        verify_reads,
        error: Mutex::new(None),
    };
    let writer = plan.spec == PhaseSpec::ReadWhileWriting;
    let outcomes: Vec<ClientOutcome> = std::thread::scope(|scope| {
        let ctx = &ctx;
        let writer_handle =
            writer.then(|| scope.spawn(move || measured(|| background_writer(ctx))));
        let handles: Vec<_> = (0..threads)
            .map(|_| scope.spawn(move || measured(|| client(ctx))))
            .collect();
        let mut outs: Vec<ClientOutcome> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect();
        ctx.readers_done.store(true, Ordering::Relaxed);
        if let Some(h) = writer_handle {
            let w = h
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            // The writer's bytes count for write amplification; its operations are not the
            // phase's measured ones.
            outs.push(ClientOutcome {
                written: w.written,
                cpu_ticks: w.cpu_ticks,
                ..ClientOutcome::default()
            });
        }
        outs
    });
    let mut out = PhaseOutcome {
        error: ctx.error.lock().take(),
        ..PhaseOutcome::default()
    };
    for c in &outcomes {
        out.ops += c.ops;
        out.latency.merge(&c.latency);
        for (kind, l) in &c.by_op {
            out.by_op.entry(kind).or_default().merge(l);
        }
        out.range_delete_latency.merge(&c.range_delete_latency);
        out.range_keys_removed += c.range_keys_removed;
        out.user_bytes_written += c.written;
        out.user_bytes_read += c.read;
        out.stall_seconds = out.stall_seconds.max(c.stalled.as_secs_f64());
        out.client_cpu_ticks += c.cpu_ticks;
    }
    out
}

/// Per-thread generators.
struct Gen<'a> {
    w: &'a Workload,
    rng: WorkloadRng,
    chooser: KeyChooser,
    values: ValueGen,
    key: Vec<u8>,
    /// The exclusive end of a range delete (its start goes in `key`).
    end: Vec<u8>,
    value: Vec<u8>,
}

/// The random stream of operations `chunk * CLAIM ..` of phase `phase`: operations draw from
/// streams tied to their positions, not to the thread that happens to claim them, so a run
/// writes the same keys and values whatever the thread interleaving.
fn stream(phase: u64, chunk: u64) -> u64 {
    (phase << 40) ^ chunk
}

/// The stream of the `readwhilewriting` writer of phase `phase`.
fn writer_stream(phase: u64) -> u64 {
    (1 << 63) | phase
}

/// True when YCSB workload `w` inserts new keys (D and E).
pub fn inserts(w: YcsbWorkload) -> bool {
    OpMix::ycsb(w)
        .probabilities()
        .iter()
        .any(|&(kind, p)| kind == OpKind::Insert && p > 0.0)
}

impl<'a> Gen<'a> {
    fn new(w: &'a Workload, plan: &PhasePlan, live: &LiveSet, stream: u64) -> Self {
        // The keys written so far (earlier YCSB phases may have inserted some), and room for
        // this phase's inserts: Zipf's hot keys stay put as inserts grow the key space.
        let count = live.key_count().max(1);
        let (dist, capacity) = match plan.spec {
            PhaseSpec::Ycsb(y) => (
                y.key_dist().unwrap_or(w.dist),
                if inserts(y) { count + plan.ops } else { count },
            ),
            _ => (w.dist, count),
        };
        Gen {
            w,
            rng: thread_rng(w.seed, stream),
            chooser: KeyChooser::with_capacity(dist, count, capacity),
            values: w.values.clone(),
            key: Vec::with_capacity(w.keys.key_len()),
            end: Vec::with_capacity(w.keys.key_len()),
            value: Vec::new(),
        }
    }

    /// An existing key number (including keys inserted so far).
    fn choose(&mut self, live: &LiveSet) -> u64 {
        let count = live.key_count().max(1);
        if count != self.chooser.count() {
            self.chooser.set_count(count);
        }
        self.chooser.next(&mut self.rng)
    }

    fn key(&mut self, number: u64) -> &[u8] {
        self.w.keys.write(number, &mut self.key);
        &self.key
    }
}

/// Runs a client thread's work and records the CPU the thread spent on it.
fn measured(work: impl FnOnce() -> ClientOutcome) -> ClientOutcome {
    let before = super::cpu::own_ticks();
    let mut out = work();
    out.cpu_ticks = super::cpu::own_ticks().saturating_sub(before);
    out
}

fn client(ctx: &Ctx<'_>) -> ClientOutcome {
    let mut g = Gen::new(ctx.workload, ctx.plan, ctx.live, stream(ctx.plan.index, 0));
    let mut out = ClientOutcome::default();
    let order = matches!(ctx.plan.spec, PhaseSpec::Load)
        .then(|| LoadOrder::new(ctx.workload.loaded_keys, ctx.workload.seed));
    let mix = match ctx.plan.spec {
        PhaseSpec::Ycsb(w) => Some((OpMix::ycsb(w), w.scan_length().unwrap_or_default())),
        _ => None,
    };
    // Over the keys written so far; the ranges' places are the run's (seeded by it).
    let mixgraph = (ctx.plan.spec == PhaseSpec::Mixgraph).then(|| {
        Mixgraph::new(
            ctx.workload.mixgraph,
            ctx.live.key_count(),
            ctx.workload.seed,
        )
    });
    while let Some((start, end)) = ctx.claim() {
        g.rng = thread_rng(ctx.workload.seed, stream(ctx.plan.index, start / CLAIM));
        for position in start..end {
            if !ctx.wait_if_paused(&mut out, || false) {
                // Count what this batch completed before the stop.
                ctx.note_done(position - start);
                return out;
            }
            let began = Instant::now();
            let result = match ctx.plan.spec {
                PhaseSpec::Load => {
                    let number = order.as_ref().expect("load order").at(position);
                    put(ctx, &mut g, number, &mut out)
                }
                PhaseSpec::Update => {
                    let number = g.choose(ctx.live);
                    put(ctx, &mut g, number, &mut out)
                }
                PhaseSpec::Read | PhaseSpec::ReadWhileWriting => {
                    let number = g.choose(ctx.live);
                    get(ctx, &mut g, number, &mut out)
                }
                PhaseSpec::Scan => {
                    let number = g.choose(ctx.live);
                    let len = ScanLength::default().next(&mut g.rng);
                    scan(ctx, &mut g, number, len, &mut out)
                }
                PhaseSpec::DeleteRange => match RangeStep::at(position) {
                    RangeStep::DeleteRange => delete_range(ctx, &mut g, &mut out),
                    RangeStep::Update => {
                        let number = g.choose(ctx.live);
                        put(ctx, &mut g, number, &mut out)
                    }
                    RangeStep::Read => {
                        let number = g.choose(ctx.live);
                        get(ctx, &mut g, number, &mut out)
                    }
                },
                PhaseSpec::Ycsb(_) => ycsb(ctx, &mut g, mix.as_ref().expect("ycsb mix"), &mut out),
                PhaseSpec::Mixgraph => {
                    mixgraph_op(ctx, &mut g, mixgraph.as_ref().expect("mixgraph"), &mut out)
                }
            };
            if let Err(e) = result {
                ctx.fail(e);
                ctx.note_done(position - start);
                return out;
            }
            let nanos = began.elapsed().as_nanos() as u64;
            out.latency.record(nanos);
            out.by_op.entry(out.kind).or_default().record(nanos);
            if ctx.plan.spec == PhaseSpec::DeleteRange
                && RangeStep::at(position) == RangeStep::DeleteRange
            {
                out.range_delete_latency.record(nanos);
            }
            out.ops += 1;
        }
        ctx.note_done(end - start);
    }
    out
}

/// The `readwhilewriting` writer: updates as fast as it can until the readers are done.
fn background_writer(ctx: &Ctx<'_>) -> ClientOutcome {
    let mut g = Gen::new(
        ctx.workload,
        ctx.plan,
        ctx.live,
        writer_stream(ctx.plan.index),
    );
    let mut out = ClientOutcome::default();
    let readers_done = || ctx.readers_done.load(Ordering::Relaxed);
    while !readers_done() && ctx.wait_if_paused(&mut out, readers_done) {
        let number = g.choose(ctx.live);
        if let Err(e) = put(ctx, &mut g, number, &mut out) {
            ctx.fail(e);
            break;
        }
    }
    out
}

fn put(ctx: &Ctx<'_>, g: &mut Gen<'_>, number: u64, out: &mut ClientOutcome) -> Result<(), String> {
    out.kind = "put";
    g.values.fill(&mut g.rng, &mut g.value);
    let len = g.value.len();
    // Digest only when reads are checked later: hashing 16 KiB values would cost the null
    // engine's measurement of the harness (and engines that keep nothing are never checked).
    let found = if ctx.engine.keeps_data() {
        Found::of(&g.value)
    } else {
        Found { len, digest: 0 }
    };
    g.w.keys.write(number, &mut g.key);
    let ttl =
        g.w.ttl_ms
            .map(|(lo, hi)| rand::Rng::random_range(&mut g.rng, lo..=hi));
    let guard = ctx.live.lock(number);
    match ttl {
        Some(ttl) => ctx.engine.put_with_ttl(&g.key, &g.value, ttl),
        None => ctx.engine.put(&g.key, &g.value),
    }
    .map_err(|e| format!("put of key #{number}: {e}"))?;
    ctx.live.set(number, found);
    drop(guard);
    out.written += (g.key.len() + len) as u64;
    Ok(())
}

/// One range delete: `delete_range_keys` consecutive keys from a number the key distribution
/// draws ([`key_range`]), removed from the engine and then from the live set while their
/// stripes are locked, so a concurrent update of one of them lands wholly before or after.
fn delete_range(ctx: &Ctx<'_>, g: &mut Gen<'_>, out: &mut ClientOutcome) -> Result<(), String> {
    out.kind = "range-delete";
    let chosen = g.choose(ctx.live);
    let numbers = key_range(chosen, g.chooser.count(), g.w.delete_range_keys);
    if numbers.is_empty() {
        return Err("range delete of no keys (a planning bug: --delete-range-keys is 0)".into());
    }
    write_bounds(&g.w.keys, &numbers, &mut g.key, &mut g.end);
    let guards = ctx.live.lock_range(numbers.clone());
    ctx.engine.delete_range(&g.key, &g.end).map_err(|e| {
        format!(
            "range delete of keys #{}..=#{}: {e}",
            numbers.start,
            numbers.end - 1
        )
    })?;
    let removed = numbers.filter(|&n| ctx.live.remove(n).is_some()).count();
    drop(guards);
    out.range_keys_removed += removed as u64;
    out.written += (g.key.len() + g.end.len()) as u64;
    Ok(())
}

fn get(ctx: &Ctx<'_>, g: &mut Gen<'_>, number: u64, out: &mut ClientOutcome) -> Result<(), String> {
    out.kind = "get";
    let found = ctx
        .engine
        .get(g.key(number))
        .map_err(|e| format!("get of key #{number}: {e}"))?;
    if ctx.verify_reads {
        let expected = ctx.live.get(number);
        // With TTLs, a key may have expired since its last write (never read another value).
        let expired = g.w.ttl_ms.is_some() && found.is_none();
        if found != expected && !expired {
            return Err(format!(
                "wrong data: get of key #{number} returned {found:?}, the last write was {expected:?}"
            ));
        }
    }
    out.read += (g.key.len() + found.map_or(0, |f| f.len)) as u64;
    Ok(())
}

fn scan(
    ctx: &Ctx<'_>,
    g: &mut Gen<'_>,
    number: u64,
    len: usize,
    out: &mut ClientOutcome,
) -> Result<(), String> {
    out.kind = "seek";
    let (n, bytes) = ctx
        .engine
        .scan(g.key(number), len)
        .map_err(|e| format!("scan of {len} from key #{number}: {e}"))?;
    if ctx.verify_reads && g.w.ttl_ms.is_none() && n == 0 && ctx.live.get(number).is_some() {
        // Key #number exists, so a scan from it finds at least it. (After a load cut short by
        // its time limit a scan may start at a key never written.)
        return Err(format!(
            "wrong data: scan from existing key #{number} returned nothing"
        ));
    }
    out.read += bytes;
    Ok(())
}

/// One mixgraph operation: a get, a put or a seek (a scan of a Pareto length), each of a key
/// the key ranges' heat chooses.
fn mixgraph_op(
    ctx: &Ctx<'_>,
    g: &mut Gen<'_>,
    m: &Mixgraph,
    out: &mut ClientOutcome,
) -> Result<(), String> {
    let kind = m.op(&mut g.rng);
    let number = m.key(&mut g.rng);
    match kind {
        OpKind::Update => put(ctx, g, number, out),
        OpKind::Scan => {
            let len = m.scan_len(&mut g.rng);
            scan(ctx, g, number, len, out)
        }
        _ => get(ctx, g, number, out),
    }
}

fn ycsb(
    ctx: &Ctx<'_>,
    g: &mut Gen<'_>,
    (mix, scan_length): &(OpMix, ScanLength),
    out: &mut ClientOutcome,
) -> Result<(), String> {
    match mix.next(&mut g.rng) {
        OpKind::Read => {
            let number = g.choose(ctx.live);
            get(ctx, g, number, out)
        }
        OpKind::Update => {
            let number = g.choose(ctx.live);
            put(ctx, g, number, out)
        }
        OpKind::Insert => match ctx.live.insert_slot() {
            Some(number) => put(ctx, g, number, out),
            None => Err("YCSB insert: the live set is full (a planning bug)".to_string()),
        },
        OpKind::Scan => {
            let number = g.choose(ctx.live);
            let len = scan_length.next(&mut g.rng);
            scan(ctx, g, number, len, out)
        }
        OpKind::ReadModifyWrite => {
            let number = g.choose(ctx.live);
            get(ctx, g, number, out)?;
            put(ctx, g, number, out)?;
            out.kind = "read-modify-write";
            Ok(())
        }
    }
}
