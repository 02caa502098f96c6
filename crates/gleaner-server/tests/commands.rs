//! Every command of docs/server.md driven through the `redis` crate against the real binary:
//! replies and error texts as Redis gives them, binary-safe and large values, pipelining,
//! MULTI/EXEC as one atomic batch, SCAN's numeric cursors, RESP3, AUTH, and `-OOM` at the
//! space budget.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use common::{Server, read_line, resp};
use redis::{Commands, Value};

fn start(args: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&dir.path().join("db"), args);
    (dir, server)
}

/// Runs a command; `Err` is the server's error line (code included).
fn run(con: &mut redis::Connection, args: &[&[u8]]) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("utf-8 name"));
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<Value>(con).map_err(|e| text(&e))
}

/// The error line as the server sent it (`CODE message`).
fn text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

fn err(con: &mut redis::Connection, args: &[&[u8]]) -> String {
    match run(con, args) {
        Err(e) => e,
        Ok(v) => panic!("{:?} succeeded with {v:?}", args[0]),
    }
}

fn bulk(v: &[u8]) -> Value {
    Value::BulkString(v.to_vec())
}

#[test]
fn strings_commands_answer_as_redis_does() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    assert_eq!(
        run(&mut c, &[b"PING"]),
        Ok(Value::SimpleString("PONG".into()))
    );
    assert_eq!(run(&mut c, &[b"PING", b"hi"]), Ok(bulk(b"hi")));
    assert_eq!(run(&mut c, &[b"ECHO", b"x y"]), Ok(bulk(b"x y")));

    // SET and its conditions.
    assert_eq!(run(&mut c, &[b"SET", b"k", b"v1"]), Ok(Value::Okay));
    assert_eq!(run(&mut c, &[b"SET", b"k", b"v2", b"NX"]), Ok(Value::Nil));
    assert_eq!(run(&mut c, &[b"GET", b"k"]), Ok(bulk(b"v1")));
    assert_eq!(run(&mut c, &[b"SET", b"k", b"v2", b"XX"]), Ok(Value::Okay));
    assert_eq!(
        run(&mut c, &[b"SET", b"missing", b"v", b"XX"]),
        Ok(Value::Nil)
    );
    assert_eq!(run(&mut c, &[b"EXISTS", b"missing"]), Ok(Value::Int(0)));
    assert_eq!(run(&mut c, &[b"SET", b"new", b"n", b"nx"]), Ok(Value::Okay));
    assert_eq!(run(&mut c, &[b"SET", b"k", b"v3", b"GET"]), Ok(bulk(b"v2")));
    assert_eq!(run(&mut c, &[b"SET", b"k2", b"a", b"GET"]), Ok(Value::Nil));
    assert_eq!(
        run(&mut c, &[b"SET", b"k", b"v4", b"KEEPTTL"]),
        Ok(Value::Okay)
    );
    assert_eq!(
        err(&mut c, &[b"SET", b"k", b"v", b"NX", b"XX"]),
        "ERR syntax error"
    );
    for ttl in [&b"EX"[..], b"PX", b"EXAT", b"PXAT"] {
        assert_eq!(
            err(&mut c, &[b"SET", b"k", b"v", ttl, b"0"]),
            "ERR invalid expire time in 'set' command"
        );
    }
    assert_eq!(
        err(&mut c, &[b"SET", b"k", b"v", b"EX", b"1", b"PX", b"1"]),
        "ERR syntax error"
    );
    assert_eq!(
        run(&mut c, &[b"GET", b"k"]),
        Ok(bulk(b"v4")),
        "refused SETs wrote nothing"
    );

    // DEL, EXISTS (repeats count), MGET, MSET.
    assert_eq!(
        run(&mut c, &[b"MSET", b"a", b"1", b"b", b"2", b"c", b""]),
        Ok(Value::Okay)
    );
    assert_eq!(
        run(&mut c, &[b"MGET", b"a", b"nope", b"c"]),
        Ok(Value::Array(vec![bulk(b"1"), Value::Nil, bulk(b"")]))
    );
    assert_eq!(
        run(&mut c, &[b"EXISTS", b"a", b"a", b"nope", b"c"]),
        Ok(Value::Int(3))
    );
    assert_eq!(
        run(&mut c, &[b"DEL", b"a", b"nope", b"b", b"a"]),
        Ok(Value::Int(2))
    );
    assert_eq!(run(&mut c, &[b"GET", b"a"]), Ok(Value::Nil));
    assert_eq!(
        err(&mut c, &[b"MSET", b"a", b"1", b"b"]),
        "ERR wrong number of arguments for 'mset' command"
    );

    // STRLEN and GETRANGE.
    assert_eq!(
        run(&mut c, &[b"SET", b"s", b"This is a string"]),
        Ok(Value::Okay)
    );
    assert_eq!(run(&mut c, &[b"STRLEN", b"s"]), Ok(Value::Int(16)));
    assert_eq!(run(&mut c, &[b"STRLEN", b"nope"]), Ok(Value::Int(0)));
    assert_eq!(
        run(&mut c, &[b"GETRANGE", b"s", b"0", b"3"]),
        Ok(bulk(b"This"))
    );
    assert_eq!(
        run(&mut c, &[b"GETRANGE", b"s", b"-3", b"-1"]),
        Ok(bulk(b"ing"))
    );
    assert_eq!(
        run(&mut c, &[b"GETRANGE", b"s", b"10", b"100"]),
        Ok(bulk(b"string"))
    );
    assert_eq!(
        run(&mut c, &[b"GETRANGE", b"nope", b"0", b"-1"]),
        Ok(bulk(b""))
    );
    assert_eq!(
        err(&mut c, &[b"GETRANGE", b"s", b"x", b"1"]),
        "ERR value is not an integer or out of range"
    );

    assert_eq!(
        run(&mut c, &[b"TYPE", b"s"]),
        Ok(Value::SimpleString("string".into()))
    );
    assert_eq!(
        run(&mut c, &[b"TYPE", b"nope"]),
        Ok(Value::SimpleString("none".into()))
    );

    // Connection commands.
    assert_eq!(run(&mut c, &[b"SELECT", b"0"]), Ok(Value::Okay));
    assert_eq!(
        err(&mut c, &[b"SELECT", b"16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(run(&mut c, &[b"CLIENT", b"GETNAME"]), Ok(Value::Nil));
    assert_eq!(
        run(&mut c, &[b"CLIENT", b"SETNAME", b"me"]),
        Ok(Value::Okay)
    );
    assert_eq!(run(&mut c, &[b"CLIENT", b"GETNAME"]), Ok(bulk(b"me")));
    assert!(err(&mut c, &[b"CLIENT", b"SETNAME", b"a b"]).contains("cannot contain spaces"));

    // Redis's texts for unknown commands and wrong arities.
    assert_eq!(
        err(&mut c, &[b"LPUSH", b"x"]),
        "ERR unknown command 'LPUSH', with args beginning with: 'x' "
    );
    assert_eq!(
        err(&mut c, &[b"GET", b"a", b"b"]),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        run(&mut c, &[b"PING"]),
        Ok(Value::SimpleString("PONG".into()))
    );
}

#[test]
fn values_are_binary_safe_and_large_ones_round_trip() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    let _: () = c.set(&all_bytes[..], &all_bytes[..]).expect("set");
    let back: Vec<u8> = c.get(&all_bytes[..]).expect("get");
    assert_eq!(back, all_bytes);
    let _: () = c.set("empty", b"").expect("set");
    let back: Option<Vec<u8>> = c.get("empty").expect("get");
    assert_eq!(
        back,
        Some(Vec::new()),
        "an empty value is not a missing one"
    );

    // Values of 8 MiB: separated into value tables by the engine.
    let big: Vec<u8> = (0..8u32 << 20).map(|i| (i * 7 % 251) as u8).collect();
    for i in 0..3u8 {
        let mut v = big.clone();
        v[0] = i;
        let _: () = c.set(format!("big{i}"), v).expect("set big");
    }
    // Flushed and compacted, they are read back from value tables.
    let () = redis::cmd("GLEANER.COMPACT")
        .query(&mut c)
        .expect("compact");
    for i in 0..3u8 {
        let v: Vec<u8> = c.get(format!("big{i}")).expect("get big");
        assert_eq!(v.len(), big.len());
        assert_eq!(v[0], i);
        assert_eq!(v[1..], big[1..]);
    }
    let len: i64 = c.strlen("big1").expect("strlen");
    assert_eq!(len, 8 << 20);
    let tail: Vec<u8> = redis::cmd("GETRANGE")
        .arg("big2")
        .arg(-5)
        .arg(-1)
        .query(&mut c)
        .expect("getrange");
    assert_eq!(tail, big[big.len() - 5..]);
    let stats: String = redis::cmd("GLEANER.STATS").query(&mut c).expect("stats");
    let stats: serde_json::Value = serde_json::from_str(&stats).expect("json");
    assert!(
        stats["values"]["tables"].as_u64().is_some_and(|n| n >= 1),
        "large values live in value tables: {stats}"
    );
}

#[test]
fn pipelines_of_thousands_of_commands_are_answered_in_order() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    let mut pipe = redis::pipe();
    for i in 0..5000 {
        pipe.set(format!("key{i:05}"), format!("value{i}")).ignore();
    }
    for i in (0..5000).rev() {
        pipe.get(format!("key{i:05}"));
    }
    let values: Vec<String> = pipe.query(&mut c).expect("pipeline");
    assert_eq!(values.len(), 5000);
    for (n, v) in values.iter().enumerate() {
        assert_eq!(v, &format!("value{}", 4999 - n));
    }
    // Every key was written once: the estimate is exact.
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(n, 5000);
}

