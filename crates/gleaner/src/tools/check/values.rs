//! Value tables: presence and size against the manifest, properties against the manifest, the
//! whole dense index, and every record with its checksum.

use std::sync::Arc;

use super::handles::show_key;
use super::{Checker, Problem};
use crate::error::Result;
use crate::filename::{manifest_file_name, value_table_file_name};
use crate::gc::VictimReader;
use crate::io::IoClass;
use crate::value::{ValueTable, ValueTableProperties};
use crate::version::ValueTableMeta;

/// What reading every record of a table found, to compare with its properties.
#[derive(Default)]
struct Seen {
    records: u64,
    key_bytes: u64,
    value_bytes: u64,
    first_key: Option<Vec<u8>>,
    last_key: Vec<u8>,
    smallest_seq: u64,
    largest_seq: u64,
}

impl Checker {
    /// Verifies a value table the manifest lists; false when anything is wrong with it.
    pub(super) fn check_live_value_table(&mut self, manifest: u64, meta: &ValueTableMeta) -> bool {
        let name = value_table_file_name(meta.number);
        let listed = format!(
            "{} lists it as a live value table",
            manifest_file_name(manifest)
        );
        if !self.present_with_size(&name, meta.file_size, manifest, &listed) {
            return false;
        }
        self.check_value_table_file(meta.number, Some(meta))
    }

    /// Reads value table `number` completely; with `meta`, also compares it with the manifest.
    /// False when anything is wrong with it.
    pub(super) fn check_value_table_file(
        &mut self,
        number: u64,
        meta: Option<&ValueTableMeta>,
    ) -> bool {
        let name = value_table_file_name(number);
        let before = self.report.problems.len();
        if let Err(e) = self.verify_value_table(&name, number, meta) {
            self.problem(Problem::from_error(&name, e));
        }
        self.report.problems.len() == before
    }

    fn verify_value_table(
        &mut self,
        name: &str,
        number: u64,
        meta: Option<&ValueTableMeta>,
    ) -> Result<()> {
        let reader = self.reader(name)?;
        let size = match meta {
            Some(m) => m.file_size,
            None => reader.size()?,
        };
        // Opening verifies the footer, the properties (against each other and the layout) and
        // the whole top index.
        let table = Arc::new(ValueTable::open(
            reader,
            name.to_string(),
            number,
            size,
            None,
            IoClass::Other,
        )?);
        let props = table.properties().clone();
        if let Some(m) = meta {
            self.compare_with_manifest(name, &props, m);
        }
        // The victim reader walks the dense index (contiguity, order, counts against the
        // properties) and reads the records it lists in chunks, checking each record's CRC and
        // that it is the record its index entry names.
        let mut records = VictimReader::new(table);
        let mut seen = Seen::default();
        while let Some(r) = records.next_record()? {
            if seen.first_key.is_none() {
                seen.first_key = Some(r.key.clone());
                seen.smallest_seq = r.seq;
            }
            seen.records += 1;
            seen.key_bytes += r.key.len() as u64;
            seen.value_bytes += r.value.len() as u64;
            seen.smallest_seq = seen.smallest_seq.min(r.seq);
            seen.largest_seq = seen.largest_seq.max(r.seq);
            seen.last_key = r.key;
            self.report.records_checked += 1;
        }
        self.report.value_tables_checked += 1;
        self.compare_with_records(name, &props, &seen);
        Ok(())
    }

    /// The manifest's record of the table against the table's own properties.
    fn compare_with_manifest(&mut self, name: &str, p: &ValueTableProperties, m: &ValueTableMeta) {
        let mut differ = Vec::new();
        let mut field = |what: &str, table: String, manifest: String| {
            if table != manifest {
                differ.push(format!("{what} {table} (manifest: {manifest})"));
            }
        };
        field("records", p.num_records.to_string(), m.records.to_string());
        field(
            "record_bytes",
            p.record_bytes.to_string(),
            m.record_bytes.to_string(),
        );
        field(
            "smallest_seq",
            p.smallest_seq.to_string(),
            m.smallest_seq.to_string(),
        );
        field(
            "largest_seq",
            p.largest_seq.to_string(),
            m.largest_seq.to_string(),
        );
        field("class", p.class.to_string(), m.class.to_string());
        // Keys are compared as bytes: the rendering is cut for long keys.
        for (what, table, manifest) in [
            ("smallest_key", &p.smallest_key, &m.smallest_key),
            ("largest_key", &p.largest_key, &m.largest_key),
        ] {
            if table != manifest {
                differ.push(format!(
                    "{what} {} (manifest: {})",
                    show_key(table),
                    show_key(manifest)
                ));
            }
        }
        if !differ.is_empty() {
            self.problem(Problem::new(
                name,
                None,
                format!(
                    "properties disagree with the manifest: {}",
                    differ.join(", ")
                ),
            ));
        }
    }

    /// The records read against the properties the table was written with.
    fn compare_with_records(&mut self, name: &str, p: &ValueTableProperties, s: &Seen) {
        let mut differ = Vec::new();
        if s.key_bytes != p.key_bytes || s.value_bytes != p.value_bytes {
            differ.push(format!(
                "records hold {} key bytes and {} value bytes, properties say {} and {}",
                s.key_bytes, s.value_bytes, p.key_bytes, p.value_bytes
            ));
        }
        if s.records > 0 {
            if s.first_key.as_deref() != Some(p.smallest_key.as_slice())
                || s.last_key != p.largest_key
            {
                differ.push("first or last record key differs from the properties".to_string());
            }
            if (s.smallest_seq, s.largest_seq) != (p.smallest_seq, p.largest_seq) {
                differ.push(format!(
                    "records span sequences {}..={}, properties say {}..={}",
                    s.smallest_seq, s.largest_seq, p.smallest_seq, p.largest_seq
                ));
            }
        }
        for d in differ {
            self.problem(Problem::new(name, None, d));
        }
    }
}
