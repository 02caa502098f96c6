//! `load`: bulk writes from stdin, committed in batches.

use std::io::{BufRead, Write};

use gleaner::options::MAX_KEY_SIZE;
use gleaner::{Db, WriteBatch, WriteOptions};

use super::{Context, Status};
use crate::args::LoadArgs;
use crate::codec::Codec;
use crate::error::{CliError, CliResult, output};

/// `gleaner load DIR [--sync] [--batch N]` (the input format is documented on the command).
pub fn run(
    ctx: &Context,
    args: &LoadArgs,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> CliResult<Status> {
    ctx.with_db(&args.dir, true, |db| {
        let mut loader = Loader {
            db,
            codec: ctx.codec,
            write_opts: WriteOptions { sync: args.sync },
            batch_ops: args.batch,
            max_value: db.options().max_value_size(),
            max_batch: db.options().max_batch_size(),
            batch: WriteBatch::new(),
            first_line: 0,
            last_line: 0,
            out,
        };
        loader.load(input)
    })?;
    Ok(Status::Success)
}

/// One parsed input line.
enum Op {
    Put(Vec<u8>, Vec<u8>),
    /// `putttl`: a put expiring at the given time (milliseconds since the Unix epoch).
    PutExpiring(Vec<u8>, Vec<u8>, u64),
    Del(Vec<u8>),
    /// `delrange`: every key of `[start, end)`.
    DelRange(Vec<u8>, Vec<u8>),
}

/// Upper bound of the bytes an op adds to an encoded batch: kind byte, two varint lengths (at
/// most 10 bytes each), key, value and an expiry.
fn encoded_bound(key: &[u8], value: &[u8]) -> u64 {
    (1 + 10 + key.len() + 10 + value.len() + 8) as u64
}

struct Loader<'a> {
    db: &'a Db,
    codec: Codec,
    write_opts: WriteOptions,
    batch_ops: u64,
    max_value: u64,
    max_batch: u64,
    /// The batch being filled; it is written only when complete, so a bad line loses nothing
    /// but its own batch.
    batch: WriteBatch,
    /// Line numbers (1-based) of the first and last op in `batch`.
    first_line: u64,
    last_line: u64,
    out: &'a mut dyn Write,
}

