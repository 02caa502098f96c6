//! The command line and the validated server configuration.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use gleaner::Options;
use gleaner::options::OptionValue;

use crate::auth::Password;
use crate::durability::SyncMode;
use crate::resp::ParserLimits;

/// Engine options whose default the server sets otherwise than the engine, by OPTIONS-file name.
/// A database's saved value and `--option` both win over them (`Options::set_default`).
///
/// `separate_at=write`: a separated value is written once, to a value segment, and the log
/// holds its handle, where at the engine's default (`flush`) the log holds the value and the
/// flush copies it into a value table. A server acknowledges every write as it comes (Redis's
/// AOF writes each value once), and under `redis-benchmark -t set -d 8192 -P 16 -c 32` this
/// took 8 KiB SETs from about 48 k to 57 k a second and the server's CPU per SET from 33 to
/// 26 µs, and halved its peak memory, with GETs unchanged (docs/benchmarks.md, "gleaner-server
/// against Redis: values written once").
pub const SERVER_DEFAULTS: &[(&str, &str)] = &[("separate_at", "write")];

/// Default `--bind`: loopback only, port 6380 (6379 is Redis's).
pub const DEFAULT_BIND: &str = "127.0.0.1:6380";
/// Default `--maxclients`: 10,000, as Redis.
pub const DEFAULT_MAX_CLIENTS: u32 = 10_000;
/// Default `--max-bulk-len` before it is capped at the engine's `max_value_size`: 512 MiB, as
/// Redis's `proto-max-bulk-len`.
pub const DEFAULT_MAX_BULK_LEN: u64 = 512 << 20;
/// Smallest `--max-bulk-len`: 1 KiB.
pub const MIN_MAX_BULK_LEN: u64 = 1 << 10;
/// Default `--max-args`: 1,048,576 arguments per command (`MSET` of 524,287 pairs).
pub const DEFAULT_MAX_ARGS: usize = 1 << 20;
/// Smallest `--max-args`: 16 (every command but MGET/MSET/DEL/EXISTS needs fewer).
pub const MIN_MAX_ARGS: usize = 16;
/// Largest `--max-args`: 2^31 - 1, as Redis's multibulk length.
pub const MAX_MAX_ARGS: usize = i32::MAX as usize;
/// Default `--max-pending-bytes`: 1 GiB, as Redis's `client-query-buffer-limit`.
pub const DEFAULT_MAX_PENDING_BYTES: u64 = 1 << 30;
/// `--max-pending-bytes` must exceed `--max-bulk-len` by this much, so that a command with one
/// value of the largest size and a key of the largest size fits.
pub const PENDING_HEADROOM: u64 = 128 << 10;

/// `--protected-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtectedMode {
    /// Without a password, refuse clients that do not connect over loopback.
    Yes,
    /// Serve every client (only behind a firewall or a proxy you trust).
    No,
}

/// `--disable-thp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DisableThp {
    /// Turn transparent huge pages off for the process at start (Linux), as Redis does.
    Yes,
    /// Leave them as the system sets them.
    No,
}

/// Gleaner over the Redis protocol.
///
/// Serves the database in DIR (created if missing) to Redis clients: RESP2 and RESP3, GET SET
/// DEL EXISTS MGET MSET STRLEN GETRANGE TYPE SCAN, MULTI/EXEC as one atomic write batch, INFO, and
/// GLEANER.* admin commands. See docs/server.md for every command, option, limit and
/// guarantee.
///
/// SIGTERM or SIGINT stop it cleanly: no new connection is accepted, commands being run finish
/// and are answered, then the database is closed. Exit status: 0 after a clean shutdown, 1 when
/// closing the database failed, 2 for a bad command line or when the database cannot be opened
/// or the address bound.
#[derive(Debug, Parser)]
#[command(name = "gleaner-server", version)]
pub struct Args {
    /// The database directory (created when missing).
    pub dir: PathBuf,

