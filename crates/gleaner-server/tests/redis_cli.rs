//! Debian's `redis-cli` (package `redis-tools`) against the server: one-shot commands as the
//! README shows them, RESP3 (`-3`), a password, `--scan` (which parses the numeric cursor as
//! an unsigned integer), `--pipe` mass insertion, `--bigkeys`, and a short `redis-benchmark`
//! run. Skipped, with a message, when the tools are not installed (`.ci/run` installs them).

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::Server;

fn cli(server: &Server, args: &[&str]) -> Output {
    Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli")
}

/// Runs redis-cli and returns its standard output, trimmed; fails on a non-zero exit.
fn cli_ok(server: &Server, args: &[&str]) -> String {
    let out = cli(server, args);
    assert!(
        out.status.success(),
        "redis-cli {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim_end()
        .to_string()
}

fn start(test: &str, args: &[&str]) -> Option<(tempfile::TempDir, Server)> {
    if !common::have("redis-cli") {
        common::skip(
            test,
            "redis-cli is not installed (Debian package redis-tools)",
        );
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&dir.path().join("db"), args);
    Some((dir, server))
}

#[test]
fn redis_cli_one_shot_commands() {
    let Some((_dir, server)) = start("redis_cli_one_shot_commands", &[]) else {
        return;
    };
    assert_eq!(cli_ok(&server, &["set", "a", "b"]), "OK");
    assert_eq!(cli_ok(&server, &["get", "a"]), "b");
    assert_eq!(cli_ok(&server, &["-3", "get", "a"]), "b");
    assert_eq!(
        cli_ok(&server, &["--no-raw", "-3", "get", "missing"]),
        "(nil)"
    );
    assert_eq!(cli_ok(&server, &["set", "a", "c", "NX"]), "");
    assert_eq!(cli_ok(&server, &["set", "a", "c", "XX", "GET"]), "b");
    assert_eq!(cli_ok(&server, &["strlen", "a"]), "1");
    assert_eq!(cli_ok(&server, &["ping"]), "PONG");
    assert_eq!(cli_ok(&server, &["exists", "a", "nope"]), "1");
    // Exact, though both versions of `a` are still in the memtable (docs/server.md).
    assert_eq!(cli_ok(&server, &["dbsize"]), "1");
    assert_eq!(cli_ok(&server, &["gleaner.compact"]), "OK");
    assert_eq!(cli_ok(&server, &["dbsize"]), "1");
    assert_eq!(cli_ok(&server, &["set", "t", "v", "EX", "10"]), "OK");
    assert_eq!(cli_ok(&server, &["ttl", "t"]), "10");
    assert_eq!(cli_ok(&server, &["flushall"]), "OK");
    assert_eq!(cli_ok(&server, &["dbsize"]), "0");
    assert_eq!(
        cli_ok(&server, &["lpush", "l", "x"]),
        "ERR unknown command 'lpush', with args beginning with: 'l' 'x'"
    );
    let info = cli_ok(&server, &["info", "gleaner"]);
    assert!(
        info.starts_with("# Gleaner") && info.contains("gc_policy:"),
        "{info}"
    );
    assert!(cli_ok(&server, &["--no-raw", "command", "count"]).starts_with("(integer) "));
    // Commands from standard input, as in a script.
    let mut child = Command::new("redis-cli")
        .args(["-p", &server.port().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"set s1 v1\nmset s2 v2 s3 v3\nmget s1 s2 s3 nope\n")
        .expect("write");
    let out = child.wait_with_output().expect("redis-cli");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "OK\nOK\nv1\nv2\nv3\n\n"
    );
}

#[test]
fn redis_cli_with_a_password() {
    let Some((_dir, server)) = start("redis_cli_with_a_password", &["--requirepass", "pw"]) else {
        return;
    };
    assert_eq!(
        cli_ok(&server, &["get", "a"]),
        "NOAUTH Authentication required."
    );
    // A wrong password: redis-cli warns and sends the command anyway.
    let out = cli(&server, &["--no-auth-warning", "-a", "wrong", "get", "a"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("AUTH failed: WRONGPASS"),
        "{out:?}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        "NOAUTH Authentication required."
    );
    assert_eq!(
        cli_ok(&server, &["--no-auth-warning", "-a", "pw", "set", "a", "1"]),
        "OK"
    );
    assert_eq!(
        cli_ok(
            &server,
            &["--no-auth-warning", "-3", "-a", "pw", "get", "a"]
        ),
        "1"
    );
}

#[test]
fn redis_cli_scan_pipe_and_bigkeys() {
    let Some((_dir, server)) = start("redis_cli_scan_pipe_and_bigkeys", &[]) else {
        return;
    };
    // Mass insertion, as the Redis documentation describes it.
    let mut protocol = Vec::new();
    for i in 0..10_000 {
        protocol.extend_from_slice(&common::resp(&[
            b"SET",
            format!("key:{i:05}").as_bytes(),
            &vec![b'v'; i % 700],
        ]));
    }
    let mut child = Command::new("redis-cli")
        .args(["-p", &server.port().to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-cli --pipe");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&protocol)
        .expect("write");
    let out = child.wait_with_output().expect("redis-cli --pipe");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("errors: 0, replies: 10000"), "{text}");
    assert_eq!(cli_ok(&server, &["dbsize"]), "10000");

    // --scan drives numeric cursors to the end: every key once.
    let all = cli_ok(&server, &["--scan"]);
    let keys: Vec<&str> = all.lines().collect();
    assert_eq!(keys.len(), 10_000);
    let expected: Vec<String> = (0..10_000).map(|i| format!("key:{i:05}")).collect();
    assert_eq!(keys, expected);
    let some = cli_ok(&server, &["--scan", "--pattern", "key:0000?"]);
    assert_eq!(some.lines().count(), 10);

    // --bigkeys uses SCAN, TYPE and STRLEN.
    let big = cli_ok(&server, &["--bigkeys"]);
    assert!(
        big.contains("Biggest string found") && big.contains("has 699 bytes"),
        "{big}"
    );
}

#[test]
fn redis_benchmark_runs_against_the_server() {
    if !common::have("redis-benchmark") {
        common::skip(
            "redis_benchmark_runs_against_the_server",
            "redis-benchmark is not installed (Debian package redis-tools)",
        );
        return;
    }
    let Some((_dir, server)) = start("redis_benchmark_runs_against_the_server", &[]) else {
        return;
    };
    let out = Command::new("redis-benchmark")
        .args(["-p", &server.port().to_string()])
        .args([
            "-t", "set,get", "-n", "2000", "-d", "1000", "-P", "8", "-c", "4", "-q",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for test in ["SET: ", "GET: "] {
        assert!(
            text.contains(test) && text.contains("requests per second"),
            "{text}"
        );
    }
    // redis-benchmark wrote key:__rand_int__ with values of 1,000 bytes.
    assert_eq!(cli_ok(&server, &["strlen", "key:__rand_int__"]), "1000");
}
