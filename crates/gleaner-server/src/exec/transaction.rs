//! Transactions: `MULTI`, queuing, `EXEC`, `DISCARD`, and optimistic locking with `WATCH` and
//! `UNWATCH`.
//!
//! `EXEC` runs the queued data commands as one atomic unit ([`super::unit`]): one write batch,
//! all of it or nothing. With watched keys the batch goes to the engine's conditional write,
//! which checks that no watched key changed since it was watched and applies the batch in one
//! step of the engine's write queue; if one did, `EXEC` answers a null array and nothing runs,
//! as in Redis. A key counts as changed when it was written (even with the same value) or
//! deleted, when a `FLUSHDB`/`FLUSHALL` removed it while it existed, or when it expired after
//! it was watched.

use bytes::Bytes;
use gleaner::{WriteBatch, WriteOptions};

use super::parse::DataCmd;
use super::unit::{self, Failure};
use super::{Outcome, engine_error};
use crate::commands::{self, CommandSpec};
use crate::keylocks::LockMode;
use crate::keyspace::MAX_KEY_LEN;
use crate::resp::Reply;
use crate::session::{MultiState, Session, Watch};
use crate::shared::Shared;
use crate::stats::ServerStats;

/// Most keys one client may watch at once: 1,048,576.
pub const MAX_WATCHED_KEYS: usize = 1 << 20;

/// `MULTI`.
pub fn multi(session: &mut Session) -> Reply {
    if session.multi.is_some() {
        return Reply::error("ERR MULTI calls can not be nested");
    }
    session.multi = Some(MultiState::default());
    Reply::Ok
}

/// `DISCARD`: drops the queue and the watched keys.
pub fn discard(session: &mut Session) -> Reply {
    match session.multi.take() {
        Some(_) => {
            session.watch = None;
            Reply::Ok
        }
        None => Reply::error("ERR DISCARD without MULTI"),
    }
}

/// `UNWATCH`.
pub fn unwatch(session: &mut Session) -> Reply {
    session.watch = None;
    Reply::Ok
}

/// `WATCH key...`. Watching more keys later moves the earlier ones to a new snapshot after
/// checking, with their stripes locked, that they did not change in between (a change marks
/// the watch dirty, so `EXEC` will fail, as in Redis).
pub fn watch(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Reply {
    if session.multi.is_some() {
        return Reply::error("ERR WATCH inside MULTI is not allowed");
    }
    let ks = &shared.keyspace;
    // A key over the limit can never exist or be written: nothing to watch.
    let new: Vec<Vec<u8>> = args[1..]
        .iter()
        .filter(|k| k.len() <= MAX_KEY_LEN)
        .map(|k| ks.encode(session.db, k).into_owned())
        .collect();
    let had = session.watch.as_ref().map_or(0, |w| w.keys.len());
    if had + new.len() > MAX_WATCHED_KEYS {
        return Reply::error(format!(
            "ERR too many watched keys: a client watches at most {MAX_WATCHED_KEYS} keys \
             (UNWATCH, EXEC or DISCARD releases them)"
        ));
    }
    let watch = match session.watch.take() {
        None => Watch {
            snapshot: shared.db.snapshot(),
            keys: new,
            dirty: false,
        },
        Some(old) => {
            let _held = shared.locks.lock(old.keys.iter(), LockMode::Exclusive);
            // Taken before the check: a change after it is seen by EXEC, one before it by
            // the check (which judges expiry at a time after the snapshot's).
            let snapshot = shared.db.snapshot();
            let keys: Vec<&[u8]> = old.keys.iter().map(Vec::as_slice).collect();
            let dirty = old.dirty
                || match shared.db.write_if_unchanged(
                    WriteBatch::new(),
                    &WriteOptions::default(),
                    &old.snapshot,
                    &keys,
                ) {
                    Ok(unchanged) => !unchanged,
                    Err(e) => {
                        session.watch = Some(old);
                        return engine_error(shared, &e);
                    }
                };
            let mut all = old.keys;
            all.extend(new);
            Watch {
                snapshot,
                keys: all,
                dirty,
            }
        }
    };
    session.watch = Some(watch);
    Reply::Ok
}

/// Queues a command inside `MULTI`, checking its syntax now as Redis does.
pub fn queue(
    shared: &Shared,
    session: &mut Session,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Outcome {
    let Some(m) = session.multi.as_mut() else {
        return Outcome::Reply(Reply::error("ERR internal: not in MULTI"));
    };
    match DataCmd::parse(spec.id, args) {
        None => {
            m.aborted = true;
            let reply = if spec.id == commands::CommandId::Watch {
                Reply::error("ERR WATCH inside MULTI is not allowed")
            } else {
                Reply::error(format!(
                    "ERR '{}' is not allowed inside MULTI: gleaner-server runs a transaction \
                     as one atomic write batch of data commands (string and key commands, \
                     SELECT, PING, ECHO)",
                    spec.name
                ))
            };
            return Outcome::Reply(reply);
        }
        Some(Err(reply)) => {
            m.aborted = true;
            return Outcome::Reply(reply);
        }
        Some(Ok(_)) => {}
    }
    let bytes: usize = args.iter().map(Bytes::len).sum();
    if m.bytes + bytes > shared.config.max_pending_bytes
        || m.queued.len() >= shared.config.limits.max_args
    {
        session.multi = None;
        ServerStats::add(&shared.stats.limit_disconnections, 1);
        return Outcome::Fatal(Reply::error(format!(
            "ERR MULTI queue exceeds --max-pending-bytes ({} bytes) or --max-args ({} \
             commands); closing the connection",
            shared.config.max_pending_bytes, shared.config.limits.max_args
        )));
    }
    m.bytes += bytes;
    m.queued.push(args.to_vec());
    Outcome::Reply(Reply::simple("QUEUED"))
}

/// `EXEC`.
pub fn exec(shared: &Shared, session: &mut Session) -> Outcome {
    let Some(m) = session.multi.take() else {
        return Outcome::Reply(Reply::error("ERR EXEC without MULTI"));
    };
    // EXEC ends the watch whatever happens.
    let watch = session.watch.take();
    if m.aborted {
        return Outcome::Reply(Reply::error(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    if watch.as_ref().is_some_and(|w| w.dirty) {
        return Outcome::Reply(Reply::NullArray);
    }
    let mut cmds = Vec::with_capacity(m.queued.len());
    for args in &m.queued {
        // Queued commands were parsed when they were queued; this cannot fail.
        match commands::lookup(&args[0]).and_then(|spec| DataCmd::parse(spec.id, args)) {
            Some(Ok(cmd)) => cmds.push(cmd),
            _ => return Outcome::Reply(Reply::error("ERR internal: queued command unparsable")),
        }
    }
    match unit::run_unit(shared, session, &cmds, true, watch.as_ref()) {
        Ok(Some(replies)) => Outcome::Reply(Reply::Array(replies)),
        Ok(None) => Outcome::Reply(Reply::NullArray),
        Err(Failure::Engine(e)) => {
            let reply = engine_error(shared, &e);
            let Reply::Error(text) = reply else {
                return Outcome::Reply(reply);
            };
            // Keep the error code (ERR, OOM) first, and say that nothing was applied.
            let (code, rest) = text.split_once(' ').unwrap_or((text.as_str(), ""));
            Outcome::Reply(Reply::error(format!(
                "{code} transaction not applied, nothing was written: {rest}"
            )))
        }
        Err(Failure::ReplyTooLarge) => unit::reply_too_large(shared),
    }
}
