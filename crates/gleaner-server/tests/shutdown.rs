//! Shutdown and crashes: SIGTERM and SIGINT close the database cleanly (exit status 0) while
//! clients are connected and writing, and every write acknowledged before is there after a
//! restart; a SIGKILL loop under `--sync always`, `batch` and `everysec` loses no acknowledged
//! write, and a MULTI/EXEC is found whole or not at all.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::mpsc;
use std::thread;

use common::{IO_TIMEOUT, Server, resp};
use redis::Commands;

/// The value written under `key`: derived from it, so a check needs only the key.
fn value_of(key: &str) -> Vec<u8> {
    let len = 20 + key.len() * 37 % 3000;
    key.bytes().cycle().take(len).collect()
}

/// A client that pipelines SETs of `prefix{n}` in groups of `group` and reports each key whose
/// `+OK` it read. It stops at its first error (the server went away), or after `most` keys.
fn writer(server: &Server, prefix: String, group: usize, most: usize, acked: mpsc::Sender<String>) {
    let stream = TcpStream::connect(server.addr).expect("connect");
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let mut out = stream.try_clone().expect("clone");
    let mut input = BufReader::new(stream);
    thread::spawn(move || {
        let mut n = 0;
        while n < most {
            let keys: Vec<String> = (n..n + group).map(|i| format!("{prefix}{i}")).collect();
            let mut request = Vec::new();
            for k in &keys {
                request.extend_from_slice(&resp(&[b"SET", k.as_bytes(), &value_of(k)]));
            }
            if out.write_all(&request).is_err() {
                return;
            }
            for k in keys {
                let mut line = String::new();
                match input.read_line(&mut line) {
                    Ok(n) if n > 0 && line == "+OK\r\n" => {}
                    // EOF, reset, or the shutdown's error: this write is not acknowledged.
                    _ => return,
                }
                if acked.send(k).is_err() {
                    return;
                }
            }
            n += group;
        }
    });
}

/// Checks that every key in `acked` holds its value.
fn check_acked(server: &Server, acked: &[String]) {
    let mut c = server.conn();
    for chunk in acked.chunks(500) {
        let got: Vec<Option<Vec<u8>>> = c.mget(chunk).expect("mget");
        for (k, v) in chunk.iter().zip(got) {
            assert_eq!(
                v.as_deref(),
                Some(&value_of(k)[..]),
                "acknowledged {k} lost"
            );
        }
    }
}

/// Runs writers until `target` writes were acknowledged, then sends `signal`; returns every
/// acknowledged key (also those acknowledged after the signal) and the exit status and stderr.
fn write_then_signal(
    server: Server,
    round: usize,
    signal: &str,
    target: usize,
) -> (Vec<String>, std::process::ExitStatus, String) {
    let (tx, rx) = mpsc::channel();
    for w in 0..3 {
        writer(
            &server,
            format!("r{round}w{w}k"),
            1 + w * 7,
            100_000,
            tx.clone(),
        );
    }
    drop(tx);
    let mut acked = Vec::new();
    while acked.len() < target {
        acked.push(rx.recv_timeout(IO_TIMEOUT).expect("writers make progress"));
    }
    let (status, stderr) = server.stop(signal);
    // The writers end on their first failure; collect what they were told before it.
    acked.extend(rx.iter());
    (acked, status, stderr)
}

fn restart(dir: &Path, args: &[&str]) -> Server {
    Server::start(dir, args)
}

#[test]
fn sigterm_and_sigint_close_cleanly_and_keep_every_acknowledged_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let mut all = Vec::new();
    for (round, signal) in ["TERM", "INT"].into_iter().enumerate() {
        let server = Server::start(&dir, &[]);
        // Idle clients do not hold shutdown up.
        let _idle: Vec<TcpStream> = (0..10).map(|_| server.raw()).collect();
        let (acked, status, stderr) = write_then_signal(server, round, signal, 3000);
        assert!(
            status.success(),
            "SIG{signal}: exit {status:?}; stderr:\n{stderr}"
        );
        assert!(
            stderr.contains(&format!("SIG{signal} received"))
                && stderr.contains("database closed cleanly"),
            "{stderr}"
        );
        all.extend(acked);
        let server = restart(&dir, &[]);
        check_acked(&server, &all);
        let (status, _) = server.stop("TERM");
        assert!(status.success());
    }
}

