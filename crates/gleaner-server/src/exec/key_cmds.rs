//! The keyspace commands run in a unit: `DEL UNLINK EXISTS TOUCH TYPE EXPIRE PEXPIRE EXPIREAT
//! PEXPIREAT TTL PTTL EXPIRETIME PEXPIRETIME PERSIST RENAME RENAMENX COPY MOVE`, and `SELECT
//! PING ECHO` inside a transaction.
//!
//! An expiry lives in the engine with the key's version ([`gleaner::WriteBatch::put_with_expiry`]),
//! so changing it (`EXPIRE`, `PERSIST`) rewrites the value with the new expiry: it costs a
//! read and a write of the value, and for a separated value leaves the old copy as garbage for
//! GC. `TTL`, `EXISTS` and `TYPE` read only the key's index entry, never a separated value.

use bytes::Bytes;

use super::parse::{DataCmd, ExpireFlags, TimeUnit, TtlForm};
use super::unit::{Failure, Unit};
use crate::resp::Reply;

/// Runs a keyspace command; `None` when `cmd` is not one.
pub fn apply(cmd: &DataCmd, unit: &mut Unit<'_>) -> Option<Result<Reply, Failure>> {
    Some(match cmd {
        DataCmd::Del(keys) => (|| {
            let mut removed = 0;
            for key in keys {
                if unit.presence(key)?.is_some() {
                    unit.delete(key);
                    removed += 1;
                }
            }
            Ok(Reply::Int(removed))
        })(),
        DataCmd::Exists(keys) => (|| {
            let mut found = 0;
            for key in keys {
                found += i64::from(unit.presence(key)?.is_some());
            }
            Ok(Reply::Int(found))
        })(),
        DataCmd::Type(key) => unit
            .presence(key)
            .map(|p| Reply::simple(if p.is_some() { "string" } else { "none" })),
        DataCmd::Expire {
            key,
            when,
            unit: time_unit,
            absolute,
            flags,
            name,
        } => expire(unit, key, *when, *time_unit, *absolute, *flags, name),
        DataCmd::Ttl(key, form) => unit.presence(key).map(|p| ttl(p, *form, unit.now)),
        DataCmd::Persist(key) => (|| {
            match unit.entry(key)? {
                Some(e) if e.expiry.is_some() => {
                    // Read just now, so the key fits the limit.
                    let _ = unit.put(key, e.value, None);
                    Ok(Reply::Int(1))
                }
                _ => Ok(Reply::Int(0)),
            }
        })(),
        DataCmd::Rename { src, dst, nx } => rename(unit, src, dst, *nx),
        DataCmd::Copy {
            src,
            dst,
            db,
            replace,
        } => copy(unit, src, dst, *db, *replace),
        DataCmd::Move(key, db) => move_key(unit, key, *db),
        DataCmd::Select(index) => Ok(match unit.database(*index) {
            Some(db) => {
                unit.db = db;
                Reply::Ok
            }
            None => Reply::error("ERR DB index is out of range"),
        }),
        DataCmd::Ping(None) => Ok(Reply::simple("PONG")),
        DataCmd::Ping(Some(m)) | DataCmd::Echo(m) => Ok(Reply::Bulk(m.clone())),
        _ => return None,
    })
}

/// `EXPIRE` and its kin, with Redis 7.0's rules: the time is checked for overflow first
/// (an error even when the key is missing), a missing key answers 0, the flags are judged
/// against the current expiry (none counts as infinite), and a time not in the future deletes
/// the key.
fn expire(
    unit: &mut Unit<'_>,
    key: &Bytes,
    when: i64,
    time_unit: TimeUnit,
    absolute: bool,
    flags: ExpireFlags,
    name: &str,
) -> Result<Reply, Failure> {
    let invalid = || Reply::error(format!("ERR invalid expire time in '{name}' command"));
    let ms = match time_unit {
        TimeUnit::Seconds => match when.checked_mul(1000) {
            Some(ms) => ms,
            None => return Ok(invalid()),
        },
        TimeUnit::Millis => when,
    };
    let base = if absolute { 0 } else { unit.now as i64 };
    let Some(at) = ms.checked_add(base) else {
        return Ok(invalid());
    };
    let Some(entry) = unit.entry(key)? else {
        return Ok(Reply::Int(0));
    };
    let current = entry.expiry.map(|t| t as i64);
    let refused = (flags.nx && current.is_some())
        || (flags.xx && current.is_none())
        || (flags.gt && current.is_none_or(|c| at <= c))
        || (flags.lt && current.is_some_and(|c| at >= c));
    if refused {
        return Ok(Reply::Int(0));
    }
    if at <= unit.now as i64 {
        unit.delete(key);
    } else {
        // Read just now, so the key fits the limit.
        let _ = unit.put(key, entry.value, Some(at as u64));
    }
    Ok(Reply::Int(1))
}