impl Loader<'_> {
    fn load(&mut self, input: &mut dyn BufRead) -> CliResult<()> {
        let mut line = Vec::new();
        let mut line_no = 0u64;
        loop {
            line.clear();
            if input
                .read_until(b'\n', &mut line)
                .map_err(CliError::Input)?
                == 0
            {
                break;
            }
            line_no += 1;
            let content = strip_line_end(&line);
            if content.is_empty() {
                continue;
            }
            let op = self
                .parse(content)
                .map_err(|why| CliError::Invalid(format!("line {line_no}: {why}")))?;
            // A range delete's end takes the place of a value in the encoding.
            let (key, value): (&[u8], &[u8]) = match &op {
                Op::Put(k, v) | Op::PutExpiring(k, v, _) | Op::DelRange(k, v) => (k, v),
                Op::Del(k) => (k, &[]),
            };
            // Options guarantee that one op always fits an empty batch, so committing first
            // is enough to respect `max_batch_size`.
            if !self.batch.is_empty()
                && self.batch.encoded_size() as u64 + encoded_bound(key, value) > self.max_batch
            {
                self.commit()?;
            }
            match &op {
                Op::Put(k, v) => self.batch.put(k, v),
                Op::PutExpiring(k, v, expiry) => self.batch.put_with_expiry(k, v, *expiry),
                Op::Del(k) => self.batch.delete(k),
                Op::DelRange(start, end) => self.batch.delete_range(start, end),
            }
            if self.batch.count() == 1 {
                self.first_line = line_no;
            }
            self.last_line = line_no;
            if u64::from(self.batch.count()) >= self.batch_ops {
                self.commit()?;
            }
        }
        if !self.batch.is_empty() {
            self.commit()?;
        }
        Ok(())
    }

    /// Parses and validates one non-empty line (without its line end).
    fn parse(&self, line: &[u8]) -> Result<Op, String> {
        let text = std::str::from_utf8(line).map_err(|_| {
            "not valid UTF-8 (with --hex, keys and values are hex; lines are still text)"
                .to_string()
        })?;
        let fields: Vec<&str> = text.split('\t').collect();
        let op = match (fields[0], fields.len()) {
            ("put", 3) => Op::Put(
                self.decode("key", fields[1])?,
                self.decode("value", fields[2])?,
            ),
            ("putttl", 4) => Op::PutExpiring(
                self.decode("key", fields[1])?,
                self.decode("value", fields[2])?,
                self.expiry(fields[3])?,
            ),
            ("del", 2) => Op::Del(self.decode("key", fields[1])?),
            ("delrange", 3) => Op::DelRange(
                self.decode("start key", fields[1])?,
                self.decode("end key", fields[2])?,
            ),
            ("put", n) => {
                return Err(format!(
                    "`put` takes a key and a value: expected 3 tab-separated fields, found {n}"
                ));
            }
            ("putttl", n) => {
                return Err(format!(
                    "`putttl` takes a key, a value and a TTL in milliseconds: expected 4 \
                     tab-separated fields, found {n}"
                ));
            }
            ("del", n) => {
                return Err(format!(
                    "`del` takes a key: expected 2 tab-separated fields, found {n}"
                ));
            }
            ("delrange", n) => {
                return Err(format!(
                    "`delrange` takes a start and an end key: expected 3 tab-separated fields, \
                     found {n}"
                ));
            }
            (other, _) => {
                return Err(format!(
                    "unknown operation `{}` (expected `put`, `putttl`, `del` or `delrange`)",
                    other.escape_debug()
                ));
            }
        };
        // The database checks these limits only for a whole batch; checking them here names
        // the offending line and keeps its batch from being attempted at all.
        let (key, value) = match &op {
            Op::Put(k, v) | Op::PutExpiring(k, v, _) => (k, Some(v)),
            Op::Del(k) => (k, None),
            Op::DelRange(start, end) => {
                if start >= end {
                    return Err(
                        "`delrange`: the start key must sort before the end key".to_string()
                    );
                }
                if end.len() > MAX_KEY_SIZE {
                    return Err(format!(
                        "end key of {} bytes exceeds the key size limit of {MAX_KEY_SIZE} bytes",
                        end.len()
                    ));
                }
                (start, None)
            }
        };
        if key.len() > MAX_KEY_SIZE {
            return Err(format!(
                "key of {} bytes exceeds the key size limit of {MAX_KEY_SIZE} bytes",
                key.len()
            ));
        }
        if let Some(v) = value
            && v.len() as u64 > self.max_value
        {
            return Err(format!(
                "value of {} bytes exceeds option `max_value_size` ({} bytes)",
                v.len(),
                self.max_value
            ));
        }
        Ok(op)
    }

    /// The expiry of a `putttl` line's TTL field: milliseconds after the database's time now.
    fn expiry(&self, ttl: &str) -> Result<u64, String> {
        let ttl: i64 = ttl.parse().map_err(|_| {
            format!(
                "TTL `{}` is not a whole number of milliseconds",
                ttl.escape_debug()
            )
        })?;
        let ttl = u64::try_from(ttl)
            .map_err(|_| format!("TTL {ttl}: a time to live is at least 0 milliseconds"))?;
        gleaner::expiry::expiry_after(self.db.time_ms(), ttl).map_err(|e| e.to_string())
    }

    fn decode(&self, what: &str, text: &str) -> Result<Vec<u8>, String> {
        self.codec.decode(what, text).map(|b| b.into_owned())
    }

    /// Writes the batch and reports the lines consumed so far.
    fn commit(&mut self) -> CliResult<()> {
        let batch = std::mem::take(&mut self.batch);
        self.db.write(batch, &self.write_opts).map_err(|e| {
            CliError::Invalid(format!(
                "lines {}-{}: the batch was rejected: {e}",
                self.first_line, self.last_line
            ))
        })?;
        output(writeln!(self.out, "committed {}", self.last_line))?;
        output(self.out.flush())
    }
}

/// `line` without its `\n` or `\r\n`.
fn strip_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}
