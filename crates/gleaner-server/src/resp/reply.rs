//! Replies and their encoding in RESP2 or RESP3.
//!
//! Commands build [`Reply`] values; [`ReplyBuf`] encodes them in the protocol the connection
//! speaks (RESP2 until `HELLO 3`). Large bulk strings are not copied: they become their own
//! segment of the output, written to the socket as they are.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};

/// Bulk strings at least this long are written as their own segment instead of being copied
/// into the output buffer (the connection writes segments with vectored writes, so a segment
/// costs no extra system call).
const OWN_SEGMENT_LEN: usize = 2 << 10;

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2, the default of every connection.
    Resp2,
    /// RESP3, after `HELLO 3`: nulls, maps and verbatim strings have their own types.
    Resp3,
}

impl Protocol {
    /// The protocol version number (2 or 3).
    pub fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// One reply (or part of one).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A status line (`+...`); must not contain CR or LF.
    Simple(Cow<'static, str>),
    /// An error (`-CODE message`); CR and LF are replaced by spaces when encoded.
    Error(String),
    /// An integer.
    Int(i64),
    /// A bulk string.
    Bulk(Bytes),
    /// The null bulk string (RESP2 `$-1`, RESP3 `_`).
    Null,
    /// The null array (RESP2 `*-1`, RESP3 `_`).
    NullArray,
    /// An array.
    Array(Vec<Reply>),
    /// A map (RESP3 `%`; RESP2 a flat array of keys and values).
    Map(Vec<(Reply, Reply)>),
    /// Human-readable text (RESP3 verbatim string of format `txt`; RESP2 bulk string).
    Verbatim(String),
}

impl Reply {
    /// An error reply; `message` starts with the error code (`ERR`, `WRONGPASS`, ...).
    pub fn error(message: impl Into<String>) -> Reply {
        Reply::Error(message.into())
    }

    /// A bulk string of `text`.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Bulk(Bytes::from(text.into()))
    }

    /// A status reply.
    pub fn simple(text: &'static str) -> Reply {
        Reply::Simple(Cow::Borrowed(text))
    }

    /// The encoded size of this reply (within a few bytes per element), to bound output
    /// buffers before encoding.
    pub fn approximate_len(&self) -> usize {
        match self {
            Reply::Ok | Reply::Null | Reply::NullArray => 5,
            Reply::Simple(s) => s.len() + 3,
            Reply::Error(s) => s.len() + 3,
            Reply::Int(_) => 22,
            Reply::Bulk(b) => b.len() + 16,
            Reply::Verbatim(s) => s.len() + 20,
            Reply::Array(items) => 16 + items.iter().map(Reply::approximate_len).sum::<usize>(),
            Reply::Map(pairs) => {
                16 + pairs
                    .iter()
                    .map(|(k, v)| k.approximate_len() + v.approximate_len())
                    .sum::<usize>()
            }
        }
    }

    /// True for error replies.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}

impl From<Vec<u8>> for Reply {
    fn from(v: Vec<u8>) -> Self {
        Reply::Bulk(Bytes::from(v))
    }
}

/// Bytes a reply buffer starts with for small replies: 1 KiB, the headers of a hundred bulk
/// replies.
const REPLY_CHUNK: usize = 1024;

/// Encoded replies waiting to be written: small ones share a buffer, large bulk strings are
/// segments of their own.
#[derive(Debug)]
pub struct ReplyBuf {
    segments: Vec<Bytes>,
    current: BytesMut,
    len: usize,
}

impl Default for ReplyBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplyBuf {
    /// An empty buffer, with room for the small replies of a batch of pipelined commands:
    /// each bulk reply's header would otherwise take an allocation of its own (a large value
    /// cuts the buffer, and the next header found it empty).
    pub fn new() -> Self {
        ReplyBuf {
            segments: Vec::new(),
            current: BytesMut::with_capacity(REPLY_CHUNK),
            len: 0,
        }
    }

    /// Bytes encoded and not yet taken.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Encodes `reply` in `protocol`.
    pub fn push(&mut self, reply: &Reply, protocol: Protocol) {
        match reply {
            Reply::Ok => self.raw(b"+OK\r\n"),
            Reply::Simple(s) => {
                self.raw(b"+");
                self.raw_sanitized(s.as_bytes());
                self.raw(b"\r\n");
            }
            Reply::Error(s) => {
                self.raw(b"-");
                self.raw_sanitized(s.as_bytes());
                self.raw(b"\r\n");
            }
            Reply::Int(i) => self.line(b':', i.is_negative(), i.unsigned_abs()),
            Reply::Bulk(b) => self.bulk(b),
            Reply::Null => match protocol {
                Protocol::Resp2 => self.raw(b"$-1\r\n"),
                Protocol::Resp3 => self.raw(b"_\r\n"),
            },
            Reply::NullArray => match protocol {
                Protocol::Resp2 => self.raw(b"*-1\r\n"),
                Protocol::Resp3 => self.raw(b"_\r\n"),
            },
            Reply::Array(items) => {
                self.line_len(b'*', items.len());
                for item in items {
                    self.push(item, protocol);
                }
            }
            Reply::Map(pairs) => {
                match protocol {
                    Protocol::Resp2 => self.line_len(b'*', pairs.len() * 2),
                    Protocol::Resp3 => self.line_len(b'%', pairs.len()),
                }
                for (k, v) in pairs {
                    self.push(k, protocol);
                    self.push(v, protocol);
                }
            }
            Reply::Verbatim(text) => match protocol {
                Protocol::Resp2 => self.bulk(&Bytes::copy_from_slice(text.as_bytes())),
                Protocol::Resp3 => {
                    self.line_len(b'=', text.len() + 4);
                    self.raw(b"txt:");
                    self.raw(text.as_bytes());
                    self.raw(b"\r\n");
                }
            },
        }
    }

