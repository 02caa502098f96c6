//! One client connection: read, parse, run, reply, with every buffer bounded.
//!
//! The loop reads only when the input buffer holds no complete request, so a client that
//! pipelines faster than the server answers is held back by TCP, not buffered. Complete
//! requests are run in batches ([`MAX_BATCH_COMMANDS`], [`MAX_BATCH_BYTES`]) on a blocking
//! thread; the replies of a batch are written before the next batch runs, and a batch hands its
//! replies over once they reach [`crate::exec::REPLY_FLUSH_BYTES`]. What a client may hold in
//! the server is bounded by `--max-pending-bytes` (an incomplete request, a MULTI queue, one
//! reply); breaking a limit gets an error reply and the connection is closed, and nothing of
//! it reaches other clients.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::exec::{self, After};
use crate::resp::{ParserLimits, ProtocolError, Reply, ReplyBuf, RequestParser};
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::ServerStats;

/// Most commands run in one batch.
pub const MAX_BATCH_COMMANDS: usize = 1024;
/// A batch takes no more commands once their arguments reach this many bytes: 4 MiB.
pub const MAX_BATCH_BYTES: usize = 4 << 20;
/// Bytes requested from the socket per read (more while a large bulk string is arriving).
const READ_CHUNK: usize = 64 << 10;
/// Largest single read while a large bulk string is arriving.
const MAX_READ_CHUNK: usize = 4 << 20;
/// After shutdown began, how long a client may take to read its last replies.
pub const SHUTDOWN_WRITE_GRACE: Duration = Duration::from_secs(5);

/// Serves one client until it quits, breaks a limit, sends a malformed request, disconnects,
/// idles past `--timeout`, or the server shuts down.
pub async fn serve(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
) {
    // Replies go out at once: a client waiting for one should not wait for Nagle.
    let _ = stream.set_nodelay(true);
    let authenticated = shared.config.password.is_none();
    let session = Session::new(shared.next_client_id(), peer, authenticated);
    let mut conn = Connection {
        shared,
        stream,
        shutdown,
        session: Some(session),
        buf: BytesMut::with_capacity(READ_CHUNK),
        parser: RequestParser::new(),
        pending: VecDeque::new(),
    };
    // Every way out of the loop is a reason to close; errors were reported to the client where
    // it could still hear them.
    let _ = conn.run().await;
}

struct Connection {
    shared: Arc<Shared>,
    stream: TcpStream,
    shutdown: watch::Receiver<bool>,
    /// Moved to the blocking thread while a batch runs.
    session: Option<Session>,
    buf: BytesMut,
    parser: RequestParser,
    pending: VecDeque<Vec<Bytes>>,
}

/// Why the connection ends.
#[derive(Debug)]
enum End {
    /// Quit, EOF, an error told to the client, a write failure or shutdown.
    Done,
}

impl From<io::Error> for End {
    fn from(_: io::Error) -> Self {
        End::Done
    }
}

impl Connection {
    fn session(&self) -> &Session {
        self.session
            .as_ref()
            .expect("session is home between batches")
    }

    fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    async fn run(&mut self) -> Result<(), End> {
        loop {
            let error = self.parse_batch();
            let ran = !self.pending.is_empty();
            while !self.pending.is_empty() {
                self.run_batch().await?;
                if self.shutting_down() {
                    return Err(End::Done);
                }
            }
            if let Some(e) = error {
                let limit = matches!(
                    e,
                    ProtocolError::BulkTooLong { .. }
                        | ProtocolError::TooManyArgs { .. }
                        | ProtocolError::InlineTooLong
                );
                let counter = if limit {
                    &self.shared.stats.limit_disconnections
                } else {
                    &self.shared.stats.protocol_errors
                };
                ServerStats::add(counter, 1);
                self.reply_and_close(Reply::error(format!("ERR {e}")))
                    .await?;
            }
            if ran {
                // More complete requests may be buffered beyond the batch bounds.
                continue;
            }
            if self.parser.is_idle() && self.buf.is_empty() {
                // Nothing buffered: a good time to let go of a large buffer.
                if self.buf.capacity() > 4 * READ_CHUNK {
                    self.buf = BytesMut::with_capacity(READ_CHUNK);
                }
            } else {
                let held = self.buf.len() + self.parser.partial_bytes();
                if held > self.shared.config.max_pending_bytes {
                    ServerStats::add(&self.shared.stats.limit_disconnections, 1);
                    let msg = format!(
                        "ERR Protocol error: request exceeds --max-pending-bytes ({} bytes)",
                        self.shared.config.max_pending_bytes
                    );
                    self.reply_and_close(Reply::error(msg)).await?;
                }
            }
            self.read().await?;
        }
    }

    /// Moves complete requests from the buffer into `pending`, within the batch bounds (one
    /// request at a time before authentication, so that AUTH takes effect before the next
    /// request is parsed with the full limits). Returns the protocol error that stopped
    /// parsing, if any; the requests before it still run.
    fn parse_batch(&mut self) -> Option<ProtocolError> {
        let authenticated = self.session().authenticated;
        let (limits, max_commands) = if authenticated {
            (self.shared.config.limits, MAX_BATCH_COMMANDS)
        } else {
            (ParserLimits::UNAUTHENTICATED, 1)
        };
        let mut bytes = 0;
        while self.pending.len() < max_commands && bytes < MAX_BATCH_BYTES {
            match self.parser.parse(&mut self.buf, &limits) {
                Ok(Some(args)) => {
                    bytes += args.iter().map(Bytes::len).sum::<usize>();
                    self.pending.push_back(args);
                }
                Ok(None) => return None,
                Err(e) => return Some(e),
            }
        }
        None
    }

