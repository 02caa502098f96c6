//! The request parser: RESP arrays of bulk strings (what every client library sends) and inline
//! commands (what `telnet` and health checks send), decoded incrementally from a connection's
//! input buffer.
//!
//! Why our own parser rather than a crate such as `redis-protocol`: a server must refuse an
//! oversize bulk string or argument count *from its header*, before buffering the payload, with
//! an error naming the limit; general-purpose decoders decode complete frames only (an incomplete
//! frame is re-decoded from its start on every read, and its size is known only once it is all
//! in memory), and they do not accept inline commands. Requests are a small subset of RESP (an
//! array of bulk strings), so the parser is a few states; replies are encoded by
//! [`super::reply`].
//!
//! The parser never panics on any input (the `resp_parser` fuzz target checks it), never
//! allocates more than the bytes it was given plus one argument vector sized by the argument
//! count it accepted, and resumes where it stopped, so a large bulk string arriving in many
//! reads is scanned once.

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};

/// Longest inline command line, as in Redis (`PROTO_INLINE_MAX_SIZE`): 64 KiB.
pub const MAX_INLINE_LEN: usize = 64 << 10;

/// Longest `*<count>` or `$<length>` header line accepted, CRLF included. A sign and 19 digits
/// fit; anything longer is not a number the parser would accept anyway.
const MAX_HEADER_LEN: usize = 24;

/// Argument vectors are allocated for at most this many arguments up front; longer commands grow
/// as their arguments actually arrive (a header alone cannot make the server allocate much).
const PREALLOCATED_ARGS: usize = 1024;

/// The limits a request must respect; breaking one is a protocol error (the connection is
/// closed after the error reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParserLimits {
    /// Longest bulk string (one argument) in bytes (`--max-bulk-len`).
    pub max_bulk_len: usize,
    /// Most arguments of one command, its name included (`--max-args`).
    pub max_args: usize,
    /// These are the limits before authentication, not the configured ones (for the error
    /// message).
    pub before_auth: bool,
}

impl ParserLimits {
    /// The limits before a client has authenticated when a password is set, as in Redis: at
    /// most 10 arguments of at most 16 KiB each, so an unauthenticated peer cannot make the
    /// server buffer much.
    pub const UNAUTHENTICATED: ParserLimits = ParserLimits {
        max_bulk_len: 16 << 10,
        max_args: 10,
        before_auth: true,
    };
}

/// A malformed or over-limit request. The connection gets `-ERR <Display>` and is closed, as
/// Redis does: after a framing error the rest of the stream cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*` not followed by a valid integer and CRLF.
    InvalidMultibulkLength,
    /// An argument count above the limit.
    TooManyArgs {
        /// The count the client announced.
        count: u64,
        /// The limit.
        limit: usize,
        /// The limit applied before authentication (not `--max-args`).
        unauthenticated: bool,
    },
    /// An element of a request array that is not a bulk string.
    ExpectedDollar(u8),
    /// `$` not followed by a valid non-negative integer and CRLF.
    InvalidBulkLength,
    /// A bulk string longer than the limit.
    BulkTooLong {
        /// The length the client announced.
        len: u64,
        /// The limit.
        limit: usize,
        /// The limit applied before authentication (not `--max-bulk-len`).
        unauthenticated: bool,
    },
    /// A bulk string not followed by CRLF.
    MissingCrlf,
    /// A header line longer than any valid one.
    HeaderTooLong,
    /// An inline command line longer than [`MAX_INLINE_LEN`].
    InlineTooLong,
    /// An inline command with an unterminated quote, or a closing quote not followed by a
    /// space.
    UnbalancedQuotes,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::InvalidMultibulkLength => {
                write!(f, "Protocol error: invalid multibulk length")
            }
            ProtocolError::TooManyArgs {
                count,
                limit,
                unauthenticated,
            } => {
                // Redis's own words before AUTH (clients match on them).
                if *unauthenticated {
                    return write!(f, "Protocol error: unauthenticated multibulk length");
                }
                write!(
                    f,
                    "Protocol error: invalid multibulk length {count}: more than {limit} arguments (--max-args)"
                )
            }
            ProtocolError::ExpectedDollar(b) => {
                write!(
                    f,
                    "Protocol error: expected '$', got '{}'",
                    b.escape_ascii()
                )
            }
            ProtocolError::InvalidBulkLength => write!(f, "Protocol error: invalid bulk length"),
            ProtocolError::BulkTooLong {
                len,
                limit,
                unauthenticated,
            } => {
                if *unauthenticated {
                    return write!(f, "Protocol error: unauthenticated bulk length");
                }
                write!(
                    f,
                    "Protocol error: invalid bulk length {len}: longer than {limit} bytes (--max-bulk-len)"
                )
            }
            ProtocolError::MissingCrlf => {
                write!(f, "Protocol error: bulk string not followed by CRLF")
            }
            ProtocolError::HeaderTooLong => {
                write!(
                    f,
                    "Protocol error: too big mbulk count or bulk length string"
                )
            }
            ProtocolError::InlineTooLong => write!(
                f,
                "Protocol error: too big inline request (more than {MAX_INLINE_LEN} bytes)"
            ),
            ProtocolError::UnbalancedQuotes => {
                write!(f, "Protocol error: unbalanced quotes in request")
            }
        }
    }
}

