//! Running commands: dispatch by the command table, authentication, `MULTI` queuing, and the
//! batches of pipelined commands a connection hands over (run on a blocking thread, since the
//! engine's calls block).

mod admin;
mod connection_cmds;
pub mod data;
mod info;
mod scan;

use std::collections::VecDeque;

use bytes::Bytes;

use crate::commands::{self, CommandId};
use crate::resp::{Reply, ReplyBuf};
use crate::session::{MultiState, Session};
use crate::shared::Shared;
use crate::stats::ServerStats;

use data::DataCmd;

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

/// Runs one command (or queues it inside `MULTI`).
pub fn execute(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let Some(spec) = commands::lookup(&args[0]) else {
        flag_transaction(session);
        return Outcome::Reply(commands::unknown_command(args));
    };
    if !spec.arity_ok(args.len()) {
        flag_transaction(session);
        return Outcome::Reply(commands::wrong_arity(spec));
    }
    if !session.authenticated && !spec.no_auth() {
        flag_transaction(session);
        return Outcome::Reply(Reply::error("NOAUTH Authentication required."));
    }
    ServerStats::add(&shared.stats.total_commands_processed, 1);
    if session.multi.is_some()
        && !matches!(
            spec.id,
            CommandId::Exec | CommandId::Discard | CommandId::Multi | CommandId::Quit
        )
    {
        return queue(shared, session, spec, args);
    }
    match spec.id {
        CommandId::Get
        | CommandId::Set
        | CommandId::Del
        | CommandId::Exists
        | CommandId::Mget
        | CommandId::Mset
        | CommandId::Strlen
        | CommandId::Getrange
        | CommandId::Type
        | CommandId::Ping
        | CommandId::Echo => match DataCmd::parse(spec.id, args) {
            Ok(cmd) => data::run_single(shared, session, cmd),
            Err(reply) => Outcome::Reply(reply),
        },
        CommandId::Scan => Outcome::Reply(scan::scan(shared, args)),
        CommandId::Info => Outcome::Reply(info::info(shared, args)),
        CommandId::Dbsize => Outcome::Reply(Reply::Int(info::key_estimate(shared) as i64)),
        CommandId::Command => Outcome::Reply(connection_cmds::command(args)),
        CommandId::Client => Outcome::Reply(connection_cmds::client(session, args)),
        CommandId::Quit => Outcome::Close(Reply::Ok),
        CommandId::Auth => Outcome::Reply(connection_cmds::auth(shared, session, args)),
        CommandId::Hello => Outcome::Reply(connection_cmds::hello(shared, session, args)),
        CommandId::Select => Outcome::Reply(connection_cmds::select(args)),
        CommandId::Config => Outcome::Reply(connection_cmds::config(shared, args)),
        CommandId::Multi => Outcome::Reply(multi(session)),
        CommandId::Exec => exec(shared, session),
        CommandId::Discard => Outcome::Reply(match session.multi.take() {
            Some(_) => Reply::Ok,
            None => Reply::error("ERR DISCARD without MULTI"),
        }),
        CommandId::GleanerGc => Outcome::Reply(admin::gc(shared)),
        CommandId::GleanerCompact => Outcome::Reply(admin::compact(shared, args)),
        CommandId::GleanerCheck => Outcome::Reply(admin::check(shared)),
        CommandId::GleanerStats => Outcome::Reply(admin::stats(shared)),
    }
}

/// A command refused while queuing makes `EXEC` fail, as in Redis.
fn flag_transaction(session: &mut Session) {
    if let Some(m) = session.multi.as_mut() {
        m.aborted = true;
    }
}

fn multi(session: &mut Session) -> Reply {
    if session.multi.is_some() {
        return Reply::error("ERR MULTI calls can not be nested");
    }
    session.multi = Some(MultiState::default());
    Reply::Ok
}

fn queue(
    shared: &Shared,
    session: &mut Session,
    spec: &commands::CommandSpec,
    args: &[Bytes],
) -> Outcome {
    let Some(m) = session.multi.as_mut() else {
        return Outcome::Reply(Reply::error("ERR internal: not in MULTI"));
    };
    if !spec.allowed_in_multi() {
        m.aborted = true;
        return Outcome::Reply(Reply::error(format!(
            "ERR '{}' is not allowed inside MULTI: gleaner-server runs a transaction as one \
             atomic write batch of GET SET DEL EXISTS MGET MSET STRLEN GETRANGE TYPE PING ECHO",
            spec.name
        )));
    }
    if let Err(reply) = DataCmd::parse(spec.id, args) {
        m.aborted = true;
        return Outcome::Reply(reply);
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

fn exec(shared: &Shared, session: &mut Session) -> Outcome {
    let Some(m) = session.multi.take() else {
        return Outcome::Reply(Reply::error("ERR EXEC without MULTI"));
    };
    if m.aborted {
        return Outcome::Reply(Reply::error(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    let mut cmds = Vec::with_capacity(m.queued.len());
    for args in &m.queued {
        // Queued commands were parsed when they were queued; this cannot fail.
        match commands::lookup(&args[0]).map(|spec| DataCmd::parse(spec.id, args)) {
            Some(Ok(cmd)) => cmds.push(cmd),
            _ => return Outcome::Reply(Reply::error("ERR internal: queued command unparsable")),
        }
    }
    match data::run_unit(shared, session, &cmds, true) {
        Ok(replies) => Outcome::Reply(Reply::Array(replies)),
        Err(data::Failure::Engine(e)) => {
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
        Err(data::Failure::ReplyTooLarge) => data::reply_too_large(shared),
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
