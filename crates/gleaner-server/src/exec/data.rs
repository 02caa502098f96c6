//! The data commands (GET SET DEL EXISTS MGET MSET STRLEN GETRANGE TYPE, and PING/ECHO inside a
//! transaction), run as atomic units: a single command, or every command of a `MULTI/EXEC`.
//!
//! A unit takes the key locks of its keys ([`crate::keylocks`]), runs its commands against the
//! database with their own pending writes visible to their later reads, collects the writes in
//! one [`WriteBatch`], and commits it with one engine write: all of it or nothing. Replies are
//! only released once the write returned, so no write is acknowledged before the engine
//! accepted it.

use std::collections::HashMap;

use bytes::Bytes;
use gleaner::{Db, ReadOptions, Snapshot, WriteBatch};

use super::{Outcome, engine_error};
use crate::commands::CommandId;
use crate::keylocks::LockMode;
use crate::resp::Reply;
use crate::resp::parser::parse_strict_i64;
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::ServerStats;

/// A parsed data command. Parsing checks the syntax, so that a transaction refuses a bad
/// command when it is queued and a unit never fails half-way on syntax.
#[derive(Debug, Clone)]
pub enum DataCmd {
    /// `GET key`
    Get(Bytes),
    /// `SET key value [NX|XX] [GET] [KEEPTTL]`
    Set {
        /// The key.
        key: Bytes,
        /// The value.
        value: Bytes,
        /// `NX` (`Some(false)`: only if absent) or `XX` (`Some(true)`: only if present).
        only_if_exists: Option<bool>,
        /// `GET`: reply with the old value.
        get: bool,
    },
    /// `DEL key...`
    Del(Vec<Bytes>),
    /// `EXISTS key...`
    Exists(Vec<Bytes>),
    /// `MGET key...`
    Mget(Vec<Bytes>),
    /// `MSET key value...`
    Mset(Vec<(Bytes, Bytes)>),
    /// `STRLEN key`
    Strlen(Bytes),
    /// `GETRANGE key start end`
    Getrange(Bytes, i64, i64),
    /// `TYPE key`
    Type(Bytes),
    /// `PING [message]`
    Ping(Option<Bytes>),
    /// `ECHO message`
    Echo(Bytes),
}

/// The error Redis gives for an unparsable integer.
pub fn not_an_integer() -> Reply {
    Reply::error("ERR value is not an integer or out of range")
}

/// Redis's syntax error.
pub fn syntax_error() -> Reply {
    Reply::error("ERR syntax error")
}

impl DataCmd {
    /// Parses a data command whose arity was checked; `Err` is the error reply.
    pub fn parse(id: CommandId, args: &[Bytes]) -> Result<DataCmd, Reply> {
        let rest = || args[1..].to_vec();
        Ok(match id {
            CommandId::Get => DataCmd::Get(args[1].clone()),
            CommandId::Set => parse_set(args)?,
            CommandId::Del => DataCmd::Del(rest()),
            CommandId::Exists => DataCmd::Exists(rest()),
            CommandId::Mget => DataCmd::Mget(rest()),
            CommandId::Mset => {
                if args.len() % 2 != 1 {
                    return Err(Reply::error(
                        "ERR wrong number of arguments for 'mset' command",
                    ));
                }
                DataCmd::Mset(
                    args[1..]
                        .chunks_exact(2)
                        .map(|p| (p[0].clone(), p[1].clone()))
                        .collect(),
                )
            }
            CommandId::Strlen => DataCmd::Strlen(args[1].clone()),
            CommandId::Type => DataCmd::Type(args[1].clone()),
            CommandId::Getrange => {
                let start = parse_strict_i64(&args[2]).ok_or_else(not_an_integer)?;
                let end = parse_strict_i64(&args[3]).ok_or_else(not_an_integer)?;
                DataCmd::Getrange(args[1].clone(), start, end)
            }
            CommandId::Ping => {
                if args.len() > 2 {
                    return Err(Reply::error(
                        "ERR wrong number of arguments for 'ping' command",
                    ));
                }
                DataCmd::Ping(args.get(1).cloned())
            }
            CommandId::Echo => DataCmd::Echo(args[1].clone()),
            other => unreachable!("{other:?} is not a data command"),
        })
    }

    /// How a single command of this kind locks its keys (`None`: it takes no lock). A
    /// transaction locks all its keys exclusively instead.
    fn lock_mode(&self) -> Option<LockMode> {
        match self {
            DataCmd::Set {
                only_if_exists: None,
                get: false,
                ..
            }
            | DataCmd::Mset(_) => Some(LockMode::Shared),
            DataCmd::Set { .. } | DataCmd::Del(_) => Some(LockMode::Exclusive),
            _ => None,
        }
    }

