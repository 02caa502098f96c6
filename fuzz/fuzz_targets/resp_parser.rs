//! Fuzz target `resp_parser`: see `gleaner_server::fuzzing::resp_parser` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner_server::fuzzing::resp_parser(data));
