//! The string commands run in a unit: `GET SET SETNX SETEX PSETEX GETSET GETDEL GETEX MSET
//! MSETNX MGET STRLEN GETRANGE SUBSTR APPEND SETRANGE INCR DECR INCRBY DECRBY INCRBYFLOAT
//! GETBIT SETBIT BITCOUNT LCS`. The value arithmetic is [`crate::strings`]'s; this module reads,
//! decides and writes, with Redis's replies.
//!
//! Commands that change a value in place (`APPEND`, `SETRANGE`, `SETBIT`, the increments)
//! keep the key's expiry, as in Redis; `SET` and `GETSET` remove it unless `KEEPTTL`.

use bytes::Bytes;

use super::parse::{DataCmd, ExpiryArg, SetCondition, TimeUnit, string_error};
use super::unit::{Failure, Unit};
use crate::resp::Reply;
use crate::strings;

/// The absolute expiry `arg` asks for, for command `name` at the unit's time: `Ok(None)` for
/// no expiry option, `Err` for Redis's `invalid expire time` (not positive, or overflowing).
pub fn resolve_expiry(arg: ExpiryArg, now: u64, name: &str) -> Result<Option<u64>, Reply> {
    let invalid = || Reply::error(format!("ERR invalid expire time in '{name}' command"));
    let (n, unit, relative) = match arg {
        ExpiryArg::In(n, u) => (n, u, true),
        ExpiryArg::At(n, u) => (n, u, false),
        ExpiryArg::Unchanged | ExpiryArg::Keep | ExpiryArg::Persist => return Ok(None),
    };
    if n <= 0 {
        return Err(invalid());
    }
    let ms = match unit {
        TimeUnit::Seconds => n.checked_mul(1000).ok_or_else(invalid)?,
        TimeUnit::Millis => n,
    };
    let at = if relative {
        ms.checked_add(now as i64).ok_or_else(invalid)?
    } else {
        ms
    };
    Ok(Some(at as u64))
}