    /// Address to listen on. The default is loopback only; see --protected-mode before
    /// binding another address.
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_BIND)]
    pub bind: String,

    /// Set database option NAME to VALUE at open (repeatable), e.g. `--option
    /// memtable_size=64MiB`. Names are those of the OPTIONS file (see `gleaner --help`). The
    /// server's own default: `separate_at=write` (a database's saved setting wins).
    #[arg(long = "option", value_name = "NAME=VALUE")]
    pub options: Vec<String>,

    /// Require clients to AUTH with this password (visible in the process list: prefer
    /// --requirepass-file).
    #[arg(long, value_name = "SECRET", conflicts_with = "requirepass_file")]
    pub requirepass: Option<String>,

    /// Require clients to AUTH with the password in FILE (its first line, without the line
    /// ending).
    #[arg(long, value_name = "FILE")]
    pub requirepass_file: Option<PathBuf>,

    /// Most clients connected at once; one more gets `-ERR max number of clients reached`.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CLIENTS,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub maxclients: u32,

    /// Close a client idle for SECS seconds (no request received, or replies not read); 0
    /// never does.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub timeout: u64,

    /// When a write is acknowledged: `always` after an fsync of its own (shared with concurrent
    /// writers), `batch` after one fsync per pipeline, `no` without fsync (survives a process
    /// crash, not a power loss).
    #[arg(long, value_enum, default_value_t = SyncMode::Batch)]
    pub sync: SyncMode,

    /// Longest bulk string (one key or value) a request may carry, e.g. `64MiB`. Default 512
    /// MiB capped at the engine's `max_value_size` (256 MiB by default); never above it.
    #[arg(long, value_name = "BYTES")]
    pub max_bulk_len: Option<String>,

    /// Most arguments of one command, its name included.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_ARGS)]
    pub max_args: usize,

    /// Most bytes a client may have pending: an incomplete request, the commands queued in a
    /// MULTI, or one reply. Default 1 GiB; at least --max-bulk-len + 128 KiB.
    #[arg(long, value_name = "BYTES")]
    pub max_pending_bytes: Option<String>,

    /// Without a password, refuse clients that do not connect over loopback (as Redis's
    /// protected mode does).
    #[arg(long, value_enum, default_value_t = ProtectedMode::Yes)]
    pub protected_mode: ProtectedMode,

    /// Number of databases (`SELECT 0` to N - 1), 1 to 255. Database 0's keys are stored as
    /// they are; the others' carry a two-byte prefix (see docs/server.md).
    #[arg(long, value_name = "N", default_value_t = crate::keyspace::DEFAULT_DATABASES,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::keyspace::MAX_DATABASES)))]
    pub databases: u32,

    /// Turn transparent huge pages off for the server process at start (Linux; Redis's
    /// `disable-thp`, also on by default). A cache that evicts and refills values all the time
    /// frees and touches memory all the time, and with huge pages each first touch of a freed
    /// range zeroes 2 MiB, not 4 KiB (docs/server.md).
    #[arg(long, value_enum, default_value_t = DisableThp::Yes)]
    pub disable_thp: DisableThp,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The database directory.
    pub dir: PathBuf,
    /// The address to listen on.
    pub bind: SocketAddr,
    /// The engine options (`--option`).
    pub db_options: Options,
    /// The password, when one is required.
    pub password: Option<Password>,
    /// `--maxclients`.
    pub max_clients: u32,
    /// `--timeout`, `None` for never.
    pub idle_timeout: Option<Duration>,
    /// `--sync`.
    pub sync: SyncMode,
    /// The request limits (`--max-bulk-len`, `--max-args`).
    pub limits: ParserLimits,
    /// `--max-bulk-len` was given explicitly (so it may not be capped silently).
    pub max_bulk_len_explicit: bool,
    /// `--max-pending-bytes`.
    pub max_pending_bytes: usize,
    /// `--protected-mode yes` and no password.
    pub protected: bool,
    /// `--databases`.
    pub databases: u32,
    /// `--disable-thp yes`: the `gleaner-server` command turns transparent huge pages off for
    /// its process (an embedded server leaves its host process alone).
    pub disable_thp: bool,
    /// The memory allocator `INFO memory` names (`mem_allocator`): the `gleaner-server` command
    /// links mimalloc and says so; a server embedded in another program has that program's,
    /// `libc` unless it says otherwise.
    pub allocator: &'static str,
}

