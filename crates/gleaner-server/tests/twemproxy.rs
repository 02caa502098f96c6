//! Scale-out with twemproxy (Debian package `nutcracker`): three servers behind one proxy with
//! ketama consistent hashing, configured by `examples/twemproxy/nutcracker.yml`. 20,000 keys
//! of mixed sizes (16 bytes to 96 KiB) are written and read back through the proxy, every
//! server holds a share, and after one server is killed the proxy answers errors for that
//! shard's keys and still serves the others; restarted, the server's keys are served again. Skipped, with a message, when `nutcracker` is not
//! installed (`.ci/run` installs it).

mod common;

use std::collections::HashSet;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{IO_TIMEOUT, Server};
use redis::{Commands, IntoConnectionInfo};

const KEYS: usize = 20_000;
/// Commands per pipeline through the proxy.
const PIPELINE: usize = 200;

/// The value of key `i`: mostly small, some of a few KiB, 1 % of 64 to 96 KiB.
fn value(i: usize) -> Vec<u8> {
    let len = match i % 100 {
        0 => (64 << 10) + (i * 131) % (32 << 10),
        1..=20 => 1024 + (i * 37) % (15 << 10),
        _ => 16 + (i * 13) % 500,
    };
    let tag = format!("{i}:");
    tag.bytes().cycle().take(len).collect()
}

fn key(i: usize) -> String {
    format!("object:{i}")
}

/// A loopback port that was free a moment ago (nutcracker binds its own; a clash makes it
/// exit, which the test reports with its log).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

