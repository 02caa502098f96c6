//! The CURRENT file and the manifest it names.

use super::{Checker, Listing, Problem, Recovered};
use crate::error::{Error, Result};
use crate::filename::{CURRENT, manifest_file_name};
use crate::io::IoClass;
use crate::options::WalRecoveryMode;
use crate::version::edit::manifest_format;
use crate::version::set::MAX_MANIFEST_RECORD;
use crate::version::{MAX_LEVELS, Version, VersionEdit, read_current};
use crate::wal::LogReader;

impl Checker {
    /// Verifies CURRENT and replays the manifest it names; `None` (with problems recorded) when
    /// either is unusable.
    pub(super) fn check_current_and_manifest(&mut self, listing: &Listing) -> Option<Recovered> {
        let number = match read_current(self.fs.as_ref(), &self.dir, &self.io) {
            Ok(n) => n,
            Err(e) => {
                self.problem(Problem::from_error(CURRENT, e));
                return None;
            }
        };
        if !listing.manifests.contains(&number) {
            self.problem(Problem::new(
                CURRENT,
                None,
                format!("names {}, which does not exist", manifest_file_name(number)),
            ));
            return None;
        }
        let name = manifest_file_name(number);
        match self.replay_manifest(number, &name) {
            Ok(r) => Some(r),
            Err(e) => {
                self.problem(Problem::from_error(&name, e));
                None
            }
        }
    }

    /// Replays the manifest the way recovery does (`VersionSet::recover`), but reads with
    /// [`IoClass::Other`], reports a torn tail as a warning, and attributes a failed edit to the
    /// offset of its record.
    fn replay_manifest(&mut self, number: u64, name: &str) -> Result<Recovered> {
        let mut reader = LogReader::new(
            self.reader(name)?,
            name.to_string(),
            IoClass::Other,
            WalRecoveryMode::TolerateCorruptedTail,
            MAX_MANIFEST_RECORD,
        )?;
        // Apply with the most levels any database may have: the level count an open uses is an
        // option, not a property of the files.
        let mut version = Version::new_partitioned(MAX_LEVELS);
        let (mut log_number, mut next_file, mut last_seq) = (None, None, None);
        let mut time_floor = 0u64;
        let mut format = None;
        while let Some((offset, record)) = reader.read_record()? {
            let mut edit = VersionEdit::decode(&record, name, offset)?;
            let f = match format {
                Some(f) => f,
                None => *format.insert(manifest_format(&edit, name, offset)?),
            };
            edit.check_format(f)
                .map_err(|why| Error::corruption(name, offset, why))?;
            edit.upgrade(f);
            version = version.apply(&edit, name, offset)?;
            log_number = edit.log_number.or(log_number);
            next_file = edit.next_file_number.or(next_file);
            last_seq = edit.last_sequence.or(last_seq);
            time_floor = time_floor.max(edit.time_floor.unwrap_or(0));
        }
        for region in reader.dropped() {
            self.warning(
                name,
                Some(region.offset),
                format!(
                    "torn tail of {} bytes ({}); recovery ignores it",
                    region.len, region.reason
                ),
            );
        }
        let missing =
            |what: &str| Error::corruption(name, 0, format!("manifest records no {what}"));
        let log_number = log_number.ok_or_else(|| missing("log number"))?;
        next_file.ok_or_else(|| missing("next file number"))?;
        last_seq.ok_or_else(|| missing("last sequence"))?;
        version
            .check_invariants()
            .map_err(|why| Error::corruption(name, 0, why))?;
        Ok(Recovered {
            time_floor,
            manifest_number: number,
            version,
            log_number,
        })
    }
}
