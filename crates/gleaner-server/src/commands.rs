//! The command table: every command the server knows, with Redis's arity, flags and key
//! positions (what `COMMAND` reports and what the server uses to find a command's keys).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use bytes::Bytes;

use crate::resp::Reply;

/// Identifies a command for dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandId {
    /// `GET`
    Get,
    /// `SET`
    Set,
    /// `SETNX`
    Setnx,
    /// `SETEX`
    Setex,
    /// `PSETEX`
    Psetex,
    /// `GETSET`
    Getset,
    /// `GETDEL`
    Getdel,
    /// `GETEX`
    Getex,
    /// `MSET`
    Mset,
    /// `MSETNX`
    Msetnx,
    /// `MGET`
    Mget,
    /// `STRLEN`
    Strlen,
    /// `GETRANGE`
    Getrange,
    /// `SUBSTR`
    Substr,
    /// `APPEND`
    Append,
    /// `SETRANGE`
    Setrange,
    /// `INCR`
    Incr,
    /// `DECR`
    Decr,
    /// `INCRBY`
    Incrby,
    /// `DECRBY`
    Decrby,
    /// `INCRBYFLOAT`
    Incrbyfloat,
    /// `GETBIT`
    Getbit,
    /// `SETBIT`
    Setbit,
    /// `BITCOUNT`
    Bitcount,
    /// `LCS`
    Lcs,
    /// `DEL`
    Del,
    /// `UNLINK`
    Unlink,
    /// `EXISTS`
    Exists,
    /// `TOUCH`
    Touch,
    /// `TYPE`
    Type,
    /// `EXPIRE`
    Expire,
    /// `PEXPIRE`
    Pexpire,
    /// `EXPIREAT`
    Expireat,
    /// `PEXPIREAT`
    Pexpireat,
    /// `TTL`
    Ttl,
    /// `PTTL`
    Pttl,
    /// `EXPIRETIME`
    Expiretime,
    /// `PEXPIRETIME`
    Pexpiretime,
    /// `PERSIST`
    Persist,
    /// `RENAME`
    Rename,
    /// `RENAMENX`
    Renamenx,
    /// `COPY`
    Copy,
    /// `MOVE`
    Move,
    /// `KEYS`
    Keys,
    /// `RANDOMKEY`
    Randomkey,
    /// `SCAN`
    Scan,
    /// `DBSIZE`
    Dbsize,
    /// `FLUSHDB`
    Flushdb,
    /// `FLUSHALL`
    Flushall,
    /// `SWAPDB`
    Swapdb,
    /// `WATCH`
    Watch,
    /// `UNWATCH`
    Unwatch,
    /// `PING`
    Ping,
    /// `ECHO`
    Echo,
    /// `INFO`
    Info,
    /// `COMMAND`
    Command,
    /// `CLIENT`
    Client,
    /// `QUIT`
    Quit,
    /// `AUTH`
    Auth,
    /// `HELLO`
    Hello,
    /// `SELECT`
    Select,
    /// `MULTI`
    Multi,
    /// `EXEC`
    Exec,
    /// `DISCARD`
    Discard,
    /// `CONFIG`
    Config,
    /// `DEBUG`
    Debug,
    /// `TIME`
    Time,
    /// `SAVE`
    Save,
    /// `SHUTDOWN`
    Shutdown,
    /// `FUNCTION`
    Function,
    /// `GLEANER.GC`
    GleanerGc,
    /// `GLEANER.COMPACT`
    GleanerCompact,
    /// `GLEANER.CHECK`
    GleanerCheck,
    /// `GLEANER.STATS`
    GleanerStats,
}

/// One command's description.
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    /// Dispatch id.
    pub id: CommandId,
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: `n > 0` exactly n arguments (the name included), `n < 0` at least `-n`.
    pub arity: i32,
    /// Redis command flags (`write`, `readonly`, `fast`, `no_auth`, ...).
    pub flags: &'static [&'static str],
    /// Position of the first key (0: none).
    pub first_key: i32,
    /// Position of the last key (-1: the last argument).
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
    /// One line for docs and `COMMAND DOCS`-less clients.
    pub summary: &'static str,
}

