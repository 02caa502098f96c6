//! Running commands: dispatch by the command table, authentication, `MULTI` queuing, and the
//! batches of pipelined commands a connection hands over (run on a blocking thread, since the
//! engine's calls block).

mod admin;
mod config_cmd;
mod connection_cmds;
mod debug;
mod info;
mod key_cmds;
mod keyspace_cmds;
pub mod parse;
mod scan;
mod string_cmds;
mod transaction;
pub mod unit;

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use crate::commands::{self, CommandId};
use crate::resp::{Reply, ReplyBuf};
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::ServerStats;

use parse::DataCmd;
use unit::Failure;

/// Replies are handed to the connection for writing once this many bytes are waiting, even
/// if pipelined commands remain (they run after the write): the output buffer stays bounded.
pub const REPLY_FLUSH_BYTES: usize = 1 << 20;

/// What running one command produced.
#[derive(Debug)]
pub enum Outcome {
    /// A reply; the connection goes on.
    Reply(Reply),
    /// A reply, then the connection is closed (`QUIT`).
    Close(Reply),
    /// An error reply for a broken limit, then the connection is closed.
    Fatal(Reply),
}

/// What the connection does once a batch ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Write the replies and go on.
    Continue,
    /// Write the replies, then close.
    Close,
    /// Close without writing the replies: the WAL sync that would have made the batch's
    /// writes durable failed, so they must not be acknowledged.
    Abort,
}

/// Runs commands from the front of `commands` (leaving the rest) until they run out, the
/// replies reach [`REPLY_FLUSH_BYTES`], or the connection is to be closed; encodes the replies
/// into `out`. Under `--sync batch`, syncs the WAL before returning if a write is waiting to
/// be acknowledged.
pub fn run_batch(
    shared: &Shared,
    session: &mut Session,
    commands: &mut VecDeque<Vec<Bytes>>,
    out: &mut ReplyBuf,
) -> After {
    let mut after = After::Continue;
    while let Some(args) = commands.pop_front() {
        if let Some(first) = blind_write(session, &args) {
            run_blind_writes(shared, session, first, commands, out);
            if out.len() >= REPLY_FLUSH_BYTES {
                break;
            }
            continue;
        }
        let outcome = execute(shared, session, &args);
        let reply = match outcome {
            Outcome::Reply(r) => r,
            Outcome::Close(r) | Outcome::Fatal(r) => {
                after = After::Close;
                r
            }
        };
        if reply.is_error() {
            ServerStats::add(&shared.stats.error_replies, 1);
        }
        out.push(&reply, session.protocol);
        if after == After::Close || out.len() >= REPLY_FLUSH_BYTES {
            break;
        }
    }
    if after == After::Close {
        commands.clear();
    }
    if let Some(ticket) = session.unsynced_ticket.take()
        && let Err(e) = shared.durability.sync_through(&shared.db, ticket)
    {
        eprintln!(
            "gleaner-server: WAL sync failed, client {} ({}) disconnected without \
             acknowledgement: {e}",
            session.id, session.peer
        );
        return After::Abort;
    }
    after
}

/// Most arguments a batch run on the connection's task may hold: 4,096 (a batch of 1,024
/// pipelined GETs has 2,048).
const MAX_INLINE_ARGS: usize = 4096;

/// Most plain writes coalesced into one engine write: 64.
const MAX_COALESCED_WRITES: usize = 64;

/// `args` as a plain write (`SET` without `NX`/`XX`/`GET`/`KEEPTTL`, `MSET`) that may be
/// coalesced with the plain writes after it: outside `MULTI`, authenticated, well-formed.
fn blind_write(session: &Session, args: &[Bytes]) -> Option<DataCmd> {
    if session.multi.is_some() || !session.authenticated {
        return None;
    }
    let spec = commands::lookup(&args[0])?;
    if !matches!(spec.id, CommandId::Set | CommandId::Mset) || !spec.arity_ok(args.len()) {
        return None;
    }
    DataCmd::parse(spec.id, args)?
        .ok()
        .filter(DataCmd::blind_write)
}