#[test]
fn sigkill_loses_no_acknowledged_write() {
    // `everysec` survives a crash of the process too (the WAL is in the page cache).
    for sync in ["always", "batch", "everysec"] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("db");
        let args = ["--sync", sync];
        let mut all = Vec::new();
        for round in 0..4 {
            let server = Server::start(&dir, &args);
            // A writer of transactions in database 3, each setting the pair (a{n}, b{n}) with
            // an hour to live, alongside the plain writers. It returns how many it started and
            // how many were acknowledged.
            let tx_client = server.client();
            let tx_round = round;
            let tx_thread = thread::spawn(move || {
                let Ok(mut c) = tx_client.get_connection() else {
                    return (0, 0);
                };
                if redis::cmd("SELECT").arg(3).query::<()>(&mut c).is_err() {
                    return (0, 0);
                }
                for n in 0..100_000 {
                    let r: redis::RedisResult<()> = redis::pipe()
                        .atomic()
                        .cmd("SET")
                        .arg(format!("tx{tx_round}a{n}"))
                        .arg(n)
                        .arg("PX")
                        .arg(3_600_000)
                        .ignore()
                        .set(format!("tx{tx_round}b{n}"), n)
                        .ignore()
                        .query(&mut c);
                    if r.is_err() {
                        return (n + 1, n);
                    }
                }
                (100_000, 100_000)
            });
            let (acked, status, stderr) = write_then_signal(server, round, "KILL", 600);
            assert!(!status.success(), "SIGKILL: {status:?}\n{stderr}");
            all.extend(acked);
            let (started, tx_acked) = tx_thread.join().expect("transaction writer");
            let server = restart(&dir, &args);
            check_acked(&server, &all);
            // Each transaction is whole or absent, in database 3, with its expiry.
            let mut c = server.conn();
            redis::cmd("SELECT")
                .arg(3)
                .query::<()>(&mut c)
                .expect("select");
            for n in 0..started {
                let (a, b): (Option<i64>, Option<i64>) = redis::pipe()
                    .get(format!("tx{round}a{n}"))
                    .get(format!("tx{round}b{n}"))
                    .query(&mut c)
                    .expect("get pair");
                assert_eq!(a, b, "transaction {n} of round {round} is half there");
                if n < tx_acked {
                    assert_eq!(a, Some(n as i64), "acknowledged transaction {n} lost");
                    let ttl: i64 = redis::cmd("PTTL")
                        .arg(format!("tx{round}a{n}"))
                        .query(&mut c)
                        .expect("pttl");
                    assert!(ttl > 0, "transaction {n} of round {round} lost its expiry");
                }
            }
        }
        assert!(all.len() >= 4 * 600);
    }
}

#[test]
fn keys_of_many_sizes_survive_a_clean_restart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let server = Server::start(&dir, &["--option", "memtable_size=1MiB"]);
    let mut c = server.conn();
    let mut expected = HashMap::new();
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        let k = format!("size{i}");
        let v = value_of(&k);
        pipe.set(&k, &v[..]).ignore();
        expected.insert(k, v);
    }
    let () = pipe.query(&mut c).expect("load");
    drop(c);
    let (status, _) = server.stop("TERM");
    assert!(status.success());
    let server = restart(&dir, &[]);
    let mut keys: Vec<&String> = expected.keys().collect();
    keys.sort();
    let mut c = server.conn();
    for k in keys {
        let v: Vec<u8> = c.get(k).expect("get");
        assert_eq!(&v, &expected[k]);
    }
}

/// The `separate_at` line of the database's OPTIONS file (what its last open used).
fn saved_separate_at(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("OPTIONS")).expect("OPTIONS");
    text.lines()
        .find_map(|l| l.strip_prefix("separate_at="))
        .expect("separate_at saved")
        .to_string()
}

/// Bytes this server process has written to value segments (the values written once).
fn segment_bytes(server: &Server) -> u64 {
    let mut c = server.conn();
    let stats: String = redis::cmd("GLEANER.STATS").query(&mut c).expect("stats");
    let stats: serde_json::Value = serde_json::from_str(&stats).expect("stats json");
    stats["io"]["segment"]["write_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no segment bytes in {stats}"))
}

#[test]
fn values_are_written_once_by_default_and_a_saved_setting_wins() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let big = |i: usize| vec![b'a' + (i % 26) as u8; 16 << 10];
    let check = |server: &Server, upto: usize| {
        let mut c = server.conn();
        for i in 0..upto {
            let v: Vec<u8> = c.get(format!("k{i}")).expect("get");
            assert_eq!(v, big(i), "k{i}");
        }
    };
    let mut written = 0;
    let mut write_some = |server: &Server| {
        let mut c = server.conn();
        for i in written..written + 50 {
            let () = c.set(format!("k{i}"), big(i)).expect("set");
        }
        written += 50;
        written
    };
    // A new database takes the server's default.
    let server = Server::start(&dir, &[]);
    let n = write_some(&server);
    assert_eq!(saved_separate_at(&dir), "write");
    assert!(
        segment_bytes(&server) >= 50 * (16 << 10),
        "each value went to a value segment as it was written"
    );
    assert!(server.stop("TERM").0.success());
    // The command line wins over it, and its choice is saved...
    let server = restart(&dir, &["--option", "separate_at=flush"]);
    check(&server, n);
    let before = segment_bytes(&server);
    let n = write_some(&server);
    assert_eq!(saved_separate_at(&dir), "flush");
    assert_eq!(
        segment_bytes(&server),
        before,
        "values stay in the log until the flush"
    );
    assert!(server.stop("TERM").0.success());
    // ...and kept by a start that does not say.
    let server = restart(&dir, &[]);
    check(&server, n);
    assert_eq!(saved_separate_at(&dir), "flush");
    assert!(server.stop("TERM").0.success());
}
