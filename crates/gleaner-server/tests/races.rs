//! Read-modify-write commands are atomic per key against concurrent clients: for each, several
//! clients race on the same keys and the end state must be the one some serial order of their
//! commands gives (no lost update, no double win). The assertions hold whatever the
//! interleaving: they check invariants every serial order keeps, never a particular order.
//! Each race runs twice: with the engine's defaults, and with a row cache ([`servers`]).

mod common;

use std::collections::BTreeMap;
use std::thread;

use common::Server;
use redis::{Connection, Value};

/// Racing clients.
const CLIENTS: usize = 6;
/// Commands per client.
const ROUNDS: usize = 150;

/// The servers each race runs against, one after the other: with the engine's defaults, and
/// with a row cache that every write fills (`row_cache_size`, `prepopulate_row_cache`), so
/// the reads of the read-modify-write commands are answered from it while other clients write.
fn servers() -> impl Iterator<Item = (tempfile::TempDir, Server)> {
    let rows: &[&str] = &[
        "--option",
        "row_cache_size=1MiB",
        "--option",
        "prepopulate_row_cache=true",
    ];
    [&[][..], rows].into_iter().map(|args| {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = Server::start(&dir.path().join("db"), args);
        (dir, server)
    })
}

/// Runs `work(connection, client)` on [`CLIENTS`] clients at once and returns their results.
fn race<T: Send + 'static>(
    server: &Server,
    work: impl Fn(&mut Connection, usize) -> T + Send + Sync + Clone + 'static,
) -> Vec<T> {
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let mut con = server.conn();
            let work = work.clone();
            thread::spawn(move || work(&mut con, c))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("client"))
        .collect()
}

