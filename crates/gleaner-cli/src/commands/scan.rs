//! `scan`: the entries of a key range, forwards or backwards.

use std::io::Write;
use std::ops::Bound;

use gleaner::ReadOptions;

use super::{Context, Status};
use crate::args::ScanArgs;
use crate::error::{CliResult, output, stop_quietly_on_broken_pipe};

/// `gleaner scan DIR [--from KEY] [--to KEY] [--limit N] [--reverse] [--keys-only]`: one
/// `KEY<TAB>VALUE` (or `KEY`) line per entry of `[from, to)`.
pub fn run(ctx: &Context, args: &ScanArgs, out: &mut dyn Write) -> CliResult<Status> {
    let from = args.from.as_deref().map(|k| ctx.key(k)).transpose()?;
    let to = args.to.as_deref().map(|k| ctx.key(k)).transpose()?;
    let limit = args.limit.unwrap_or(usize::MAX);
    ctx.with_read_only_db(&args.dir, |db| {
        let range = (
            from.as_deref().map_or(Bound::Unbounded, Bound::Included),
            to.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
        );
        // A scan reads each block once; keep it from evicting what the cache holds.
        let opts = ReadOptions {
            fill_cache: false,
            ..ReadOptions::default()
        };
        let iter = db.range(range, &opts)?;
        let entries: Box<dyn Iterator<Item = _>> = if args.reverse {
            Box::new(iter.rev())
        } else {
            Box::new(iter)
        };
        stop_quietly_on_broken_pipe((|| {
            for entry in entries.take(limit) {
                let (key, value) = entry?;
                output(out.write_all(&ctx.codec.encode(&key)))?;
                if !args.keys_only {
                    output(out.write_all(b"\t"))?;
                    output(out.write_all(&ctx.codec.encode(&value)))?;
                }
                output(out.write_all(b"\n"))?;
            }
            output(out.flush())
        })())
    })?;
    Ok(Status::Success)
}