/// `TTL`'s reply for a key's presence and expiry at `now`: -2 absent, -1 no expiry, else the
/// time left (seconds rounded to nearest, as Redis) or the expiry time.
fn ttl(presence: Option<Option<u64>>, form: TtlForm, now: u64) -> Reply {
    let Some(expiry) = presence else {
        return Reply::Int(-2);
    };
    let Some(at) = expiry else {
        return Reply::Int(-1);
    };
    Reply::Int(match form {
        TtlForm::Remaining(u) => {
            let left = at.saturating_sub(now) as i64;
            match u {
                TimeUnit::Millis => left,
                TimeUnit::Seconds => (left + 500) / 1000,
            }
        }
        TtlForm::Absolute(TimeUnit::Millis) => at as i64,
        // Rounded to the nearest second, as Redis does.
        TtlForm::Absolute(TimeUnit::Seconds) => ((at + 500) / 1000) as i64,
    })
}

fn rename(unit: &mut Unit<'_>, src: &Bytes, dst: &Bytes, nx: bool) -> Result<Reply, Failure> {
    let Some(entry) = unit.entry(src)? else {
        return Ok(Reply::error("ERR no such key"));
    };
    if src == dst {
        return Ok(if nx { Reply::Int(0) } else { Reply::Ok });
    }
    if nx && unit.presence(dst)?.is_some() {
        return Ok(Reply::Int(0));
    }
    if let Err(r) = unit.put(dst, entry.value, entry.expiry) {
        return Ok(r);
    }
    unit.delete(src);
    Ok(if nx { Reply::Int(1) } else { Reply::Ok })
}

fn copy(
    unit: &mut Unit<'_>,
    src: &Bytes,
    dst: &Bytes,
    db: Option<i64>,
    replace: bool,
) -> Result<Reply, Failure> {
    let target = match db {
        None => unit.db,
        Some(i) => match unit.database(i) {
            Some(d) => d,
            None => return Ok(Reply::error("ERR DB index is out of range")),
        },
    };
    if target == unit.db && src == dst {
        return Ok(Reply::error(
            "ERR source and destination objects are the same",
        ));
    }
    let Some(entry) = unit.entry(src)? else {
        return Ok(Reply::Int(0));
    };
    if !replace && unit.presence_in(target, dst)?.is_some() {
        return Ok(Reply::Int(0));
    }
    Ok(match unit.put_in(target, dst, entry.value, entry.expiry) {
        Ok(()) => Reply::Int(1),
        Err(r) => r,
    })
}

fn move_key(unit: &mut Unit<'_>, key: &Bytes, db: i64) -> Result<Reply, Failure> {
    let Some(target) = unit.database(db) else {
        return Ok(Reply::error("ERR DB index is out of range"));
    };
    if target == unit.db {
        return Ok(Reply::error(
            "ERR source and destination objects are the same",
        ));
    }
    let Some(entry) = unit.entry(key)? else {
        return Ok(Reply::Int(0));
    };
    if unit.presence_in(target, key)?.is_some() {
        return Ok(Reply::Int(0));
    }
    // Read just now, so the key fits the limit.
    let _ = unit.put_in(target, key, entry.value, entry.expiry);
    unit.delete(key);
    Ok(Reply::Int(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_replies_follow_redis() {
        let now = 10_000;
        let r = |p, f| ttl(p, f, now);
        let secs = TtlForm::Remaining(TimeUnit::Seconds);
        assert_eq!(r(None, secs), Reply::Int(-2));
        assert_eq!(r(Some(None), secs), Reply::Int(-1));
        // Rounded to the nearest second, as Redis does.
        assert_eq!(r(Some(Some(now + 1_499)), secs), Reply::Int(1));
        assert_eq!(r(Some(Some(now + 1_500)), secs), Reply::Int(2));
        assert_eq!(
            r(
                Some(Some(now + 1_500)),
                TtlForm::Remaining(TimeUnit::Millis)
            ),
            Reply::Int(1_500)
        );
        assert_eq!(
            r(Some(Some(12_345_678)), TtlForm::Absolute(TimeUnit::Seconds)),
            Reply::Int(12_346)
        );
    }
}