    /// Runs commands from `pending`, on this task when they are quick ([`exec::runs_inline`])
    /// and on a blocking thread otherwise, and writes their replies.
    async fn run_batch(&mut self) -> Result<(), End> {
        let shared = Arc::clone(&self.shared);
        let mut session = self.session.take().ok_or(End::Done)?;
        let mut pending = std::mem::take(&mut self.pending);
        let inline = exec::runs_inline(&self.shared, &pending);
        let run = move || {
            let mut out = ReplyBuf::new();
            let after = exec::run_batch(&shared, &mut session, &mut pending, &mut out);
            (session, pending, out, after)
        };
        let (session, pending, mut out, after) = if inline {
            run()
        } else {
            match tokio::task::spawn_blocking(run).await {
                Ok(done) => done,
                Err(e) => {
                    // A bug in a command: this client is dropped, the server goes on.
                    eprintln!("gleaner-server: internal error while running a command: {e}");
                    return Err(End::Done);
                }
            }
        };
        self.session = Some(session);
        self.pending = pending;
        if after == After::Abort {
            return Err(End::Done);
        }
        self.write(out.take_segments()).await?;
        if after == After::Close {
            return Err(End::Done);
        }
        Ok(())
    }

    async fn reply_and_close(&mut self, reply: Reply) -> Result<(), End> {
        let mut out = ReplyBuf::new();
        out.push(&reply, self.session().protocol);
        self.write(out.take_segments()).await?;
        Err(End::Done)
    }

    /// Reads more input, waiting at most `--timeout`, and not at all once shutdown began.
    async fn read(&mut self) -> Result<(), End> {
        let want = self
            .parser
            .bulk_bytes_needed(self.buf.len())
            .clamp(READ_CHUNK, MAX_READ_CHUNK);
        self.buf.reserve(want);
        let idle = self.shared.config.idle_timeout;
        let n = tokio::select! {
            r = read_with_timeout(&mut self.stream, &mut self.buf, idle) => match r {
                Ok(Some(n)) => n,
                Ok(None) => {
                    ServerStats::add(&self.shared.stats.idle_disconnections, 1);
                    return Err(End::Done);
                }
                Err(e) => return Err(e.into()),
            },
            _ = self.shutdown.wait_for(|&s| s) => return Err(End::Done),
        };
        if n == 0 {
            return Err(End::Done);
        }
        ServerStats::add(&self.shared.stats.total_net_input_bytes, n as u64);
        Ok(())
    }

    /// Writes `segments`, waiting at most `--timeout` for a client that does not read, and at
    /// most [`SHUTDOWN_WRITE_GRACE`] once shutdown began.
    async fn write(&mut self, segments: Vec<Bytes>) -> Result<(), End> {
        let total: usize = segments.iter().map(Bytes::len).sum();
        let idle = self.shared.config.idle_timeout;
        let mut shutdown = self.shutdown.clone();
        let stream = &mut self.stream;
        let write = async move {
            write_all_vectored(stream, &segments).await?;
            stream.flush().await
        };
        let deadline = async move {
            let _ = shutdown.wait_for(|&s| s).await;
            tokio::time::sleep(SHUTDOWN_WRITE_GRACE).await;
        };
        let result = tokio::select! {
            r = with_timeout(idle, write) => r,
            _ = deadline => Err(io::ErrorKind::TimedOut.into()),
        };
        result?;
        ServerStats::add(&self.shared.stats.total_net_output_bytes, total as u64);
        Ok(())
    }
}

/// Most segments handed to one `writev`.
const MAX_IOVECS: usize = 64;

/// Writes `segments` in order with vectored writes: a batch of replies whose large values are
/// segments of their own (not copied) still goes out in few system calls.
async fn write_all_vectored(stream: &mut TcpStream, segments: &[Bytes]) -> io::Result<()> {
    let (mut first, mut offset) = (0usize, 0usize);
    while first < segments.len() {
        let slices: Vec<io::IoSlice<'_>> = segments[first..]
            .iter()
            .take(MAX_IOVECS)
            .enumerate()
            .map(|(i, s)| io::IoSlice::new(if i == 0 { &s[offset..] } else { s }))
            .collect();
        let mut written = stream.write_vectored(&slices).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        // Advance past what was written.
        while written > 0 {
            let left = segments[first].len() - offset;
            if written >= left {
                written -= left;
                first += 1;
                offset = 0;
            } else {
                offset += written;
                written = 0;
            }
        }
        // Skip empty segments so the loop ends.
        while first < segments.len() && segments[first].len() == offset {
            first += 1;
            offset = 0;
        }
    }
    Ok(())
}

/// A read of at most the buffer's spare capacity; `Ok(None)` when `idle` passed first.
async fn read_with_timeout(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    idle: Option<Duration>,
) -> io::Result<Option<usize>> {
    match idle {
        Some(d) => match tokio::time::timeout(d, stream.read_buf(buf)).await {
            Ok(r) => r.map(Some),
            Err(_) => Ok(None),
        },
        None => stream.read_buf(buf).await.map(Some),
    }
}

async fn with_timeout(
    limit: Option<Duration>,
    f: impl std::future::Future<Output = io::Result<()>>,
) -> io::Result<()> {
    match limit {
        Some(d) => tokio::time::timeout(d, f)
            .await
            .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into())),
        None => f.await,
    }
}