#[test]
fn scan_walks_every_key_once_with_numeric_cursors() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    let mut expected = BTreeSet::new();
    let mut pipe = redis::pipe();
    for i in 0..777 {
        let key = format!("{}:{i}", if i % 3 == 0 { "user" } else { "item" });
        pipe.set(&key, i).ignore();
        expected.insert(key);
    }
    let () = pipe.query(&mut c).expect("load");

    // A full walk with COUNT 7: every key exactly once, in key order.
    let mut cursor = 0u64;
    let mut seen = Vec::new();
    let mut calls = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(7)
            .query(&mut c)
            .expect("scan");
        assert!(keys.len() <= 7);
        seen.extend(keys);
        calls += 1;
        assert!(calls <= 200, "the walk must end");
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), expected.len(), "no key twice, none missing");
    assert_eq!(seen, expected.iter().cloned().collect::<Vec<_>>());

    // MATCH filters; the redis crate's scan iterator drives the cursors.
    let users: BTreeSet<String> = c
        .scan_match::<_, String>("user:*")
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("scan");
    let expected_users: BTreeSet<String> = expected
        .iter()
        .filter(|k| k.starts_with("user:"))
        .cloned()
        .collect();
    assert_eq!(users, expected_users);
    let (_, none): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("TYPE")
        .arg("hash")
        .query(&mut c)
        .expect("scan");
    assert!(none.is_empty(), "every key is a string");

    // A cursor this server never issued (or one from before a restart) is an error.
    let e = err(&mut c, &[b"SCAN", b"123456789"]);
    assert!(
        e.contains("invalid cursor") && e.contains("start the scan again"),
        "{e}"
    );
    assert_eq!(err(&mut c, &[b"SCAN", b"-1"]), "ERR invalid cursor");
    assert_eq!(
        err(&mut c, &[b"SCAN", b"0", b"COUNT", b"0"]),
        "ERR syntax error"
    );
    // A cursor may be repeated (a client retrying after a timeout gets the same page).
    let (next, page): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("COUNT")
        .arg(5)
        .query(&mut c)
        .expect("scan");
    let again: (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(next)
        .arg("COUNT")
        .arg(5)
        .query(&mut c)
        .expect("scan");
    let again2: (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(next)
        .arg("COUNT")
        .arg(5)
        .query(&mut c)
        .expect("scan");
    assert_eq!(again.1, again2.1);
    assert!(page.last() < again.1.first());
}

/// A server with a row cache (`--option row_cache_size`) answers repeated GETs from it, never
/// with a value overwritten, deleted, flushed or expired since, and INFO reports it.
#[test]
fn a_row_cache_serves_gets_and_never_a_stale_value() {
    let (_dir, server) = start(&["--option", "row_cache_size=1MiB"]);
    let mut c = server.conn();
    let big = |tag: u8| vec![tag; 8192];
    let get = |c: &mut redis::Connection, k: &str| -> Option<Vec<u8>> { c.get(k).expect("get") };
    let () = c.set("a", big(1)).expect("set");
    let () = c.set("b", big(2)).expect("set");
    for _ in 0..2 {
        assert_eq!(get(&mut c, "a"), Some(big(1)));
        assert_eq!(get(&mut c, "b"), Some(big(2)));
    }
    let () = c.set("a", big(3)).expect("set");
    let _: i64 = c.del("b").expect("del");
    assert_eq!(get(&mut c, "a"), Some(big(3)));
    assert_eq!(get(&mut c, "b"), None);
    let _: i64 = c.append("a", b"tail").expect("append");
    let mut appended = big(3);
    appended.extend_from_slice(b"tail");
    assert_eq!(get(&mut c, "a"), Some(appended.clone()));
    assert_eq!(get(&mut c, "a"), Some(appended));
    let _: bool = c.pexpire("a", 50).expect("pexpire");
    thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(get(&mut c, "a"), None, "expired");
    let () = c.set("c", big(4)).expect("set");
    assert_eq!(get(&mut c, "c"), Some(big(4)));
    let () = redis::cmd("FLUSHDB").query(&mut c).expect("flushdb");
    assert_eq!(get(&mut c, "c"), None, "flushed");
    let memory: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut c)
        .expect("info");
    assert!(
        memory.contains("row_cache_capacity_bytes:1048576\r\n"),
        "{memory}"
    );
    assert!(memory.contains("row_cache_usage_bytes:"), "{memory}");
    let gleaner: String = redis::cmd("INFO")
        .arg("gleaner")
        .query(&mut c)
        .expect("info");
    // The second GET of each of `a` (twice after the APPEND) and `b` hit.
    let hits = gleaner
        .lines()
        .find_map(|l| l.strip_prefix("row_cache_hits:"))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .expect("row_cache_hits");
    assert!(hits >= 3, "{gleaner}");
}