    /// The keys the command reads or writes.
    fn keys(&self) -> Vec<&Bytes> {
        match self {
            DataCmd::Get(k)
            | DataCmd::Strlen(k)
            | DataCmd::Getrange(k, _, _)
            | DataCmd::Type(k) => vec![k],
            DataCmd::Set { key, .. } => vec![key],
            DataCmd::Del(ks) | DataCmd::Exists(ks) | DataCmd::Mget(ks) => ks.iter().collect(),
            DataCmd::Mset(pairs) => pairs.iter().map(|(k, _)| k).collect(),
            DataCmd::Ping(_) | DataCmd::Echo(_) => Vec::new(),
        }
    }

    /// Runs the command in `unit`.
    fn apply(&self, unit: &mut Unit<'_>) -> Result<Reply, Failure> {
        Ok(match self {
            DataCmd::Get(key) => unit.reply_value(unit.get(key)?)?,
            DataCmd::Set {
                key,
                value,
                only_if_exists,
                get,
            } => {
                let old = if only_if_exists.is_some() || *get {
                    unit.get(key)?
                } else {
                    None
                };
                let allowed = match only_if_exists {
                    None => true,
                    Some(want) => old.is_some() == *want,
                };
                if allowed {
                    unit.put(key, value);
                }
                match (get, allowed) {
                    (true, _) => unit.reply_value(old)?,
                    (false, true) => Reply::Ok,
                    (false, false) => Reply::Null,
                }
            }
            DataCmd::Del(keys) => {
                let mut removed = 0;
                for key in keys {
                    if unit.get(key)?.is_some() {
                        unit.delete(key);
                        removed += 1;
                    }
                }
                Reply::Int(removed)
            }
            DataCmd::Exists(keys) => {
                let mut found = 0;
                for key in keys {
                    found += i64::from(unit.get(key)?.is_some());
                }
                Reply::Int(found)
            }
            DataCmd::Mget(keys) => {
                let mut values = Vec::with_capacity(keys.len());
                for key in keys {
                    values.push(unit.reply_value(unit.get(key)?)?);
                }
                Reply::Array(values)
            }
            DataCmd::Mset(pairs) => {
                for (k, v) in pairs {
                    unit.put(k, v);
                }
                Reply::Ok
            }
            DataCmd::Strlen(key) => Reply::Int(unit.get(key)?.map_or(0, |v| v.len() as i64)),
            DataCmd::Getrange(key, start, end) => {
                let value = unit.get(key)?.unwrap_or_default();
                let range = getrange(value.len(), *start, *end);
                unit.reply_value(Some(value.slice(range)))?
            }
            DataCmd::Type(key) => Reply::simple(if unit.get(key)?.is_some() {
                "string"
            } else {
                "none"
            }),
            DataCmd::Ping(None) => Reply::simple("PONG"),
            DataCmd::Ping(Some(m)) | DataCmd::Echo(m) => Reply::Bulk(m.clone()),
        })
    }
}

fn parse_set(args: &[Bytes]) -> Result<DataCmd, Reply> {
    let mut only_if_exists = None;
    let mut get = false;
    for opt in &args[3..] {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" if only_if_exists != Some(true) => only_if_exists = Some(false),
            b"XX" if only_if_exists != Some(false) => only_if_exists = Some(true),
            b"GET" => get = true,
            // No key has a time to live, so keeping it changes nothing.
            b"KEEPTTL" => {}
            b"EX" | b"PX" | b"EXAT" | b"PXAT" => {
                return Err(Reply::error(
                    "ERR gleaner-server does not support key expiry: SET with EX, PX, EXAT or \
                     PXAT is refused (keys never expire)",
                ));
            }
            _ => return Err(syntax_error()),
        }
    }
    Ok(DataCmd::Set {
        key: args[1].clone(),
        value: args[2].clone(),
        only_if_exists,
        get,
    })
}

/// The byte range `GETRANGE` returns for a value of `len` bytes, with Redis's rules for
/// negative and out-of-range offsets.
pub fn getrange(len: usize, start: i64, end: i64) -> std::ops::Range<usize> {
    let len = len as i64;
    if len == 0 || (start < 0 && end < 0 && start > end) {
        return 0..0;
    }
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    if start > end {
        return 0..0;
    }
    start as usize..end as usize + 1
}

/// Why a unit stopped.
#[derive(Debug)]
pub enum Failure {
    /// The engine failed a read or the write: nothing was written.
    Engine(gleaner::Error),
    /// The replies would exceed `--max-pending-bytes`: nothing was written, and the client
    /// is disconnected.
    ReplyTooLarge,
}

impl From<gleaner::Error> for Failure {
    fn from(e: gleaner::Error) -> Self {
        Failure::Engine(e)
    }
}

/// One atomic unit in progress.
struct Unit<'a> {
    db: &'a Db,
    /// Reads go to this snapshot when set (a multi-key read that holds no lock), so that they
    /// see one state of the database, as Redis's MGET does.
    snapshot: Option<&'a Snapshot>,
    stats: &'a ServerStats,
    batch: WriteBatch,
    /// Writes of the unit so far, seen by its later reads (`None`: deleted).
    pending: HashMap<Bytes, Option<Bytes>>,
    /// Bytes the replies may still take.
    reply_budget: usize,
}