/// Runs a string command; `None` when `cmd` is not one.
pub fn apply(cmd: &DataCmd, unit: &mut Unit<'_>) -> Option<Result<Reply, Failure>> {
    Some(match cmd {
        DataCmd::Get(key) => get(unit, key),
        DataCmd::Set {
            key,
            value,
            condition,
            get,
            expiry,
            name,
        } => set(unit, key, value, *condition, *get, *expiry, name),
        DataCmd::Setnx(key, value) => (|| {
            if unit.presence(key)?.is_some() {
                return Ok(Reply::Int(0));
            }
            Ok(match unit.put(key, value.clone(), None) {
                Ok(()) => Reply::Int(1),
                Err(r) => r,
            })
        })(),
        DataCmd::Getdel(key) => (|| {
            let old = unit.value(key)?;
            if old.is_some() {
                unit.delete(key);
            }
            unit.reply_value(old)
        })(),
        DataCmd::Getex(key, arg) => getex(unit, key, *arg),
        DataCmd::Mset { pairs, nx } => mset(unit, pairs, *nx),
        DataCmd::Mget(keys) => (|| {
            let mut values = Vec::with_capacity(keys.len());
            for key in keys {
                let v = unit.value(key)?;
                values.push(unit.reply_value(v)?);
            }
            Ok(Reply::Array(values))
        })(),
        DataCmd::Strlen(key) => unit
            .value(key)
            .map(|v| Reply::Int(v.map_or(0, |v| v.len() as i64))),
        DataCmd::Getrange(key, start, end) => (|| {
            let value = unit.value(key)?.unwrap_or_default();
            let range = getrange(value.len(), *start, *end);
            unit.reply_value(Some(value.slice(range)))
        })(),
        DataCmd::Append(key, tail) => {
            let max = unit.shared.config.limits.max_bulk_len as u64;
            modify(unit, key, |old| {
                let new = strings::append(old, tail, max)?;
                let len = new.len() as i64;
                Ok((Some(new), Reply::Int(len)))
            })
        }
        DataCmd::Setrange(key, offset, value) => {
            let max = unit.shared.config.limits.max_bulk_len as u64;
            modify(unit, key, |old| {
                let r = strings::setrange(old, *offset, value, max)?;
                let len = r.reply() as i64;
                Ok(match r {
                    strings::SetRange::Write(new) => (Some(new), Reply::Int(len)),
                    strings::SetRange::Unchanged { .. } => (None, Reply::Int(len)),
                })
            })
        }
        DataCmd::IncrBy(key, delta) => modify(unit, key, |old| {
            let (n, new) = strings::incr_by(old, *delta)?;
            Ok((Some(new), Reply::Int(n)))
        }),
        DataCmd::DecrByMin(_) => Ok(Reply::error("ERR decrement would overflow")),
        DataCmd::IncrByFloat(key, incr) => modify(unit, key, |old| {
            let new = strings::incr_by_float(old, incr)?;
            let reply = Reply::Bulk(Bytes::from(new.clone()));
            Ok((Some(new), reply))
        }),
        DataCmd::Getbit(key, offset) => {
            if let Err(r) = bit_offset_fits(unit, *offset) {
                return Some(Ok(r));
            }
            unit.value(key).map(|v| {
                Reply::Int(i64::from(strings::getbit(
                    v.as_deref().unwrap_or(&[]),
                    *offset,
                )))
            })
        }
        DataCmd::Setbit(key, offset, bit) => {
            if let Err(r) = bit_offset_fits(unit, *offset) {
                return Some(Ok(r));
            }
            modify(unit, key, |old| {
                let r = strings::setbit(old, *offset, *bit);
                Ok((r.new_value, Reply::Int(i64::from(r.old_bit))))
            })
        }
        DataCmd::Bitcount(key, args) => unit.value(key).map(|v| match v {
            // Redis answers a missing key before it looks at the arguments.
            None => Reply::Int(0),
            Some(v) => match strings::parse_bitcount_args(args) {
                Ok(range) => Reply::Int(strings::bitcount(&v, range)),
                Err(e) => string_error(e),
            },
        }),
        DataCmd::Lcs(a, b, opts) => lcs(unit, a, b, opts),
        _ => return None,
    })
}

fn get(unit: &mut Unit<'_>, key: &Bytes) -> Result<Reply, Failure> {
    let v = unit.value(key)?;
    unit.reply_value(v)
}

fn set(
    unit: &mut Unit<'_>,
    key: &Bytes,
    value: &Bytes,
    condition: SetCondition,
    get: bool,
    expiry: ExpiryArg,
    name: &str,
) -> Result<Reply, Failure> {
    let at = match resolve_expiry(expiry, unit.now, name) {
        Ok(at) => at,
        Err(r) => return Ok(r),
    };
    let needs_old = get || condition != SetCondition::Always || expiry == ExpiryArg::Keep;
    let old = if needs_old { unit.entry(key)? } else { None };
    let allowed = match condition {
        SetCondition::Always => true,
        SetCondition::IfAbsent => old.is_none(),
        SetCondition::IfPresent => old.is_some(),
    };
    if allowed {
        let at = if expiry == ExpiryArg::Keep {
            old.as_ref().and_then(|e| e.expiry)
        } else {
            at
        };
        if let Err(r) = unit.put(key, value.clone(), at) {
            return Ok(r);
        }
    }
    match (get, allowed) {
        (true, _) => unit.reply_value(old.map(|e| e.value)),
        (false, true) => Ok(Reply::Ok),
        (false, false) => Ok(Reply::Null),
    }
}