impl std::error::Error for ProtocolError {}

/// Where the parser is within the current request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between requests.
    Start,
    /// Inside an array, `remaining` bulk strings to go, the next one's header not read yet.
    Header { remaining: usize },
    /// Inside an array, the header of a bulk string of `len` bytes read.
    Bulk { remaining: usize, len: usize },
}

/// Incremental request decoder. Feed it a connection's input buffer after every read; it
/// consumes the bytes of every complete request it returns and of the parts of an incomplete
/// one it has decoded (arguments are split off the buffer without copying).
#[derive(Debug)]
pub struct RequestParser {
    state: State,
    args: Vec<Bytes>,
    /// Bytes of the arguments of the incomplete request already taken from the buffer.
    partial_bytes: usize,
}

impl Default for RequestParser {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestParser {
    /// A parser between requests.
    pub fn new() -> Self {
        RequestParser {
            state: State::Start,
            args: Vec::new(),
            partial_bytes: 0,
        }
    }

    /// Bytes of the incomplete request held by the parser (arguments already decoded), not
    /// counting what is still in the input buffer. The connection bounds their sum.
    pub fn partial_bytes(&self) -> usize {
        self.partial_bytes
    }

    /// Bytes the parser needs in the buffer before it can make progress on a bulk string it is
    /// in the middle of (0 when it is not inside one); a hint for sizing reads.
    pub fn bulk_bytes_needed(&self, buffered: usize) -> usize {
        match self.state {
            State::Bulk { len, .. } => (len + 2).saturating_sub(buffered),
            _ => 0,
        }
    }

    /// True between requests (nothing of an incomplete request decoded).
    pub fn is_idle(&self) -> bool {
        self.state == State::Start
    }

