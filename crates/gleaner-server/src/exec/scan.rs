//! `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`: a walk over the keys in key order.
//!
//! Cursor 0 starts at the first key. Each call examines at most COUNT keys (default 10, capped
//! at [`MAX_SCAN_COUNT`]) and stops early once the keys it returns reach [`SCAN_REPLY_BYTES`];
//! MATCH filters the examined keys, so a call may return none while the walk goes on. When keys
//! remain, the next key to examine is registered under a new numeric cursor (see
//! [`crate::cursors`]); when none remain the cursor returned is 0.
//!
//! Guarantees: a key present for the whole walk is returned exactly once (the walk moves
//! forward in key order, so unlike Redis's SCAN it never returns a key twice); a key written or
//! deleted during the walk may or may not be returned. A stale cursor (evicted from the
//! bounded table, or from before a restart) gets `-ERR invalid cursor ...`: start again from 0.

use bytes::Bytes;
use gleaner::ReadOptions;

use super::engine_error;
use super::parse::{not_an_integer, syntax_error};
use crate::cursors::MAX_CURSORS;
use crate::glob::Glob;
use crate::resp::Reply;
use crate::resp::parser::parse_strict_i64;
use crate::session::Session;
use crate::shared::Shared;

/// Largest COUNT honoured (larger ones are capped: COUNT is a hint in Redis too).
pub const MAX_SCAN_COUNT: usize = 100_000;
/// A call stops once the keys it returns reach this many bytes: 1 MiB.
pub const SCAN_REPLY_BYTES: usize = 1 << 20;
/// Default COUNT, as in Redis.
const DEFAULT_COUNT: usize = 10;

/// Runs SCAN.
pub fn scan(shared: &Shared, session: &Session, args: &[Bytes]) -> Reply {
    let cursor = match std::str::from_utf8(&args[1])
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(c) => c,
        None => return Reply::error("ERR invalid cursor"),
    };
    let mut count = DEFAULT_COUNT;
    let mut glob: Option<Glob> = None;
    let mut strings_only = true;
    let mut i = 2;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else {
            return syntax_error();
        };
        match args[i].to_ascii_uppercase().as_slice() {
            b"COUNT" => match parse_strict_i64(value) {
                Some(n) if n >= 1 => count = (n as u64).min(MAX_SCAN_COUNT as u64) as usize,
                Some(_) => return syntax_error(),
                None => return not_an_integer(),
            },
            b"MATCH" => {
                let g = Glob::new(value);
                glob = (!g.matches_everything()).then_some(g);
            }
            // Every key holds a string.
            b"TYPE" => strings_only = value.eq_ignore_ascii_case(b"string"),
            _ => return syntax_error(),
        }
        i += 2;
    }
    let start = if cursor == 0 {
        None
    } else {
        match shared.cursors.resume_key(cursor) {
            Some(k) => Some(k),
            None => {
                return Reply::error(format!(
                    "ERR invalid cursor {cursor}: unknown or expired (the server remembers the \
                     last {MAX_CURSORS} cursors, and none from before a restart); start the \
                     scan again from 0"
                ));
            }
        }
    };
    let ks = &shared.keyspace;
    let db = session.db;
    let walk = || -> gleaner::Result<(Vec<Reply>, Option<Vec<u8>>)> {
        let (mut keys, mut bytes, mut examined) = (Vec::new(), 0usize, 0usize);
        // The database's ranges from the resume key on (a cursor of another database
        // resumes at the first of this one's ranges after its key).
        for (range_start, range_end) in ks.ranges(db) {
            let lower = match &start {
                Some(s) if s.as_slice() >= range_end.as_slice() => continue,
                Some(s) if s.as_slice() > range_start.as_slice() => s.clone(),
                _ => range_start,
            };
            let opts = ReadOptions {
                // Keys only: separated values are never read.
                lazy_values: true,
                lower_bound: Some(lower),
                upper_bound: Some(range_end),
                ..ReadOptions::default()
            };
            let mut it = shared.db.iter(&opts)?;
            it.seek_to_first()?;
            while it.valid() {
                if examined >= count || bytes >= SCAN_REPLY_BYTES {
                    return Ok((keys, Some(it.key().to_vec())));
                }
                examined += 1;
                let key = ks.client_key(db, it.key());
                if strings_only && glob.as_ref().is_none_or(|g| g.matches(key)) {
                    bytes += key.len();
                    keys.push(Reply::Bulk(Bytes::copy_from_slice(key)));
                }
                it.next()?;
            }
        }
        Ok((keys, None))
    };
    match walk() {
        Ok((keys, next)) => {
            let next = next.map_or(0, |k| shared.cursors.register(k));
            Reply::Array(vec![Reply::text(next.to_string()), Reply::Array(keys)])
        }
        Err(e) => engine_error(shared, &e),
    }
}
