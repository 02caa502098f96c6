//! Parsing the data commands: the commands that run as atomic units ([`super::unit`]), alone
//! or queued in a `MULTI`. Parsing checks what Redis checks before it runs a command (option
//! syntax, integers), so a transaction refuses a bad command when it is queued; what Redis
//! checks only when it runs (an expire time that is not positive, say) is checked when the
//! command runs and answered in its slot of `EXEC`'s reply, as in Redis.

use bytes::Bytes;

use crate::commands::CommandId;
use crate::resp::Reply;
use crate::resp::parser::parse_strict_i64;
use crate::strings::{self, LcsOptions, StringError};

/// `SET`'s and `GETEX`'s expiry options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryArg {
    /// None given: `SET` removes any expiry, `GETEX` leaves it.
    Unchanged,
    /// `KEEPTTL`: keep the key's expiry.
    Keep,
    /// `PERSIST` (`GETEX`): remove the expiry.
    Persist,
    /// `EX`/`PX n`: `n` (as given, not yet checked) in the unit, from now.
    In(i64, TimeUnit),
    /// `EXAT`/`PXAT t`: at `t` (as given, not yet checked) in the unit since the epoch.
    At(i64, TimeUnit),
}

/// Seconds or milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// Seconds (`EX`, `EXAT`, `EXPIRE`, `TTL`, ...).
    Seconds,
    /// Milliseconds (`PX`, `PXAT`, `PEXPIRE`, `PTTL`, ...).
    Millis,
}

/// `SET`'s `NX`/`XX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetCondition {
    /// Always.
    Always,
    /// `NX`: only if the key is absent.
    IfAbsent,
    /// `XX`: only if the key is present.
    IfPresent,
}

/// `EXPIRE`'s `NX|XX|GT|LT` (NX excludes the others, GT excludes LT: checked when parsed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExpireFlags {
    /// `NX`: only if the key has no expiry.
    pub nx: bool,
    /// `XX`: only if it has one.
    pub xx: bool,
    /// `GT`: only if the new expiry is later (no expiry counts as infinite, so never).
    pub gt: bool,
    /// `LT`: only if the new expiry is earlier (no expiry counts as infinite).
    pub lt: bool,
}

/// `TTL`-family reply form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlForm {
    /// Time left (`TTL`, `PTTL`).
    Remaining(TimeUnit),
    /// The expiry time (`EXPIRETIME`, `PEXPIRETIME`).
    Absolute(TimeUnit),
}

