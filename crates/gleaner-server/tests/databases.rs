//! Numbered databases, expiry across restarts, the key limit, the keyspace layout marker,
//! `--sync everysec` and `SHUTDOWN`: what Redis's own suite (run with `--singledb`) does not
//! reach.

mod common;

use std::time::{Duration, Instant};

use common::Server;
use redis::{Connection, Value};

fn start(args: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&dir.path().join("db"), args);
    (dir, server)
}

fn cmd(con: &mut Connection, args: &[&[u8]]) -> Result<Value, String> {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).expect("name"));
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query::<Value>(con).map_err(|e| {
        format!(
            "{} {}",
            e.code().unwrap_or_default(),
            e.detail().unwrap_or_default()
        )
    })
}

fn ok(con: &mut Connection, args: &[&[u8]]) -> Value {
    cmd(con, args).unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(args[0])))
}

fn int(con: &mut Connection, args: &[&[u8]]) -> i64 {
    match ok(con, args) {
        Value::Int(n) => n,
        v => panic!("{v:?}"),
    }
}

fn get(con: &mut Connection, key: &[u8]) -> Option<Vec<u8>> {
    match ok(con, &[b"GET", key]) {
        Value::Nil => None,
        Value::BulkString(b) => Some(b),
        v => panic!("{v:?}"),
    }
}

fn keys(con: &mut Connection) -> Vec<Vec<u8>> {
    let Value::Array(found) = ok(con, &[b"KEYS", b"*"]) else {
        panic!("KEYS")
    };
    let mut found: Vec<Vec<u8>> = found
        .into_iter()
        .map(|v| match v {
            Value::BulkString(b) => b,
            v => panic!("{v:?}"),
        })
        .collect();
    found.sort();
    found
}

#[test]
fn databases_are_separate_and_flushdb_clears_one() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    // A database-0 key starting with 0xFF, and one that looks like database 1's stored form.
    ok(&mut c, &[b"SET", b"\xFFraw", b"zero"]);
    ok(&mut c, &[b"SET", b"\xFF\x01k", b"zero-too"]);
    ok(&mut c, &[b"SET", b"k", b"0"]);
    ok(&mut c, &[b"SELECT", b"1"]);
    assert_eq!(get(&mut c, b"k"), None);
    assert_eq!(int(&mut c, &[b"DBSIZE"]), 0);
    ok(&mut c, &[b"SET", b"k", b"1"]);
    ok(&mut c, &[b"SELECT", b"15"]);
    ok(&mut c, &[b"SET", b"k", b"15"]);
    ok(&mut c, &[b"SET", b"other", b"15"]);
    assert_eq!(int(&mut c, &[b"DBSIZE"]), 2);
    assert_eq!(keys(&mut c), vec![b"k".to_vec(), b"other".to_vec()]);
    ok(&mut c, &[b"SELECT", b"0"]);
    assert_eq!(
        keys(&mut c),
        vec![b"k".to_vec(), b"\xFF\x01k".to_vec(), b"\xFFraw".to_vec()]
    );
    assert_eq!(get(&mut c, b"\xFF\x01k"), Some(b"zero-too".to_vec()));

    // SCAN walks only the selected database, both of database 0's ranges.
    let mut cursor = b"0".to_vec();
    let mut seen = Vec::new();
    loop {
        let Value::Array(page) = ok(&mut c, &[b"SCAN", &cursor, b"COUNT", b"1"]) else {
            panic!("scan")
        };
        let Value::BulkString(next) = &page[0] else {
            panic!("cursor")
        };
        let Value::Array(ks) = &page[1] else {
            panic!("keys")
        };
        seen.extend(ks.iter().map(|v| match v {
            Value::BulkString(b) => b.clone(),
            v => panic!("{v:?}"),
        }));
        cursor.clone_from(next);
        if cursor == b"0" {
            break;
        }
    }
    seen.sort();
    assert_eq!(seen, keys(&mut c));

    // MOVE and COPY ... DB carry values and expiries across databases.
    ok(&mut c, &[b"SET", b"moving", b"m", b"EX", b"1000"]);
    assert_eq!(int(&mut c, &[b"MOVE", b"moving", b"1"]), 1);
    assert_eq!(get(&mut c, b"moving"), None);
    assert_eq!(int(&mut c, &[b"COPY", b"k", b"copied", b"DB", b"1"]), 1);
    assert_eq!(
        cmd(&mut c, &[b"MOVE", b"k", b"16"]),
        Err("ERR DB index is out of range".into())
    );
    ok(&mut c, &[b"SELECT", b"1"]);
    assert_eq!(get(&mut c, b"moving"), Some(b"m".to_vec()));
    assert!((990..=1000).contains(&int(&mut c, &[b"TTL", b"moving"])));
    assert_eq!(get(&mut c, b"copied"), Some(b"0".to_vec()));

    // FLUSHDB clears database 1 only; FLUSHALL clears them all.
    ok(&mut c, &[b"FLUSHDB"]);
    assert_eq!(int(&mut c, &[b"DBSIZE"]), 0);
    ok(&mut c, &[b"SELECT", b"15"]);
    assert_eq!(int(&mut c, &[b"DBSIZE"]), 2);
    ok(&mut c, &[b"SELECT", b"0"]);
    assert_eq!(int(&mut c, &[b"DBSIZE"]), 3);
    let info = match ok(&mut c, &[b"INFO", b"keyspace"]) {
        Value::BulkString(b) => String::from_utf8(b).expect("utf-8"),
        Value::VerbatimString { text, .. } => text,
        v => panic!("{v:?}"),
    };
    assert!(
        info.contains("db0:keys=3,expires=0,avg_ttl=0\r\n"),
        "{info}"
    );
    assert!(info.contains("db15:keys=2,"), "{info}");
    assert!(!info.contains("db1:"), "{info}");
    ok(&mut c, &[b"FLUSHALL", b"ASYNC"]);
    for db in [&b"0"[..], b"1", b"15"] {
        ok(&mut c, &[b"SELECT", db]);
        assert_eq!(int(&mut c, &[b"DBSIZE"]), 0);
    }
    assert_eq!(
        cmd(&mut c, &[b"SELECT", b"16"]),
        Err("ERR DB index is out of range".into())
    );
}

