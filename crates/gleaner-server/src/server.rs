//! The listener: accepts clients up to `--maxclients`, applies protected mode, and shuts down
//! gracefully (stop accepting, let every connection finish the commands it is running and
//! write their replies, then close the database).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gleaner::Db;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use crate::config::Config;
use crate::connection;
use crate::durability::SyncMode;
use crate::keyspace::Keyspace;
use crate::shared::Shared;
use crate::stats::ServerStats;

/// How long an accept failure (say, out of file descriptors) pauses the accept loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// How long a refused client gets to read its error before the connection is dropped.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// A bound server, ready to run.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    listener: TcpListener,
}

impl Server {
    /// Binds `config.bind` and prepares to serve `db`, laid out as `keyspace` says
    /// ([`Keyspace::open`] checked it). On failure `db` is dropped, which
    /// closes it.
    pub async fn bind(db: Db, config: Config, keyspace: Keyspace) -> io::Result<Server> {
        let listener = TcpListener::bind(config.bind).await?;
        let local_addr = listener.local_addr()?;
        Ok(Server {
            shared: Arc::new(Shared::new(db, config, keyspace, local_addr)),
            listener,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Serves clients until `shutdown` completes, then stops accepting, waits for every
    /// connection to finish the commands it is running and write their replies (a client that
    /// does not read gets [`connection::SHUTDOWN_WRITE_GRACE`]), and closes the database. The
    /// result is the close's.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> gleaner::Result<()> {
        let Server { shared, listener } = self;
        let max_clients = shared.config.max_clients;
        let permits = Arc::new(Semaphore::new(max_clients as usize));
        let (stop_tx, stop_rx) = watch::channel(false);
        let syncer = (shared.durability.mode() == SyncMode::Everysec)
            .then(|| tokio::spawn(sync_every_second(Arc::clone(&shared))));
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                _ = shared.shutdown.notified() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => admit(&shared, &permits, &stop_rx, stream, peer),
                    Err(e) => {
                        eprintln!("gleaner-server: accept failed (retrying): {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
            }
        }
        drop(listener);
        let _ = stop_tx.send(true);
        if let Some(s) = syncer {
            // Closing the database syncs the WAL.
            s.abort();
        }
        // Every connection holds a permit until it ends: having them all back means none is
        // left.
        let _all = permits.acquire_many(max_clients).await;
        let closing = Arc::clone(&shared);
        match tokio::task::spawn_blocking(move || closing.db.close()).await {
            Ok(r) => r,
            Err(e) => Err(gleaner::Error::Io {
                context: "closing the database".into(),
                source: Arc::new(io::Error::other(e.to_string())),
            }),
        }
    }
}

/// Starts serving an accepted client, or refuses it (protected mode, `--maxclients`).
fn admit(
    shared: &Arc<Shared>,
    permits: &Arc<Semaphore>,
    stop: &watch::Receiver<bool>,
    stream: TcpStream,
    peer: SocketAddr,
) {
    ServerStats::add(&shared.stats.total_connections_received, 1);
    // Canonical: an IPv4 client of a dual-stack `[::]` listener shows as ::ffff:127.0.0.1.
    if shared.config.protected && !peer.ip().to_canonical().is_loopback() {
        ServerStats::add(&shared.stats.rejected_connections, 1);
        tokio::spawn(refuse(
            stream,
            "-DENIED gleaner-server is running in protected mode: no password is set and it \
             only accepts clients over loopback. Set a password with --requirepass-file, or \
             start it with --protected-mode no if the network is trusted.\r\n",
        ));
        return;
    }
    let Ok(permit) = Arc::clone(permits).try_acquire_owned() else {
        ServerStats::add(&shared.stats.rejected_connections, 1);
        tokio::spawn(refuse(stream, "-ERR max number of clients reached\r\n"));
        return;
    };
    let shared = Arc::clone(shared);
    let stop = stop.clone();
    tokio::spawn(async move {
        let _client = ClientCount::new(&shared.stats);
        connection::serve(Arc::clone(&shared), stream, peer, stop).await;
        drop(permit);
    });
}

async fn refuse(mut stream: TcpStream, message: &'static str) {
    let _ = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, stream.write_all(message.as_bytes())).await;
}

/// Counts a connected client for as long as it lives (also if its task panics).
struct ClientCount<'a> {
    stats: &'a ServerStats,
}

impl<'a> ClientCount<'a> {
    fn new(stats: &'a ServerStats) -> Self {
        ServerStats::add(&stats.connected_clients, 1);
        ClientCount { stats }
    }
}

impl Drop for ClientCount<'_> {
    fn drop(&mut self) {
        self.stats
            .connected_clients
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `--sync everysec`: syncs the WAL once a second when anything was written since the last
/// sync. A failed sync is reported once; the engine then refuses writes, which clients see.
async fn sync_every_second(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let s = Arc::clone(&shared);
        match tokio::task::spawn_blocking(move || s.durability.sync_if_due(&s.db)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("gleaner-server: the once-a-second WAL sync failed: {e}");
                return;
            }
            Err(_) => return,
        }
    }
}