    /// Takes everything encoded so far, in order.
    pub fn take_segments(&mut self) -> Vec<Bytes> {
        self.cut();
        self.len = 0;
        std::mem::take(&mut self.segments)
    }

    fn bulk(&mut self, b: &Bytes) {
        self.line_len(b'$', b.len());
        if b.len() >= OWN_SEGMENT_LEN {
            self.cut();
            self.len += b.len();
            self.segments.push(b.clone());
        } else {
            self.raw(b);
        }
        self.raw(b"\r\n");
    }

    /// A line of `kind` and a length.
    fn line_len(&mut self, kind: u8, len: usize) {
        self.line(kind, false, len as u64);
    }

    /// A line of `kind` and a number (`-magnitude` when `negative`), written without a heap
    /// copy: every reply of a pipelined GET has one.
    fn line(&mut self, kind: u8, negative: bool, magnitude: u64) {
        let mut digits = [0u8; 22];
        let mut at = digits.len();
        for end in [b'\n', b'\r'] {
            at -= 1;
            digits[at] = end;
        }
        let mut m = magnitude;
        loop {
            at -= 1;
            digits[at] = b'0' + (m % 10) as u8;
            m /= 10;
            if m == 0 {
                break;
            }
        }
        if negative {
            at -= 1;
            digits[at] = b'-';
        }
        self.raw(&[kind]);
        self.raw(&digits[at..]);
    }

    fn raw(&mut self, bytes: &[u8]) {
        self.current.put_slice(bytes);
        self.len += bytes.len();
    }

    /// Status and error lines cannot carry CR or LF: they would end the line early and the
    /// client would read the rest as another reply.
    fn raw_sanitized(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.current
                .put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
        }
        self.len += bytes.len();
    }

    fn cut(&mut self) {
        if !self.current.is_empty() {
            self.segments.push(self.current.split().freeze());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(reply: &Reply, protocol: Protocol) -> Vec<u8> {
        let mut buf = ReplyBuf::new();
        buf.push(reply, protocol);
        let len = buf.len();
        let out: Vec<u8> = buf.take_segments().concat();
        assert_eq!(out.len(), len, "len() counts every byte");
        out
    }

    #[test]
    fn resp2_and_resp3_encodings() {
        let map = Reply::Map(vec![(Reply::text("proto"), Reply::Int(3))]);
        assert_eq!(
            encode(&map, Protocol::Resp2),
            b"*2\r\n$5\r\nproto\r\n:3\r\n"
        );
        assert_eq!(
            encode(&map, Protocol::Resp3),
            b"%1\r\n$5\r\nproto\r\n:3\r\n"
        );
        assert_eq!(encode(&Reply::Null, Protocol::Resp2), b"$-1\r\n");
        assert_eq!(encode(&Reply::Null, Protocol::Resp3), b"_\r\n");
        assert_eq!(encode(&Reply::NullArray, Protocol::Resp2), b"*-1\r\n");
        assert_eq!(
            encode(&Reply::Verbatim("a:b".into()), Protocol::Resp3),
            b"=7\r\ntxt:a:b\r\n"
        );
        assert_eq!(
            encode(&Reply::Verbatim("a:b".into()), Protocol::Resp2),
            b"$3\r\na:b\r\n"
        );
        assert_eq!(
            encode(&Reply::error("ERR bad\r\nthing"), Protocol::Resp2),
            b"-ERR bad  thing\r\n"
        );
        assert_eq!(encode(&Reply::Int(-7), Protocol::Resp2), b":-7\r\n");
        assert_eq!(encode(&Reply::Int(0), Protocol::Resp2), b":0\r\n");
        assert_eq!(
            encode(&Reply::Int(i64::MIN), Protocol::Resp2),
            b":-9223372036854775808\r\n"
        );
        assert_eq!(
            encode(&Reply::Int(i64::MAX), Protocol::Resp3),
            b":9223372036854775807\r\n"
        );
    }

    #[test]
    fn large_bulks_are_segments_of_their_own_in_order() {
        let big = Bytes::from(vec![7u8; OWN_SEGMENT_LEN]);
        let reply = Reply::Array(vec![Reply::Ok, Reply::Bulk(big.clone()), Reply::Int(1)]);
        let mut buf = ReplyBuf::new();
        buf.push(&reply, Protocol::Resp2);
        let segments = buf.take_segments();
        assert_eq!(segments.len(), 3);
        assert_eq!(segments[1], big);
        let mut expected = format!("*3\r\n+OK\r\n${}\r\n", OWN_SEGMENT_LEN).into_bytes();
        expected.extend_from_slice(&big);
        expected.extend_from_slice(b"\r\n:1\r\n");
        assert_eq!(segments.concat(), expected);
        assert!(buf.is_empty());
    }
}