impl Unit<'_> {
    fn get(&self, key: &Bytes) -> Result<Option<Bytes>, Failure> {
        let value = match self.pending.get(key) {
            Some(v) => v.clone(),
            None => match self.snapshot {
                Some(s) => self.db.get_with(key, &ReadOptions::default().at(s))?,
                None => self.db.get(key)?,
            }
            .map(Bytes::from),
        };
        let counter = if value.is_some() {
            &self.stats.keyspace_hits
        } else {
            &self.stats.keyspace_misses
        };
        ServerStats::add(counter, 1);
        Ok(value)
    }

    fn put(&mut self, key: &Bytes, value: &Bytes) {
        self.batch.put(key, value);
        self.pending.insert(key.clone(), Some(value.clone()));
    }

    fn delete(&mut self, key: &Bytes) {
        self.batch.delete(key);
        self.pending.insert(key.clone(), None);
    }

    /// A value as a reply, charged to the reply budget.
    fn reply_value(&mut self, value: Option<Bytes>) -> Result<Reply, Failure> {
        let Some(v) = value else {
            return Ok(Reply::Null);
        };
        let cost = v.len() + 16;
        if cost > self.reply_budget {
            return Err(Failure::ReplyTooLarge);
        }
        self.reply_budget -= cost;
        Ok(Reply::Bulk(v))
    }
}

/// Runs `cmds` as one atomic unit (`transaction`: a `MULTI/EXEC`, whose keys are all locked
/// exclusively) and returns their replies, or the failure that stopped it (nothing written).
pub fn run_unit(
    shared: &Shared,
    session: &mut Session,
    cmds: &[DataCmd],
    transaction: bool,
) -> Result<Vec<Reply>, Failure> {
    let mode = if transaction {
        Some(LockMode::Exclusive)
    } else {
        cmds.iter()
            .filter_map(DataCmd::lock_mode)
            .max_by_key(|m| *m == LockMode::Exclusive)
    };
    let _guard = mode.map(|m| shared.locks.lock(cmds.iter().flat_map(DataCmd::keys), m));
    // Without a lock, reads of several keys could each see a different state; a snapshot
    // makes them see one. (Locked keys cannot change under the unit.)
    let snapshot = (mode.is_none() && cmds.iter().map(|c| c.keys().len()).sum::<usize>() > 1)
        .then(|| shared.db.snapshot());
    let mut unit = Unit {
        db: &shared.db,
        snapshot: snapshot.as_ref(),
        stats: &shared.stats,
        batch: WriteBatch::new(),
        pending: HashMap::new(),
        reply_budget: shared.config.max_pending_bytes,
    };
    let mut replies = Vec::with_capacity(cmds.len());
    for cmd in cmds {
        replies.push(cmd.apply(&mut unit)?);
    }
    if !unit.batch.is_empty() {
        shared
            .db
            .write(unit.batch, &shared.durability.write_options())?;
        if let Some(ticket) = shared.durability.note_write() {
            session.unsynced_ticket = Some(ticket);
        }
    }
    Ok(replies)
}

/// Runs one data command outside a transaction.
pub fn run_single(shared: &Shared, session: &mut Session, cmd: DataCmd) -> Outcome {
    match run_unit(shared, session, std::slice::from_ref(&cmd), false) {
        Ok(mut replies) => Outcome::Reply(replies.pop().unwrap_or(Reply::Null)),
        Err(Failure::Engine(e)) => Outcome::Reply(engine_error(shared, &e)),
        Err(Failure::ReplyTooLarge) => reply_too_large(shared),
    }
}

/// The reply (and disconnection) for a reply over `--max-pending-bytes`.
pub fn reply_too_large(shared: &Shared) -> Outcome {
    ServerStats::add(&shared.stats.limit_disconnections, 1);
    Outcome::Fatal(Reply::error(format!(
        "ERR reply would exceed --max-pending-bytes ({} bytes); closing the connection",
        shared.config.max_pending_bytes
    )))
}

#[cfg(test)]
mod tests {
    use super::getrange;

    #[test]
    fn getrange_follows_redis() {
        // "This is a string" examples from the Redis documentation.
        let s = b"This is a string";
        let g = |a, b| &s[getrange(s.len(), a, b)];
        assert_eq!(g(0, 3), b"This");
        assert_eq!(g(-3, -1), b"ing");
        assert_eq!(g(0, -1), s);
        assert_eq!(g(10, 100), b"string");
        assert_eq!(g(5, 3), b"");
        assert_eq!(g(-1, -5), b"");
        assert_eq!(g(-100, 2), b"Thi");
        assert_eq!(getrange(0, 0, -1), 0..0);
        assert_eq!(g(i64::MIN, i64::MAX), s);
        assert_eq!(g(100, 200), b"");
    }
}