/// A parsed data command.
#[derive(Debug, Clone)]
pub enum DataCmd {
    /// `GET key`
    Get(Bytes),
    /// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]`, and `SETEX`,
    /// `PSETEX`, `GETSET` (the reply form differs: see `reply`).
    Set {
        /// The key.
        key: Bytes,
        /// The value.
        value: Bytes,
        /// `NX`/`XX`.
        condition: SetCondition,
        /// `GET`: reply with the old value.
        get: bool,
        /// The expiry options.
        expiry: ExpiryArg,
        /// The name Redis uses in the expire-time error (`set`, `setex`, `psetex`).
        name: &'static str,
    },
    /// `SETNX key value`: 1 when set, 0 when the key existed.
    Setnx(Bytes, Bytes),
    /// `GETDEL key`
    Getdel(Bytes),
    /// `GETEX key [EX|PX|EXAT|PXAT n|PERSIST]`
    Getex(Bytes, ExpiryArg),
    /// `MSET key value...` (`nx`: `MSETNX`, all or none, replying 1 or 0).
    Mset {
        /// The pairs.
        pairs: Vec<(Bytes, Bytes)>,
        /// `MSETNX`.
        nx: bool,
    },
    /// `MGET key...`
    Mget(Vec<Bytes>),
    /// `STRLEN key`
    Strlen(Bytes),
    /// `GETRANGE key start end` (and `SUBSTR`).
    Getrange(Bytes, i64, i64),
    /// `APPEND key value`
    Append(Bytes, Bytes),
    /// `SETRANGE key offset value`
    Setrange(Bytes, u64, Bytes),
    /// `INCR`, `DECR`, `INCRBY`, `DECRBY` (the delta, negated for the decrements).
    IncrBy(Bytes, i64),
    /// `DECRBY key i64::MIN`: Redis refuses it when it runs (the negation overflows).
    DecrByMin(Bytes),
    /// `INCRBYFLOAT key increment` (the increment as given).
    IncrByFloat(Bytes, Bytes),
    /// `GETBIT key offset`
    Getbit(Bytes, u64),
    /// `SETBIT key offset bit`
    Setbit(Bytes, u64, bool),
    /// `BITCOUNT key [start end [BYTE|BIT]]`: the arguments after the key, parsed when it
    /// runs (Redis answers 0 for a missing key whatever they are).
    Bitcount(Bytes, Vec<Bytes>),
    /// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]`
    Lcs(Bytes, Bytes, LcsOptions),
    /// `DEL key...` and `UNLINK key...`
    Del(Vec<Bytes>),
    /// `EXISTS key...` and `TOUCH key...`
    Exists(Vec<Bytes>),
    /// `TYPE key`
    Type(Bytes),
    /// `EXPIRE`, `PEXPIRE` (relative) and `EXPIREAT`, `PEXPIREAT` (absolute).
    Expire {
        /// The key.
        key: Bytes,
        /// The time as given.
        when: i64,
        /// Its unit.
        unit: TimeUnit,
        /// Whether `when` is absolute.
        absolute: bool,
        /// `NX|XX|GT|LT`.
        flags: ExpireFlags,
        /// The command's name, for the expire-time error.
        name: &'static str,
    },
    /// `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`
    Ttl(Bytes, TtlForm),
    /// `PERSIST key`
    Persist(Bytes),
    /// `RENAME src dst` (`nx`: `RENAMENX`).
    Rename {
        /// Source key.
        src: Bytes,
        /// Destination key.
        dst: Bytes,
        /// `RENAMENX`.
        nx: bool,
    },
    /// `COPY src dst [DB index] [REPLACE]`
    Copy {
        /// Source key.
        src: Bytes,
        /// Destination key.
        dst: Bytes,
        /// `DB index` (unchecked: answered when it runs, as in Redis).
        db: Option<i64>,
        /// `REPLACE`.
        replace: bool,
    },
    /// `MOVE key db`
    Move(Bytes, i64),
    /// `SELECT index` inside `MULTI`: later commands of the transaction use that database.
    Select(i64),
    /// `PING [message]`
    Ping(Option<Bytes>),
    /// `ECHO message`
    Echo(Bytes),
    /// A command that touches no key and runs in place inside a transaction: `CONFIG`,
    /// `INFO`, `TIME` (not part of the transaction's atomic write).
    Keyless(CommandId, Vec<Bytes>),
}

/// The error Redis gives for an unparsable integer.
pub fn not_an_integer() -> Reply {
    Reply::error("ERR value is not an integer or out of range")
}

/// Redis's syntax error.
pub fn syntax_error() -> Reply {
    Reply::error("ERR syntax error")
}

fn int(arg: &Bytes) -> Result<i64, Reply> {
    parse_strict_i64(arg).ok_or_else(not_an_integer)
}

/// A string operation's error as its reply.
pub fn string_error(e: StringError) -> Reply {
    Reply::error(e.message())
}

fn upper(arg: &Bytes) -> Vec<u8> {
    arg.to_ascii_uppercase()
}