#[test]
fn info_dbsize_command_and_admin_commands() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    let mut pipe = redis::pipe();
    for i in 0..300 {
        pipe.set(format!("k{i}"), vec![b'x'; 100 + i]).ignore();
    }
    let () = pipe.query(&mut c).expect("load");
    let info: String = redis::cmd("INFO").query(&mut c).expect("info");
    for section in [
        "# Server",
        "# Clients",
        "# Stats",
        "# Keyspace",
        "# Gleaner",
    ] {
        assert!(info.contains(section), "{section} missing:\n{info}");
    }
    assert!(info.contains("db0:keys=300,"), "{info}");
    assert!(info.contains("connected_clients:1\r\n"), "{info}");
    let gleaner: String = redis::cmd("INFO")
        .arg("gleaner")
        .query(&mut c)
        .expect("info");
    assert!(gleaner.starts_with("# Gleaner\r\n"), "{gleaner}");
    assert!(gleaner.contains("gc_policy:") && gleaner.contains("disk_bytes:"));
    assert!(!gleaner.contains("# Server"));
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(dbsize, 300);

    let count: i64 = redis::cmd("COMMAND")
        .arg("COUNT")
        .query(&mut c)
        .expect("count");
    let all: Vec<Value> = redis::cmd("COMMAND").query(&mut c).expect("command");
    assert_eq!(all.len() as i64, count);
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("get")
        .arg("nosuch")
        .query(&mut c)
        .expect("command info");
    assert_eq!(info.len(), 2);
    assert_eq!(info[1], Value::Nil);
    let Value::Array(get) = &info[0] else {
        panic!("{info:?}")
    };
    assert_eq!(get[0], bulk(b"get"));
    assert_eq!(get[1], Value::Int(2));

    // Admin commands: COMPACT, then GC and CHECK report JSON.
    for i in 0..300 {
        let _: () = c.del(format!("k{i}")).expect("del");
    }
    let ok: String = redis::cmd("GLEANER.COMPACT")
        .query(&mut c)
        .expect("compact");
    assert_eq!(ok, "OK");
    let gc: String = redis::cmd("GLEANER.GC").query(&mut c).expect("gc");
    let gc: serde_json::Value = serde_json::from_str(&gc).expect("gc json");
    assert!(gc.get("jobs").is_some(), "{gc}");
    let check: String = redis::cmd("GLEANER.CHECK").query(&mut c).expect("check");
    let check: serde_json::Value = serde_json::from_str(&check).expect("check json");
    assert_eq!(check["ok"], true, "{check}");
    assert_eq!(check["keys"], 0, "{check}");
    let stats: String = redis::cmd("GLEANER.STATS").query(&mut c).expect("stats");
    let stats: serde_json::Value = serde_json::from_str(&stats).expect("stats json");
    assert!(
        stats.get("space").is_some() && stats.get("gc").is_some(),
        "{stats}"
    );
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(dbsize, 0, "compaction dropped the deleted keys");
}