    /// Decodes the next complete request from `buf`: `Ok(Some(args))` with at least one
    /// argument (the command name first), `Ok(None)` when `buf` holds no complete request yet
    /// (what it holds of one is kept), or the protocol error. Empty arrays and empty inline
    /// lines are skipped, as Redis does.
    pub fn parse(
        &mut self,
        buf: &mut BytesMut,
        limits: &ParserLimits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        loop {
            match self.state {
                State::Start => {
                    let Some(&first) = buf.first() else {
                        return Ok(None);
                    };
                    if first != b'*' {
                        match parse_inline(buf, limits)? {
                            None => return Ok(None),
                            Some(args) if args.is_empty() => continue,
                            Some(args) => return Ok(Some(args)),
                        }
                    }
                    let Some(count) = header_number(buf, ProtocolError::InvalidMultibulkLength)?
                    else {
                        return Ok(None);
                    };
                    if count <= 0 {
                        continue;
                    }
                    let count = count as u64;
                    if count > limits.max_args as u64 {
                        return Err(ProtocolError::TooManyArgs {
                            count,
                            limit: limits.max_args,
                            unauthenticated: limits.before_auth,
                        });
                    }
                    let count = count as usize;
                    self.args = Vec::with_capacity(count.min(PREALLOCATED_ARGS));
                    self.partial_bytes = 0;
                    self.state = State::Header { remaining: count };
                }
                State::Header { remaining: 0 } => {
                    self.state = State::Start;
                    self.partial_bytes = 0;
                    return Ok(Some(std::mem::take(&mut self.args)));
                }
                State::Header { remaining } => {
                    let Some(&first) = buf.first() else {
                        return Ok(None);
                    };
                    if first != b'$' {
                        return Err(ProtocolError::ExpectedDollar(first));
                    }
                    let Some(len) = header_number(buf, ProtocolError::InvalidBulkLength)? else {
                        return Ok(None);
                    };
                    if len < 0 {
                        return Err(ProtocolError::InvalidBulkLength);
                    }
                    let len = len as u64;
                    if len > limits.max_bulk_len as u64 {
                        return Err(ProtocolError::BulkTooLong {
                            len,
                            limit: limits.max_bulk_len,
                            unauthenticated: limits.before_auth,
                        });
                    }
                    self.state = State::Bulk {
                        remaining,
                        len: len as usize,
                    };
                }
                State::Bulk { remaining, len } => {
                    if buf.len() < len + 2 {
                        return Ok(None);
                    }
                    if &buf[len..len + 2] != b"\r\n" {
                        return Err(ProtocolError::MissingCrlf);
                    }
                    let arg = buf.split_to(len).freeze();
                    buf.advance(2);
                    self.partial_bytes += len;
                    self.args.push(arg);
                    self.state = State::Header {
                        remaining: remaining - 1,
                    };
                }
            }
        }
    }
}

/// Reads a `*<n>\r\n` or `$<n>\r\n` header at the start of `buf` (the type byte is not
/// checked here) and consumes it. `Ok(None)` when the line is not complete yet.
fn header_number(buf: &mut BytesMut, invalid: ProtocolError) -> Result<Option<i64>, ProtocolError> {
    let window = &buf[..buf.len().min(MAX_HEADER_LEN)];
    let Some(cr) = window.iter().position(|&b| b == b'\r') else {
        if buf.len() >= MAX_HEADER_LEN {
            return Err(ProtocolError::HeaderTooLong);
        }
        return Ok(None);
    };
    if cr + 1 >= buf.len() {
        return Ok(None);
    }
    if buf[cr + 1] != b'\n' {
        return Err(invalid);
    }
    let n = parse_strict_i64(&buf[1..cr]).ok_or(invalid)?;
    buf.advance(cr + 2);
    Ok(Some(n))
}

/// Parses a decimal integer the way Redis's `string2ll` does: an optional `-`, then digits
/// without leading zeros (only `0` itself starts with one), no spaces or `+`, in range.
pub fn parse_strict_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits[0] == b'0' && (digits.len() > 1 || negative) {
        return None;
    }
    let mut value: i128 = 0;
    for &d in digits {
        value = value * 10 + i128::from(d - b'0');
    }
    if negative {
        value = -value;
    }
    i64::try_from(value).ok()
}

