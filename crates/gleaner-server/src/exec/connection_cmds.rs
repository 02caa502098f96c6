//! Commands about the connection and the server rather than the data: COMMAND, CLIENT, AUTH,
//! HELLO, SELECT.

use bytes::Bytes;

use crate::commands::{self, COMMANDS};
use crate::resp::parser::parse_strict_i64;
use crate::resp::{Protocol, Reply};
use crate::session::Session;
use crate::shared::Shared;

/// The only user name (Redis's default user).
const DEFAULT_USER: &[u8] = b"default";

/// Longest client name `CLIENT SETNAME` keeps.
const MAX_CLIENT_NAME: usize = 1024;

fn upper(arg: &Bytes) -> Vec<u8> {
    arg.to_ascii_uppercase()
}

fn unknown_subcommand(command: &str, sub: &Bytes) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand '{}'. Try {command} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)])
    ))
}

/// `COMMAND`, `COMMAND COUNT`, `COMMAND INFO name...`, `COMMAND LIST`, `COMMAND DOCS`.
pub fn command(args: &[Bytes]) -> Reply {
    let Some(sub) = args.get(1) else {
        return Reply::Array(COMMANDS.iter().map(|c| c.info()).collect());
    };
    match upper(sub).as_slice() {
        b"COUNT" if args.len() == 2 => Reply::Int(COMMANDS.len() as i64),
        b"LIST" if args.len() == 2 => {
            Reply::Array(COMMANDS.iter().map(|c| Reply::text(c.name)).collect())
        }
        b"INFO" => Reply::Array(if args.len() == 2 {
            COMMANDS.iter().map(|c| c.info()).collect()
        } else {
            args[2..]
                .iter()
                .map(|n| commands::lookup(n).map_or(Reply::NullArray, |c| c.info()))
                .collect()
        }),
        // No documentation entries: redis-cli then falls back to its built-in help.
        b"DOCS" => Reply::Map(Vec::new()),
        _ => unknown_subcommand("COMMAND", sub),
    }
}

/// `CLIENT SETNAME|GETNAME|ID|SETINFO|HELP`.
pub fn client(session: &mut Session, args: &[Bytes]) -> Reply {
    let sub = &args[1];
    match (upper(sub).as_slice(), args.len()) {
        (b"SETNAME", 3) => match valid_client_name(&args[2]) {
            Ok(()) => {
                session.name = (!args[2].is_empty()).then(|| args[2].clone());
                Reply::Ok
            }
            Err(e) => e,
        },
        (b"GETNAME", 2) => session.name.clone().map_or(Reply::Null, Reply::Bulk),
        (b"ID", 2) => Reply::Int(session.id as i64),
        (b"SETINFO", 4) => {
            let value = args[3].clone();
            if value.len() > MAX_CLIENT_NAME || value.iter().any(|b| !(b'!'..=b'~').contains(b)) {
                return Reply::error(
                    "ERR lib-name and lib-ver cannot contain spaces, newlines or special characters.",
                );
            }
            match upper(&args[2]).as_slice() {
                b"LIB-NAME" => session.lib.0 = Some(value),
                b"LIB-VER" => session.lib.1 = Some(value),
                _ => {
                    return Reply::error(format!(
                        "ERR Unrecognized option '{}'",
                        String::from_utf8_lossy(&args[2][..args[2].len().min(128)])
                    ));
                }
            }
            Reply::Ok
        }
        (b"HELP", 2) => Reply::Array(
            [
                "CLIENT <subcommand> [<arg> ...]. Subcommands are:",
                "GETNAME",
                "    Return the name of the current connection.",
                "ID",
                "    Return the ID of the current connection.",
                "SETNAME <name>",
                "    Assign the name <name> to the current connection.",
                "SETINFO <LIB-NAME|LIB-VER> <value>",
                "    Set client library information.",
            ]
            .into_iter()
            .map(Reply::simple)
            .collect(),
        ),
        (b"SETNAME" | b"GETNAME" | b"ID" | b"SETINFO" | b"HELP", _) => Reply::error(format!(
            "ERR wrong number of arguments for 'client|{}' command",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        )),
        _ => unknown_subcommand("CLIENT", sub),
    }
}