#[test]
fn info_keyspace_counts_expiring_keys_and_their_mean_ttl() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    ok(&mut c, &[b"SET", b"a", b"1"]);
    ok(&mut c, &[b"SET", b"b", b"1", b"EX", b"1000"]);
    // A separated value (large), expiring too: its expiry is in its handle.
    let big = vec![b'v'; 64 << 10];
    ok(&mut c, &[b"SET", b"c", &big, b"EX", b"3000"]);
    ok(&mut c, &[b"SELECT", b"2"]);
    ok(&mut c, &[b"SET", b"x", b"1"]);
    let info = match ok(&mut c, &[b"INFO", b"keyspace"]) {
        Value::BulkString(b) => String::from_utf8(b).expect("utf-8"),
        Value::VerbatimString { text, .. } => text,
        v => panic!("{v:?}"),
    };
    let db0 = info
        .lines()
        .find_map(|l| l.strip_prefix("db0:"))
        .expect("db0");
    let fields: Vec<(&str, u64)> = db0
        .split(',')
        .map(|f| {
            let (k, v) = f.split_once('=').expect("field");
            (k, v.trim().parse().expect("number"))
        })
        .collect();
    assert_eq!(fields[0], ("keys", 3), "{info}");
    assert_eq!(fields[1], ("expires", 2), "{info}");
    // The mean of about 1,000 s and 3,000 s left, in milliseconds.
    let (name, avg) = fields[2];
    assert_eq!(name, "avg_ttl");
    assert!((1_990_000..=2_000_000).contains(&avg), "{info}");
    assert!(
        info.contains("db2:keys=1,expires=0,avg_ttl=0\r\n"),
        "{info}"
    );
}