/// Decodes one inline command line (up to `\n`, an `\r` before it dropped) into arguments,
/// splitting on white space with Redis's quoting rules (`sdssplitargs`). `Ok(None)` when the
/// line is not complete; `Ok(Some(empty))` for a blank line.
fn parse_inline(
    buf: &mut BytesMut,
    limits: &ParserLimits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let window = &buf[..buf.len().min(MAX_INLINE_LEN + 1)];
    let Some(newline) = window.iter().position(|&b| b == b'\n') else {
        if buf.len() > MAX_INLINE_LEN {
            return Err(ProtocolError::InlineTooLong);
        }
        return Ok(None);
    };
    let line = buf.split_to(newline + 1);
    let mut line = &line[..newline];
    if let Some(stripped) = line.strip_suffix(b"\r") {
        line = stripped;
    }
    let args = split_args(line)?;
    if args.len() > limits.max_args {
        return Err(ProtocolError::TooManyArgs {
            count: args.len() as u64,
            limit: limits.max_args,
            unauthenticated: limits.before_auth,
        });
    }
    if let Some(long) = args.iter().find(|a| a.len() > limits.max_bulk_len) {
        return Err(ProtocolError::BulkTooLong {
            len: long.len() as u64,
            limit: limits.max_bulk_len,
            unauthenticated: limits.before_auth,
        });
    }
    Ok(Some(args.into_iter().map(Bytes::from).collect()))
}

