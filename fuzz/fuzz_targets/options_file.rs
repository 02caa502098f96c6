//! Fuzz target `options_file`: see `gleaner::fuzzing::options_file` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner::fuzzing::options_file(data));