#[test]
fn multi_exec_is_one_atomic_batch() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    // Reads in a transaction see its own earlier writes.
    let (a, b, n): (String, Option<String>, i64) = redis::pipe()
        .atomic()
        .set("x", "1")
        .ignore()
        .get("x")
        .del("x")
        .ignore()
        .get("x")
        .exists("x")
        .query(&mut c)
        .expect("exec");
    assert_eq!((a.as_str(), b, n), ("1", None, 0));

    // A refused command while queuing aborts the whole transaction: nothing is written.
    assert_eq!(run(&mut c, &[b"MULTI"]), Ok(Value::Okay));
    assert_eq!(
        run(&mut c, &[b"SET", b"t", b"1"]),
        Ok(Value::SimpleString("QUEUED".into()))
    );
    assert_eq!(
        err(&mut c, &[b"SET", b"t", b"1", b"EX"]),
        "ERR syntax error"
    );
    assert!(err(&mut c, &[b"NOSUCH"]).contains("unknown command"));
    assert!(err(&mut c, &[b"SCAN", b"0"]).contains("not allowed inside MULTI"));
    let e = err(&mut c, &[b"EXEC"]);
    assert!(e.starts_with("EXECABORT"), "{e}");
    assert_eq!(run(&mut c, &[b"GET", b"t"]), Ok(Value::Nil));
    assert_eq!(err(&mut c, &[b"EXEC"]), "ERR EXEC without MULTI");
    assert_eq!(run(&mut c, &[b"MULTI"]), Ok(Value::Okay));
    assert_eq!(
        err(&mut c, &[b"MULTI"]),
        "ERR MULTI calls can not be nested"
    );
    assert_eq!(
        run(&mut c, &[b"SET", b"t", b"1"]),
        Ok(Value::SimpleString("QUEUED".into()))
    );
    assert_eq!(run(&mut c, &[b"DISCARD"]), Ok(Value::Okay));
    assert_eq!(run(&mut c, &[b"GET", b"t"]), Ok(Value::Nil));

    // Concurrent transactions keep two keys equal; readers never see them differ.
    for k in ["left", "right"] {
        let _: () = c.set(k, 0).expect("set");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let mut wc = server.conn();
            thread::spawn(move || {
                for i in 0..1500 {
                    let v = w * 10_000 + i;
                    let () = redis::pipe()
                        .atomic()
                        .set("left", v)
                        .ignore()
                        .set("right", v)
                        .ignore()
                        .query(&mut wc)
                        .expect("exec");
                }
            })
        })
        .collect();
    let reader = {
        let mut rc = server.conn();
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) || reads == 0 {
                let (l, r): (i64, i64) = redis::cmd("MGET")
                    .arg("left")
                    .arg("right")
                    .query(&mut rc)
                    .expect("mget");
                assert_eq!(l, r, "MGET saw half a transaction");
                let (l, r): (i64, i64) = redis::pipe()
                    .atomic()
                    .get("left")
                    .get("right")
                    .query(&mut rc)
                    .expect("exec");
                assert_eq!(l, r, "a transaction saw half another");
                reads += 1;
            }
        })
    };
    for w in writers {
        w.join().expect("writer");
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().expect("reader");
}