/// Splits an inline line like Redis's `sdssplitargs`: white space separates arguments;
/// `"..."` takes `\n \r \t \b \a \\ \"` and `\xHH` escapes; `'...'` takes `\'`; a closing quote
/// must be followed by white space or the end.
pub fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Ok(args);
        }
        let mut current = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            if in_double {
                let Some(&c) = line.get(i) else {
                    return Err(ProtocolError::UnbalancedQuotes);
                };
                if c == b'\\'
                    && line.get(i + 1) == Some(&b'x')
                    && let (Some(h), Some(l)) = (
                        line.get(i + 2).and_then(|&b| hex_value(b)),
                        line.get(i + 3).and_then(|&b| hex_value(b)),
                    )
                {
                    current.push(h * 16 + l);
                    i += 4;
                } else if c == b'\\' && i + 1 < line.len() {
                    current.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                    i += 2;
                } else if c == b'"' {
                    if line.get(i + 1).is_some_and(|&b| !is_space(b)) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                    i += 1;
                }
            } else if in_single {
                let Some(&c) = line.get(i) else {
                    return Err(ProtocolError::UnbalancedQuotes);
                };
                if c == b'\\' && line.get(i + 1) == Some(&b'\'') {
                    current.push(b'\'');
                    i += 2;
                } else if c == b'\'' {
                    if line.get(i + 1).is_some_and(|&b| !is_space(b)) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                    i += 1;
                }
            } else {
                match line.get(i) {
                    None => break,
                    Some(&c) if is_space(c) => break,
                    Some(b'"') => {
                        in_double = true;
                        i += 1;
                    }
                    Some(b'\'') => {
                        in_single = true;
                        i += 1;
                    }
                    Some(&c) => {
                        current.push(c);
                        i += 1;
                    }
                }
            }
        }
        args.push(current);
    }
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ParserLimits = ParserLimits {
        max_bulk_len: 1024,
        max_args: 8,
        before_auth: false,
    };

    fn parse_all(input: &[u8], limits: &ParserLimits) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(args) = parser.parse(&mut buf, limits)? {
            out.push(args.iter().map(|a| a.to_vec()).collect());
        }
        Ok(out)
    }

    fn strings(cmds: &[&[&str]]) -> Vec<Vec<Vec<u8>>> {
        cmds.iter()
            .map(|c| c.iter().map(|a| a.as_bytes().to_vec()).collect())
            .collect()
    }

    #[test]
    fn arrays_of_bulk_strings_and_pipelines() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n";
        assert_eq!(
            parse_all(input, &LIMITS).expect("valid"),
            strings(&[&["SET", "a", ""], &["PING"]])
        );
    }

    #[test]
    fn byte_by_byte_feeding_gives_the_same_commands() {
        let input =
            b"*2\r\n$4\r\nECHO\r\n$5\r\nhe\r\no\r\nPING x\r\n*0\r\n*-1\r\n\r\n*1\r\n$4\r\nQUIT\r\n";
        let whole = parse_all(input, &LIMITS).expect("valid");
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut pieces = Vec::new();
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            while let Some(args) = parser.parse(&mut buf, &LIMITS).expect("valid") {
                pieces.push(args.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            }
        }
        assert_eq!(whole, pieces);
        assert_eq!(
            whole,
            strings(&[&["ECHO", "he\r\no"], &["PING", "x"], &["QUIT"]])
        );
        assert!(parser.is_idle());
    }

    #[test]
    fn limits_are_enforced_from_the_headers() {
        // The bulk body is never sent: the header alone is refused.
        let e = parse_all(b"*2\r\n$3\r\nGET\r\n$1025\r\n", &LIMITS).expect_err("too long");
        assert!(
            matches!(
                e,
                ProtocolError::BulkTooLong {
                    len: 1025,
                    limit: 1024,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("--max-bulk-len"), "{e}");
        let e = parse_all(b"*9\r\n", &LIMITS).expect_err("too many");
        assert!(e.to_string().contains("--max-args"), "{e}");
        let e = parse_all(b"*11\r\n", &ParserLimits::UNAUTHENTICATED).expect_err("too many");
        assert_eq!(
            e.to_string(),
            "Protocol error: unauthenticated multibulk length",
            "Redis's words"
        );
        let long_inline = vec![b'a'; MAX_INLINE_LEN + 1];
        assert_eq!(
            parse_all(&long_inline, &LIMITS),
            Err(ProtocolError::InlineTooLong)
        );
    }

    #[test]
    fn malformed_streams_are_errors() {
        for (input, expected) in [
            (&b"*x\r\n"[..], ProtocolError::InvalidMultibulkLength),
            (b"*01\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*1\rx", ProtocolError::InvalidMultibulkLength),
            (b"*1\r\n:1\r\n", ProtocolError::ExpectedDollar(b':')),
            (b"*1\r\n$-1\r\n", ProtocolError::InvalidBulkLength),
            (b"*1\r\n$+1\r\n", ProtocolError::InvalidBulkLength),
            (b"*1\r\n$1\r\nabc", ProtocolError::MissingCrlf),
            (
                b"*1\r\n$99999999999999999999999\r\n",
                ProtocolError::HeaderTooLong,
            ),
            (
                b"*99999999999999999999\r\n",
                ProtocolError::InvalidMultibulkLength,
            ),
            (b"SET \"a\r\n", ProtocolError::UnbalancedQuotes),
            (b"SET \"a\"b\r\n", ProtocolError::UnbalancedQuotes),
            (b"SET 'a\r\n", ProtocolError::UnbalancedQuotes),
        ] {
            assert_eq!(parse_all(input, &LIMITS), Err(expected), "{input:?}");
        }
    }

    #[test]
    fn inline_commands_follow_redis_quoting() {
        assert_eq!(
            parse_all(b"set \"a b\" 'c\\'d' \"\\x41\\n\"\r\n  \r\nping\n", &LIMITS).expect("valid"),
            vec![
                vec![
                    b"set".to_vec(),
                    b"a b".to_vec(),
                    b"c'd".to_vec(),
                    b"A\n".to_vec()
                ],
                vec![b"ping".to_vec()],
            ]
        );
    }

    #[test]
    fn incomplete_requests_wait_and_count_their_bytes() {
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$10\r\nabc"[..]);
        assert_eq!(parser.parse(&mut buf, &LIMITS).expect("valid"), None);
        assert_eq!(parser.partial_bytes(), 3);
        assert_eq!(parser.bulk_bytes_needed(buf.len()), 9);
        buf.extend_from_slice(b"defghij\r\n");
        let args = parser
            .parse(&mut buf, &LIMITS)
            .expect("valid")
            .expect("done");
        assert_eq!(args[1], Bytes::from_static(b"abcdefghij"));
        assert_eq!(parser.partial_bytes(), 0);
        assert!(buf.is_empty());
    }

    #[test]
    fn strict_integers() {
        assert_eq!(parse_strict_i64(b"0"), Some(0));
        assert_eq!(parse_strict_i64(b"-12"), Some(-12));
        assert_eq!(parse_strict_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_strict_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"007",
            b"+1",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"1e3",
        ] {
            assert_eq!(parse_strict_i64(bad), None, "{bad:?}");
        }
    }
}
