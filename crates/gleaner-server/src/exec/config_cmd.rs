//! `CONFIG GET`, `CONFIG SET` and `CONFIG RESETSTAT`.
//!
//! The command line configures the server; `CONFIG GET` reports those settings under Redis's
//! parameter names (what `redis-benchmark` and client libraries ask for). `CONFIG SET`
//! changes nothing at run time: a known parameter is refused with Redis's wording for an
//! immutable one (after its value is validated as Redis validates it), an unknown one with
//! Redis's unknown-option error. `CONFIG RESETSTAT` zeroes the `INFO` counters.

use bytes::Bytes;

use crate::glob::Glob;
use crate::resp::Reply;
use crate::shared::Shared;

/// The settings `CONFIG GET` reports, by Redis parameter name.
fn settings(shared: &Shared) -> Vec<(&'static str, String)> {
    let c = &shared.config;
    vec![
        ("bind", shared.local_addr.ip().to_string()),
        ("port", shared.local_addr.port().to_string()),
        ("dir", c.dir.display().to_string()),
        ("maxclients", c.max_clients.to_string()),
        (
            "timeout",
            c.idle_timeout.map_or(0, |d| d.as_secs()).to_string(),
        ),
        ("proto-max-bulk-len", c.limits.max_bulk_len.to_string()),
        ("client-query-buffer-limit", c.max_pending_bytes.to_string()),
        (
            "protected-mode",
            if c.protected { "yes" } else { "no" }.to_string(),
        ),
        ("databases", shared.keyspace.databases().to_string()),
        ("save", String::new()),
        // The WAL is Gleaner's append-only log; `appendfsync` is what --sync maps to.
        ("appendonly", "yes".to_string()),
        ("appendfsync", c.sync.name().to_string()),
        // No memory limit: the engine's budget is disk space (option max_disk_bytes).
        ("maxmemory", "0".to_string()),
    ]
}

/// Runs `CONFIG subcommand ...`.
pub fn config(shared: &Shared, args: &[Bytes]) -> Reply {
    match args[1].to_ascii_uppercase().as_slice() {
        b"GET" => get(shared, args),
        b"SET" => set(shared, args),
        b"RESETSTAT" if args.len() == 2 => {
            shared.stats.reset();
            Reply::Ok
        }
        _ => Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(&args[1][..args[1].len().min(32)])
        )),
    }
}

fn get(shared: &Shared, args: &[Bytes]) -> Reply {
    if args.len() < 3 {
        return Reply::error("ERR wrong number of arguments for 'config|get' command");
    }
    let patterns: Vec<Glob> = args[2..]
        .iter()
        .map(|p| Glob::new(&p.to_ascii_lowercase()))
        .collect();
    let pairs: Vec<(Reply, Reply)> = settings(shared)
        .into_iter()
        .filter(|(name, _)| patterns.iter().any(|g| g.matches(name.as_bytes())))
        .map(|(name, value)| (Reply::text(name), Reply::text(value)))
        .collect();
    Reply::Map(pairs)
}

fn set(shared: &Shared, args: &[Bytes]) -> Reply {
    if args.len() < 4 || !args.len().is_multiple_of(2) {
        return Reply::error("ERR wrong number of arguments for 'config|set' command");
    }
    let known = settings(shared);
    // Every parameter is immutable, so the first one decides the reply.
    let (name, value) = (
        String::from_utf8_lossy(&args[2]).to_ascii_lowercase(),
        &args[3],
    );
    if !known.iter().any(|(n, _)| *n == name) {
        return Reply::error(format!(
            "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
        ));
    }
    let why = if name == "maxmemory" && memory_value(value).is_none() {
        "argument must be a memory value"
    } else {
        "can't set immutable config: gleaner-server is configured by its command line"
    };
    Reply::error(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

/// A Redis memory value (`100`, `10mb`, `1gb`, ...), as `CONFIG SET maxmemory` validates it.
fn memory_value(v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?.to_ascii_lowercase();
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &s[digits.len()..];
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::memory_value;

    #[test]
    fn memory_values_parse_as_redis_does() {
        assert_eq!(memory_value(b"100"), Some(100));
        assert_eq!(memory_value(b"10mb"), Some(10 << 20));
        assert_eq!(memory_value(b"1G"), Some(1_000_000_000));
        assert_eq!(memory_value(b"bla"), None);
        assert_eq!(memory_value(b"12xb"), None);
        assert_eq!(memory_value(b""), None);
    }
}