fn valid_client_name(name: &[u8]) -> Result<(), Reply> {
    if name.len() > MAX_CLIENT_NAME || name.iter().any(|b| !(b'!'..=b'~').contains(b)) {
        return Err(Reply::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

/// Checks `user`/`password` and marks the session authenticated; the error reply otherwise.
fn authenticate(
    shared: &Shared,
    session: &mut Session,
    user: &[u8],
    password: &[u8],
) -> Result<(), Reply> {
    let Some(secret) = &shared.config.password else {
        // Without a password the default user takes any password, as Redis 7's `nopass`
        // default user does; another user name does not exist.
        return if user == DEFAULT_USER {
            session.authenticated = true;
            Ok(())
        } else {
            Err(Reply::error(
                "WRONGPASS invalid username-password pair or user is disabled.",
            ))
        };
    };
    // Both checks run whatever the outcome of the first, so the time taken tells nothing.
    let user_ok = user == DEFAULT_USER;
    let password_ok = secret.check(password);
    if user_ok && password_ok {
        session.authenticated = true;
        Ok(())
    } else {
        Err(Reply::error(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ))
    }
}

/// `AUTH [username] password`.
pub fn auth(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Reply {
    let (user, password) = match args.len() {
        // Redis 7's answer to the old form when no password is set.
        2 if shared.config.password.is_none() => {
            return Reply::error(
                "ERR AUTH <password> called without any password configured for the default \
                 user. Are you sure your configuration is correct?",
            );
        }
        2 => (DEFAULT_USER, &args[1][..]),
        3 => (&args[1][..], &args[2][..]),
        _ => return Reply::error("ERR syntax error"),
    };
    match authenticate(shared, session, user, password) {
        Ok(()) => Reply::Ok,
        Err(e) => e,
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
pub fn hello(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Reply {
    let mut protocol = session.protocol;
    if let Some(v) = args.get(1) {
        match parse_strict_i64(v) {
            Some(2) => protocol = Protocol::Resp2,
            Some(3) => protocol = Protocol::Resp3,
            Some(_) => return Reply::error("NOPROTO unsupported protocol version"),
            None => {
                return Reply::error("ERR Protocol version is not an integer or out of range");
            }
        }
    }
    let mut i = 2;
    let mut name = None;
    let mut credentials = None;
    while i < args.len() {
        match upper(&args[i]).as_slice() {
            b"AUTH" if i + 2 < args.len() => {
                credentials = Some((&args[i + 1], &args[i + 2]));
                i += 3;
            }
            b"SETNAME" if i + 1 < args.len() => {
                if let Err(e) = valid_client_name(&args[i + 1]) {
                    return e;
                }
                name = Some(args[i + 1].clone());
                i += 2;
            }
            _ => {
                return Reply::error(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(&args[i][..args[i].len().min(128)])
                ));
            }
        }
    }
    if let Some((user, password)) = credentials
        && let Err(e) = authenticate(shared, session, user, password)
    {
        return e;
    }
    if !session.authenticated {
        return Reply::error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client \
             and select the RESP protocol version at the same time",
        );
    }
    if let Some(n) = name {
        session.name = (!n.is_empty()).then_some(n);
    }
    session.protocol = protocol;
    Reply::Map(vec![
        (Reply::text("server"), Reply::text("gleaner")),
        // The same version as INFO's `redis_version`: what clients compare features against.
        (
            Reply::text("version"),
            Reply::text(super::info::REDIS_COMPAT_VERSION),
        ),
        (Reply::text("proto"), Reply::Int(protocol.version())),
        (Reply::text("id"), Reply::Int(session.id as i64)),
        (Reply::text("mode"), Reply::text("standalone")),
        (Reply::text("role"), Reply::text("master")),
        (Reply::text("modules"), Reply::Array(Vec::new())),
    ])
}

/// `SELECT index`: only database 0 exists.
pub fn select(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Reply {
    match parse_strict_i64(&args[1]) {
        Some(i) if shared.keyspace.valid(i) => {
            session.db = i as u8;
            Reply::Ok
        }
        Some(_) => Reply::error("ERR DB index is out of range"),
        None => Reply::error("ERR value is not an integer or out of range"),
    }
}