#[test]
fn conditional_writes_are_atomic_across_clients() {
    let (_dir, server) = start(&[]);
    // Eight clients race SET NX on the same keys: exactly one wins each key.
    let wins: Vec<_> = (0..8)
        .map(|_| {
            let mut c = server.conn();
            thread::spawn(move || {
                let mut won = 0;
                for i in 0..200 {
                    let r: Option<String> = redis::cmd("SET")
                        .arg(format!("lock{i}"))
                        .arg("x")
                        .arg("NX")
                        .query(&mut c)
                        .expect("set nx");
                    won += usize::from(r.is_some());
                }
                won
            })
        })
        .collect();
    let total: usize = wins.into_iter().map(|t| t.join().expect("client")).sum();
    assert_eq!(total, 200);
}

#[test]
fn resp3_after_hello_3() {
    let (_dir, server) = start(&[]);
    // The redis crate sends HELLO 3 for protocol=resp3.
    let client =
        redis::Client::open(format!("redis://{}/?protocol=resp3", server.addr)).expect("client");
    let mut c = common::connect(&client);
    let _: () = c.set("a", "b").expect("set");
    assert_eq!(run(&mut c, &[b"GET", b"nope"]), Ok(Value::Nil));
    match run(&mut c, &[b"CONFIG", b"GET", b"appendfsync"]) {
        Ok(Value::Map(pairs)) => assert_eq!(pairs, vec![(bulk(b"appendfsync"), bulk(b"batch"))]),
        other => panic!("{other:?}"),
    }

    // On the wire: a map for HELLO 3, `_` for a null, `=` for INFO's verbatim text.
    let mut raw = server.raw();
    let hello_then_ping = |raw: &mut std::net::TcpStream, version: &[u8]| {
        let mut request = resp(&[b"HELLO", version]);
        request.extend_from_slice(&resp(&[b"PING"]));
        raw.write_all(&request).expect("write");
        let first = read_line(raw);
        for _ in 0..40 {
            if read_line(raw) == "+PONG" {
                return first;
            }
        }
        panic!("no PONG after HELLO");
    };
    assert_eq!(hello_then_ping(&mut raw, b"3"), "%7");
    raw.write_all(&resp(&[b"GET", b"nope"])).expect("write");
    assert_eq!(read_line(&mut raw), "_");
    raw.write_all(&resp(&[b"HELLO", b"4"])).expect("write");
    assert_eq!(read_line(&mut raw), "-NOPROTO unsupported protocol version");
    assert_eq!(hello_then_ping(&mut raw, b"2"), "*14");
    raw.write_all(&resp(&[b"GET", b"nope"])).expect("write");
    assert_eq!(read_line(&mut raw), "$-1");
}