#[test]
fn a_transaction_may_span_databases_and_watch_remembers_the_database() {
    let (_dir, server) = start(&["--databases", "4"]);
    let mut c = server.conn();
    let mut other = server.conn();
    ok(&mut c, &[b"SELECT", b"2"]);
    ok(&mut c, &[b"SET", b"x", b"30"]);
    ok(&mut c, &[b"WATCH", b"x"]);
    // The same name in another database is another key.
    ok(&mut other, &[b"SELECT", b"1"]);
    ok(&mut other, &[b"SET", b"x", b"10"]);
    ok(&mut c, &[b"MULTI"]);
    ok(&mut c, &[b"SET", b"a", b"in-2"]);
    ok(&mut c, &[b"SELECT", b"3"]);
    ok(&mut c, &[b"SET", b"a", b"in-3"]);
    let Value::Array(replies) = ok(&mut c, &[b"EXEC"]) else {
        panic!("exec")
    };
    assert_eq!(replies.len(), 3);
    // The transaction's SELECT carries over, as in Redis.
    assert_eq!(get(&mut c, b"a"), Some(b"in-3".to_vec()));
    ok(&mut c, &[b"SELECT", b"2"]);
    assert_eq!(get(&mut c, b"a"), Some(b"in-2".to_vec()));
    // A change in the watched key's own database fails EXEC.
    ok(&mut c, &[b"WATCH", b"x"]);
    ok(&mut other, &[b"SELECT", b"2"]);
    ok(&mut other, &[b"SET", b"x", b"31"]);
    ok(&mut c, &[b"MULTI"]);
    ok(&mut c, &[b"SET", b"a", b"lost"]);
    assert_eq!(ok(&mut c, &[b"EXEC"]), Value::Nil);
    assert_eq!(get(&mut c, b"a"), Some(b"in-2".to_vec()));
}

#[test]
fn the_key_limit_is_the_same_in_every_database() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    let limit = gleaner_server::keyspace::MAX_KEY_LEN;
    let fits = vec![b'k'; limit];
    let over = vec![b'k'; limit + 1];
    for db in [&b"0"[..], b"7"] {
        ok(&mut c, &[b"SELECT", db]);
        ok(&mut c, &[b"SET", &fits, b"v"]);
        let e = cmd(&mut c, &[b"SET", &over, b"v"]).expect_err("over the limit");
        assert!(e.contains("key limit"), "{e}");
        // Reads of such a key find nothing, as of a missing key.
        assert_eq!(get(&mut c, &over), None);
        assert_eq!(int(&mut c, &[b"EXISTS", &over]), 0);
        assert_eq!(int(&mut c, &[b"TTL", &over]), -2);
    }
}

#[test]
fn expiries_survive_a_restart_and_expired_keys_stay_gone() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    {
        let server = Server::start(&dir, &[]);
        let mut c = server.conn();
        ok(&mut c, &[b"SET", b"long", b"v", b"EX", b"1000"]);
        ok(&mut c, &[b"SELECT", b"5"]);
        ok(&mut c, &[b"SET", b"short", b"v", b"PX", b"50"]);
        ok(&mut c, &[b"SET", b"kept", b"v"]);
        let (status, stderr) = server.stop("TERM");
        assert!(status.success(), "{stderr}");
    }
    // Past the short expiry whatever the scheduling: the clock only moves forward.
    std::thread::sleep(Duration::from_millis(100));
    let server = Server::start(&dir, &[]);
    let mut c = server.conn();
    assert!((990..=1000).contains(&int(&mut c, &[b"TTL", b"long"])));
    ok(&mut c, &[b"SELECT", b"5"]);
    assert_eq!(get(&mut c, b"short"), None);
    assert_eq!(int(&mut c, &[b"DBSIZE"]), 1);
    assert_eq!(int(&mut c, &[b"TTL", b"kept"]), -1);
}

#[test]
fn keys_of_databases_beyond_databases_are_reported_at_start() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    {
        let server = Server::start(&dir, &[]);
        let mut c = server.conn();
        ok(&mut c, &[b"SELECT", b"9"]);
        ok(&mut c, &[b"SET", b"k", b"v"]);
        let (status, stderr) = server.stop("TERM");
        assert!(status.success(), "{stderr}");
    }
    let server = Server::start(&dir, &["--databases", "4"]);
    let stderr = server.stderr();
    assert!(
        stderr.contains("keys of database 9, beyond --databases 4"),
        "{stderr}"
    );
    // With enough databases the key is there, and nothing is reported.
    drop(server);
    let server = Server::start(&dir, &["--databases", "10"]);
    assert!(!server.stderr().contains("beyond --databases"));
    let mut c = server.conn();
    ok(&mut c, &[b"SELECT", b"9"]);
    assert_eq!(get(&mut c, b"k"), Some(b"v".to_vec()));
}

