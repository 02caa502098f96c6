//! `dump`: one file of the database in readable form.

use std::io::Write;
use std::path::Path;

use gleaner::tools::dump_file;

use super::{Context, Status};
use crate::args::DumpArgs;
use crate::error::{CliError, CliResult, output, stop_quietly_on_broken_pipe};

/// `gleaner dump DIR FILE`. FILE must be a plain name inside DIR: dumping is about the
/// database's files, and a path would make it easy to dump a file of another database by
/// mistake.
pub fn run(ctx: &Context, args: &DumpArgs, out: &mut dyn Write) -> CliResult<Status> {
    let name = Path::new(&args.file);
    if name.components().count() != 1 || name.file_name().is_none() {
        return Err(CliError::Invalid(format!(
            "`{}` is not a file name; give the name of a file inside {}, e.g. 000012.sst",
            args.file,
            args.dir.display()
        )));
    }
    let path = args.dir.join(name);
    stop_quietly_on_broken_pipe((|| {
        dump_file(&path, out, ctx.codec.is_hex())?;
        output(out.flush())
    })())?;
    Ok(Status::Success)
}
