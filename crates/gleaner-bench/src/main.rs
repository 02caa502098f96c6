//! `gleaner-bench`: see `gleaner-bench --help` and docs/benchmarks.md.

use std::process::ExitCode;

fn main() -> ExitCode {
    gleaner_bench::cli::main_with_args(std::env::args())
}