impl DataCmd {
    /// Whether `id` is a data command (one [`DataCmd::parse`] parses), known without parsing.
    pub fn is_data_command(id: CommandId) -> bool {
        use CommandId as C;
        matches!(
            id,
            C::Get
                | C::Set
                | C::Setnx
                | C::Setex
                | C::Psetex
                | C::Getset
                | C::Getdel
                | C::Getex
                | C::Mset
                | C::Msetnx
                | C::Mget
                | C::Strlen
                | C::Getrange
                | C::Substr
                | C::Append
                | C::Setrange
                | C::Incr
                | C::Decr
                | C::Incrby
                | C::Decrby
                | C::Incrbyfloat
                | C::Getbit
                | C::Setbit
                | C::Bitcount
                | C::Lcs
                | C::Del
                | C::Unlink
                | C::Exists
                | C::Touch
                | C::Type
                | C::Expire
                | C::Pexpire
                | C::Expireat
                | C::Pexpireat
                | C::Ttl
                | C::Pttl
                | C::Expiretime
                | C::Pexpiretime
                | C::Persist
                | C::Rename
                | C::Renamenx
                | C::Copy
                | C::Move
                | C::Select
                | C::Ping
                | C::Echo
                | C::Config
                | C::Info
                | C::Time
        )
    }

    /// Parses a data command whose arity was checked; `Err` is the error reply. `None` when
    /// `id` is not a data command ([`DataCmd::is_data_command`]).
    pub fn parse(id: CommandId, args: &[Bytes]) -> Option<Result<DataCmd, Reply>> {
        use CommandId as C;
        let key = || args[1].clone();
        let rest = || args[1..].to_vec();
        let parsed = match id {
            C::Get => Ok(DataCmd::Get(key())),
            C::Set => parse_set(args),
            C::Setnx => Ok(DataCmd::Setnx(key(), args[2].clone())),
            C::Setex | C::Psetex => {
                let (unit, name) = if id == C::Setex {
                    (TimeUnit::Seconds, "setex")
                } else {
                    (TimeUnit::Millis, "psetex")
                };
                int(&args[2]).map(|n| DataCmd::Set {
                    key: key(),
                    value: args[3].clone(),
                    condition: SetCondition::Always,
                    get: false,
                    expiry: ExpiryArg::In(n, unit),
                    name,
                })
            }
            C::Getset => Ok(DataCmd::Set {
                key: key(),
                value: args[2].clone(),
                condition: SetCondition::Always,
                get: true,
                expiry: ExpiryArg::Unchanged,
                name: "getset",
            }),
            C::Getdel => Ok(DataCmd::Getdel(key())),
            C::Getex => {
                parse_expiry_options(&args[2..], false).map(|(_, _, e)| DataCmd::Getex(key(), e))
            }
            C::Mset | C::Msetnx => {
                if args.len() % 2 != 1 {
                    Err(Reply::error(format!(
                        "ERR wrong number of arguments for '{}' command",
                        if id == C::Mset { "mset" } else { "msetnx" }
                    )))
                } else {
                    Ok(DataCmd::Mset {
                        pairs: args[1..]
                            .chunks_exact(2)
                            .map(|p| (p[0].clone(), p[1].clone()))
                            .collect(),
                        nx: id == C::Msetnx,
                    })
                }
            }
            C::Mget => Ok(DataCmd::Mget(rest())),
            C::Strlen => Ok(DataCmd::Strlen(key())),
            C::Getrange | C::Substr => int(&args[2])
                .and_then(|start| Ok((start, int(&args[3])?)))
                .map(|(start, end)| DataCmd::Getrange(key(), start, end)),
            C::Append => Ok(DataCmd::Append(key(), args[2].clone())),
            C::Setrange => strings::parse_setrange_offset(&args[2])
                .map(|o| DataCmd::Setrange(key(), o, args[3].clone()))
                .map_err(string_error),
            C::Incr => Ok(DataCmd::IncrBy(key(), 1)),
            C::Decr => Ok(DataCmd::IncrBy(key(), -1)),
            C::Incrby => int(&args[2]).map(|d| DataCmd::IncrBy(key(), d)),
            C::Decrby => int(&args[2]).map(|d| match d.checked_neg() {
                Some(n) => DataCmd::IncrBy(key(), n),
                None => DataCmd::DecrByMin(key()),
            }),
            C::Incrbyfloat => Ok(DataCmd::IncrByFloat(key(), args[2].clone())),
            // The offset's bound (the longest value) is checked when the command runs.
            C::Getbit => strings::parse_bit_offset(&args[2], u64::MAX)
                .map(|o| DataCmd::Getbit(key(), o))
                .map_err(string_error),
            C::Setbit => strings::parse_bit_offset(&args[2], u64::MAX)
                .and_then(|o| Ok((o, strings::parse_bit_value(&args[3])?)))
                .map(|(o, bit)| DataCmd::Setbit(key(), o, bit))
                .map_err(string_error),
            C::Bitcount => Ok(DataCmd::Bitcount(key(), args[2..].to_vec())),
            C::Lcs => strings::parse_lcs_options(&args[3..])
                .map(|o| DataCmd::Lcs(key(), args[2].clone(), o))
                .map_err(string_error),
            C::Del | C::Unlink => Ok(DataCmd::Del(rest())),
            C::Exists | C::Touch => Ok(DataCmd::Exists(rest())),
            C::Type => Ok(DataCmd::Type(key())),
            C::Expire | C::Pexpire | C::Expireat | C::Pexpireat => parse_expire(id, args),
            C::Ttl => Ok(DataCmd::Ttl(key(), TtlForm::Remaining(TimeUnit::Seconds))),
            C::Pttl => Ok(DataCmd::Ttl(key(), TtlForm::Remaining(TimeUnit::Millis))),
            C::Expiretime => Ok(DataCmd::Ttl(key(), TtlForm::Absolute(TimeUnit::Seconds))),
            C::Pexpiretime => Ok(DataCmd::Ttl(key(), TtlForm::Absolute(TimeUnit::Millis))),
            C::Persist => Ok(DataCmd::Persist(key())),
            C::Rename | C::Renamenx => Ok(DataCmd::Rename {
                src: key(),
                dst: args[2].clone(),
                nx: id == C::Renamenx,
            }),
            C::Copy => parse_copy(args),
            C::Move => int(&args[2]).map(|d| DataCmd::Move(key(), d)),
            C::Select => int(&args[1]).map(DataCmd::Select),
            C::Ping => {
                if args.len() > 2 {
                    Err(Reply::error(
                        "ERR wrong number of arguments for 'ping' command",
                    ))
                } else {
                    Ok(DataCmd::Ping(args.get(1).cloned()))
                }
            }
            C::Echo => Ok(DataCmd::Echo(key())),
            C::Config | C::Info | C::Time => Ok(DataCmd::Keyless(id, args.to_vec())),
            _ => return None,
        };
        Some(parsed)
    }

