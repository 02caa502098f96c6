//! Runs the `gleaner-server` binary for the integration tests: on a free loopback port (it
//! binds port 0 and says which port it got on its "ready" line, so no port is guessed and no
//! test polls), with its stderr collected for the failure messages.

#![allow(dead_code)] // Each test file uses its own part of this module.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How long a server may take to open its database and bind: generous, for a loaded machine.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a test waits for a reply or for a server to exit before it fails.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// The binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_gleaner-server")
}

/// A running `gleaner-server`; killed when dropped.
pub struct Server {
    child: Option<Child>,
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The database directory.
    pub dir: PathBuf,
    stderr: Arc<Mutex<String>>,
    stderr_closed: Receiver<()>,
}

impl Server {
    /// Starts a server on `dir` with the extra command-line arguments `args`, on a free
    /// loopback port, and waits until it is ready.
    pub fn start(dir: &Path, args: &[&str]) -> Server {
        Self::start_with(dir, "127.0.0.1:0", args)
    }

    /// Starts a server bound to `bind`.
    pub fn start_with(dir: &Path, bind: &str, args: &[&str]) -> Server {
        let mut child = Command::new(binary())
            .arg(dir)
            .args(["--bind", bind])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gleaner-server");
        let stderr = child.stderr.take().expect("stderr piped");
        let text = Arc::new(Mutex::new(String::new()));
        let (ready_tx, ready_rx) = mpsc::channel::<String>();
        let (closed_tx, closed_rx) = mpsc::channel::<()>();
        let collected = Arc::clone(&text);
        thread::spawn(move || {
            let mut ready = Some(ready_tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split_once("ready, listening on ").map(|(_, r)| r)
                    && let Some(tx) = ready.take()
                {
                    let addr = rest.split_whitespace().next().unwrap_or_default();
                    let _ = tx.send(addr.to_string());
                }
                let mut t = collected.lock().expect("stderr lock");
                t.push_str(&line);
                t.push('\n');
            }
            let _ = closed_tx.send(());
        });
        let addr = match ready_rx.recv_timeout(START_TIMEOUT) {
            Ok(a) => a.parse().expect("address on the ready line"),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "gleaner-server did not become ready; stderr:\n{}",
                    text.lock().expect("stderr lock")
                );
            }
        };
        Server {
            child: Some(child),
            addr,
            dir: dir.to_path_buf(),
            stderr: text,
            stderr_closed: closed_rx,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// A `redis` crate client.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(format!("redis://{}/", self.addr)).expect("client")
    }

    /// A connection of the `redis` crate, with bounded read and write waits.
    pub fn conn(&self) -> redis::Connection {
        connect(&self.client())
    }

    /// A raw TCP connection with bounded waits.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        s.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        s
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr lock").clone()
    }

    /// Sends `signal` (`"TERM"`, `"INT"`, `"KILL"`) and waits for the process to exit; returns
    /// its status and its whole stderr.
    pub fn stop(mut self, signal: &str) -> (ExitStatus, String) {
        let mut child = self.child.take().expect("running");
        send_signal(child.id(), signal);
        let status = wait_bounded(&mut child);
        // The stderr reader ends once the process closed its end.
        let _ = self.stderr_closed.recv_timeout(IO_TIMEOUT);
        (status, self.stderr())
    }

    /// Waits (bounded) for the process to exit on its own, as after `SHUTDOWN`; returns its
    /// status and its whole stderr.
    pub fn wait_exit(mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().expect("running");
        let status = wait_bounded(&mut child);
        let _ = self.stderr_closed.recv_timeout(IO_TIMEOUT);
        (status, self.stderr())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A connection of `client` with bounded waits.
pub fn connect(client: &redis::Client) -> redis::Connection {
    let c = client.get_connection().expect("connect");
    c.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    c.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
    c
}

/// Sends a signal with kill(1) (the tests use no libc binding).
pub fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// Waits for `child` to exit, at most [`IO_TIMEOUT`] (then kills it and fails).
pub fn wait_bounded(child: &mut Child) -> ExitStatus {
    let (tx, rx) = mpsc::channel();
    let pid = child.id();
    // `Child::wait` has no timeout; a watchdog kills the process if it hangs.
    let watchdog = thread::spawn(move || {
        if rx.recv_timeout(IO_TIMEOUT).is_err() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            return true;
        }
        false
    });
    let status = child.wait().expect("wait");
    let _ = tx.send(());
    let hung = watchdog.join().expect("watchdog");
    assert!(!hung, "the server did not exit within {IO_TIMEOUT:?}");
    status
}

/// Sends `request` on `stream` and reads until the server closes the connection; returns what
/// it sent.
pub fn send_and_read_to_end(stream: &mut TcpStream, request: &[u8]) -> Vec<u8> {
    // The server may close before reading everything: a failed write is not an error here.
    let _ = stream.write_all(request);
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return out,
            Err(e) => panic!(
                "read failed ({e}) after {:?}",
                String::from_utf8_lossy(&out)
            ),
        }
    }
}

/// Reads exactly one RESP line-terminated reply element header or simple reply.
pub fn read_line(stream: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        let n = stream.read(&mut b).expect("read");
        assert!(
            n == 1,
            "connection closed after {:?}",
            String::from_utf8_lossy(&line)
        );
        line.push(b[0]);
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).expect("utf-8 line")
}

/// A RESP array of bulk strings.
pub fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Whether `program` is on the PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Prints why a test is skipped. Written to the process's stderr directly, not with
/// `eprintln!`, which the test harness captures and shows only for failing tests.
pub fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}
