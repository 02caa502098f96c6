//! `put` and `delete`: one synced write each, so the change is durable when the command returns.

use gleaner::{WriteBatch, WriteOptions};

use super::{Context, Status};
use crate::args::{KeyArgs, PutArgs};
use crate::error::CliResult;

/// `gleaner put DIR KEY VALUE`.
pub fn put(ctx: &Context, args: &PutArgs) -> CliResult<Status> {
    let key = ctx.key(&args.key)?;
    let value = ctx.decode("value", &args.value)?;
    let mut batch = WriteBatch::new();
    batch.put(key, value);
    ctx.with_db(&args.dir, true, |db| {
        Ok(db.write(batch, &WriteOptions::sync())?)
    })?;
    Ok(Status::Success)
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