struct Nutcracker {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Drop for Nutcracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The proxy configuration: examples/twemproxy/nutcracker.yml itself, with the free ports
/// of this test in place of its addresses (so the example is what CI runs).
fn config(listen: u16, servers: &[u16]) -> String {
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/twemproxy/nutcracker.yml");
    let mut c = std::fs::read_to_string(&example).expect("read the example configuration");
    let mut replace = |from: String, to: String| {
        assert_eq!(
            c.matches(&from).count(),
            1,
            "{from} in {}",
            example.display()
        );
        c = c.replace(&from, &to);
    };
    replace(
        "listen: 127.0.0.1:22121\n".into(),
        format!("listen: 127.0.0.1:{listen}\n"),
    );
    for (n, port) in servers.iter().enumerate() {
        replace(
            format!("- 127.0.0.1:638{}:1 gleaner{}\n", n + 1, n + 1),
            format!("- 127.0.0.1:{port}:1 gleaner{}\n", n + 1),
        );
    }
    c
}

fn start_nutcracker(dir: &Path, servers: &[u16]) -> Nutcracker {
    let port = free_port();
    let conf = dir.join("nutcracker.yml");
    std::fs::write(&conf, config(port, servers)).expect("write config");
    let log = dir.join("nutcracker.log");
    let child = Command::new("nutcracker")
        .arg("-c")
        .arg(&conf)
        .arg("-o")
        .arg(&log)
        // The stats listener defaults to 0.0.0.0:22222: keep it on loopback, on a free port.
        .args(["-a", "127.0.0.1", "-s", &free_port().to_string()])
        .args(["-p"])
        .arg(dir.join("nutcracker.pid"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nutcracker");
    let mut proxy = Nutcracker { child, port, log };
    // nutcracker says nothing when it is ready: poll until it accepts, a bounded time.
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return proxy;
        }
        if let Ok(Some(status)) = proxy.child.try_wait() {
            panic!(
                "nutcracker exited ({status}); log:\n{}",
                std::fs::read_to_string(&proxy.log).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "nutcracker did not listen");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A `redis` crate connection through the proxy. twemproxy closes a connection on a command
/// it does not route (CLIENT among them), so the crate's `CLIENT SETINFO` is turned off.
fn proxy_conn(port: u16) -> redis::Connection {
    let info = format!("redis://127.0.0.1:{port}/")
        .into_connection_info()
        .expect("url");
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    let client = redis::Client::open(info.set_redis_settings(settings)).expect("client");
    common::connect(&client)
}

/// Every key a server holds, by SCAN on the server itself.
fn keys_of(server: &Server) -> HashSet<String> {
    let mut c = server.conn();
    c.scan::<String>()
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("scan")
}

#[test]
fn three_servers_behind_twemproxy() {
    if !common::have("nutcracker") {
        common::skip(
            "three_servers_behind_twemproxy",
            "nutcracker is not installed (Debian package nutcracker)",
        );
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut servers: Vec<Option<Server>> = (1..=3)
        .map(|n| Some(Server::start(&tmp.path().join(format!("db{n}")), &[])))
        .collect();
    let ports: Vec<u16> = servers.iter().flatten().map(Server::port).collect();
    let proxy = start_nutcracker(tmp.path(), &ports);

    // Write through the proxy, in pipelines.
    let mut c = proxy_conn(proxy.port);
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for &i in chunk {
            pipe.set(key(i), value(i)).ignore();
        }
        let () = pipe
            .query(&mut c)
            .expect("pipelined SETs through the proxy");
    }
    // Read everything back through the proxy: MGET (which twemproxy splits by shard) and GET.
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(PIPELINE) {
        let keys: Vec<String> = chunk.iter().map(|&i| key(i)).collect();
        let values: Vec<Vec<u8>> = redis::cmd("MGET").arg(&keys).query(&mut c).expect("mget");
        for (&i, v) in chunk.iter().zip(values) {
            assert_eq!(v, value(i), "{}", key(i));
        }
    }

    // The single-key read-modify-write and expiry commands go through the proxy to the key's
    // server (twemproxy forwards these; GETDEL and GETEX are newer than it).
    let n: i64 = redis::cmd("INCR")
        .arg("counter")
        .query(&mut c)
        .expect("incr");
    assert_eq!(n, 1);
    let f: String = redis::cmd("INCRBYFLOAT")
        .arg("counter")
        .arg("1.5")
        .query(&mut c)
        .expect("incrbyfloat");
    assert_eq!(f, "2.5");
    let len: i64 = redis::cmd("APPEND")
        .arg("log")
        .arg("ab")
        .query(&mut c)
        .expect("append");
    assert_eq!(len, 2);
    let set: i64 = redis::cmd("SETNX")
        .arg("log")
        .arg("x")
        .query(&mut c)
        .expect("setnx");
    assert_eq!(set, 0);
    let () = redis::cmd("SETEX")
        .arg("session")
        .arg(100)
        .arg("s")
        .query(&mut c)
        .expect("setex");
    let ttl: i64 = redis::cmd("TTL").arg("session").query(&mut c).expect("ttl");
    assert!((90..=100).contains(&ttl), "{ttl}");
    let one: i64 = redis::cmd("PERSIST")
        .arg("session")
        .query(&mut c)
        .expect("persist");
    assert_eq!(one, 1);
    let one: i64 = redis::cmd("EXPIRE")
        .arg("log")
        .arg(50)
        .query(&mut c)
        .expect("expire");
    assert_eq!(one, 1);
    let old: String = redis::cmd("GETSET")
        .arg("log")
        .arg("cd")
        .query(&mut c)
        .expect("getset");
    assert_eq!(old, "ab");
    let ttl: i64 = redis::cmd("TTL").arg("log").query(&mut c).expect("ttl");
    assert_eq!(ttl, -1, "GETSET removes the expiry");
    let was: i64 = redis::cmd("SETBIT")
        .arg("bits")
        .arg(7)
        .arg(1)
        .query(&mut c)
        .expect("setbit");
    assert_eq!(was, 0);
    let count: i64 = redis::cmd("BITCOUNT")
        .arg("bits")
        .query(&mut c)
        .expect("bitcount");
    assert_eq!(count, 1);
    let extra_keys = 4; // counter, log, session, bits

    // Each server holds a share, and the shares are the whole set, each key once.
    let shards: Vec<HashSet<String>> = servers.iter().flatten().map(keys_of).collect();
    let sizes: Vec<usize> = shards.iter().map(HashSet::len).collect();
    eprintln!("keys per server: {sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), KEYS + extra_keys, "{sizes:?}");
    for &n in &sizes {
        assert!(
            n >= KEYS / 10,
            "a server holds too small a share: {sizes:?}"
        );
    }
    let union: HashSet<&String> = shards.iter().flatten().collect();
    assert_eq!(union.len(), KEYS + extra_keys);

    // Kill the second server: its keys get errors through the proxy, the others are served.
    let killed = servers[1].take().expect("second server");
    let (status, _) = killed.stop("KILL");
    assert!(!status.success());
    let mut errors = 0;
    let mut served = 0;
    let mut first_error = None;
    for i in (0..KEYS).step_by(7) {
        let k = key(i);
        let r: redis::RedisResult<Vec<u8>> = redis::cmd("GET").arg(&k).query(&mut c);
        if shards[1].contains(&k) {
            let e = r.expect_err("a key of the killed server");
            first_error.get_or_insert_with(|| e.to_string());
            errors += 1;
        } else {
            assert_eq!(r.expect("a key of a live server"), value(i), "{k}");
            served += 1;
        }
    }
    assert!(errors > 0 && served > 0, "{errors} errors, {served} served");
    eprintln!("after the kill: {errors} GETs failed, {served} served");
    let first_error = first_error.expect("an error");
    eprintln!("the proxy's error for the dead shard: {first_error}");
    assert!(first_error.contains("Connection refused"), "{first_error}");
    // The proxy and the live servers keep working for writes too.
    let live_key = (0..KEYS)
        .map(key)
        .find(|k| !shards[1].contains(k))
        .expect("a key of a live server");
    let () = redis::cmd("SET")
        .arg(&live_key)
        .arg("after")
        .query(&mut c)
        .expect("set");
    let v: String = redis::cmd("GET").arg(&live_key).query(&mut c).expect("get");
    assert_eq!(v, "after");

    // The server comes back on its address with its data: its keys are served again, and
    // nothing of them was written elsewhere meanwhile.
    let back = Server::start_with(
        &tmp.path().join("db2"),
        &format!("127.0.0.1:{}", ports[1]),
        &[],
    );
    for i in (0..KEYS)
        .filter(|&i| shards[1].contains(&key(i)))
        .step_by(50)
    {
        let v: Vec<u8> = redis::cmd("GET")
            .arg(key(i))
            .query(&mut c)
            .expect("served again");
        assert_eq!(v, value(i), "{}", key(i));
    }
    assert_eq!(keys_of(&back), shards[1]);
    for (n, server) in servers.iter().enumerate() {
        if let Some(server) = server {
            assert_eq!(
                keys_of(server),
                shards[n],
                "server {} gained or lost keys",
                n + 1
            );
        }
    }
    drop(proxy);
}