/// Runs `first` and the plain writes right after it in `commands` as one unit: one engine
/// write for all of them (one WAL record instead of one per command), each answered as if it
/// ran alone. They are independent commands of one client's pipeline, applied in order, so
/// writing them together changes nothing a client can observe but the time it takes; if the
/// engine refuses the write, each of them gets its error and none is applied.
fn run_blind_writes(
    shared: &Shared,
    session: &mut Session,
    first: DataCmd,
    commands: &mut VecDeque<Vec<Bytes>>,
    out: &mut ReplyBuf,
) {
    let mut cmds = vec![first];
    while cmds.len() < MAX_COALESCED_WRITES
        && let Some(next) = commands.front().and_then(|a| blind_write(session, a))
    {
        commands.pop_front();
        cmds.push(next);
    }
    let id = |c: &DataCmd| match c {
        DataCmd::Mset { .. } => CommandId::Mset,
        _ => CommandId::Set,
    };
    let started = Instant::now();
    let replies = match unit::run_unit(shared, session, &cmds, false, None) {
        Ok(Some(replies)) => replies,
        Ok(None) => vec![Reply::error("ERR internal: unwatched unit refused"); cmds.len()],
        Err(Failure::Engine(e)) => vec![engine_error(shared, &e); cmds.len()],
        // Plain writes reply `OK`: no reply budget to break.
        Err(Failure::ReplyTooLarge) => vec![Reply::error("ERR internal: reply budget"); cmds.len()],
    };
    // The unit's time, shared evenly among its commands.
    let usec = started.elapsed().as_micros() as u64 / cmds.len() as u64;
    ServerStats::add(&shared.stats.total_commands_processed, cmds.len() as u64);
    for (cmd, reply) in cmds.iter().zip(replies) {
        let counters = &shared.stats.commands[commands::lookup_id(id(cmd)).index()];
        ServerStats::add(&counters.calls, 1);
        ServerStats::add(&counters.usec, usec);
        if reply.is_error() {
            ServerStats::add(&counters.failed, 1);
            ServerStats::add(&shared.stats.error_replies, 1);
        }
        out.push(&reply, session.protocol);
    }
}

/// Whether a batch of `commands` may run on the connection's own task instead of a blocking
/// thread: every command does a bounded number of engine operations on a few keys (the data
/// commands, `LCS` and `INFO` excepted, with at most [`MAX_INLINE_ARGS`] arguments in all), and no write may wait: not for an fsync
/// (under `--sync always` or `batch` the writes of a batch wait for one), nor for the engine
/// ([`gleaner::Db::write_pressure`]: L0 or the immutable memtables at their limits, or a space
/// budget). Such batches are handed to a blocking thread, as is anything that may take long:
/// `KEYS`, `DBSIZE`, `EXEC`, `FLUSHDB`, the admin commands. Running inline saves two thread hand-offs per batch, which
/// were most of the server's CPU under pipelined small commands (docs/benchmarks.md). The
/// runtime has more worker threads than cores, so a read that waits for the disk holds up
/// only the connections of its own worker, and the others are taken over by the rest.
pub fn runs_inline(shared: &Shared, commands: &VecDeque<Vec<Bytes>>) -> bool {
    // A batch touching many keys (a large MGET, DEL or MSET) may take long whatever it is.
    if commands.iter().map(Vec::len).sum::<usize>() > MAX_INLINE_ARGS {
        return false;
    }
    // A write that may wait (an fsync, a stall, the space throttle) goes to a blocking thread;
    // asked of the engine once, and only for a batch with a write.
    let mut writes_wait = None;
    commands.iter().all(|args| {
        let Some(spec) = commands::lookup(&args[0]) else {
            // Answered with an error at once.
            return true;
        };
        match spec.id {
            // LCS's table and INFO's walk of every database may take long.
            CommandId::Lcs | CommandId::Info => false,
            id if DataCmd::is_data_command(id) => {
                !spec.arity_ok(args.len())
                    || !spec.has_flag("write")
                    || !*writes_wait.get_or_insert_with(|| {
                        matches!(
                            shared.durability.mode(),
                            crate::SyncMode::Always | crate::SyncMode::Batch
                        ) || shared.db.write_pressure()
                    })
            }
            _ => false,
        }
    })
}

/// Runs one command (or queues it inside `MULTI`), counting it in `INFO commandstats`.
pub fn execute(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let Some(spec) = commands::lookup(&args[0]) else {
        flag_transaction(session);
        return Outcome::Reply(commands::unknown_command(args));
    };
    let counters = &shared.stats.commands[spec.index()];
    let refuse = |session: &mut Session, reply: Reply, flag: bool| {
        if flag {
            flag_transaction(session);
        }
        ServerStats::add(&counters.rejected, 1);
        Outcome::Reply(reply)
    };
    if !spec.arity_ok(args.len()) {
        return refuse(session, commands::wrong_arity(spec), true);
    }
    if !session.authenticated && !spec.no_auth() {
        return refuse(
            session,
            Reply::error("NOAUTH Authentication required."),
            true,
        );
    }
    ServerStats::add(&shared.stats.total_commands_processed, 1);
    if session.multi.is_some() {
        match spec.id {
            CommandId::Exec | CommandId::Discard | CommandId::Multi | CommandId::Quit => {}
            // Refused without aborting the transaction, as in Redis.
            CommandId::Watch => {
                return refuse(
                    session,
                    Reply::error("ERR WATCH inside MULTI is not allowed"),
                    false,
                );
            }
            _ if spec.no_multi() => {
                return refuse(
                    session,
                    Reply::error("ERR Command not allowed inside a transaction"),
                    true,
                );
            }
            _ => return transaction::queue(shared, session, spec, args),
        }
    }
    let started = Instant::now();
    let outcome = dispatch(shared, session, spec, args);
    ServerStats::add(&counters.calls, 1);
    ServerStats::add(&counters.usec, started.elapsed().as_micros() as u64);
    let failed = match &outcome {
        Outcome::Reply(r) | Outcome::Close(r) | Outcome::Fatal(r) => r.is_error(),
    };
    if failed {
        ServerStats::add(&counters.failed, 1);
    }
    outcome
}