    /// The keys the command reads or writes in the database it runs in (`MOVE` and `COPY ...
    /// DB` also touch the key in another database: [`DataCmd::other_db_key`]).
    pub fn keys(&self) -> Vec<&Bytes> {
        match self {
            DataCmd::Get(k)
            | DataCmd::Setnx(k, _)
            | DataCmd::Getdel(k)
            | DataCmd::Getex(k, _)
            | DataCmd::Strlen(k)
            | DataCmd::Getrange(k, _, _)
            | DataCmd::Append(k, _)
            | DataCmd::Setrange(k, _, _)
            | DataCmd::IncrBy(k, _)
            | DataCmd::DecrByMin(k)
            | DataCmd::IncrByFloat(k, _)
            | DataCmd::Getbit(k, _)
            | DataCmd::Setbit(k, _, _)
            | DataCmd::Bitcount(k, _)
            | DataCmd::Type(k)
            | DataCmd::Ttl(k, _)
            | DataCmd::Persist(k)
            | DataCmd::Move(k, _) => vec![k],
            DataCmd::Set { key, .. } | DataCmd::Expire { key, .. } => vec![key],
            DataCmd::Lcs(a, b, _) => vec![a, b],
            DataCmd::Rename { src, dst, .. } => vec![src, dst],
            DataCmd::Copy { src, dst, db, .. } => {
                if db.is_some() {
                    vec![src]
                } else {
                    vec![src, dst]
                }
            }
            DataCmd::Del(ks) | DataCmd::Exists(ks) | DataCmd::Mget(ks) => ks.iter().collect(),
            DataCmd::Mset { pairs, .. } => pairs.iter().map(|(k, _)| k).collect(),
            DataCmd::Select(_) | DataCmd::Ping(_) | DataCmd::Echo(_) | DataCmd::Keyless(..) => {
                Vec::new()
            }
        }
    }

