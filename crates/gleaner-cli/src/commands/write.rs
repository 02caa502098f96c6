//! `put`, `delete` and `delete-range`: one synced write each, so the change is durable when the
//! command returns.

use gleaner::expiry::expiry_after;
use gleaner::{WriteBatch, WriteOptions};

use super::{Context, Status};
use crate::args::{KeyArgs, PutArgs, RangeArgs};
use crate::error::{CliError, CliResult};

/// `gleaner put DIR KEY VALUE [--ttl-ms N]`. A negative TTL is refused before the database is
/// opened; one that overflows the latest expiry is refused by the database, which writes
/// nothing.
pub fn put(ctx: &Context, args: &PutArgs) -> CliResult<Status> {
    let key = ctx.key(&args.key)?;
    let value = ctx.decode("value", &args.value)?;
    let ttl = args.ttl_ms.map(ttl_ms).transpose()?;
    ctx.with_db(&args.dir, true, |db| {
        let mut batch = WriteBatch::new();
        match ttl {
            Some(ttl) => batch.put_with_expiry(key, value, expiry_after(db.time_ms(), ttl)?),
            None => batch.put(key, value),
        }
        Ok(db.write(batch, &WriteOptions::sync())?)
    })?;
    Ok(Status::Success)
}

/// A TTL given on the command line, in milliseconds.
pub(crate) fn ttl_ms(ttl: i64) -> CliResult<u64> {
    u64::try_from(ttl).map_err(|_| {
        CliError::Invalid(format!(
            "--ttl-ms {ttl}: a time to live is a number of milliseconds, at least 0"
        ))
    })
}

/// `gleaner delete DIR KEY`. Deleting a key that is not there is not an error (the database
/// does not distinguish), and does not create a database that does not exist.
pub fn delete(ctx: &Context, args: &KeyArgs) -> CliResult<Status> {
    let key = ctx.key(&args.key)?;
    let mut batch = WriteBatch::new();
    batch.delete(key);
    ctx.with_db(&args.dir, false, |db| {
        Ok(db.write(batch, &WriteOptions::sync())?)
    })?;
    Ok(Status::Success)
}

/// `gleaner delete-range DIR START END`: one range tombstone. Like `delete`, it does not create
/// a database that does not exist; a START that does not sort before END is refused before the
/// database is opened.
pub fn delete_range(ctx: &Context, args: &RangeArgs) -> CliResult<Status> {
    let start = ctx.decode("start key", &args.start)?;
    let end = ctx.decode("end key", &args.end)?;
    if start >= end {
        return Err(CliError::Invalid(
            "the start key must sort before the end key (the range is [START, END))".to_string(),
        ));
    }
    let mut batch = WriteBatch::new();
    batch.delete_range(start, end);
    ctx.with_db(&args.dir, false, |db| {
        Ok(db.write(batch, &WriteOptions::sync())?)
    })?;
    Ok(Status::Success)
}
