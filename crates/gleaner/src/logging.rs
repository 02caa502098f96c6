//! A minimal logger for the commands built on the engine (`gleaner-server`, `gleaner`).
//!
//! The engine reports failures that no caller sees through the [`log`] facade: a background GC
//! job or compaction that failed (with what is retried when), and the failure that made the
//! database refuse writes. A library leaves the choice of logger to its user; without one the
//! messages cost nothing. [`StderrLogger`] writes them to standard error, one line each,
//! behind the command's name.

use std::io::Write;

/// Writes every record at or above a level to standard error as `PROGRAM: LEVEL: MESSAGE`.
#[derive(Debug)]
pub struct StderrLogger {
    program: &'static str,
    level: log::LevelFilter,
}

impl StderrLogger {
    /// Installs a logger for `program` (the prefix of every line) that writes records at
    /// `level` and above. Returns `false` when a logger was installed already (that one stays).
    pub fn install(program: &'static str, level: log::LevelFilter) -> bool {
        let logger = Box::leak(Box::new(StderrLogger { program, level }));
        if log::set_logger(logger).is_err() {
            return false;
        }
        log::set_max_level(level);
        true
    }

    /// The line for `record`, without its newline.
    fn line(&self, record: &log::Record<'_>) -> String {
        let level = match record.level() {
            log::Level::Error => "error",
            log::Level::Warn => "warning",
            log::Level::Info => "info",
            log::Level::Debug => "debug",
            log::Level::Trace => "trace",
        };
        format!("{}: {level}: {}", self.program, record.args())
    }
}

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            // One write per line, so lines of several threads do not interleave; a failed write
            // to stderr has nowhere else to go.
            let _ = writeln!(std::io::stderr().lock(), "{}", self.line(record));
        }
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use log::Log;

    #[test]
    fn lines_carry_the_program_and_the_level() {
        let logger = StderrLogger {
            program: "gleaner-server",
            level: log::LevelFilter::Info,
        };
        let line = logger.line(
            &log::Record::builder()
                .level(log::Level::Warn)
                .args(format_args!("GC job on value tables [7] failed"))
                .build(),
        );
        assert_eq!(
            line,
            "gleaner-server: warning: GC job on value tables [7] failed"
        );
        let debug = log::Metadata::builder().level(log::Level::Debug).build();
        assert!(!logger.enabled(&debug));
        let error = log::Metadata::builder().level(log::Level::Error).build();
        assert!(logger.enabled(&error));
    }
}