    /// How many keys [`DataCmd::keys`] lists, without listing the keys of the commonest
    /// commands.
    pub fn key_count(&self) -> usize {
        match self {
            DataCmd::Get(_) | DataCmd::Set { .. } => 1,
            DataCmd::Del(ks) | DataCmd::Exists(ks) | DataCmd::Mget(ks) => ks.len(),
            DataCmd::Mset { pairs, .. } => pairs.len(),
            _ => self.keys().len(),
        }
    }

    /// A key the command touches in another database, with that database's index as given.
    pub fn other_db_key(&self) -> Option<(&Bytes, i64)> {
        match self {
            DataCmd::Move(k, db) => Some((k, *db)),
            DataCmd::Copy {
                dst, db: Some(db), ..
            } => Some((dst, *db)),
            _ => None,
        }
    }

    /// Whether the command only reads (a unit of such commands takes no lock).
    pub fn read_only(&self) -> bool {
        matches!(
            self,
            DataCmd::Get(_)
                | DataCmd::Mget(_)
                | DataCmd::Strlen(_)
                | DataCmd::Getrange(..)
                | DataCmd::Getbit(..)
                | DataCmd::Bitcount(..)
                | DataCmd::Lcs(..)
                | DataCmd::Exists(_)
                | DataCmd::Type(_)
                | DataCmd::Ttl(..)
                | DataCmd::Select(_)
                | DataCmd::Ping(_)
                | DataCmd::Echo(_)
                | DataCmd::Keyless(..)
        )
    }

    /// Whether the command writes without reading the keys it writes (`SET` without options,
    /// `MSET`): such commands lock their keys shared, so concurrent blind writes still meet in
    /// the engine's group commit; every other write reads first and locks exclusively.
    pub fn blind_write(&self) -> bool {
        matches!(
            self,
            DataCmd::Set {
                condition: SetCondition::Always,
                get: false,
                expiry: ExpiryArg::Unchanged | ExpiryArg::In(..) | ExpiryArg::At(..),
                ..
            } | DataCmd::Mset { nx: false, .. }
        )
    }
}

fn parse_set(args: &[Bytes]) -> Result<DataCmd, Reply> {
    let (condition, get, expiry) = parse_expiry_options(&args[3..], true)?;
    Ok(DataCmd::Set {
        key: args[1].clone(),
        value: args[2].clone(),
        condition,
        get,
        expiry,
        name: "set",
    })
}