fn getex(unit: &mut Unit<'_>, key: &Bytes, arg: ExpiryArg) -> Result<Reply, Failure> {
    let Some(old) = unit.entry(key)? else {
        return Ok(Reply::Null);
    };
    let at = match resolve_expiry(arg, unit.now, "getex") {
        Ok(at) => at,
        Err(r) => return Ok(r),
    };
    let reply = unit.reply_value(Some(old.value.clone()))?;
    match arg {
        ExpiryArg::Unchanged | ExpiryArg::Keep => {}
        ExpiryArg::Persist => {
            if old.expiry.is_some() {
                // The key was just read, so it fits the limit.
                let _ = unit.put(key, old.value, None);
            }
        }
        _ => {
            let _ = unit.put(key, old.value, at);
        }
    }
    Ok(reply)
}

fn mset(unit: &mut Unit<'_>, pairs: &[(Bytes, Bytes)], nx: bool) -> Result<Reply, Failure> {
    if let Some((k, _)) = pairs
        .iter()
        .find(|(k, _)| k.len() > crate::keyspace::MAX_KEY_LEN)
    {
        return Ok(super::unit::key_too_long(k.len()));
    }
    if nx {
        for (k, _) in pairs {
            if unit.presence(k)?.is_some() {
                return Ok(Reply::Int(0));
            }
        }
    }
    for (k, v) in pairs {
        // Checked above: no key is over the limit.
        let _ = unit.put(k, v.clone(), None);
    }
    Ok(if nx { Reply::Int(1) } else { Reply::Ok })
}

/// Reads `key`, computes its new value with `f` (`None`: leave it), and writes it keeping
/// the key's expiry. `f`'s error is the command's error reply.
fn modify(
    unit: &mut Unit<'_>,
    key: &Bytes,
    f: impl FnOnce(Option<&[u8]>) -> Result<(Option<Vec<u8>>, Reply), strings::StringError>,
) -> Result<Reply, Failure> {
    let old = unit.entry(key)?;
    let (new, reply) = match f(old.as_ref().map(|e| e.value.as_ref())) {
        Ok(r) => r,
        Err(e) => return Ok(string_error(e)),
    };
    if let Some(new) = new {
        let expiry = old.and_then(|e| e.expiry);
        if let Err(r) = unit.put(key, Bytes::from(new), expiry) {
            return Ok(r);
        }
    }
    Ok(reply)
}

fn lcs(
    unit: &mut Unit<'_>,
    a: &Bytes,
    b: &Bytes,
    opts: &strings::LcsOptions,
) -> Result<Reply, Failure> {
    let va = unit.value(a)?.unwrap_or_default();
    let vb = unit.value(b)?.unwrap_or_default();
    let limit = unit.shared.config.limits.max_bulk_len as u64;
    let reply = match strings::lcs(&va, &vb, opts, limit) {
        Ok(strings::LcsReply::String(s)) => Reply::Bulk(Bytes::from(s)),
        Ok(strings::LcsReply::Len(n)) => Reply::Int(n as i64),
        Ok(strings::LcsReply::Idx { matches, len }) => {
            let range =
                |(s, e): (u64, u64)| Reply::Array(vec![Reply::Int(s as i64), Reply::Int(e as i64)]);
            let matches = matches
                .into_iter()
                .map(|m| {
                    let mut parts = vec![range(m.a), range(m.b)];
                    parts.extend(m.len.map(|l| Reply::Int(l as i64)));
                    Reply::Array(parts)
                })
                .collect();
            Reply::Map(vec![
                (Reply::text("matches"), Reply::Array(matches)),
                (Reply::text("len"), Reply::Int(len as i64)),
            ])
        }
        Err(e) => string_error(e),
    };
    unit.charge(reply.approximate_len())?;
    Ok(reply)
}

/// Redis refuses a bit offset past the longest value (`offset / 8 >= proto-max-bulk-len`).
fn bit_offset_fits(unit: &Unit<'_>, offset: u64) -> Result<(), Reply> {
    if offset >> 3 >= unit.shared.config.limits.max_bulk_len as u64 {
        return Err(Reply::error(
            "ERR bit offset is not an integer or out of range",
        ));
    }
    Ok(())
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
