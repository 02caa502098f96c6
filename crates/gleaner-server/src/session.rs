//! The state of one client connection that commands read and change.

use std::net::SocketAddr;

use bytes::Bytes;

use crate::resp::Protocol;

/// One client's state.
#[derive(Debug)]
pub struct Session {
    /// Unique id (`CLIENT ID`, `HELLO`), from 1.
    pub id: u64,
    /// The peer address.
    pub peer: SocketAddr,
    /// The protocol replies are encoded in.
    pub protocol: Protocol,
    /// Whether the client may run commands (always true without a password).
    pub authenticated: bool,
    /// `CLIENT SETNAME`.
    pub name: Option<Bytes>,
    /// `CLIENT SETINFO LIB-NAME` and `LIB-VER`.
    pub lib: (Option<Bytes>, Option<Bytes>),
    /// Inside `MULTI`: the queued commands.
    pub multi: Option<MultiState>,
    /// The highest `--sync batch` ticket of a write whose reply is not sent yet.
    pub unsynced_ticket: Option<u64>,
}

/// Commands queued by `MULTI`.
#[derive(Debug, Default)]
pub struct MultiState {
    /// The queued commands, in order.
    pub queued: Vec<Vec<Bytes>>,
    /// Bytes of their arguments.
    pub bytes: usize,
    /// A command was refused while queuing: `EXEC` fails with `EXECABORT`.
    pub aborted: bool,
}

impl Session {
    /// A new connection's state.
    pub fn new(id: u64, peer: SocketAddr, authenticated: bool) -> Session {
        Session {
            id,
            peer,
            protocol: Protocol::Resp2,
            authenticated,
            name: None,
            lib: (None, None),
            multi: None,
            unsynced_ticket: None,
        }
    }
}
