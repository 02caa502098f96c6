//! `get`: one value, or exit status 1.

use std::io::Write;

use super::{Context, Status};
use crate::args::KeyArgs;
use crate::error::{CliResult, output, stop_quietly_on_broken_pipe};

/// `gleaner get DIR KEY`: prints the value and a newline. Absence is reported by the caller
/// (`not found` on stderr, exit status 1).
pub fn run(ctx: &Context, args: &KeyArgs, out: &mut dyn Write) -> CliResult<Status> {
    let key = ctx.key(&args.key)?;
    let value = ctx.with_read_only_db(&args.dir, |db| Ok(db.get(&key)?))?;
    let Some(value) = value else {
        return Ok(Status::NotFound);
    };
    stop_quietly_on_broken_pipe(output((|| {
        out.write_all(&ctx.codec.encode(&value))?;
        out.write_all(b"\n")?;
        out.flush()
    })()))?;
    Ok(Status::Success)
}