impl Config {
    /// Validates `args`; the error names the option. Reads `--requirepass-file`.
    pub fn from_args(args: &Args) -> Result<Config, String> {
        let bind = resolve(&args.bind)?;
        let mut db_options = Options::default();
        for (name, value) in SERVER_DEFAULTS {
            db_options
                .set_default(name, value)
                .map_err(|e| e.to_string())?;
        }
        for o in &args.options {
            let (name, value) = o
                .split_once('=')
                .ok_or_else(|| format!("--option `{o}`: expected NAME=VALUE"))?;
            db_options
                .set(name.trim(), value.trim())
                .map_err(|e| e.to_string())?;
        }
        let password = match (&args.requirepass, &args.requirepass_file) {
            (Some(secret), _) => Some(secret.as_bytes().to_vec()),
            (None, Some(file)) => {
                let text = std::fs::read(file).map_err(|e| {
                    format!("--requirepass-file {}: cannot read: {e}", file.display())
                })?;
                let line = text.split(|&b| b == b'\n').next().unwrap_or_default();
                Some(line.strip_suffix(b"\r").unwrap_or(line).to_vec())
            }
            (None, None) => None,
        };
        if password.as_ref().is_some_and(Vec::is_empty) {
            return Err("--requirepass / --requirepass-file: the password is empty".into());
        }
        let max_bulk_len = match &args.max_bulk_len {
            Some(text) => {
                let v = size("--max-bulk-len", text)?;
                if v < MIN_MAX_BULK_LEN {
                    return Err(format!(
                        "--max-bulk-len is {v}, but must be at least {MIN_MAX_BULK_LEN}"
                    ));
                }
                v
            }
            None => DEFAULT_MAX_BULK_LEN,
        };
        if !(MIN_MAX_ARGS..=MAX_MAX_ARGS).contains(&args.max_args) {
            return Err(format!(
                "--max-args is {}, but must be between {MIN_MAX_ARGS} and {MAX_MAX_ARGS}",
                args.max_args
            ));
        }
        let max_pending = match &args.max_pending_bytes {
            Some(text) => size("--max-pending-bytes", text)?,
            None => DEFAULT_MAX_PENDING_BYTES,
        };
        let config = Config {
            dir: args.dir.clone(),
            bind,
            db_options,
            protected: password.is_none() && args.protected_mode == ProtectedMode::Yes,
            databases: args.databases,
            disable_thp: args.disable_thp == DisableThp::Yes,
            allocator: "libc",
            password: password.map(|p| Password::new(&p)),
            max_clients: args.maxclients,
            idle_timeout: (args.timeout > 0).then(|| Duration::from_secs(args.timeout)),
            sync: args.sync,
            limits: ParserLimits {
                max_bulk_len: usize::try_from(max_bulk_len).unwrap_or(usize::MAX),
                max_args: args.max_args,
                before_auth: false,
            },
            max_bulk_len_explicit: args.max_bulk_len.is_some(),
            max_pending_bytes: usize::try_from(max_pending).unwrap_or(usize::MAX),
        };
        if args.max_pending_bytes.is_some() {
            config.check_pending()?;
        }
        Ok(config)
    }

    /// Fits the bulk limit to the engine's effective `max_value_size` (known once the
    /// database is open, after its OPTIONS file was merged): the default is capped at it, an
    /// explicit `--max-bulk-len` above it is an error. Then checks `--max-pending-bytes`
    /// against the bulk limit (the default grows to fit).
    pub fn fit_to_engine(&mut self, max_value_size: u64) -> Result<(), String> {
        let cap = usize::try_from(max_value_size).unwrap_or(usize::MAX);
        if self.limits.max_bulk_len > cap {
            if self.max_bulk_len_explicit {
                return Err(format!(
                    "--max-bulk-len is {}, but the database's option `max_value_size` is {cap}: \
                     the bulk limit may not exceed it (raise `--option max_value_size=...`, up \
                     to {})",
                    self.limits.max_bulk_len,
                    gleaner::options::MAX_VALUE_SIZE_LIMIT
                ));
            }
            self.limits.max_bulk_len = cap;
        }
        self.check_pending()
    }

