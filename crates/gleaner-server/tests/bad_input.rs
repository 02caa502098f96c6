//! Bad input and limits: a malformed stream, an oversize bulk string, too many arguments, a
//! MULTI queue or reply over `--max-pending-bytes`, a client that disconnects in the middle of a
//! pipeline, 1,000 idle connections, `--maxclients` and `--timeout`. Each offending client gets
//! an error naming what it broke and is disconnected; nothing it sent half-way is written; and
//! every other client is served throughout.

mod common;

use std::io::Write;
use std::net::TcpStream;

use common::{Server, read_line, resp, send_and_read_to_end};
use redis::Commands;

fn start(args: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&dir.path().join("db"), args);
    (dir, server)
}

fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg(section).query(con).expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("{field} not in INFO {section}:\n{info}"))
}

/// Polls INFO until `connected_clients` is `n` (the server accepts and ends connections
/// asynchronously to the client's side), for at most [`common::IO_TIMEOUT`].
fn wait_for_clients(con: &mut redis::Connection, n: usize) {
    let deadline = std::time::Instant::now() + common::IO_TIMEOUT;
    while std::time::Instant::now() < deadline {
        if info_field(con, "clients", "connected_clients") == n.to_string() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!(
        "connected_clients stayed at {}, expected {n}",
        info_field(con, "clients", "connected_clients")
    );
}

#[test]
fn a_malformed_stream_gets_an_error_and_a_closed_connection_and_others_go_on() {
    let (_dir, server) = start(&[]);
    let mut bystander = server.conn();
    let _: () = bystander.set("before", "1").expect("set");
    for (garbage, expected) in [
        (
            &b"*1\r\n:1\r\n"[..],
            "-ERR Protocol error: expected '$', got ':'",
        ),
        (b"*x\r\n", "-ERR Protocol error: invalid multibulk length"),
        (b"*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length"),
        (
            b"*1\r\n$3\r\nGETxx",
            "-ERR Protocol error: bulk string not followed by CRLF",
        ),
        (
            b"*1\r\n$99999999999999999999999\r\n",
            "-ERR Protocol error: too big",
        ),
        (
            b"SET \"unterminated\r\n",
            "-ERR Protocol error: unbalanced quotes",
        ),
    ] {
        let mut raw = server.raw();
        // A complete command first: it runs and is answered before the error.
        let mut request = resp(&[b"SET", b"good", garbage]);
        request.extend_from_slice(garbage);
        let reply = send_and_read_to_end(&mut raw, &request);
        let reply = String::from_utf8_lossy(&reply);
        let mut lines = reply.split("\r\n");
        assert_eq!(lines.next(), Some("+OK"), "{garbage:?}: {reply}");
        let error = lines.next().unwrap_or_default();
        assert!(error.starts_with(expected), "{garbage:?}: {reply}");
        assert_eq!(
            lines.next(),
            Some(""),
            "then the connection closed: {reply}"
        );
        let stored: Vec<u8> = bystander.get("good").expect("get");
        assert_eq!(stored, garbage);
    }
    let v: String = bystander
        .get("before")
        .expect("the bystander is still served");
    assert_eq!(v, "1");
    assert_eq!(info_field(&mut bystander, "stats", "protocol_errors"), "6");
}

#[test]
fn oversize_bulks_and_argument_counts_are_refused_from_the_header() {
    let (_dir, server) = start(&["--max-bulk-len", "1KiB", "--max-args", "16"]);
    let mut bystander = server.conn();

    // The header alone is refused: the 2,000 bytes are never sent.
    let mut raw = server.raw();
    let reply = send_and_read_to_end(&mut raw, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000\r\n");
    assert_eq!(
        String::from_utf8_lossy(&reply),
        "-ERR Protocol error: invalid bulk length 2000: longer than 1024 bytes \
         (--max-bulk-len)\r\n"
    );
    // At the limit it is accepted.
    let ok: () = bystander.set("k", vec![b'x'; 1024]).expect("1 KiB value");
    let () = ok;
    let e = bystander
        .set::<_, _, ()>("k2", vec![b'x'; 1025])
        .expect_err("over the limit");
    assert!(e.to_string().contains("--max-bulk-len"), "{e}");
    // That connection was closed; a new one finds nothing written.
    let mut bystander = server.conn();
    assert_eq!(
        bystander.get::<_, Option<Vec<u8>>>("k2").expect("get"),
        None
    );
    let mut raw = server.raw();
    let reply = send_and_read_to_end(&mut raw, b"*17\r\n");
    assert!(
        String::from_utf8_lossy(&reply).contains("more than 16 arguments (--max-args)"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    // An inline command line has its own bound (64 KiB, as Redis).
    let mut raw = server.raw();
    let reply = send_and_read_to_end(&mut raw, &vec![b'a'; 70 << 10]);
    assert!(
        String::from_utf8_lossy(&reply).starts_with("-ERR Protocol error: too big inline request"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let v: Vec<u8> = bystander.get("k").expect("still served");
    assert_eq!(v.len(), 1024);
    assert_eq!(
        info_field(&mut bystander, "stats", "limit_disconnections"),
        "4"
    );
}

#[test]
fn pending_bytes_bound_multi_queues_and_replies() {
    let (_dir, server) = start(&["--max-bulk-len", "64KiB", "--max-pending-bytes", "256KiB"]);
    let mut c = server.conn();
    let value = vec![b'v'; 60 << 10];

    // A MULTI queue over the bound: an error, the connection closed, nothing written.
    let mut raw = server.raw();
    let mut request = resp(&[b"MULTI"]);
    for i in 0..8 {
        request.extend_from_slice(&resp(&[b"SET", format!("q{i}").as_bytes(), &value]));
    }
    request.extend_from_slice(&resp(&[b"EXEC"]));
    let reply = send_and_read_to_end(&mut raw, &request);
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with("+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n-ERR MULTI queue exceeds --max-pending-bytes"),
        "{reply}"
    );
    for i in 0..8 {
        assert_eq!(
            c.get::<_, Option<Vec<u8>>>(format!("q{i}")).expect("get"),
            None
        );
    }

    // A reply over the bound: MGET of five 60 KiB values.
    for i in 0..5 {
        let _: () = c.set(format!("r{i}"), &value[..]).expect("set");
    }
    let mut raw = server.raw();
    let reply = send_and_read_to_end(
        &mut raw,
        &resp(&[b"MGET", b"r0", b"r1", b"r2", b"r3", b"r4"]),
    );
    assert!(
        String::from_utf8_lossy(&reply).starts_with("-ERR reply would exceed --max-pending-bytes"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let four: Vec<Vec<u8>> = c.mget(&["r0", "r1", "r2", "r3"]).expect("within the bound");
    assert_eq!(four.len(), 4);
}

#[test]
fn clients_that_disconnect_mid_pipeline_leave_only_whole_writes() {
    let (_dir, server) = start(&[]);
    let mut bystander = server.conn();
    let value = |i: usize| format!("value-{i}-").repeat(50).into_bytes();
    for round in 0..5 {
        let mut raw = TcpStream::connect(server.addr).expect("connect");
        let mut pipeline = Vec::new();
        for i in 0..2000 {
            pipeline.extend_from_slice(&resp(&[
                b"SET",
                format!("r{round}k{i}").as_bytes(),
                &value(i),
            ]));
        }
        // Cut off inside the last request's value: the client goes away mid-bulk.
        let cut = pipeline.len() - 100;
        // The server may stop reading once it sees the client has gone; a failed write is
        // part of the scenario.
        let _ = raw.write_all(&pipeline[..cut]);
        drop(raw);
        // Every key is either absent or holds its whole value.
        let keys: Vec<String> = (0..2000).map(|i| format!("r{round}k{i}")).collect();
        let got: Vec<Option<Vec<u8>>> = bystander.mget(&keys).expect("mget");
        for (i, v) in got.iter().enumerate() {
            if let Some(v) = v {
                assert_eq!(v, &value(i), "r{round}k{i}");
            }
        }
    }
    wait_for_clients(&mut bystander, 1);
    // The half-sent last request was never run: its key is absent.
    for round in 0..5 {
        let last: Option<Vec<u8>> = bystander.get(format!("r{round}k1999")).expect("get");
        assert_eq!(last, None);
    }
}

#[test]
fn a_thousand_idle_connections_do_not_stop_others_from_being_served() {
    // This process holds the 1,000 client ends: raise its own open-file limit as needed.
    let limit = rlimit::increase_nofile_limit(4096).expect("raise the open-file limit");
    assert!(
        limit >= 1100,
        "this test needs 1,100 open files; the limit is {limit}"
    );
    let (_dir, server) = start(&[]);
    let mut idle: Vec<TcpStream> = (0..1000).map(|_| server.raw()).collect();
    let mut busy = server.conn();
    wait_for_clients(&mut busy, 1001);
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.set(format!("k{i}"), i).ignore();
    }
    let () = pipe
        .query(&mut busy)
        .expect("writes while 1,000 clients idle");
    let sum: i64 = (0..2000)
        .map(|i| busy.get::<_, i64>(format!("k{i}")).expect("get"))
        .sum();
    assert_eq!(sum, (0..2000).sum::<i64>());
    // Every idle connection is alive and answers.
    for s in &mut idle {
        s.write_all(b"PING\r\n").expect("write");
    }
    for s in &mut idle {
        assert_eq!(read_line(s), "+PONG");
    }
    drop(idle);
    wait_for_clients(&mut busy, 1);
}

#[test]
fn maxclients_refuses_the_client_over_the_limit() {
    let (_dir, server) = start(&["--maxclients", "3"]);
    let mut first = server.conn();
    let second = server.raw();
    let _third = server.raw();
    wait_for_clients(&mut first, 3);
    let mut fourth = server.raw();
    let reply = send_and_read_to_end(&mut fourth, b"PING\r\n");
    assert_eq!(
        String::from_utf8_lossy(&reply),
        "-ERR max number of clients reached\r\n"
    );
    drop(second);
    wait_for_clients(&mut first, 2);
    let mut again = server.raw();
    again.write_all(b"PING\r\n").expect("write");
    assert_eq!(read_line(&mut again), "+PONG", "a freed slot is reused");
    assert_eq!(info_field(&mut first, "stats", "rejected_connections"), "1");
}

#[test]
fn timeout_closes_idle_clients() {
    let (_dir, server) = start(&["--timeout", "1"]);
    let mut idle = server.raw();
    idle.write_all(b"PING\r\n").expect("write");
    assert_eq!(read_line(&mut idle), "+PONG");
    // Nothing more is sent: the server closes the connection after about a second (the read
    // waits at most IO_TIMEOUT, so a server that never closes fails the test).
    let rest = send_and_read_to_end(&mut idle, b"");
    assert!(rest.is_empty());
    let mut c = server.conn();
    assert_eq!(info_field(&mut c, "stats", "idle_disconnections"), "1");
}

#[test]
fn inline_commands_work_as_with_telnet() {
    let (_dir, server) = start(&[]);
    let mut raw = server.raw();
    raw.write_all(b"SET greeting \"hello world\"\r\nGET greeting\r\n\r\nEXISTS greeting nope\n")
        .expect("write");
    assert_eq!(read_line(&mut raw), "+OK");
    assert_eq!(read_line(&mut raw), "$11");
    assert_eq!(read_line(&mut raw), "hello world");
    assert_eq!(read_line(&mut raw), ":1");
    let reply = send_and_read_to_end(&mut raw, b"QUIT\r\n");
    assert_eq!(reply, b"+OK\r\n", "QUIT answers, then closes");
}

#[test]
fn protected_mode_admits_ipv4_loopback_clients_of_a_dual_stack_listener() {
    if std::net::TcpListener::bind("[::]:0").is_err() {
        common::skip(
            "protected_mode_admits_ipv4_loopback_clients_of_a_dual_stack_listener",
            "no IPv6 on this machine",
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(&dir.path().join("db"), "[::]:0", &[]);
    // Over IPv4 loopback the peer address is ::ffff:127.0.0.1: still loopback.
    let Ok(mut raw) = TcpStream::connect(("127.0.0.1", server.port())) else {
        common::skip(
            "protected_mode_admits_ipv4_loopback_clients_of_a_dual_stack_listener",
            "[::] does not accept IPv4 here (net.ipv6.bindv6only=1)",
        );
        return;
    };
    raw.set_read_timeout(Some(common::IO_TIMEOUT))
        .expect("timeout");
    raw.write_all(b"PING\r\n").expect("write");
    assert_eq!(read_line(&mut raw), "+PONG");
}
