//! Human-readable dumps of single database files (`gleaner dump`).
//!
//! The kind of file is decided by its name (as `filename::parse_file_name` recognizes it):
//! - key table (`NNNNNN.sst`): its layout and properties, one `name: value` per line, a blank
//!   line, then every entry as `KEY<TAB>seq=N<TAB>kind=put|del|handle<TAB>VALUE` (the value is
//!   empty for a deletion; a handle's is `file=F offset=O len=L`, then ` record_seq=S`,
//!   ` alias`, ` payload=HEX` and ` expiry=MS` where the handle has them; an inline value
//!   with an expiry has a fifth column, `expiry=MS`). An index-decoupled table shows its parts one after the other, each
//!   introduced by a `# data part: ...` or `# handle part: ...` line. A table holding range
//!   tombstones ends with a `# range tombstones: N fragments` line and one line per fragment
//!   and tombstone, `START<TAB>seq=N<TAB>kind=delrange<TAB>END` (as the reader fragmented
//!   them: overlapping tombstones show cut at each other's bounds);
//! - WAL (`NNNNNN.log`): per record a `# record at offset O: sequence S, N ops` line, then every
//!   op as `KEY<TAB>seq=N<TAB>kind=put|del|handle|delrange<TAB>VALUE`, like table entries (a
//!   range delete's value is its end key); a torn tail is shown
//!   as a `# torn tail ...` line;
//! - value table (`NNNNNN.vst`): its properties, a blank line, then every record as
//!   `KEY<TAB>seq=N<TAB>offset=O<TAB>len=L<TAB>VALUE` (then `<TAB>expiry=MS` for a record
//!   whose version expires), read through the dense index and checked (CRC, and that it is the
//!   record the index names);
//! - manifest (`MANIFEST-NNNNNN`): per edit a `# edit at offset O` line, then one `field: value`
//!   line per field it sets (a key table's dependences and an inheritance record's children on
//!   indented lines below it); internal keys are shown as `KEY@SEQ:KIND`;
//! - `CURRENT`: the manifest it names; `OPTIONS`: the saved options, one `name=value` per line;
//! - policy file (`<policy>.<slot>.pol`): its policy, slot, data length and data (hex), checked.
//!
//! Keys and values are text with non-printable bytes escaped, or lower-case hex with `hex`.
//! The dump reads the file as it is (no LOCK: the files it reads are immutable or append-only)
//! and stops at the first damage with the corruption error, after printing what came before.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use crate::batch::BatchOp;
use crate::error::{Error, Result};
use crate::filename::{FileType, manifest_file_name, parse_file_name};
use crate::io::{CountedReader, FileSystem, IoClass, IoStats, PosixFs, ReadFileOptions};
use crate::iter::InternalIterator;
use crate::key::{ParsedKey, SeqNo};
use crate::options::{WalRecoveryMode, parse_options_file};
use crate::table::{KeyTableLayout, ReadCtx, Table, TableIter, TablePart, TableProperties};
use crate::value::segment::scan_segment;
use crate::value::{StoredHandle, ValueTable};
use crate::version::VersionEdit;
use crate::version::set::MAX_MANIFEST_RECORD;
use crate::wal::{LogReader, decode_wal_record, wal_reader};

use super::text::{kind_name, render, render_handle, render_internal_key};

/// Writes a human-readable description of the file at `path` to `out` (see the module
/// documentation for the formats). Keys and values are hex-encoded when `hex` is true.
///
/// Errors: [`Error::InvalidArgument`] naming the file when its name is not one of a file kind
/// that can be dumped; [`Error::Corruption`] at the first damage; [`Error::Io`] for failed
/// reads and for failed writes to `out` (its kind, e.g. `BrokenPipe`, is kept).
pub fn dump_file(path: &Path, out: &mut dyn Write, hex: bool) -> Result<()> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::invalid(format!("{} does not name a file", path.display())))?;
    let kind = parse_file_name(name).ok_or_else(|| {
        Error::invalid(format!(
            "{name}: not a Gleaner file that can be dumped (expected NNNNNN.sst, NNNNNN.vst, \
             NNNNNN.vdk, NNNNNN.log, MANIFEST-NNNNNN, CURRENT, OPTIONS, a policy file or HOTNESS)"
        ))
    })?;
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFs::new());
    let mut d = Dumper {
        out,
        hex,
        fs,
        path,
        name,
    };
    match kind {
        FileType::KeyTable(n) => d.key_table(n),
        FileType::ValueTable(n) => d.value_table(n),
        FileType::DropFile(_) => d.drop_file(),
        FileType::Wal(_) => d.wal(),
        FileType::Manifest(_) => d.manifest(),
        FileType::Current => d.current(),
        FileType::Options => d.options(),
        FileType::PolicyFile => d.policy_file(),
        FileType::Hotness => d.hotness(),
        FileType::Lock | FileType::Temp => Err(Error::invalid(format!(
            "{name}: a lock or temporary file has no contents to dump"
        ))),
    }
}

