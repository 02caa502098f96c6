//! The chain of write-ahead logs: what recovery (and `gleaner check`) learn from the sequence
//! numbers across logs. A memtable switch does not sync the log it closes, so a power loss can
//! take that log's unsynced tail and keep bytes of a later log; each log continues its
//! predecessor's sequence numbers exactly, which shows such a loss, and nothing logged after it
//! is replayed (docs/format.md, "WAL record").

use crate::error::{Error, Result};
use crate::filename::wal_file_name;
use crate::options::WalRecoveryMode;

/// Where a replay was cut, and why.
pub(crate) struct Cut {
    /// The log where the loss is.
    pub log: u64,
    /// Where in that log: the torn write's record, or the end of what the log kept.
    pub offset: u64,
    /// What was lost.
    pub kind: CutKind,
}

#[derive(Clone, Copy)]
pub(crate) enum CutKind {
    /// A write's value is not whole in its value segment (`separate_at=write`).
    TornValue,
    /// A log lost writes at its tail (a power loss before it was synced).
    LostLog,
}

/// Follows the sequence numbers from log to log: a memtable's log holds at least one write (a
/// switch seals only a memtable with one), and the next log's first write continues its last
/// one's sequence number exactly.
#[derive(Default)]
pub(crate) struct LogChain {
    /// The sequence number the next write must carry (none before the first replayed write).
    next: Option<u64>,
    /// The log of the last write replayed.
    last_log: u64,
    /// The log being read (none before the first), and whether it has replayed a write.
    log: Option<u64>,
    log_replayed: bool,
    /// The log that replayed no write although a later log may hold some: it lost them.
    empty: Option<u64>,
}

impl LogChain {
    /// Notes that log `number` is read next.
    pub fn start_log(&mut self, number: u64) {
        if let Some(log) = self.log
            && !self.log_replayed
            && self.empty.is_none()
        {
            self.empty = Some(log);
        }
        self.log = Some(number);
        self.log_replayed = false;
    }

    /// Checks the write about to be replayed (log `number`, at `offset`, starting at sequence
    /// `first`): `Some` of where the chain broke when writes before it were lost.
    ///
    /// Errors: it reuses sequence numbers an earlier write had (no crash does that).
    pub fn lost_before(&self, number: u64, offset: u64, first: u64) -> Result<Option<Cut>> {
        if let Some(log) = self.empty {
            return Ok(Some(Cut {
                log,
                offset: 0,
                kind: CutKind::LostLog,
            }));
        }
        let Some(next) = self.next else {
            return Ok(None);
        };
        if first < next {
            return Err(Error::corruption(
                wal_file_name(number),
                offset,
                format!("write at sequence {first} repeats sequence numbers below {next}"),
            ));
        }
        // Within a log, records follow each other: damage there is the log reader's to find.
        if first > next && !self.log_replayed {
            return Ok(Some(Cut {
                log: self.last_log,
                offset: 0,
                kind: CutKind::LostLog,
            }));
        }
        Ok(None)
    }

    /// Notes a replayed write, whose last sequence number is `next - 1`.
    pub fn replayed(&mut self, next: u64) {
        self.next = Some(next);
        self.last_log = self.log.unwrap_or_default();
        self.log_replayed = true;
    }
}

/// Under `tolerate_corrupted_tail`, writes lost at `cut` are a crash's only if nothing shows
/// they were synced: the write-ahead log record of log `wal` with sync point `point`, read after
/// the cut, shows it when it lies in a later log that had been synced (a sync of a log syncs
/// the logs before it first, with their value segments), or in the same log past a sync that
/// covered the cut (segments are synced before their log). That is damage: `Error::Corruption`,
/// as damage followed by intact log records is.
pub(crate) fn check_cut_unsynced(cut: &Cut, wal: u64, point: Option<u64>, mode: WalRecoveryMode) -> Result<()> {
    if mode != WalRecoveryMode::TolerateCorruptedTail {
        return Ok(());
    }
    let point = point.unwrap_or(0);
    let synced = if wal != cut.log {
        point > 0
    } else {
        point > cut.offset
    };
    if synced {
        let (what, damaged) = match cut.kind {
            CutKind::TornValue => (
                "a write whose value is not whole in its value segment",
                "the segment",
            ),
            CutKind::LostLog => ("writes lost at the end of this log", "the log"),
        };
        return Err(Error::corruption(
            wal_file_name(cut.log),
            cut.offset,
            format!(
                "{what} had been synced, as a later log record shows: {damaged} is damaged"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `logs` (each a list of writes as `(first sequence, count)`) to a chain as recovery
    /// does, and returns the log and the write (log, index) where it cuts, if it does.
    fn cut_at(logs: &[&[(u64, u64)]]) -> Result<Option<(u64, usize, u64)>> {
        let mut chain = LogChain::default();
        for (n, writes) in logs.iter().enumerate() {
            let number = n as u64 + 10;
            chain.start_log(number);
            for (i, &(first, count)) in writes.iter().enumerate() {
                if let Some(cut) = chain.lost_before(number, i as u64, first)? {
                    return Ok(Some((number, i, cut.log)));
                }
                chain.replayed(first + count);
            }
        }
        Ok(None)
    }

    #[test]
    fn logs_that_continue_each_other_replay_whole() {
        assert!(cut_at(&[&[(5, 2), (7, 1)], &[(8, 3)], &[(11, 1)]]).unwrap().is_none());
        // The first log may start anywhere (the ones before it are flushed), and the last may
        // be empty (a switch just made it).
        assert!(cut_at(&[&[(100, 1)], &[]]).unwrap().is_none());
    }

    #[test]
    fn a_gap_between_logs_cuts_at_the_later_log() {
        // Log 10 lost sequence 8: log 11's first write shows it.
        assert_eq!(
            cut_at(&[&[(5, 3)], &[(9, 1)], &[(10, 1)]]).unwrap(),
            Some((11, 0, 10))
        );
    }

    #[test]
    fn an_empty_log_before_one_with_writes_lost_them() {
        assert_eq!(cut_at(&[&[], &[(9, 1)]]).unwrap(), Some((11, 0, 10)));
        assert_eq!(
            cut_at(&[&[(1, 1)], &[], &[(3, 1)]]).unwrap(),
            Some((12, 0, 11))
        );
    }

    #[test]
    fn repeated_sequence_numbers_are_corruption() {
        let e = cut_at(&[&[(5, 3)], &[(7, 1)]]).unwrap_err();
        assert!(e.is_corruption(), "{e}");
    }

    #[test]
    fn only_a_sync_after_the_cut_shows_the_lost_writes_were_durable() {
        let mode = WalRecoveryMode::TolerateCorruptedTail;
        let lost = Cut {
            log: 10,
            offset: 0,
            kind: CutKind::LostLog,
        };
        // A later log never synced: the loss is a crash's.
        assert!(check_cut_unsynced(&lost, 11, Some(0), mode).is_ok());
        // A later log synced: every log before it had been synced first.
        assert!(check_cut_unsynced(&lost, 11, Some(4096), mode).is_err());
        // Skipping damage never fails.
        let skip = WalRecoveryMode::SkipAnyCorruptedRecords;
        assert!(check_cut_unsynced(&lost, 11, Some(4096), skip).is_ok());
        // A torn value in the same log: only a sync past its record shows it durable.
        let torn = Cut {
            log: 11,
            offset: 500,
            kind: CutKind::TornValue,
        };
        assert!(check_cut_unsynced(&torn, 11, Some(500), mode).is_ok());
        assert!(check_cut_unsynced(&torn, 11, Some(501), mode).is_err());
    }
}
