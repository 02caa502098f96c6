//! The `gleaner-server` command: see `gleaner-server --help` and docs/server.md.

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use gleaner::Db;
use gleaner_server::keyspace::Keyspace;
use gleaner_server::{Args, Config, Server};
use tokio::signal::unix::{SignalKind, signal};

/// The allocator, as Redis links jemalloc: answering a GET allocates its value's buffer (8 KiB
/// at the sizes users store here) and frees it once the reply is written, and glibc's malloc,
/// which keeps no per-thread cache for blocks that large, spent 7 % of the server's CPU on
/// them (docs/benchmarks.md, "gleaner-server against Redis: GET with a memtable key filter,
/// slot-held cache entries and mimalloc").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Threads that run commands (each connection has at most one batch running); more clients
/// with work queue for a thread. Enough for many writers to meet in the engine's group commit.
const MAX_BLOCKING_THREADS: usize = 128;
/// File descriptors kept for the database, the listener and the runtime besides clients and
/// the engine's `max_open_files`.
const RESERVED_FDS: u64 = 64;

fn main() -> ExitCode {
    // The engine's reports of failures no command sees (a failed background GC job or
    // compaction, the database turning read-only) go to stderr beside the server's own lines.
    gleaner::logging::StderrLogger::install("gleaner-server", log::LevelFilter::Info);
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("gleaner-server: {message}");
            ExitCode::from(2)
        }
    }
}

/// Turns transparent huge pages off for this process before it allocates much, as Redis does
/// at start (`disable-thp yes`). The value cache frees and refills value buffers all the time;
/// the allocator hands freed ranges back and touches them again, and under huge pages each such
/// first touch zeroed 2 MiB: a quarter of the server's CPU while a 1 GiB cache filled
/// (docs/benchmarks.md, "gleaner-server against Redis: GET with Redis's memory").
/// A failure is reported and the server goes on (as Redis does).
fn disable_transparent_huge_pages() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        eprintln!(
            "gleaner-server: warning: cannot turn transparent huge pages off \
             (--disable-thp): {e}"
        );
    }
}

/// The runtime's worker threads: twice the cores, at least 4. Quick commands run on the
/// workers themselves (`exec::runs_inline`), and one that waits for the disk holds its worker:
/// the spare workers take the other connections over meanwhile.
fn worker_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    (2 * cores).max(4)
}

fn run(args: Args) -> Result<ExitCode, String> {
    let mut config = Config::from_args(&args)?;
    config.allocator = "mimalloc";
    if config.disable_thp {
        disable_transparent_huge_pages();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .worker_threads(worker_threads())
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    fit_file_limit(&mut config);
    let db = Db::open(&config.dir, config.db_options.clone())
        .map_err(|e| format!("cannot open the database at {}: {e}", config.dir.display()))?;
    config.fit_to_engine(db.options().max_value_size())?;
    let keyspace = Keyspace::open(config.databases, &db, false)
        .map_err(|e| format!("cannot serve the database at {}: {e}", config.dir.display()))?;
    runtime.block_on(async move {
        // Signals are caught from here on: a SIGTERM during start-up also shuts down cleanly.
        let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
        let dir = config.dir.clone();
        let sync = config.sync;
        let bind = config.bind;
        let server = Server::bind(db, config, keyspace)
            .await
            .map_err(|e| format!("cannot listen on {bind}: {e}"))?;
        eprintln!(
            "gleaner-server: ready, listening on {} (database {}, --sync {})",
            server.local_addr(),
            dir.display(),
            sync.name()
        );
        let shutdown = async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            eprintln!(
                "gleaner-server: {name} received: no new clients; finishing the commands in \
                 flight, then closing the database"
            );
        };
        match server.run(shutdown).await {
            Ok(()) => {
                eprintln!("gleaner-server: database closed cleanly");
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("gleaner-server: closing the database failed: {e}");
                Ok(ExitCode::from(1))
            }
        }
    })
}

/// Raises the open-file limit to fit `--maxclients` and the engine's table files
/// (`max_open_files` of each kind), or, when the hard limit is lower, lowers `--maxclients` to
/// fit it (as Redis does), with a warning.
fn fit_file_limit(config: &mut Config) {
    // `max_open_files` bounds each of the engine's two table caches: key and value tables.
    let engine = 2 * u64::from(config.db_options.max_open_files()) + RESERVED_FDS;
    let wanted = u64::from(config.max_clients) + engine;
    let got = rlimit::increase_nofile_limit(wanted).unwrap_or(0);
    if got != 0 && got < wanted {
        let fit = got.saturating_sub(engine).max(1);
        eprintln!(
            "gleaner-server: warning: the open-file limit is {got}, too low for --maxclients {} \
             and option `max_open_files` {}; serving at most {fit} clients (raise `ulimit -n`)",
            config.max_clients,
            config.db_options.max_open_files()
        );
        config.max_clients = u32::try_from(fit).unwrap_or(u32::MAX);
    }
}