struct Dumper<'a> {
    out: &'a mut dyn Write,
    hex: bool,
    fs: Arc<dyn FileSystem>,
    path: &'a Path,
    name: &'a str,
}

/// Keeps the kind of an output error (a closed pipe is not a failure of the dump).
fn output_error(e: std::io::Error) -> Error {
    Error::io("writing the dump", e)
}

impl Dumper<'_> {
    fn line(&mut self, text: &str) -> Result<()> {
        writeln!(self.out, "{text}").map_err(output_error)
    }

    fn reader(&self) -> Result<CountedReader> {
        let file = self
            .fs
            .open_readable(self.path, ReadFileOptions::default())?;
        Ok(CountedReader::new(file, Arc::new(IoStats::default())))
    }

    /// One entry line shared by tables and WALs; a handle is shown decoded, an inline value's
    /// expiry in a column of its own (see the module comment).
    fn entry(&mut self, key: &[u8], seq: SeqNo, kind: &str, value: &[u8]) -> Result<()> {
        let value = match kind {
            "handle" => render_handle(&StoredHandle::decode(value, self.name, 0)?),
            "putexp" => {
                let (expiry, value) = crate::expiry::split_inline(value).ok_or_else(|| {
                    Error::corruption(self.name, 0, crate::expiry::BAD_INLINE_EXPIRY)
                })?;
                return self.put_with_expiry(key, seq, value, expiry);
            }
            _ => render(value, self.hex),
        };
        let line = format!("{}\tseq={seq}\tkind={kind}\t{value}", render(key, self.hex));
        self.line(&line)
    }

    /// An inline put with an expiry: `KEY<TAB>seq=N<TAB>kind=put<TAB>VALUE<TAB>expiry=MS`.
    fn put_with_expiry(&mut self, key: &[u8], seq: SeqNo, value: &[u8], expiry: u64) -> Result<()> {
        let line = format!(
            "{}\tseq={seq}\tkind=put\t{}\texpiry={expiry}",
            render(key, self.hex),
            render(value, self.hex)
        );
        self.line(&line)
    }

    fn key_table(&mut self, number: u64) -> Result<()> {
        let reader = self.reader()?;
        let size = reader.size()?;
        let table = Arc::new(Table::open(
            reader,
            self.name.to_string(),
            number,
            size,
            None,
            IoClass::Other,
        )?);
        self.properties(table.properties())?;
        self.line("")?;
        let ctx = ReadCtx {
            class: IoClass::Other,
            fill_cache: false,
            readahead: 0,
            readahead_ramp: false,
        };
        if table.layout() == KeyTableLayout::Mixed {
            self.table_entries(table.iter(ctx))?;
            return self.range_tombstones(&table);
        }
        let p = table.properties();
        for part in [TablePart::Data, TablePart::Handles] {
            let Some(it) = table.part_iter(part, ctx) else {
                continue;
            };
            let (blocks, entries, bytes) = match part {
                TablePart::Data => (p.num_data_blocks, p.num_data_entries(), p.data_bytes),
                TablePart::Handles => (p.num_handle_blocks, p.num_handle_entries, p.handle_bytes),
            };
            self.line(&format!(
                "# {} part: {blocks} blocks, {entries} entries, {bytes} bytes",
                part.name()
            ))?;
            self.table_entries(it)?;
        }
        self.range_tombstones(&table)
    }

    /// The table's range tombstones, fragmented, if it holds any.
    fn range_tombstones(&mut self, table: &Table) -> Result<()> {
        let Some(f) = table.range_tombstones() else {
            return Ok(());
        };
        self.line(&format!("# range tombstones: {} fragments", f.len()))?;
        for t in f.tombstones() {
            self.entry(&t.start, t.seq, "delrange", &t.end)?;
        }
        Ok(())
    }

    /// One line per entry of `it`, from the first.
    fn table_entries(&mut self, mut it: TableIter) -> Result<()> {
        it.seek_to_first()?;
        while it.valid() {
            let parsed = ParsedKey::parse(it.key()).ok_or_else(|| {
                Error::corruption(self.name, 0, "entry key is not an internal key")
            })?;
            self.entry(
                parsed.user_key,
                parsed.seq,
                kind_name(parsed.kind),
                it.value(),
            )?;
            it.next()?;
        }
        Ok(())
    }

    /// A value segment left open by a crash (`separate_at=write`; docs/format.md, format
    /// version 3): a header, then one line per record in file order, as
    /// [`Dumper::value_table`] prints them, and where the records end short of the file (a torn
    /// write). When not even one record is whole at offset 0 it is no segment: `footer_error`,
    /// why it did not open as a table, is returned.
    fn open_segment(&mut self, size: u64, footer_error: Error) -> Result<()> {
        let reader = self.reader()?;
        let scanned = scan_segment(self.name, size, |at, len| {
            reader.read_vec(at, len, IoClass::Other)
        })?;
        if scanned.num_records() == 0 {
            return Err(footer_error);
        }
        let hex = self.hex;
        self.line("open value segment (no index: a crash left it open; the next open seals it)")?;
        self.line(&format!("num_records: {}", scanned.num_records()))?;
        self.line(&format!("records_end: {}", scanned.end()))?;
        if let Some((at, why)) = scanned.torn() {
            self.line(&format!("torn_at: {at} ({why})"))?;
        }
        self.line("")?;
        for (offset, len) in scanned.places() {
            let bytes = reader.read_vec(offset, len as usize, IoClass::Other)?;
            let record = crate::value::decode_record(&bytes, self.name, offset)?;
            let line = format!(
                "{}\tseq={}\toffset={offset}\tlen={len}\t{}",
                render(record.key, hex),
                record.seq,
                render(record.value, hex)
            );
            self.line(&line)?;
        }
        Ok(())
    }

    /// A value table: its properties, then one line per record in key order,
    /// `KEY<TAB>seq=N<TAB>offset=O<TAB>len=L<TAB>VALUE`.
    fn value_table(&mut self, number: u64) -> Result<()> {
        let reader = self.reader()?;
        let size = reader.size()?;
        let opened = ValueTable::open(
            reader,
            self.name.to_string(),
            number,
            size,
            None,
            IoClass::Other,
        );
        let table = match opened {
            Ok(t) => Arc::new(t),
            // Without a valid footer it may be a value segment a crash left open: records from
            // offset 0, no index.
            Err(e) if e.is_corruption() => return self.open_segment(size, e),
            Err(e) => return Err(e),
        };
        let p = table.properties();
        let hex = self.hex;
        let lines = [
            format!("num_records: {}", p.num_records),
            format!("record_bytes: {}", p.record_bytes),
            format!("key_bytes: {}", p.key_bytes),
            format!("value_bytes: {}", p.value_bytes),
            format!("smallest_seq: {}", p.smallest_seq),
            format!("largest_seq: {}", p.largest_seq),
            format!("smallest_key: {}", render(&p.smallest_key, hex)),
            format!("largest_key: {}", render(&p.largest_key, hex)),
            format!("index_bytes: {}", p.index_bytes),
            format!("class: {}", p.class),
            format!("format_version: {}", p.format_version),
        ];
        for l in lines {
            self.line(&l)?;
        }
        if p.format_version >= crate::value::FORMAT_VERSION_EXPIRY {
            self.line(&format!("expiring_records: {}", p.expiring_records))?;
            self.line(&format!("max_expiry: {}", p.max_expiry))?;
        }
        self.line("")?;
        for entry in table.index_iter(IoClass::Other) {
            let e = entry?;
            let record = table.read_record(e.offset, e.len, IoClass::Other)?;
            // A record that is intact but not the one its index entry names is still damage:
            // a handle found through the index would read the wrong value.
            if record.key != e.user_key || record.seq != e.seq {
                return Err(Error::corruption(
                    self.name,
                    e.offset,
                    "record does not match its dense-index entry",
                ));
            }
            let mut line = format!(
                "{}\tseq={}\toffset={}\tlen={}\t{}",
                render(&record.key, hex),
                record.seq,
                e.offset,
                e.len,
                render(&record.value, hex)
            );
            if let Some(x) = e.expiry {
                line.push_str(&format!("\texpiry={x}"));
            }
            self.line(&line)?;
        }
        Ok(())
    }

    /// A drop file: each block with its named table, then its drop keys.
    fn drop_file(&mut self) -> Result<()> {
        let reader = crate::value::DropFileReader::open(
            self.fs.as_ref(),
            self.path,
            self.name,
            Arc::new(IoStats::default()),
        )?;
        let hex = self.hex;
        // Streamed: memory stays bounded whatever the file's size.
        reader.walk(IoClass::Other, |item| match item {
            crate::value::WalkItem::Block(block) => self.line(&format!(
                "block offset={} len={} named_table={} keys={}",
                block.offset, block.len, block.named_table, block.keys
            )),
            crate::value::WalkItem::Key(key, seq) => {
                self.line(&format!("{}\tseq={seq}", render(key, hex)))
            }
        })
    }

    fn properties(&mut self, p: &TableProperties) -> Result<()> {
        let hex = self.hex;
        let mut lines = vec![
            format!("layout: {}", p.layout().name()),
            format!("num_entries: {}", p.num_entries),
            format!("num_deletions: {}", p.num_deletions),
            format!("num_data_blocks: {}", p.num_data_blocks),
            format!("raw_key_bytes: {}", p.raw_key_bytes),
            format!("raw_value_bytes: {}", p.raw_value_bytes),
            format!("data_bytes: {}", p.data_bytes),
            format!("index_bytes: {}", p.index_bytes),
            format!("filter_bytes: {}", p.filter_bytes),
            format!("smallest_seq: {}", p.smallest_seq),
            format!("largest_seq: {}", p.largest_seq),
            format!("compression: {}", p.compression),
            format!("format_version: {}", p.format_version),
            format!(
                "smallest_key: {}",
                render_internal_key(&p.smallest_key, hex)
            ),
            format!("largest_key: {}", render_internal_key(&p.largest_key, hex)),
        ];
        if p.range_deletions > 0 {
            lines.push(format!("range_deletions: {}", p.range_deletions));
        }
        if p.layout() == KeyTableLayout::IndexDecoupled {
            lines.extend([
                format!("num_handle_blocks: {}", p.num_handle_blocks),
                format!("num_handle_entries: {}", p.num_handle_entries),
                format!("handle_bytes: {}", p.handle_bytes),
                format!("handle_index_bytes: {}", p.handle_index_bytes),
            ]);
        }
        for l in lines {
            self.line(&l)?;
        }
        Ok(())
    }

    fn manifest_reader(&self) -> Result<LogReader> {
        LogReader::new(
            self.reader()?,
            self.name.to_string(),
            IoClass::Other,
            WalRecoveryMode::TolerateCorruptedTail,
            MAX_MANIFEST_RECORD,
        )
    }

    /// Reports what the log reader cut off as a torn tail.
    fn torn_tail(&mut self, reader: &LogReader) -> Result<()> {
        for r in reader.dropped().to_vec() {
            self.line(&format!(
                "# torn tail at offset {}: {} bytes ({}), ignored by recovery",
                r.offset, r.len, r.reason
            ))?;
        }
        Ok(())
    }

    fn wal(&mut self) -> Result<()> {
        let mut reader = wal_reader(
            self.reader()?,
            self.name.to_string(),
            IoClass::Other,
            WalRecoveryMode::TolerateCorruptedTail,
        )?;
        while let Some((offset, record)) = reader.read_record()? {
            let Some(batch) = decode_wal_record(record, self.name, offset)? else {
                self.line(&format!("# record at offset {offset}: sync marker"))?;
                continue;
            };
            let first = batch.sequence();
            self.line(&format!(
                "# record at offset {offset}: sequence {first}, {} ops",
                batch.count()
            ))?;
            for (i, op) in batch.iter().enumerate() {
                // decode validated every op.
                let op = op.map_err(|d| Error::corruption(self.name, offset, d))?;
                let seq = first.saturating_add(i as u64);
                match op {
                    BatchOp::Put {
                        key,
                        value,
                        expiry: None,
                    } => self.entry(key, seq, "put", value)?,
                    BatchOp::Put {
                        key,
                        value,
                        expiry: Some(e),
                    } => self.put_with_expiry(key, seq, value, e)?,
                    BatchOp::Delete { key } => self.entry(key, seq, "del", &[])?,
                    BatchOp::PutHandle { key, handle } => self.entry(key, seq, "handle", handle)?,
                    // The value column holds the range's end.
                    BatchOp::DeleteRange { start, end } => {
                        self.entry(start, seq, "delrange", end)?
                    }
                }
            }
        }
        self.torn_tail(&reader)
    }

    fn manifest(&mut self) -> Result<()> {
        let mut reader = self.manifest_reader()?;
        while let Some((offset, record)) = reader.read_record()? {
            let edit = VersionEdit::decode(&record, self.name, offset)?;
            self.line(&format!("# edit at offset {offset}"))?;
            self.edit(&edit)?;
        }
        self.torn_tail(&reader)
    }

    fn edit(&mut self, e: &VersionEdit) -> Result<()> {
        let hex = self.hex;
        let mut lines = Vec::new();
        let counters = [
            ("format_version", e.format_version),
            ("log_number", e.log_number),
            ("next_file_number", e.next_file_number),
            ("last_sequence", e.last_sequence),
        ];
        for (field, value) in counters {
            if let Some(v) = value {
                lines.push(format!("{field}: {v}"));
            }
        }
        for (level, key) in &e.compact_pointers {
            lines.push(format!(
                "compact_pointer: level={level} key={}",
                render_internal_key(key, hex)
            ));
        }
        for (level, number) in &e.deleted_files {
            lines.push(format!("deleted_file: level={level} number={number}"));
        }
        for t in &e.new_tables {
            // An L0 table is a sorted run of its own; deeper, the run the record names.
            let run = if crate::version::routing::is_l0(t.level as usize) {
                "own".to_string()
            } else {
                t.run.to_string()
            };
            lines.push(format!(
                "new_table: level={} run={run} number={} file_size={} entries={} deletions={} \
                 seqs={}..={} smallest={} largest={}",
                t.level,
                t.meta.number,
                t.meta.file_size,
                t.meta.num_entries,
                t.meta.num_deletions,
                t.meta.smallest_seq,
                t.meta.largest_seq,
                render_internal_key(&t.meta.smallest, hex),
                render_internal_key(&t.meta.largest, hex)
            ));
            for d in &t.meta.dependence {
                lines.push(format!(
                    "  dependence: value_table={} handles={} bytes={}",
                    d.value_table, d.count, d.bytes
                ));
            }
            match t.meta.aliases {
                0 => {}
                crate::version::edit::ALIASES_UNRECORDED => {
                    lines.push("  aliases: unrecorded".to_string());
                }
                n => lines.push(format!("  aliases: {n}")),
            }
        }
        for v in &e.new_value_tables {
            lines.push(format!(
                "new_value_table: number={} file_size={} records={} record_bytes={} seqs={}..={} \
                 class={} smallest={} largest={}",
                v.number,
                v.file_size,
                v.records,
                v.record_bytes,
                v.smallest_seq,
                v.largest_seq,
                v.class,
                render(&v.smallest_key, hex),
                render(&v.largest_key, hex)
            ));
            if let Some(m) = &v.policy_meta {
                let said = crate::gc::registry::describe_table_meta(&m.tag, &m.data)
                    .map(|s| format!(" {s}"))
                    .unwrap_or_default();
                lines.push(format!(
                    "  policy_meta: policy={} data={}{said}",
                    m.tag,
                    super::text::hex(&m.data)
                ));
            }
            if let Some(x) = v.max_expiry {
                lines.push(format!("  max_expiry: {x}"));
            }
        }
        for (number, g) in &e.value_garbage {
            lines.push(format!(
                "value_garbage: number={number} records={} bytes={}",
                g.records, g.bytes
            ));
        }
        for number in &e.deleted_value_tables {
            lines.push(format!("deleted_value_table: number={number}"));
        }
        for (victim, children) in &e.inheritance {
            lines.push(format!("inheritance: number={victim}"));
            for c in children {
                lines.push(format!(
                    "  child: number={} smallest={} largest={}",
                    c.number,
                    render(&c.smallest_key, hex),
                    render(&c.largest_key, hex)
                ));
            }
        }
        for (number, seq) in &e.retired_value_tables {
            lines.push(format!(
                "retired_value_table: number={number} obsolete_seq={seq}"
            ));
        }
        for number in &e.released_value_tables {
            lines.push(format!("released_value_table: number={number}"));
        }
        for (number, awaiting) in &e.write_back {
            lines.push(format!("write_back: number={number} awaiting={awaiting}"));
        }
        for (number, b) in &e.drop_blocks {
            lines.push(format!(
                "drop_block: number={number} drop_file={} offset={} len={} keys={} named_table={}",
                b.file, b.offset, b.len, b.keys, b.named_table
            ));
        }
        if let Some(t) = e.time_floor {
            lines.push(format!("time_floor: {t}"));
        }
        for l in lines {
            self.line(&l)?;
        }
        Ok(())
    }

    fn current(&mut self) -> Result<()> {
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        let number = crate::version::read_current(self.fs.as_ref(), dir, &IoStats::default())?;
        self.line(&format!("manifest: {}", manifest_file_name(number)))
    }

    /// A policy file: its policy and slot, size, then its data in hex, checked.
    fn policy_file(&mut self) -> Result<()> {
        let bytes = self.fs.read_all(self.path)?;
        let data = crate::gc::policy_file::decode_policy_file(self.name, &bytes)?;
        let (policy, slot) =
            crate::filename::parse_policy_file_name(self.name).unwrap_or(("?", "?"));
        self.line(&format!("policy: {policy}"))?;
        self.line(&format!("slot: {slot}"))?;
        self.line(&format!("data_bytes: {}", data.len()))?;
        self.line(&format!("data: {}", super::text::hex(&data)))?;
        // What the policy makes of it (a model, node by node, say).
        match crate::gc::registry::describe_policy_file(policy, slot, &data) {
            Some(Ok(lines)) => lines.iter().try_for_each(|l| self.line(l)),
            Some(Err(e)) => self.line(&format!("unusable: {e}")),
            None => Ok(()),
        }
    }

    /// The hotness statistics: the snapshot's generation, counters, node count and hot
    /// prefixes, or each log record's generation and hot prefixes.
    fn hotness(&mut self) -> Result<()> {
        use crate::partition::persist::{HotnessFile, read_file};
        let hex = self.hex;
        let list = |hot: &[(Vec<u8>, f64)]| {
            hot.iter()
                .map(|(p, c)| format!("{}={c}", super::text::render(p, hex)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        match read_file(self.fs.as_ref(), self.path, self.name)? {
            HotnessFile::Snapshot(generation, trie) => {
                self.line(&format!("generation: {generation}"))?;
                self.line(&format!("accesses: {}", trie.accesses))?;
                self.line(&format!("trie_accesses: {}", trie.trie_accesses))?;
                self.line(&format!("nodes: {}", trie.nodes()))?;
                self.line(&format!("hot: {}", list(&trie.hot_counts())))
            }
            HotnessFile::Log(records) => records
                .iter()
                .try_for_each(|(g, hot)| self.line(&format!("generation {g}: {}", list(hot)))),
        }
    }

    fn options(&mut self) -> Result<()> {
        let bytes = self.fs.read_all(self.path)?;
        for (name, value) in parse_options_file(self.name, &bytes)? {
            self.line(&format!("{name}={value}"))?;
        }
        Ok(())
    }
}