fn dispatch(
    shared: &Shared,
    session: &mut Session,
    spec: &commands::CommandSpec,
    args: &[Bytes],
) -> Outcome {
    let reply = match spec.id {
        CommandId::Select => connection_cmds::select(shared, session, args),
        CommandId::Scan => scan::scan(shared, session, args),
        CommandId::Keys => keyspace_cmds::keys(shared, session, &args[1]),
        CommandId::Randomkey => keyspace_cmds::randomkey(shared, session),
        CommandId::Dbsize => keyspace_cmds::dbsize(shared, session),
        CommandId::Flushdb => keyspace_cmds::flush(shared, session, args, false),
        CommandId::Flushall => keyspace_cmds::flush(shared, session, args, true),
        CommandId::Swapdb => keyspace_cmds::swapdb(),
        CommandId::Command => connection_cmds::command(args),
        CommandId::Client => connection_cmds::client(session, args),
        CommandId::Quit => return Outcome::Close(Reply::Ok),
        CommandId::Auth => connection_cmds::auth(shared, session, args),
        CommandId::Hello => connection_cmds::hello(shared, session, args),
        CommandId::Debug => debug::debug(args),
        CommandId::Save => admin::save(shared),
        CommandId::Shutdown => return admin::shutdown(shared, args),
        CommandId::Function => admin::function(args),
        CommandId::Multi => transaction::multi(session),
        CommandId::Exec => return transaction::exec(shared, session),
        CommandId::Discard => transaction::discard(session),
        CommandId::Watch => transaction::watch(shared, session, args),
        CommandId::Unwatch => transaction::unwatch(session),
        CommandId::GleanerGc => admin::gc(shared),
        CommandId::GleanerCompact => admin::compact(shared, args),
        CommandId::GleanerCheck => admin::check(shared),
        CommandId::GleanerStats => admin::stats(shared),
        _ => match DataCmd::parse(spec.id, args) {
            Some(Ok(cmd)) => return run_single(shared, session, cmd),
            Some(Err(reply)) => reply,
            None => Reply::error(format!("ERR internal: no handler for '{}'", spec.name)),
        },
    };
    Outcome::Reply(reply)
}

/// Runs a command that touches no key (`CONFIG`, `INFO`, `TIME`), also inside a transaction.
fn run_keyless(shared: &Shared, id: CommandId, args: &[Bytes]) -> Reply {
    match id {
        CommandId::Config => config_cmd::config(shared, args),
        CommandId::Info => info::info(shared, args),
        CommandId::Time => {
            let ms = shared.db.time_ms();
            Reply::Array(vec![
                Reply::text((ms / 1000).to_string()),
                Reply::text(((ms % 1000) * 1000).to_string()),
            ])
        }
        _ => Reply::error("ERR internal: not a keyless command"),
    }
}

/// Runs a data command in a unit of its own.
fn run_single(shared: &Shared, session: &mut Session, cmd: DataCmd) -> Outcome {
    match unit::run_unit(shared, session, std::slice::from_ref(&cmd), false, None) {
        Ok(Some(mut replies)) => Outcome::Reply(replies.pop().unwrap_or(Reply::Null)),
        Ok(None) => Outcome::Reply(Reply::error("ERR internal: unwatched unit refused")),
        Err(Failure::Engine(e)) => Outcome::Reply(engine_error(shared, &e)),
        Err(Failure::ReplyTooLarge) => unit::reply_too_large(shared),
    }
}

/// Runs a data command in `unit`.
fn apply(cmd: &DataCmd, u: &mut unit::Unit<'_>) -> Result<Reply, Failure> {
    if let DataCmd::Keyless(id, args) = cmd {
        return Ok(run_keyless(u.shared, *id, args));
    }
    string_cmds::apply(cmd, u)
        .or_else(|| key_cmds::apply(cmd, u))
        .unwrap_or_else(|| Ok(Reply::error("ERR internal: no handler for a data command")))
}

/// A command refused while queuing makes `EXEC` fail, as in Redis.
fn flag_transaction(session: &mut Session) {
    if let Some(m) = session.multi.as_mut() {
        m.aborted = true;
    }
}

/// An engine error as a Redis error reply: the space budget's refusal as `-OOM` (what Redis
/// answers at `maxmemory`), everything else as `-ERR` with the engine's message.
pub fn engine_error(shared: &Shared, e: &gleaner::Error) -> Reply {
    match e {
        gleaner::Error::SpaceBudgetExceeded { .. } => {
            ServerStats::add(&shared.stats.space_budget_errors, 1);
            Reply::error(format!("OOM command not allowed: {e}"))
        }
        gleaner::Error::Closed => Reply::error("ERR the server is shutting down: database closed"),
        _ => Reply::error(format!("ERR {e}")),
    }
}