    fn check_pending(&self) -> Result<(), String> {
        let need = self
            .limits
            .max_bulk_len
            .saturating_add(PENDING_HEADROOM as usize);
        if self.max_pending_bytes < need {
            return Err(format!(
                "--max-pending-bytes is {}, but must be at least --max-bulk-len ({}) + {} = {need}",
                self.max_pending_bytes, self.limits.max_bulk_len, PENDING_HEADROOM
            ));
        }
        Ok(())
    }
}

fn size(option: &str, text: &str) -> Result<u64, String> {
    u64::parse_option(text).map_err(|why| format!("{option} `{text}`: {why}"))
}

fn resolve(bind: &str) -> Result<SocketAddr, String> {
    bind.to_socket_addrs()
        .map_err(|e| format!("--bind `{bind}`: {e}"))?
        .next()
        .ok_or_else(|| format!("--bind `{bind}`: resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["gleaner-server", "/tmp/db"];
        argv.extend_from_slice(args);
        Config::from_args(&Args::try_parse_from(argv).map_err(|e| e.to_string())?)
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Args::command().debug_assert();
    }

    #[test]
    fn defaults() {
        let mut c = parse(&[]).expect("defaults");
        assert_eq!(c.bind, "127.0.0.1:6380".parse().expect("addr"));
        assert!(c.bind.ip().is_loopback());
        assert_eq!(c.sync, SyncMode::Batch);
        assert!(c.password.is_none() && c.protected);
        assert_eq!(c.limits.max_bulk_len, 512 << 20);
        c.fit_to_engine(256 << 20).expect("fits");
        assert_eq!(c.limits.max_bulk_len, 256 << 20, "capped at max_value_size");
        assert_eq!(c.max_pending_bytes, 1 << 30);
        assert_eq!(c.idle_timeout, None);
        assert_eq!(c.db_options.separate_at(), gleaner::SeparateAt::Write);
        assert!(
            !c.db_options.is_overridden("separate_at"),
            "a database's saved setting wins over the server's default"
        );
        let c = parse(&["--option", "separate_at=flush"]).expect("flush");
        assert_eq!(c.db_options.separate_at(), gleaner::SeparateAt::Flush);
    }

    #[test]
    fn bad_values_name_the_option() {
        for (args, needle) in [
            (&["--max-bulk-len", "12x"][..], "--max-bulk-len"),
            (&["--max-bulk-len", "10"], "--max-bulk-len"),
            (&["--max-args", "3"], "--max-args"),
            (&["--max-pending-bytes", "1MiB"], "--max-pending-bytes"),
            (&["--option", "memtable_size"], "NAME=VALUE"),
            (&["--option", "nope=1"], "nope"),
            (&["--requirepass", ""], "empty"),
            (&["--bind", "nonsense"], "--bind"),
        ] {
            let e = parse(args).expect_err(needle);
            assert!(e.contains(needle), "{args:?}: {e}");
        }
        let mut c = parse(&["--max-bulk-len", "300MiB"]).expect("parses");
        let e = c
            .fit_to_engine(256 << 20)
            .expect_err("above max_value_size");
        assert!(e.contains("max_value_size"), "{e}");
        assert!(parse(&["--requirepass", "a", "--requirepass-file", "/x"]).is_err());
    }

    #[test]
    fn password_file_takes_its_first_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("pass");
        std::fs::write(&file, "s3cret\r\nignored\n").expect("write");
        let c = parse(&["--requirepass-file", file.to_str().expect("utf-8")]).expect("parses");
        let p = c.password.expect("password");
        assert!(p.check(b"s3cret"));
        assert!(!c.protected, "a password turns protected mode off");
    }
}