macro_rules! spec {
    ($id:ident, $name:literal, $arity:literal, [$($flag:literal),*], $first:literal, $last:literal, $step:literal, $summary:literal) => {
        CommandSpec {
            id: CommandId::$id,
            name: $name,
            arity: $arity,
            flags: &[$($flag),*],
            first_key: $first,
            last_key: $last,
            step: $step,
            summary: $summary,
        }
    };
}

/// Every command, in the order docs/server.md lists them.
pub const COMMANDS: &[CommandSpec] = &[
    spec!(
        Get,
        "get",
        2,
        ["readonly", "fast"],
        1,
        1,
        1,
        "the value of a key, or nil"
    ),
    spec!(
        Set,
        "set",
        -3,
        ["write", "denyoom"],
        1,
        1,
        1,
        "set a key: NX/XX, GET, EX/PX/EXAT/PXAT/KEEPTTL"
    ),
    spec!(
        Setnx,
        "setnx",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        "set a key if absent; 1 or 0"
    ),
    spec!(
        Setex,
        "setex",
        4,
        ["write", "denyoom"],
        1,
        1,
        1,
        "set a key with a time to live in seconds"
    ),
    spec!(
        Psetex,
        "psetex",
        4,
        ["write", "denyoom"],
        1,
        1,
        1,
        "set a key with a time to live in milliseconds"
    ),
    spec!(
        Getset,
        "getset",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        "set a key, returning the old value"
    ),
    spec!(
        Getdel,
        "getdel",
        2,
        ["write", "fast"],
        1,
        1,
        1,
        "get a value and delete the key"
    ),
    spec!(
        Getex,
        "getex",
        -2,
        ["write", "fast"],
        1,
        1,
        1,
        "get a value and set or remove its expiry"
    ),
    spec!(
        Mset,
        "mset",
        -3,
        ["write", "denyoom"],
        1,
        -1,
        2,
        "set several keys atomically"
    ),
    spec!(
        Msetnx,
        "msetnx",
        -3,
        ["write", "denyoom"],
        1,
        -1,
        2,
        "set several keys atomically if none exists; 1 or 0"
    ),
    spec!(
        Mget,
        "mget",
        -2,
        ["readonly", "fast"],
        1,
        -1,
        1,
        "the values of keys"
    ),
    spec!(
        Strlen,
        "strlen",
        2,
        ["readonly", "fast"],
        1,
        1,
        1,
        "the length of a value (0 when absent)"
    ),
    spec!(
        Getrange,
        "getrange",
        4,
        ["readonly"],
        1,
        1,
        1,
        "a substring of a value (negative offsets count from the end)"
    ),
    spec!(
        Substr,
        "substr",
        4,
        ["readonly"],
        1,
        1,
        1,
        "GETRANGE's old name"
    ),
    spec!(
        Append,
        "append",
        3,
        ["write", "denyoom"],
        1,
        1,
        1,
        "append to a value; the new length"
    ),
    spec!(
        Setrange,
        "setrange",
        4,
        ["write", "denyoom"],
        1,
        1,
        1,
        "overwrite part of a value; the new length"
    ),
    spec!(
        Incr,
        "incr",
        2,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        "add 1 to an integer value"
    ),
    spec!(
        Decr,
        "decr",
        2,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        "subtract 1 from an integer value"
    ),
    spec!(
        Incrby,
        "incrby",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        "add to an integer value"
    ),
    spec!(
        Decrby,
        "decrby",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        "subtract from an integer value"
    ),
    spec!(
        Incrbyfloat,
        "incrbyfloat",
        3,
        ["write", "denyoom", "fast"],
        1,
        1,
        1,
        "add to a decimal value"
    ),
    spec!(
        Getbit,
        "getbit",
        3,
        ["readonly", "fast"],
        1,
        1,
        1,
        "one bit of a value"
    ),
    spec!(
        Setbit,
        "setbit",
        4,
        ["write", "denyoom"],
        1,
        1,
        1,
        "set one bit of a value; the old bit"
    ),
    spec!(
        Bitcount,
        "bitcount",
        -2,
        ["readonly"],
        1,
        1,
        1,
        "set bits of a value, or of a byte or bit range"
    ),
    spec!(
        Lcs,
        "lcs",
        -3,
        ["readonly"],
        1,
        2,
        1,
        "the longest common subsequence of two values"
    ),
    spec!(
        Del,
        "del",
        -2,
        ["write"],
        1,
        -1,
        1,
        "remove keys; the number that existed"
    ),
    spec!(
        Unlink,
        "unlink",
        -2,
        ["write", "fast"],
        1,
        -1,
        1,
        "DEL (removal never blocks the server)"
    ),
    spec!(
        Exists,
        "exists",
        -2,
        ["readonly", "fast"],
        1,
        -1,
        1,
        "how many of the keys exist (repeats count again)"
    ),
    spec!(
        Touch,
        "touch",
        -2,
        ["readonly", "fast"],
        1,
        -1,
        1,
        "how many of the keys exist"
    ),
    spec!(
        Type,
        "type",
        2,
        ["readonly", "fast"],
        1,
        1,
        1,
        "`string`, or `none` for a missing key (every key holds a string)"
    ),
    spec!(
        Expire,
        "expire",
        -3,
        ["write", "fast"],
        1,
        1,
        1,
        "set a time to live in seconds (NX|XX|GT|LT)"
    ),
    spec!(
        Pexpire,
        "pexpire",
        -3,
        ["write", "fast"],
        1,
        1,
        1,
        "set a time to live in milliseconds (NX|XX|GT|LT)"
    ),
    spec!(
        Expireat,
        "expireat",
        -3,
        ["write", "fast"],
        1,
        1,
        1,
        "set an expiry time in seconds since the epoch (NX|XX|GT|LT)"
    ),
    spec!(
        Pexpireat,
        "pexpireat",
        -3,
        ["write", "fast"],
        1,
        1,
        1,
        "set an expiry time in milliseconds since the epoch (NX|XX|GT|LT)"
    ),
    spec!(
        Ttl,
        "ttl",
        2,
        ["readonly", "fast"],
        1,
        1,
        1,
        "seconds left; -1 no expiry, -2 no key"
    ),
    spec!(
        Pttl,
        "pttl",
        2,
        ["readonly", "fast"],
        1,
        1,
        1,
        "milliseconds left; -1 no expiry, -2 no key"
    ),
    spec!(
        Expiretime,
        "expiretime",
        2,
        ["readonly", "fast"],
        1,
        1,
        1,
        "the expiry time in seconds; -1 no expiry, -2 no key"
    ),
    spec!(
        Pexpiretime,
        "pexpiretime",
        2,
        ["readonly", "fast"],
        1,
        1,
        1,
        "the expiry time in milliseconds; -1 no expiry, -2 no key"
    ),
    spec!(
        Persist,
        "persist",
        2,
        ["write", "fast"],
        1,
        1,
        1,
        "remove a key's expiry"
    ),
    spec!(
        Rename,
        "rename",
        3,
        ["write"],
        1,
        2,
        1,
        "rename a key (with its expiry)"
    ),
    spec!(
        Renamenx,
        "renamenx",
        3,
        ["write", "fast"],
        1,
        2,
        1,
        "rename a key if the new name is free; 1 or 0"
    ),
    spec!(
        Copy,
        "copy",
        -3,
        ["write", "denyoom"],
        1,
        2,
        1,
        "copy a key (DB index, REPLACE)"
    ),
    spec!(
        Move,
        "move",
        3,
        ["write", "fast"],
        1,
        1,
        1,
        "move a key to another database"
    ),
    spec!(
        Keys,
        "keys",
        2,
        ["readonly"],
        0,
        0,
        0,
        "every key matching a pattern"
    ),
    spec!(
        Randomkey,
        "randomkey",
        1,
        ["readonly"],
        0,
        0,
        0,
        "a key chosen at random, or nil"
    ),
    spec!(
        Scan,
        "scan",
        -2,
        ["readonly"],
        0,
        0,
        0,
        "walk the keys in key order with a numeric cursor"
    ),
    spec!(
        Dbsize,
        "dbsize",
        1,
        ["readonly", "fast"],
        0,
        0,
        0,
        "the exact number of keys in the database"
    ),
    spec!(
        Flushdb,
        "flushdb",
        -1,
        ["write"],
        0,
        0,
        0,
        "delete every key of the database (ASYNC|SYNC)"
    ),
    spec!(
        Flushall,
        "flushall",
        -1,
        ["write"],
        0,
        0,
        0,
        "delete every key of every database (ASYNC|SYNC)"
    ),
    spec!(
        Swapdb,
        "swapdb",
        3,
        ["write", "fast"],
        0,
        0,
        0,
        "refused: databases are key ranges of one store"
    ),
    spec!(
        Watch,
        "watch",
        -2,
        ["noscript", "loading", "stale", "fast", "allow_busy"],
        1,
        -1,
        1,
        "make the next EXEC conditional on these keys staying unchanged"
    ),
    spec!(
        Unwatch,
        "unwatch",
        1,
        ["noscript", "loading", "stale", "fast", "allow_busy"],
        0,
        0,
        0,
        "forget the watched keys"
    ),
    spec!(Ping, "ping", -1, ["fast"], 0, 0, 0, "PONG, or the message"),
    spec!(Echo, "echo", 2, ["fast"], 0, 0, 0, "the message"),
    spec!(
        Info,
        "info",
        -1,
        ["loading", "stale"],
        0,
        0,
        0,
        "server, clients, memory, persistence, stats, replication, cpu, commandstats, keyspace and gleaner sections"
    ),
    spec!(
        Command,
        "command",
        -1,
        ["loading", "stale"],
        0,
        0,
        0,
        "this table (COUNT, INFO, LIST, DOCS)"
    ),
    spec!(
        Client,
        "client",
        -2,
        ["noscript", "loading", "stale"],
        0,
        0,
        0,
        "SETNAME, GETNAME, ID, SETINFO, NO-EVICT, NO-TOUCH, LIST, INFO"
    ),
    spec!(
        Quit,
        "quit",
        -1,
        [
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy"
        ],
        0,
        0,
        0,
        "close the connection"
    ),
    spec!(
        Auth,
        "auth",
        -2,
        [
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy"
        ],
        0,
        0,
        0,
        "authenticate with the password"
    ),
    spec!(
        Hello,
        "hello",
        -1,
        [
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy"
        ],
        0,
        0,
        0,
        "choose RESP2 or RESP3, optionally authenticate and name the connection"
    ),
    spec!(
        Select,
        "select",
        2,
        ["loading", "stale", "fast"],
        0,
        0,
        0,
        "choose the database (0 to --databases - 1)"
    ),
    spec!(
        Multi,
        "multi",
        1,
        ["noscript", "loading", "stale", "fast", "allow_busy"],
        0,
        0,
        0,
        "start queuing a transaction"
    ),
    spec!(
        Exec,
        "exec",
        1,
        ["noscript", "loading", "stale", "skip_slowlog"],
        0,
        0,
        0,
        "run the queued commands as one atomic write batch"
    ),
    spec!(
        Discard,
        "discard",
        1,
        ["noscript", "loading", "stale", "fast", "allow_busy"],
        0,
        0,
        0,
        "drop the queued commands"
    ),
    spec!(
        Config,
        "config",
        -2,
        ["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        "GET the server's settings, SET the few that can change, RESETSTAT"
    ),
    spec!(
        Debug,
        "debug",
        -2,
        ["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        "the few DEBUG subcommands test suites use"
    ),
    spec!(
        Time,
        "time",
        1,
        ["loading", "stale", "fast"],
        0,
        0,
        0,
        "the server's time: seconds and microseconds"
    ),
    spec!(
        Save,
        "save",
        1,
        ["admin", "noscript", "no_async_loading", "no_multi"],
        0,
        0,
        0,
        "make everything written durable in key tables (flush and sync)"
    ),
    spec!(
        Shutdown,
        "shutdown",
        -1,
        [
            "admin",
            "noscript",
            "loading",
            "stale",
            "no_multi",
            "allow_busy"
        ],
        0,
        0,
        0,
        "stop the server cleanly, as SIGTERM does"
    ),
    spec!(
        Function,
        "function",
        -2,
        ["noscript"],
        0,
        0,
        0,
        "FLUSH and LIST answer (the server has no functions)"
    ),
    spec!(
        GleanerGc,
        "gleaner.gc",
        1,
        ["admin", "write"],
        0,
        0,
        0,
        "run garbage collection until nothing is worth collecting; JSON"
    ),
    spec!(
        GleanerCompact,
        "gleaner.compact",
        -1,
        ["admin", "write"],
        0,
        0,
        0,
        "compact the whole key space, or [begin, end]"
    ),
    spec!(
        GleanerCheck,
        "gleaner.check",
        1,
        ["admin"],
        0,
        0,
        0,
        "read every live key and value and recount the garbage; JSON"
    ),
    spec!(
        GleanerStats,
        "gleaner.stats",
        1,
        ["admin", "loading", "stale"],
        0,
        0,
        0,
        "the engine's statistics; JSON"
    ),
];

/// Longest command name looked up (longer names are unknown without a copy).
const MAX_NAME_LEN: usize = 32;

/// FNV-1a: names are short and come from the table or from clients who can only slow their
/// own lookups, so a keyed hash buys nothing here.
struct NameHasher(u64);

impl Default for NameHasher {
    fn default() -> Self {
        NameHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

type ByName = HashMap<&'static [u8], &'static CommandSpec, BuildHasherDefault<NameHasher>>;

/// [`COMMANDS`] by lower-case name, built on first use. A pipelined command is looked up a
/// few times on its way (whether its batch runs inline, whether it coalesces, to run it): a
/// scan of the table with a lower-cased copy of the name each time was 2 % of the server's
/// CPU under pipelined 8 KiB GETs.
fn by_name() -> &'static ByName {
    static BY_NAME: OnceLock<ByName> = OnceLock::new();
    BY_NAME.get_or_init(|| COMMANDS.iter().map(|c| (c.name.as_bytes(), c)).collect())
}

/// The command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > MAX_NAME_LEN {
        return None;
    }
    let mut buf = [0u8; MAX_NAME_LEN];
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    by_name().get(&*lower).copied()
}

/// The command `id` names.
pub fn lookup_id(id: CommandId) -> &'static CommandSpec {
    &COMMANDS[id as usize]
}

