//! The admin commands: `GLEANER.GC`, `GLEANER.COMPACT`, `GLEANER.CHECK`, `GLEANER.STATS`,
//! and Redis's `SAVE`, `SHUTDOWN` and `FUNCTION`.
//! Each runs on the calling client's connection (others are served meanwhile) and may take as
//! long as the work does.

use bytes::Bytes;
use gleaner::ReadOptions;
use serde::Serialize;

use super::{Outcome, engine_error};
use crate::resp::Reply;
use crate::shared::Shared;

fn json<T: Serialize>(value: &T) -> Reply {
    match serde_json::to_string(value) {
        Ok(text) => Reply::text(text),
        Err(e) => Reply::error(format!("ERR cannot encode the reply as JSON: {e}")),
    }
}

/// `GLEANER.GC`: runs GC until the policy finds nothing worth collecting (`Db::run_gc`);
/// replies with what it did as JSON (`jobs`, `totals`).
pub fn gc(shared: &Shared) -> Reply {
    match shared.db.run_gc() {
        Ok(stats) => json(&stats),
        Err(e) => engine_error(shared, &e),
    }
}

/// `GLEANER.COMPACT [begin end]`: compacts the key tables overlapping `[begin, end]` (the whole
/// key space without arguments) down the tree (`Db::compact_range`), so overwritten versions
/// and tombstones are dropped and their values become garbage GC can reclaim.
pub fn compact(shared: &Shared, args: &[Bytes]) -> Reply {
    let (begin, end) = match args.len() {
        1 => (None, None),
        3 => (Some(&args[1][..]), Some(&args[2][..])),
        _ => return Reply::error("ERR wrong number of arguments for 'gleaner.compact' command"),
    };
    match shared.db.compact_range(begin, end) {
        Ok(()) => Reply::Ok,
        Err(e) => engine_error(shared, &e),
    }
}

/// The result of `GLEANER.CHECK`.
#[derive(Debug, Default, Serialize)]
struct OnlineCheck {
    /// No problem found.
    ok: bool,
    /// Live keys read.
    keys: u64,
    /// Bytes of their values.
    value_bytes: u64,
    /// Of those keys, values read from value tables.
    separated_values: u64,
    /// Value tables whose garbage was recounted.
    value_tables: usize,
    /// Value handles found in key tables by the recount.
    handles: u64,
    /// Disagreements between the recount and the recorded garbage, and read errors.
    problems: Vec<String>,
}

/// `GLEANER.CHECK`: an online check of the running database. It reads every live key and
/// value at one snapshot (so every block and value record on those paths has its checksum
/// verified) and recounts value-table garbage from scratch against the recorded counts
/// (`Db::recount_garbage`). Replies with JSON (`ok`, `keys`, `value_bytes`,
/// `separated_values`, `value_tables`, `handles`, `problems`); `keys` counts the keys of every
/// database (not the layout marker), and a key of no database of this server is a problem.
///
/// The offline `gleaner check DIR` verifies more (every file byte for byte, obsolete versions
/// included) but needs the database closed: it takes the directory's lock, which the server
/// holds.
pub fn check(shared: &Shared) -> Reply {
    let mut report = OnlineCheck::default();
    // Stored keys no database of this server holds (of a larger `--databases`, say).
    let mut orphans = 0u64;
    let mut walk = || -> gleaner::Result<(u64, u64, u64)> {
        let snapshot = shared.db.snapshot();
        let opts = ReadOptions {
            fill_cache: false,
            ..ReadOptions::default()
        }
        .at(&snapshot);
        let mut it = shared.db.iter(&opts)?;
        it.seek_to_first()?;
        let (mut keys, mut bytes, mut separated) = (0u64, 0u64, 0u64);
        while it.valid() {
            if it.key() == crate::keyspace::MARKER_KEY {
                it.next()?;
                continue;
            }
            if shared.keyspace.decode(it.key()).is_none() {
                orphans += 1;
            }
            keys += 1;
            bytes += it.value().len() as u64;
            separated += u64::from(it.value_is_separated());
            it.next()?;
        }
        Ok((keys, bytes, separated))
    };
    match walk() {
        Ok((keys, bytes, separated)) => {
            report.keys = keys;
            report.value_bytes = bytes;
            report.separated_values = separated;
        }
        Err(e) => report
            .problems
            .push(format!("reading every key and value: {e}")),
    }
    if orphans > 0 {
        report.problems.push(format!(
            "{orphans} keys belong to databases beyond --databases {} (no client can reach \
             them: restart with more databases)",
            shared.keyspace.databases()
        ));
    }
    match shared.db.recount_garbage() {
        Ok(recount) => {
            report.value_tables = recount.tables;
            report.handles = recount.handles;
            report.problems.extend(recount.mismatches);
        }
        Err(e) => report.problems.push(format!("recounting garbage: {e}")),
    }
    report.ok = report.problems.is_empty();
    json(&report)
}

/// `GLEANER.STATS`: `Db::stats()` as JSON (the keys of docs/stats.md).
pub fn stats(shared: &Shared) -> Reply {
    json(&shared.db.stats())
}

/// `SAVE`: writes the memtables to key tables and syncs the WAL, so everything written so far
/// is durable (Redis's synchronous snapshot; here the data is always on disk, this only makes
/// the latest writes durable and shortens the next recovery).
pub fn save(shared: &Shared) -> Reply {
    match shared.db.flush().and_then(|()| shared.db.sync_wal()) {
        Ok(()) => Reply::Ok,
        Err(e) => engine_error(shared, &e),
    }
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE]`: stops the server as SIGTERM does (no new client,
/// running commands finish, the database is closed, which makes every write durable). The
/// options are accepted; `ABORT` is refused: a shutdown, once started, is not cancelled.
pub fn shutdown(shared: &Shared, args: &[Bytes]) -> Outcome {
    for a in &args[1..] {
        match a.to_ascii_uppercase().as_slice() {
            b"NOSAVE" | b"SAVE" | b"NOW" | b"FORCE" => {}
            b"ABORT" => {
                return Outcome::Reply(Reply::error(
                    "ERR No shutdown in progress that can be aborted",
                ));
            }
            _ => return Outcome::Reply(super::parse::syntax_error()),
        }
    }
    eprintln!("gleaner-server: SHUTDOWN requested by a client");
    shared.shutdown.notify_one();
    Outcome::Close(Reply::Ok)
}

/// `FUNCTION FLUSH [ASYNC|SYNC]` and `FUNCTION LIST`: the server has no functions (no
/// scripting), so there is nothing to flush or list; other subcommands are refused.
pub fn function(args: &[Bytes]) -> Reply {
    match args[1].to_ascii_uppercase().as_slice() {
        b"FLUSH" if args.len() <= 3 => Reply::Ok,
        b"LIST" => Reply::Array(Vec::new()),
        _ => Reply::error(format!(
            "ERR FUNCTION {} is not supported: gleaner-server has no scripting (FUNCTION FLUSH \
             and LIST answer)",
            String::from_utf8_lossy(&args[1][..args[1].len().min(32)]).to_ascii_uppercase()
        )),
    }
}