fn cmd(con: &mut Connection, args: &[&str]) -> Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query::<Value>(con)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn int(v: Value) -> i64 {
    match v {
        Value::Int(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn text(v: Value) -> Option<String> {
    match v {
        Value::Nil => None,
        Value::BulkString(b) => Some(String::from_utf8(b).expect("utf-8")),
        Value::SimpleString(s) => Some(s),
        Value::Okay => Some("OK".into()),
        other => panic!("expected a string, got {other:?}"),
    }
}

fn get(con: &mut Connection, key: &str) -> Option<String> {
    text(cmd(con, &["GET", key]))
}

#[test]
fn increments_and_decrements_lose_nothing() {
    for (_dir, server) in servers() {
        race(&server, |con, c| {
            for i in 0..ROUNDS {
                match (c + i) % 4 {
                    0 => cmd(con, &["INCR", "n"]),
                    1 => cmd(con, &["INCRBY", "n", "5"]),
                    2 => cmd(con, &["DECR", "n"]),
                    _ => cmd(con, &["DECRBY", "n", "2"]),
                };
                cmd(con, &["INCRBYFLOAT", "f", "1.5"]);
            }
        });
        let mut con = server.conn();
        // Each client ran each kind ROUNDS / 4 times (150 is not a multiple of 4: count exactly).
        let mut expected = 0i64;
        for c in 0..CLIENTS {
            for i in 0..ROUNDS {
                expected += [1, 5, -1, -2][(c + i) % 4];
            }
        }
        assert_eq!(get(&mut con, "n"), Some(expected.to_string()));
        let f = (CLIENTS * ROUNDS) as f64 * 1.5;
        assert_eq!(get(&mut con, "f"), Some(format!("{f}")));
    }
}

#[test]
fn appends_and_setranges_keep_every_write() {
    for (_dir, server) in servers() {
        const SLOT: usize = 8;
        race(&server, |con, c| {
            for i in 0..ROUNDS {
                cmd(con, &["APPEND", "log", &format!("<{c}:{i}>")]);
                // Each client owns one 8-byte slot of `page`.
                cmd(
                    con,
                    &[
                        "SETRANGE",
                        "page",
                        &(c * SLOT).to_string(),
                        &format!("{c}{:07}", i),
                    ],
                );
                cmd(con, &["SETBIT", "bits", &(c * ROUNDS + i).to_string(), "1"]);
            }
        });
        let mut con = server.conn();
        let log = get(&mut con, "log").expect("log");
        for c in 0..CLIENTS {
            for i in 0..ROUNDS {
                assert_eq!(log.matches(&format!("<{c}:{i}>")).count(), 1, "<{c}:{i}>");
            }
        }
        let page = get(&mut con, "page").expect("page");
        for c in 0..CLIENTS {
            assert_eq!(
                &page[c * SLOT..(c + 1) * SLOT],
                format!("{c}{:07}", ROUNDS - 1),
                "client {c}'s last SETRANGE"
            );
        }
        assert_eq!(
            int(cmd(&mut con, &["BITCOUNT", "bits"])),
            (CLIENTS * ROUNDS) as i64
        );
    }
}

#[test]
fn exactly_one_client_wins_each_conditional_set() {
    for (_dir, server) in servers() {
        let wins = race(&server, |con, c| {
            let mut won = Vec::new();
            for i in 0..ROUNDS {
                let k = format!("k{i}");
                let me = format!("c{c}");
                let r = match i % 3 {
                    0 => int(cmd(con, &["SETNX", &k, &me])) == 1,
                    1 => text(cmd(con, &["SET", &k, &me, "NX", "PX", "600000"])).is_some(),
                    _ => int(cmd(con, &["MSETNX", &k, &me, &format!("{k}-twin"), &me])) == 1,
                };
                if r {
                    won.push(i);
                }
            }
            won
        });
        let mut con = server.conn();
        let mut winners = BTreeMap::new();
        for (c, won) in wins.iter().enumerate() {
            for i in won {
                assert!(winners.insert(*i, c).is_none(), "key k{i} won twice");
            }
        }
        assert_eq!(winners.len(), ROUNDS, "every key has a winner");
        for (i, c) in winners {
            assert_eq!(get(&mut con, &format!("k{i}")), Some(format!("c{c}")));
            if i % 3 == 2 {
                assert_eq!(get(&mut con, &format!("k{i}-twin")), Some(format!("c{c}")));
            }
        }
    }
}

#[test]
fn swaps_and_takes_hand_each_value_out_once() {
    for (_dir, server) in servers() {
        let mut con = server.conn();
        for i in 0..ROUNDS {
            cmd(&mut con, &["SET", &format!("t{i}"), &format!("v{i}")]);
        }
        cmd(&mut con, &["SET", "slot", "initial"]);
        let seen = race(&server, |con, c| {
            let mut got = Vec::new();
            for i in 0..ROUNDS {
                // GETSET and SET GET chain: every value written is read back exactly once (by
                // the next writer) or is the final one.
                let old = if i % 2 == 0 {
                    cmd(con, &["GETSET", "slot", &format!("c{c}-{i}")])
                } else {
                    cmd(con, &["SET", "slot", &format!("c{c}-{i}"), "GET"])
                };
                got.push(text(old).expect("slot is never empty"));
                // GETDEL hands each pre-set value to exactly one client.
                if let Some(v) = text(cmd(con, &["GETDEL", &format!("t{i}")])) {
                    got.push(v);
                }
            }
            got
        });
        let mut all: Vec<String> = seen.into_iter().flatten().collect();
        all.push(get(&mut con, "slot").expect("slot"));
        all.sort();
        let mut expected: Vec<String> = (0..ROUNDS).map(|i| format!("v{i}")).collect();
        expected.push("initial".into());
        for c in 0..CLIENTS {
            for i in 0..ROUNDS {
                expected.push(format!("c{c}-{i}"));
            }
        }
        expected.sort();
        assert_eq!(all, expected);
    }
}

#[test]
fn expiry_changes_do_not_lose_concurrent_increments() {
    for (_dir, server) in servers() {
        // EXPIRE, PEXPIRE, GETEX and PERSIST rewrite the value with the new expiry: done
        // non-atomically, they would write back a stale count over a concurrent INCR.
        let incrs = race(&server, |con, c| {
            let mut n = 0;
            for i in 0..ROUNDS {
                if c % 2 == 0 {
                    cmd(con, &["INCR", "counter"]);
                    n += 1;
                } else {
                    match i % 4 {
                        0 => cmd(con, &["EXPIRE", "counter", "1000"]),
                        1 => cmd(con, &["PEXPIRE", "counter", "2000000", "GT"]),
                        2 => cmd(con, &["GETEX", "counter", "EX", "500"]),
                        _ => cmd(con, &["PERSIST", "counter"]),
                    };
                }
            }
            n
        });
        let mut con = server.conn();
        let total: i64 = incrs.iter().sum();
        assert_eq!(get(&mut con, "counter"), Some(total.to_string()));
    }
}

#[test]
fn renames_and_moves_never_duplicate_or_drop_a_key() {
    for (_dir, server) in servers() {
        let mut con = server.conn();
        cmd(&mut con, &["SET", "ball-a", "payload"]);
        cmd(&mut con, &["SET", "puck", "disc"]);
        race(&server, |con, c| {
            for i in 0..ROUNDS {
                // The ball moves between two names, by RENAME and RENAMENX in both directions;
                // "no such key" is the answer when another client moved it first.
                let (from, to) = if (c + i) % 2 == 0 {
                    ("ball-a", "ball-b")
                } else {
                    ("ball-b", "ball-a")
                };
                let mut r = redis::cmd(if i % 3 == 0 { "RENAMENX" } else { "RENAME" });
                let _: redis::RedisResult<Value> = r.arg(from).arg(to).query(con);
                // The puck moves between databases 0 and 1.
                let db = if c % 2 == 0 { "0" } else { "1" };
                let other = if c % 2 == 0 { "1" } else { "0" };
                cmd(con, &["SELECT", db]);
                cmd(con, &["MOVE", "puck", other]);
            }
        });
        let balls = ["ball-a", "ball-b"]
            .iter()
            .filter_map(|k| get(&mut con, k))
            .collect::<Vec<_>>();
        assert_eq!(balls, vec!["payload".to_string()]);
        let mut pucks = Vec::new();
        for db in ["0", "1"] {
            cmd(&mut con, &["SELECT", db]);
            pucks.extend(get(&mut con, "puck"));
        }
        assert_eq!(pucks, vec!["disc".to_string()]);
    }
}

#[test]
fn deletes_count_each_key_once() {
    for (_dir, server) in servers() {
        let mut con = server.conn();
        for i in 0..ROUNDS {
            cmd(&mut con, &["SET", &format!("d{i}"), "x"]);
        }
        let counts = race(&server, |con, c| {
            let mut n = 0;
            for i in 0..ROUNDS {
                let k = format!("d{i}");
                n += int(cmd(con, &[if c % 2 == 0 { "DEL" } else { "UNLINK" }, &k]));
            }
            n
        });
        assert_eq!(counts.iter().sum::<i64>(), ROUNDS as i64);
    }
}

#[test]
fn exactly_one_copy_without_replace_wins_each_destination() {
    for (_dir, server) in servers() {
        let mut con = server.conn();
        cmd(&mut con, &["SET", "src", "payload", "EX", "1000"]);
        // Every client copies `src` to the same destinations without REPLACE: a COPY that does
        // not see another's write would answer 1 too.
        let wins = race(&server, |con, _| {
            (0..ROUNDS)
                .filter(|i| int(cmd(con, &["COPY", "src", &format!("dst{i}")])) == 1)
                .collect::<Vec<_>>()
        });
        let mut per_key = vec![0; ROUNDS];
        for i in wins.into_iter().flatten() {
            per_key[i] += 1;
        }
        assert!(per_key.iter().all(|&n| n == 1), "{per_key:?}");
        for i in 0..ROUNDS {
            assert_eq!(get(&mut con, &format!("dst{i}")), Some("payload".into()));
        }
    }
}

#[test]
fn optimistic_transactions_with_watch_lose_no_increment() {
    for (_dir, server) in servers() {
        let commits = race(&server, |con, _| {
            let mut commits = 0u32;
            let mut attempts = 0u32;
            while commits < 40 {
                attempts += 1;
                assert!(attempts < 100_000, "no progress");
                cmd(con, &["WATCH", "w"]);
                let v: i64 = get(con, "w").map_or(0, |s| s.parse().expect("integer"));
                let r: Value = redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg("w")
                    .arg(v + 1)
                    .query(con)
                    .expect("exec");
                if !matches!(r, Value::Nil) {
                    commits += 1;
                }
            }
            commits
        });
        let mut con = server.conn();
        let total: u32 = commits.iter().sum();
        assert_eq!(get(&mut con, "w"), Some(total.to_string()));
    }
}
