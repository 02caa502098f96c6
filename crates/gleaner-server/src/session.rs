//! The state of one client connection that commands read and change.

use std::net::SocketAddr;

use bytes::Bytes;
use gleaner::Snapshot;

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
    /// The selected database (`SELECT`), 0 to `--databases` - 1.
    pub db: u8,
    /// Inside `MULTI`: the queued commands.
    pub multi: Option<MultiState>,
    /// The keys `WATCH`ed since the last `EXEC`, `DISCARD` or `UNWATCH`.
    pub watch: Option<Watch>,
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

/// Watched keys: `EXEC` runs only if none of them changed since `snapshot` (the engine's
/// conditional write decides, [`gleaner::Db::write_if_unchanged`]). The snapshot holds the
/// versions it sees until the watch ends, as any snapshot does.
#[derive(Debug)]
pub struct Watch {
    /// The state the keys are compared with.
    pub snapshot: Snapshot,
    /// The watched keys, as stored (database prefix included).
    pub keys: Vec<Vec<u8>>,
    /// A watched key is already known to have changed: `EXEC` fails without checking.
    pub dirty: bool,
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
            db: 0,
            multi: None,
            watch: None,
            unsynced_ticket: None,
        }
    }
}