#[test]
fn a_directory_with_unescaped_ff_keys_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let legacy = tmp.path().join("legacy");
    let plain = tmp.path().join("plain");
    // Written without the server's layout marker, as a gleaner-server without databases did.
    {
        let db = gleaner::Db::open(&legacy, gleaner::Options::default()).expect("open");
        db.put(b"\xFF\x03stored-raw", b"v").expect("put");
        db.close().expect("close");
        let db = gleaner::Db::open(&plain, gleaner::Options::default()).expect("open");
        db.put(b"text-key", b"v").expect("put");
        db.close().expect("close");
    }
    let out = std::process::Command::new(common::binary())
        .arg(&legacy)
        .args(["--bind", "127.0.0.1:0"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("0xFF") && stderr.contains("marker"),
        "{stderr}"
    );
    // Without such keys, an old directory is served as database 0.
    let server = Server::start(&plain, &[]);
    let mut c = server.conn();
    assert_eq!(get(&mut c, b"text-key"), Some(b"v".to_vec()));
    assert_eq!(int(&mut c, &[b"DBSIZE"]), 1);
}

/// `server_wal_syncs` of `INFO persistence`, and the section.
fn server_syncs(c: &mut Connection) -> (u64, String) {
    let info = match ok(c, &[b"INFO", b"persistence"]) {
        Value::BulkString(b) => String::from_utf8(b).expect("utf-8"),
        Value::VerbatimString { text, .. } => text,
        v => panic!("{v:?}"),
    };
    let syncs = info
        .lines()
        .find_map(|l| l.strip_prefix("server_wal_syncs:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("server_wal_syncs");
    (syncs, info)
}

/// Waits (bounded) until the server ran more than `than` WAL syncs; returns how many.
fn wait_for_sync(c: &mut Connection, than: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (syncs, info) = server_syncs(c);
        assert!(info.contains("sync:everysec"), "{info}");
        if syncs > than {
            return syncs;
        }
        assert!(Instant::now() < deadline, "no WAL sync within 60 s: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn everysec_syncs_in_the_background_and_shutdown_stops_the_server() {
    let (_dir, server) = start(&["--sync", "everysec"]);
    let mut c = server.conn();
    // Each write is followed by a sync within a second or so, with no command asking.
    ok(&mut c, &[b"SET", b"a", b"b"]);
    let first = wait_for_sync(&mut c, 0);
    ok(&mut c, &[b"SET", b"a", b"c"]);
    let second = wait_for_sync(&mut c, first);
    // Without writes, no sync is due.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        server_syncs(&mut c).0,
        second,
        "a sync with nothing written"
    );
    assert_eq!(
        cmd(&mut c, &[b"SHUTDOWN", b"ABORT"]),
        Err("ERR No shutdown in progress that can be aborted".into())
    );
    // SHUTDOWN stops the server as SIGTERM does.
    let _ = cmd(&mut c, &[b"SHUTDOWN"]);
    let (status, stderr) = server.wait_exit();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("closed cleanly"), "{stderr}");
}

#[test]
fn randomkey_draws_every_key_of_a_small_database_evenly() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    assert_eq!(ok(&mut c, &[b"RANDOMKEY"]), Value::Nil);
    // Keys far apart and close together: a draw by position alone would favour "zzz".
    for k in [&b"aaa"[..], b"aab", b"zzz"] {
        ok(&mut c, &[b"SET", k, b"v"]);
    }
    ok(&mut c, &[b"SELECT", b"1"]);
    ok(&mut c, &[b"SET", b"other-db", b"v"]);
    ok(&mut c, &[b"SELECT", b"0"]);
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..600 {
        let Value::BulkString(k) = ok(&mut c, &[b"RANDOMKEY"]) else {
            panic!("RANDOMKEY")
        };
        *counts.entry(k).or_insert(0u32) += 1;
    }
    assert_eq!(counts.len(), 3, "{counts:?}");
    // Each of the 3 is drawn with probability 1/3 (200 expected of 600); below 100 would take
    // a deviation of more than 8 standard deviations.
    assert!(counts.values().all(|&n| n >= 100), "{counts:?}");
}