impl CommandSpec {
    /// Whether `argc` arguments (the name included) fit the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        if self.arity >= 0 {
            argc == self.arity as usize
        } else {
            argc >= self.arity.unsigned_abs() as usize
        }
    }

    /// Whether the command has flag `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }

    /// Whether `MULTI` refuses to queue it (Redis's `no-multi` flag).
    pub fn no_multi(&self) -> bool {
        self.has_flag("no_multi")
    }

    /// Its index in [`COMMANDS`] (the table lists the commands in [`CommandId`] order).
    pub fn index(&self) -> usize {
        self.id as usize
    }

    /// Whether it may run before authentication.
    pub fn no_auth(&self) -> bool {
        self.has_flag("no_auth")
    }

    /// The key arguments of `args` (a whole command), by the key positions.
    pub fn keys<'a>(&self, args: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> + 'a {
        let first = self.first_key.max(0) as usize;
        let last = if self.last_key < 0 {
            args.len()
                .saturating_sub(self.last_key.unsigned_abs() as usize)
        } else {
            self.last_key as usize
        };
        let step = self.step.max(1) as usize;
        let range = if first == 0 || first >= args.len() {
            0..0
        } else {
            first..(last + 1).min(args.len())
        };
        args[range].iter().step_by(step)
    }

    /// The command's entry in `COMMAND` / `COMMAND INFO` (Redis 7's ten fields; ACL
    /// categories, tips, key specs and subcommands empty).
    pub fn info(&self) -> Reply {
        Reply::Array(vec![
            Reply::text(self.name),
            Reply::Int(self.arity.into()),
            Reply::Array(self.flags.iter().map(|f| Reply::simple(f)).collect()),
            Reply::Int(self.first_key.into()),
            Reply::Int(self.last_key.into()),
            Reply::Int(self.step.into()),
            Reply::Array(Vec::new()),
            Reply::Array(Vec::new()),
            Reply::Array(Vec::new()),
            Reply::Array(Vec::new()),
        ])
    }
}

