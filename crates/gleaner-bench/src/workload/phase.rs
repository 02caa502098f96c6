//! `PhaseSpec` and `YcsbWorkload`: the phases of a run, as given on the command line.

use std::fmt;
use std::str::FromStr;

use super::spec::SpecError;

/// One of the YCSB core workloads (Cooper et al., SoCC '10), as the Scavenger evaluation runs
/// them. Text forms: `a` … `f` (as after `--ycsb`) or `ycsb-a` … `ycsb-f`, case-insensitive;
/// `Display` prints the single letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum YcsbWorkload {
    /// 50% read, 50% update.
    A,
    /// 95% read, 5% update.
    B,
    /// 100% read.
    C,
    /// 95% read of recently inserted keys (`latest`), 5% insert.
    D,
    /// 95% scan (length uniform 1..=100), 5% insert.
    E,
    /// 50% read, 50% read-modify-write.
    F,
}

impl YcsbWorkload {
    /// All six, in order.
    pub const ALL: [YcsbWorkload; 6] = [
        YcsbWorkload::A,
        YcsbWorkload::B,
        YcsbWorkload::C,
        YcsbWorkload::D,
        YcsbWorkload::E,
        YcsbWorkload::F,
    ];

    /// The lowercase letter naming the workload.
    pub fn letter(self) -> char {
        match self {
            YcsbWorkload::A => 'a',
            YcsbWorkload::B => 'b',
            YcsbWorkload::C => 'c',
            YcsbWorkload::D => 'd',
            YcsbWorkload::E => 'e',
            YcsbWorkload::F => 'f',
        }
    }
}

impl FromStr for YcsbWorkload {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let lower = text.to_ascii_lowercase();
        let letter = lower.strip_prefix("ycsb-").unwrap_or(&lower);
        YcsbWorkload::ALL
            .into_iter()
            .find(|w| letter.len() == 1 && letter.starts_with(w.letter()))
            .ok_or_else(|| {
                SpecError::new(
                    "YCSB workload",
                    text,
                    "one of `a` … `f` or `ycsb-a` … `ycsb-f`",
                )
            })
    }
}

impl fmt::Display for YcsbWorkload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.letter())
    }
}

/// A phase of a run. Text forms (what `Display` prints), case-insensitive:
///
/// - `load` — insert every key once, in a random order ([`super::LoadOrder`]).
/// - `update` — overwrite existing keys chosen by the key distribution (the papers write about
///   3× the loaded bytes, to make garbage and start GC).
/// - `read` — point reads of existing keys chosen by the key distribution.
/// - `scan` — range scans from a key chosen by the key distribution, length uniform 1..=1000
///   ([`super::ScanLength`]).
/// - `readwhilewriting` — point reads while one writer keeps updating (as in Scavenger §2).
/// - `delete-range` — range deletes of consecutive existing keys, each followed by point
///   updates and reads of keys chosen by the key distribution ([`super::delete_range`]).
/// - `ycsb-a` … `ycsb-f` — a YCSB core workload ([`super::OpMix::ycsb`]).
/// - `mixgraph` — RocksDB db_bench's mixgraph: gets, puts and seeks over key ranges of skewed
///   heat ([`super::Mixgraph`], parameters from `--mixgraph`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PhaseSpec {
    /// Insert every key once.
    Load,
    /// Overwrite existing keys.
    Update,
    /// Point reads.
    Read,
    /// Range scans.
    Scan,
    /// Point reads with a concurrent writer.
    ReadWhileWriting,
    /// Range deletes with updates and reads between them.
    DeleteRange,
    /// A YCSB core workload.
    Ycsb(YcsbWorkload),
    /// db_bench's mixgraph.
    Mixgraph,
}

const EXPECTED: &str = "`load`, `update`, `read`, `scan`, `readwhilewriting`, `delete-range`, `mixgraph` or \
     `ycsb-a` … `ycsb-f`";