/// `SET`'s options (`set`: NX, XX, GET and KEEPTTL allowed) or `GETEX`'s (PERSIST allowed),
/// with Redis's rules: the expiry options exclude one another (repeating the same one is
/// allowed, the last value wins), NX and XX exclude each other.
fn parse_expiry_options(
    opts: &[Bytes],
    set: bool,
) -> Result<(SetCondition, bool, ExpiryArg), Reply> {
    let mut condition = SetCondition::Always;
    let mut get = false;
    let mut expiry = ExpiryArg::Unchanged;
    let mut i = 0;
    while i < opts.len() {
        let opt = upper(&opts[i]);
        let next = opts.get(i + 1);
        // An expiry option is allowed when no other kind of expiry option was given.
        let other_than = |kind: &[u8]| match expiry {
            ExpiryArg::Unchanged => false,
            ExpiryArg::Keep => kind != b"KEEPTTL",
            ExpiryArg::Persist => kind != b"PERSIST",
            ExpiryArg::In(_, TimeUnit::Seconds) => kind != b"EX",
            ExpiryArg::In(_, TimeUnit::Millis) => kind != b"PX",
            ExpiryArg::At(_, TimeUnit::Seconds) => kind != b"EXAT",
            ExpiryArg::At(_, TimeUnit::Millis) => kind != b"PXAT",
        };
        match opt.as_slice() {
            b"NX" if set && condition != SetCondition::IfPresent => {
                condition = SetCondition::IfAbsent;
            }
            b"XX" if set && condition != SetCondition::IfAbsent => {
                condition = SetCondition::IfPresent;
            }
            b"GET" if set => get = true,
            b"KEEPTTL" if set && !other_than(b"KEEPTTL") => expiry = ExpiryArg::Keep,
            b"PERSIST" if !set && !other_than(b"PERSIST") => expiry = ExpiryArg::Persist,
            kind @ (b"EX" | b"PX" | b"EXAT" | b"PXAT") if !other_than(kind) && next.is_some() => {
                let n = int(next.expect("checked"))?;
                expiry = match kind {
                    b"EX" => ExpiryArg::In(n, TimeUnit::Seconds),
                    b"PX" => ExpiryArg::In(n, TimeUnit::Millis),
                    b"EXAT" => ExpiryArg::At(n, TimeUnit::Seconds),
                    _ => ExpiryArg::At(n, TimeUnit::Millis),
                };
                i += 1;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    Ok((condition, get, expiry))
}

fn parse_expire(id: CommandId, args: &[Bytes]) -> Result<DataCmd, Reply> {
    let (unit, absolute, name) = match id {
        CommandId::Expire => (TimeUnit::Seconds, false, "expire"),
        CommandId::Pexpire => (TimeUnit::Millis, false, "pexpire"),
        CommandId::Expireat => (TimeUnit::Seconds, true, "expireat"),
        _ => (TimeUnit::Millis, true, "pexpireat"),
    };
    let mut flags = ExpireFlags::default();
    for opt in &args[3..] {
        match upper(opt).as_slice() {
            b"NX" => flags.nx = true,
            b"XX" => flags.xx = true,
            b"GT" => flags.gt = true,
            b"LT" => flags.lt = true,
            _ => {
                return Err(Reply::error(format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(opt)
                )));
            }
        }
    }
    if flags.nx && (flags.xx || flags.gt || flags.lt) {
        return Err(Reply::error(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if flags.gt && flags.lt {
        return Err(Reply::error(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(DataCmd::Expire {
        key: args[1].clone(),
        when: int(&args[2])?,
        unit,
        absolute,
        flags,
        name,
    })
}

fn parse_copy(args: &[Bytes]) -> Result<DataCmd, Reply> {
    let mut db = None;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        match upper(&args[i]).as_slice() {
            b"REPLACE" => replace = true,
            b"DB" if i + 1 < args.len() => {
                db =
                    Some(int(&args[i + 1]).map_err(|_| {
                        Reply::error("ERR value is not an integer or out of range")
                    })?);
                i += 1;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    Ok(DataCmd::Copy {
        src: args[1].clone(),
        dst: args[2].clone(),
        db,
        replace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::COMMANDS;

    #[test]
    fn the_data_commands_are_those_parse_parses() {
        for spec in COMMANDS {
            let n = spec.arity.unsigned_abs() as usize;
            let mut args = vec![Bytes::from_static(spec.name.as_bytes())];
            args.resize(n, Bytes::from_static(b"1"));
            assert_eq!(
                DataCmd::parse(spec.id, &args).is_some(),
                DataCmd::is_data_command(spec.id),
                "{}",
                spec.name
            );
        }
    }

    /// `key_count` agrees with `keys` for every data command, at its least arity and with
    /// more arguments.
    #[test]
    fn key_count_counts_the_keys_listed() {
        let mut checked = 0;
        for spec in COMMANDS {
            let least = spec.arity.unsigned_abs() as usize;
            for extra in [0, 1, 2, 4] {
                let mut args = vec![Bytes::from_static(spec.name.as_bytes())];
                args.resize(least + extra, Bytes::from_static(b"1"));
                if let Some(Ok(cmd)) = DataCmd::parse(spec.id, &args) {
                    assert_eq!(cmd.key_count(), cmd.keys().len(), "{} {args:?}", spec.name);
                    checked += 1;
                }
            }
        }
        assert!(checked > 40, "{checked}");
    }
}