#[test]
fn a_password_is_required_before_any_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, "s3cret\n").expect("write secret");
    let server = Server::start(
        &dir.path().join("db"),
        &["--requirepass-file", secret_file.to_str().expect("utf-8")],
    );
    let mut raw = server.raw();
    for (request, reply) in [
        (
            resp(&[b"SET", b"a", b"b"]),
            "-NOAUTH Authentication required.",
        ),
        (resp(&[b"GET", b"a"]), "-NOAUTH Authentication required."),
        (
            resp(&[b"AUTH", b"wrong"]),
            "-WRONGPASS invalid username-password pair or user is disabled.",
        ),
        (
            resp(&[b"AUTH", b"someone", b"s3cret"]),
            "-WRONGPASS invalid username-password pair or user is disabled.",
        ),
        (resp(&[b"AUTH", b"s3cret"]), "+OK"),
        (resp(&[b"SET", b"a", b"b"]), "+OK"),
    ] {
        raw.write_all(&request).expect("write");
        assert_eq!(read_line(&mut raw), reply);
    }
    assert!(
        server.conn().get::<_, String>("a").is_err(),
        "no password: refused"
    );

    // Clients pass the password in the URL (AUTH), or in HELLO 3 AUTH.
    let with_pass = redis::Client::open(format!("redis://:s3cret@{}/", server.addr)).expect("url");
    let v: String = common::connect(&with_pass).get("a").expect("get");
    assert_eq!(v, "b");
    let resp3 = redis::Client::open(format!(
        "redis://default:s3cret@{}/?protocol=resp3",
        server.addr
    ))
    .expect("url");
    let v: String = common::connect(&resp3).get("a").expect("get");
    assert_eq!(v, "b");

    // Before AUTH, a request may not make the server buffer much: 16 KiB per argument.
    let mut raw = server.raw();
    let reply = common::send_and_read_to_end(&mut raw, b"*2\r\n$4\r\nAUTH\r\n$100000\r\n");
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with("-ERR Protocol error: unauthenticated bulk length"),
        "{reply}"
    );
}