/// Redis's reply to an unknown command: `ERR unknown command 'NAME', with args beginning
/// with: 'a' 'b' ` (the arguments quoted while their text is under 128 bytes).
pub fn unknown_command(args: &[Bytes]) -> Reply {
    let mut listed = String::new();
    for a in args.iter().skip(1) {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        listed.push('\'');
        listed.push_str(&String::from_utf8_lossy(&a[..a.len().min(room)]));
        listed.push_str("' ");
    }
    let name = args.first().map_or(&b""[..], |n| &n[..n.len().min(128)]);
    Reply::error(format!(
        "ERR unknown command '{}', with args beginning with: {listed}",
        String::from_utf8_lossy(name)
    ))
}

/// Redis's reply to a wrong argument count.
pub fn wrong_arity(spec: &CommandSpec) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{}' command",
        spec.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<Bytes> {
        list.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn lookup_is_case_insensitive_and_names_are_unique() {
        assert_eq!(lookup(b"GeT").map(|c| c.id), Some(CommandId::Get));
        assert_eq!(
            lookup(b"GLEANER.stats").map(|c| c.id),
            Some(CommandId::GleanerStats)
        );
        assert!(lookup(b"lpush").is_none());
        assert!(lookup(b"").is_none());
        assert!(lookup(&[b'g'; MAX_NAME_LEN + 1]).is_none());
        // Every command is found by its name in either case (so every name is lower-case and
        // short enough to be looked up).
        for c in COMMANDS {
            assert_eq!(lookup(c.name.as_bytes()).map(|f| f.id), Some(c.id));
            let upper = c.name.to_ascii_uppercase();
            assert_eq!(lookup(upper.as_bytes()).map(|f| f.id), Some(c.id));
        }
        let mut names: Vec<_> = COMMANDS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COMMANDS.len());
    }

    #[test]
    fn the_table_is_in_command_id_order() {
        for (i, c) in COMMANDS.iter().enumerate() {
            assert_eq!(c.index(), i, "{}", c.name);
        }
    }

    #[test]
    fn keys_follow_the_key_positions() {
        let mset = lookup(b"mset").expect("mset");
        let a = args(&["MSET", "k1", "v1", "k2", "v2"]);
        assert_eq!(mset.keys(&a).collect::<Vec<_>>(), vec![&a[1], &a[3]]);
        let del = lookup(b"del").expect("del");
        let a = args(&["DEL", "a", "b"]);
        assert_eq!(del.keys(&a).count(), 2);
        let get = lookup(b"get").expect("get");
        assert_eq!(get.keys(&args(&["GET", "k"])).count(), 1);
        let ping = lookup(b"ping").expect("ping");
        assert_eq!(ping.keys(&args(&["PING", "x"])).count(), 0);
    }

    #[test]
    fn arity_and_error_texts_match_redis() {
        let get = lookup(b"get").expect("get");
        assert!(get.arity_ok(2) && !get.arity_ok(3) && !get.arity_ok(1));
        let set = lookup(b"set").expect("set");
        assert!(set.arity_ok(3) && set.arity_ok(6) && !set.arity_ok(2));
        assert_eq!(
            wrong_arity(get),
            Reply::error("ERR wrong number of arguments for 'get' command")
        );
        assert_eq!(
            unknown_command(&args(&["foo", "a", "b"])),
            Reply::error("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")
        );
        assert_eq!(
            unknown_command(&args(&["foo"])),
            Reply::error("ERR unknown command 'foo', with args beginning with: ")
        );
    }
}
