//! The request parser never panics, whatever the bytes: the `resp_parser` fuzz target's seed
//! corpus (`fuzz/corpus/resp_parser/`) and tens of thousands of deterministic inputs run as an
//! ordinary test, so the target keeps compiling and the contract keeps holding when nobody runs
//! cargo-fuzz. Every input goes through `gleaner_server::fuzzing::resp_parser`, which feeds it
//! whole, byte by byte and in uneven pieces, requires the three to agree, and checks the limits.
//!
//! The inputs: streams of random requests (arrays of bulk strings around the limits, inline
//! commands with quotes and escapes, empty arrays, blank lines), each then mutated (bit flips,
//! overwrites with protocol bytes, insertions, removals, truncations). Intact streams must also
//! parse back to exactly the requests generated.
//!
//! Regenerate the seed corpus with
//! `cargo test -p gleaner-server --test parser_fuzz -- --ignored generate_corpus`.

use std::fs;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use gleaner_server::fuzzing;
use gleaner_server::resp::{ParserLimits, RequestParser};

/// Generated streams; each also gets [`MUTATIONS`] mutated copies.
const STREAMS: u64 = 2_000;
/// Mutations of each stream and each seed file.
const MUTATIONS: u64 = 20;

/// The limits of `fuzzing::resp_parser`, which generated requests stay within.
const MAX_BULK: usize = 64;
const MAX_ARGS: usize = 16;

/// Bytes that mean something to the parser: mutations favour them.
const PROTOCOL_BYTES: &[u8] = b"*$\r\n-+:0123456789 \"'\\x";

/// A xorshift64* generator: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/resp_parser")
}

/// An argument: printable, binary, or containing CRLF (legal inside a bulk string).
fn argument(rng: &mut Rng, max_len: usize) -> Vec<u8> {
    let len = rng.below(max_len + 1);
    match rng.below(3) {
        0 => (0..len).map(|_| b'a' + rng.below(26) as u8).collect(),
        1 => (0..len).map(|_| rng.next() as u8).collect(),
        _ => (0..len)
            .map(|i| if i % 3 == 0 { b'\r' } else { b'\n' })
            .collect(),
    }
}

/// A stream of requests and what each should parse to (`None`: skipped, as an empty array or a
/// blank line is).
fn stream(rng: &mut Rng) -> (Vec<u8>, Vec<Vec<Vec<u8>>>) {
    let mut bytes = Vec::new();
    let mut requests = Vec::new();
    for _ in 0..1 + rng.below(6) {
        match rng.below(10) {
            0 => bytes.extend_from_slice(b"*0\r\n"),
            1 => bytes.extend_from_slice(b"\r\n"),
            2 | 3 => {
                // An inline command of plain words, one of them quoted.
                let n = 1 + rng.below(4);
                let words: Vec<Vec<u8>> = (0..n)
                    .map(|_| {
                        (0..1 + rng.below(8))
                            .map(|_| b'a' + rng.below(26) as u8)
                            .collect()
                    })
                    .collect();
                for (i, w) in words.iter().enumerate() {
                    if i > 0 {
                        bytes.push(b' ');
                    }
                    if i == n - 1 && rng.chance(50) {
                        bytes.push(b'"');
                        bytes.extend_from_slice(w);
                        bytes.push(b'"');
                    } else {
                        bytes.extend_from_slice(w);
                    }
                }
                bytes.extend_from_slice(if rng.chance(50) { b"\r\n" } else { b"\n" });
                requests.push(words);
            }
            _ => {
                let n = 1 + rng.below(MAX_ARGS);
                let args: Vec<Vec<u8>> = (0..n).map(|_| argument(rng, MAX_BULK)).collect();
                bytes.extend_from_slice(format!("*{n}\r\n").as_bytes());
                for a in &args {
                    bytes.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                    bytes.extend_from_slice(a);
                    bytes.extend_from_slice(b"\r\n");
                }
                requests.push(args);
            }
        }
    }
    (bytes, requests)
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] = PROTOCOL_BYTES[rng.below(PROTOCOL_BYTES.len())];
            }
            2 => v.insert(at, PROTOCOL_BYTES[rng.below(PROTOCOL_BYTES.len())]),
            3 if at < v.len() => {
                v.remove(at);
            }
            4 => v.truncate(at),
            _ => {
                // A header with a huge or negative count or length.
                let header: &[u8] = match rng.below(4) {
                    0 => b"*9223372036854775807\r\n",
                    1 => b"$-2\r\n",
                    2 => b"$18446744073709551616\r\n",
                    _ => b"*-9223372036854775808\r\n",
                };
                v.splice(at..at, header.iter().copied());
            }
        }
    }
    v
}

fn parse_all(input: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let limits = ParserLimits {
        max_bulk_len: MAX_BULK,
        max_args: MAX_ARGS,
        before_auth: false,
    };
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    while let Some(args) = parser
        .parse(&mut buf, &limits)
        .expect("an intact stream parses")
    {
        out.push(args.iter().map(|a: &Bytes| a.to_vec()).collect());
    }
    assert!(buf.is_empty() && parser.is_idle(), "everything consumed");
    out
}

#[test]
fn generated_streams_parse_back_and_mutations_never_panic() {
    let mut rng = Rng(0x005e_ed0f_4e59);
    for _ in 0..STREAMS {
        let (bytes, requests) = stream(&mut rng);
        assert_eq!(
            parse_all(&bytes),
            requests,
            "{:?}",
            String::from_utf8_lossy(&bytes)
        );
        fuzzing::resp_parser(&bytes);
        for _ in 0..MUTATIONS {
            fuzzing::resp_parser(&mutate(&mut rng, &bytes));
        }
    }
}

#[test]
fn the_seed_corpus_never_panics() {
    let mut rng = Rng(0x00c0_ffee);
    let mut seeds = 0;
    for entry in fs::read_dir(corpus_dir()).expect("fuzz/corpus/resp_parser exists") {
        let data = fs::read(entry.expect("entry").path()).expect("read seed");
        fuzzing::resp_parser(&data);
        for _ in 0..MUTATIONS * 10 {
            fuzzing::resp_parser(&mutate(&mut rng, &data));
        }
        seeds += 1;
    }
    assert!(seeds >= 10, "the corpus has {seeds} seeds");
}

/// Rewrites `fuzz/corpus/resp_parser/`: generated streams, and hand-picked malformed ones.
#[test]
#[ignore = "writes the seed corpus; run on purpose"]
fn generate_corpus() {
    let dir = corpus_dir();
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create corpus dir");
    let mut rng = Rng(0x005e_ed0f_4e59);
    for i in 0..12 {
        let (bytes, _) = stream(&mut rng);
        fs::write(dir.join(format!("stream-{i:02}")), bytes).expect("write seed");
    }
    for (name, bytes) in [
        (
            "inline-quotes",
            &b"SET \"a\\x41\\n\" 'b\\'c' d\r\nPING\n"[..],
        ),
        ("huge-count", b"*9223372036854775807\r\n$3\r\nGET\r\n"),
        (
            "huge-length",
            b"*2\r\n$3\r\nGET\r\n$99999999999999999999\r\n",
        ),
        ("missing-crlf", b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n"),
        ("negative-length", b"*1\r\n$-1\r\n"),
        ("not-a-bulk", b"*2\r\n:1\r\n$1\r\na\r\n"),
        ("unbalanced-quote", b"ECHO \"abc\r\n"),
    ] {
        fs::write(dir.join(name), bytes).expect("write seed");
    }
}