#[test]
fn auth_without_a_password_answers_as_redis_7() {
    let (_dir, server) = start(&[]);
    let mut c = server.conn();
    // The default user takes any password (Redis 7's `nopass` default user)...
    assert_eq!(run(&mut c, &[b"AUTH", b"default", b"x"]), Ok(Value::Okay));
    let hello = run(&mut c, &[b"HELLO", b"3", b"AUTH", b"default", b"x"]).expect("hello");
    assert!(format!("{hello:?}").contains("7.0.0"), "{hello:?}");
    // ...no other user exists, and the one-argument form names the missing password.
    assert_eq!(
        err(&mut c, &[b"AUTH", b"alice", b"x"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(
        err(&mut c, &[b"AUTH", b"x"]),
        "ERR AUTH <password> called without any password configured for the default user. \
         Are you sure your configuration is correct?"
    );
    // INFO names the same version as HELLO.
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut c)
        .expect("info");
    assert!(info.contains("redis_version:7.0.0\r\n"), "{info}");
}

#[test]
fn the_space_budget_answers_oom_and_reads_go_on() {
    let (_dir, server) = start(&[
        "--option",
        "gc_policy=terarkdb",
        "--option",
        "space_throttling=on",
        "--option",
        "max_disk_bytes=400KiB",
        "--option",
        "space_stop_timeout_ms=200",
        "--option",
        "memtable_size=64KiB",
        "--option",
        "value_table_size=64KiB",
        "--option",
        "min_separated_value_size=256",
    ]);
    let mut c = server.conn();
    let value = vec![b'v'; 1000];
    let mut written = 0u32;
    let error = loop {
        match c.set::<_, _, ()>(format!("key{written:06}"), &value[..]) {
            Ok(()) => written += 1,
            Err(e) => break text(&e),
        }
        assert!(written < 5000, "writes never stopped");
    };
    assert!(error.starts_with("OOM"), "{error}");
    assert!(error.contains("max_disk_bytes"), "{error}");
    // The refused write is not there; acknowledged ones are; the server still answers.
    let refused: Option<Vec<u8>> = c.get(format!("key{written:06}")).expect("get");
    assert_eq!(refused, None);
    let first: Vec<u8> = c.get("key000000").expect("get");
    assert_eq!(first, value);
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).expect("info");
    assert!(!info.contains("space_budget_errors:0\r\n"), "{info}");
    // A transaction refused by the budget says that nothing of it was applied.
    assert_eq!(run(&mut c, &[b"MULTI"]), Ok(Value::Okay));
    for key in [&b"tx1"[..], b"tx2"] {
        assert_eq!(
            run(&mut c, &[b"SET", key, &value]),
            Ok(Value::SimpleString("QUEUED".into()))
        );
    }
    let e = err(&mut c, &[b"EXEC"]);
    assert!(
        e.starts_with("OOM") && e.contains("nothing was written"),
        "{e}"
    );
    assert_eq!(c.get::<_, Option<Vec<u8>>>("tx1").expect("get"), None);
}

/// `--disable-thp yes` (the default) turns transparent huge pages off for the server's
/// process, as Redis does; `no` leaves the system's setting. Read from the kernel's own report
/// (`THP_enabled` in `/proc/PID/status`, Linux 5.0 and later).
#[test]
fn the_server_turns_transparent_huge_pages_off_unless_told_not_to() {
    let thp_enabled = |server: &Server| {
        let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
            .expect("read the server's status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:"))
            .map(|v| v.trim().to_string())
    };
    let (_dir, server) = start(&[]);
    let Some(default) = thp_enabled(&server) else {
        common::skip(
            "the_server_turns_transparent_huge_pages_off_unless_told_not_to",
            "the kernel reports no THP_enabled in /proc/PID/status",
        );
        return;
    };
    assert_eq!(default, "0", "off by default");
    let (_dir, explicit) = start(&["--disable-thp", "yes"]);
    assert_eq!(thp_enabled(&explicit).as_deref(), Some("0"));
    // `no` leaves what the process inherited: this test's own setting.
    let own = std::fs::read_to_string("/proc/self/status").expect("own status");
    let inherited = own
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(|v| v.trim().to_string());
    let (_dir, kept) = start(&["--disable-thp", "no"]);
    assert_eq!(thp_enabled(&kept), inherited, "left as inherited");
    let mut c = kept.conn();
    let _: () = c.set("k", "v").expect("set");
    assert_eq!(c.get::<_, String>("k").expect("get"), "v");
}
