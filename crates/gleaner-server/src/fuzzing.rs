//! The fuzz target of the request parser: arbitrary bytes, fed whole and in pieces, must never
//! panic, must parse to the same requests however they are split, and must respect the limits.

use bytes::{Bytes, BytesMut};

use crate::resp::{ParserLimits, ProtocolError, RequestParser};

/// Limits small enough that fuzz inputs reach them.
const LIMITS: ParserLimits = ParserLimits {
    max_bulk_len: 64,
    max_args: 16,
    before_auth: false,
};

/// Everything one feeding produced: the requests, then the error that stopped it (if any).
type Parsed = (Vec<Vec<Bytes>>, Option<ProtocolError>);

fn feed(data: &[u8], split: impl Fn(usize) -> usize) -> Parsed {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let n = split(at).clamp(1, data.len() - at);
        buf.extend_from_slice(&data[at..at + n]);
        at += n;
        loop {
            match parser.parse(&mut buf, &LIMITS) {
                Ok(Some(args)) => {
                    assert!(!args.is_empty(), "requests have a name");
                    assert!(args.len() <= LIMITS.max_args, "argument limit broken");
                    assert!(
                        args.iter().all(|a| a.len() <= LIMITS.max_bulk_len),
                        "bulk limit broken"
                    );
                    out.push(args);
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
        // What is held for an incomplete request never exceeds what was fed.
        assert!(parser.partial_bytes() + buf.len() <= at);
    }
    (out, None)
}

/// Parses `data` fed at once, byte by byte, and in pieces chosen by its first byte; the three
/// must agree exactly. Panics (the fuzzer's finding) on disagreement or a broken limit.
pub fn resp_parser(data: &[u8]) {
    let whole = feed(data, |_| usize::MAX);
    let bytewise = feed(data, |_| 1);
    assert_eq!(whole, bytewise, "splitting changed the parse");
    let step = usize::from(data.first().copied().unwrap_or(7) % 13) + 1;
    let pieces = feed(data, |at| (at % step) + 1);
    assert_eq!(whole, pieces, "splitting changed the parse");
}
