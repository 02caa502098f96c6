//! `DEBUG`: the subcommands test suites written for Redis send, answered where they mean
//! something for this server, refused with a clear error otherwise.

use std::time::Duration;

use bytes::Bytes;

use crate::resp::Reply;
use crate::resp::parser::parse_strict_i64;

/// Longest `DEBUG SLEEP`: 60 s (the sleep holds one of the server's blocking threads).
pub const MAX_DEBUG_SLEEP: Duration = Duration::from_secs(60);

/// Runs `DEBUG subcommand ...`.
///
/// - `SET-ACTIVE-EXPIRE 0|1`: `OK`. Expired keys are never returned whatever the setting:
///   reads judge expiry themselves, and compaction drops expired versions in the background,
///   which is what Redis's active expiry does too.
/// - `SLEEP seconds` (decimal): sleeps on this client's connection, at most
///   [`MAX_DEBUG_SLEEP`]; other clients are served meanwhile (in Redis the whole server
///   sleeps).
/// - `LOG message`: `OK` (the message is dropped).
/// - anything else: an error naming the subcommand.
pub fn debug(args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_uppercase();
    match (sub.as_slice(), args.len()) {
        (b"SET-ACTIVE-EXPIRE", 3) => match parse_strict_i64(&args[2]) {
            Some(0 | 1) => Reply::Ok,
            _ => Reply::error("ERR value is out of range"),
        },
        // Test suites log each test's name; nothing here reads a log.
        (b"LOG", _) => Reply::Ok,
        (b"SLEEP", 3) => {
            let secs = std::str::from_utf8(&args[2])
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0);
            match secs {
                Some(s) => {
                    std::thread::sleep(Duration::from_secs_f64(s).min(MAX_DEBUG_SLEEP));
                    Reply::Ok
                }
                None => Reply::error("ERR value is not a valid float"),
            }
        }
        _ => Reply::error(format!(
            "ERR DEBUG {} is not supported by gleaner-server (it answers SET-ACTIVE-EXPIRE and \
             SLEEP)",
            String::from_utf8_lossy(&args[1][..args[1].len().min(64)])
        )),
    }
}