impl FromStr for PhaseSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let lower = text.to_ascii_lowercase();
        match lower.as_str() {
            "load" => Ok(PhaseSpec::Load),
            "update" => Ok(PhaseSpec::Update),
            "read" => Ok(PhaseSpec::Read),
            "scan" => Ok(PhaseSpec::Scan),
            "readwhilewriting" => Ok(PhaseSpec::ReadWhileWriting),
            "delete-range" => Ok(PhaseSpec::DeleteRange),
            "mixgraph" => Ok(PhaseSpec::Mixgraph),
            // Only the prefixed form: a bare `a` as a phase would be easy to mistype.
            _ if lower.starts_with("ycsb-") => lower
                .parse()
                .map(PhaseSpec::Ycsb)
                .map_err(|_| SpecError::new("phase spec", text, EXPECTED)),
            _ => Err(SpecError::new("phase spec", text, EXPECTED)),
        }
    }
}

impl fmt::Display for PhaseSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PhaseSpec::Load => f.write_str("load"),
            PhaseSpec::Update => f.write_str("update"),
            PhaseSpec::Read => f.write_str("read"),
            PhaseSpec::Scan => f.write_str("scan"),
            PhaseSpec::ReadWhileWriting => f.write_str("readwhilewriting"),
            PhaseSpec::DeleteRange => f.write_str("delete-range"),
            PhaseSpec::Ycsb(w) => write!(f, "ycsb-{w}"),
            PhaseSpec::Mixgraph => f.write_str("mixgraph"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_round_trip() {
        let mut all = vec![
            PhaseSpec::Load,
            PhaseSpec::Update,
            PhaseSpec::Read,
            PhaseSpec::Scan,
            PhaseSpec::ReadWhileWriting,
            PhaseSpec::DeleteRange,
            PhaseSpec::Mixgraph,
        ];
        all.extend(YcsbWorkload::ALL.map(PhaseSpec::Ycsb));
        for phase in all {
            assert_eq!(phase.to_string().parse::<PhaseSpec>(), Ok(phase));
        }
        assert_eq!(
            "ycsb-a".parse::<PhaseSpec>(),
            Ok(PhaseSpec::Ycsb(YcsbWorkload::A))
        );
        assert_eq!(
            "YCSB-F".parse::<PhaseSpec>(),
            Ok(PhaseSpec::Ycsb(YcsbWorkload::F))
        );
        assert_eq!(
            "ReadWhileWriting".parse::<PhaseSpec>(),
            Ok(PhaseSpec::ReadWhileWriting)
        );
    }

    #[test]
    fn delete_range_parses_and_prints_with_its_hyphen() {
        assert_eq!(PhaseSpec::DeleteRange.to_string(), "delete-range");
        for text in ["delete-range", "Delete-Range", "DELETE-RANGE"] {
            assert_eq!(
                text.parse::<PhaseSpec>(),
                Ok(PhaseSpec::DeleteRange),
                "{text}"
            );
        }
        // Near misses are refused, and the message lists the phase.
        for bad in ["deleterange", "delete_range", "delete-ranges", "delete"] {
            let message = bad.parse::<PhaseSpec>().expect_err(bad).to_string();
            assert!(message.contains("`delete-range`"), "{message}");
        }
    }

    #[test]
    fn ycsb_letters() {
        for (text, w) in [
            ("a", YcsbWorkload::A),
            ("E", YcsbWorkload::E),
            ("ycsb-d", YcsbWorkload::D),
        ] {
            assert_eq!(text.parse::<YcsbWorkload>(), Ok(w));
        }
        for w in YcsbWorkload::ALL {
            assert_eq!(w.to_string().parse::<YcsbWorkload>(), Ok(w));
        }
        for bad in ["g", "ab", "", "ycsb-", "ycsb-g"] {
            let message = bad.parse::<YcsbWorkload>().expect_err(bad).to_string();
            assert!(message.contains("YCSB workload"), "{message}");
        }
    }

    #[test]
    fn invalid_phases_name_the_spec() {
        for bad in ["bogus", "a", "ycsb-g", "ycsb", "", "loads"] {
            let message = bad.parse::<PhaseSpec>().expect_err(bad).to_string();
            assert!(message.contains("phase spec"), "{message}");
            assert!(message.contains(&format!("`{bad}`")), "{message}");
        }
    }
}
