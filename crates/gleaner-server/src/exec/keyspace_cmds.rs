//! Commands over a whole database: `DBSIZE`, `KEYS`, `RANDOMKEY`, `FLUSHDB`, `FLUSHALL`,
//! `SWAPDB`. A database is at most two ranges of stored keys ([`crate::keyspace`]); these
//! commands walk them with key-only iterators (separated values are never read) or delete
//! them with range deletions.

use bytes::Bytes;
use gleaner::{ReadOptions, WriteBatch};

use super::engine_error;
use super::parse::syntax_error;
use crate::glob::Glob;
use crate::keyspace::KeyRange;
use crate::resp::Reply;
use crate::session::Session;
use crate::shared::Shared;

/// Calls `visit` with each client key of `ranges` in key order and the iterator on it, at one
/// snapshot, until it returns false.
pub fn walk_keys(
    shared: &Shared,
    db: u8,
    ranges: &[KeyRange],
    mut visit: impl FnMut(&[u8], &gleaner::DbIterator) -> gleaner::Result<bool>,
) -> gleaner::Result<()> {
    let snapshot = shared.db.snapshot();
    for (start, end) in ranges {
        let opts = ReadOptions {
            lower_bound: Some(start.clone()),
            upper_bound: Some(end.clone()),
            lazy_values: true,
            // A walk of a whole database should not evict the hot blocks.
            fill_cache: false,
            ..ReadOptions::default()
        }
        .at(&snapshot);
        let mut it = shared.db.iter(&opts)?;
        it.seek_to_first()?;
        while it.valid() {
            if !visit(shared.keyspace.client_key(db, it.key()), &it)? {
                return Ok(());
            }
            it.next()?;
        }
    }
    Ok(())
}

/// The exact number of keys in database `db`: a key-only walk of its ranges (expired keys
/// are not counted). Costs a read of the database's index entries, never of a separated
/// value.
pub fn count_keys(shared: &Shared, db: u8) -> gleaner::Result<u64> {
    let mut n = 0u64;
    walk_keys(shared, db, &shared.keyspace.ranges(db), |_, _| {
        n += 1;
        Ok(true)
    })?;
    Ok(n)
}

/// What `INFO keyspace` says of database `db`: its keys, how many of them expire, and their
/// mean time to live in milliseconds at `now` (0 when none expires), exactly, by the same walk
/// as [`count_keys`] (expiries come from the index entries).
pub fn keyspace_figures(shared: &Shared, db: u8, now: u64) -> gleaner::Result<(u64, u64, u64)> {
    let (mut keys, mut expires, mut ttl_sum) = (0u64, 0u64, 0u128);
    walk_keys(shared, db, &shared.keyspace.ranges(db), |_, it| {
        keys += 1;
        if let Some(at) = it.expiry()? {
            expires += 1;
            ttl_sum += u128::from(at.saturating_sub(now));
        }
        Ok(true)
    })?;
    let avg_ttl = if expires == 0 {
        0
    } else {
        (ttl_sum / u128::from(expires)) as u64
    };
    Ok((keys, expires, avg_ttl))
}

/// `DBSIZE`.
pub fn dbsize(shared: &Shared, session: &Session) -> Reply {
    match count_keys(shared, session.db) {
        Ok(n) => Reply::Int(n as i64),
        Err(e) => engine_error(shared, &e),
    }
}

/// `KEYS pattern`: every key of the database matching it, bounded by `--max-pending-bytes`
/// (a larger reply is refused: use SCAN).
pub fn keys(shared: &Shared, session: &Session, pattern: &Bytes) -> Reply {
    let glob = Glob::new(pattern);
    let budget = shared.config.max_pending_bytes;
    let (mut found, mut bytes, mut over) = (Vec::new(), 0usize, false);
    let walked = walk_keys(
        shared,
        session.db,
        &shared.keyspace.ranges(session.db),
        |k, _| {
            if glob.matches(k) {
                bytes += k.len() + 16;
                if bytes > budget {
                    over = true;
                    return Ok(false);
                }
                found.push(Reply::Bulk(Bytes::copy_from_slice(k)));
            }
            Ok(true)
        },
    );
    if let Err(e) = walked {
        return engine_error(shared, &e);
    }
    if over {
        return Reply::error(format!(
            "ERR KEYS reply would exceed --max-pending-bytes ({budget} bytes): use SCAN"
        ));
    }
    Reply::Array(found)
}

