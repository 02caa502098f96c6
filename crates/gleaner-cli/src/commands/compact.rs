//! `compact`: a manual compaction of the whole key space.

use super::{Context, Status};
use crate::args::DirArgs;
use crate::error::CliResult;

/// `gleaner compact DIR`.
pub fn run(ctx: &Context, args: &DirArgs) -> CliResult<Status> {
    ctx.with_db(&args.dir, false, |db| Ok(db.compact_range(None, None)?))?;
    Ok(Status::Success)
}