/// Keys `RANDOMKEY` draws from: the first this many at or after a random point of the
/// database (wrapping around), 64.
pub const RANDOMKEY_WINDOW: usize = 64;

/// `RANDOMKEY`: one key drawn uniformly from the [`RANDOMKEY_WINDOW`] keys at or after a random
/// point of the database's key space (wrapping around to its first key), or nil for an empty
/// database. A database of at most that many keys is drawn from whole, so each key is equally
/// likely; in a larger one every key can be drawn, keys after long gaps somewhat more often.
pub fn randomkey(shared: &Shared, session: &Session) -> Reply {
    let db = session.db;
    let ranges = shared.keyspace.ranges(db);
    let probe = shared
        .keyspace
        .encode(db, &random_u64().to_be_bytes())
        .into_owned();
    let mut window: Vec<Vec<u8>> = Vec::with_capacity(RANDOMKEY_WINDOW);
    // From the probe to the end, then from the start to the probe.
    let halves = [
        (Some(probe.as_slice()), None),
        (None, Some(probe.as_slice())),
    ];
    let walk = |window: &mut Vec<Vec<u8>>| -> gleaner::Result<()> {
        for (from, until) in halves {
            for (start, end) in &ranges {
                let lower = match from {
                    Some(f) if f > start.as_slice() => f.to_vec(),
                    _ => start.clone(),
                };
                let upper = match until {
                    Some(u) if u < end.as_slice() => u.to_vec(),
                    _ => end.clone(),
                };
                if lower >= upper {
                    continue;
                }
                let opts = ReadOptions {
                    lower_bound: Some(lower),
                    upper_bound: Some(upper),
                    lazy_values: true,
                    ..ReadOptions::default()
                };
                let mut it = shared.db.iter(&opts)?;
                it.seek_to_first()?;
                while it.valid() {
                    if window.len() == RANDOMKEY_WINDOW {
                        return Ok(());
                    }
                    window.push(shared.keyspace.client_key(db, it.key()).to_vec());
                    it.next()?;
                }
            }
        }
        Ok(())
    };
    if let Err(e) = walk(&mut window) {
        return engine_error(shared, &e);
    }
    if window.is_empty() {
        return Reply::Null;
    }
    let pick = (random_u64() % window.len() as u64) as usize;
    Reply::Bulk(Bytes::from(window.swap_remove(pick)))
}

/// A random number (std's per-process random hasher keys, and the time).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// `FLUSHDB [ASYNC|SYNC]` (`all`: `FLUSHALL`): one write of range deletions, whatever the
/// number of keys, taken with the whole keyspace locked so no read-modify-write command runs
/// across it. `ASYNC` and `SYNC` are accepted and mean the same: the deletion is immediate
/// for readers, and compaction and GC reclaim the space in the background.
pub fn flush(shared: &Shared, session: &mut Session, args: &[Bytes], all: bool) -> Reply {
    match args.get(1).map(|a| a.to_ascii_uppercase()) {
        None => {}
        Some(m) if (m == b"ASYNC" || m == b"SYNC") && args.len() == 2 => {}
        Some(_) => return syntax_error(),
    }
    let ranges = if all {
        shared.keyspace.all_ranges()
    } else {
        shared.keyspace.ranges(session.db)
    };
    let mut batch = WriteBatch::new();
    for (start, end) in &ranges {
        batch.delete_range(start, end);
    }
    let _all = shared.locks.lock_all();
    if let Err(e) = shared.db.write(batch, &shared.durability.write_options()) {
        return engine_error(shared, &e);
    }
    if let Some(ticket) = shared.durability.note_write() {
        session.unsynced_ticket = Some(ticket);
    }
    Reply::Ok
}

/// `SWAPDB`: refused. Databases are key ranges of one store, so swapping two would rewrite
/// every key of both.
pub fn swapdb() -> Reply {
    Reply::error(
        "ERR SWAPDB is not supported: gleaner-server's databases are key ranges of one store, \
         and swapping two would rewrite every key of both",
    )
}
