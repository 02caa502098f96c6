//! The registry of compaction styles: option `compaction_style` to its strategy, and the options
//! each style alone reads (docs/architecture.md, "Compaction strategies").

use super::leveled::Leveled;
use super::strategy::CompactionStrategy;
use super::tiered::Tiered;
use crate::options::{CompactionStyle, Options};

/// The strategy `opts` ask for (option `compaction_style`).
pub(crate) fn for_options(opts: &Options) -> Box<dyn CompactionStrategy> {
    match opts.compaction_style() {
        CompactionStyle::Leveled => Box::new(Leveled),
        CompactionStyle::Tiered => Box::new(Tiered::new(opts)),
    }
}

/// The options only `style` reads: when a database is reopened under another style, the values
/// saved in its OPTIONS file for these are not applied (a later switch back starts from the
/// defaults), and setting one explicitly under another style is refused ([`check_options`]).
/// Leveled's level sizing (`level_base_size`, `level_multiplier`, `l0_compaction_trigger`) is
/// not in the list: those options shaped databases before styles existed, and a database
/// switched to tiered and back finds them as it left them.
pub(crate) fn own_options(style: CompactionStyle) -> &'static [&'static str] {
    match style {
        CompactionStyle::Leveled => &[],
        CompactionStyle::Tiered => &[
            "tiered_run_trigger",
            "tiered_size_ratio",
            "tiered_max_space_amplification",
        ],
    }
}

/// Refuses an option the caller set explicitly, to a value other than its default, that only
/// another compaction style reads: `tiered_size_ratio=0.5` under leveled compaction would
/// otherwise be accepted and do nothing. Values only remembered in OPTIONS never refuse an
/// open (a switch drops them).
///
/// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the option, the
/// style that reads it and the style the database runs.
pub(crate) fn check_options(opts: &Options) -> crate::error::Result<()> {
    let style = opts.compaction_style();
    let defaults = Options::default().persisted_values();
    for (name, value) in opts.persisted_values() {
        if !opts.is_overridden(name) || own_options(style).contains(&name) {
            continue;
        }
        // A partitioned tree's cold partition is tiered, whatever the style option says.
        if opts.partitioning().is_partitioned()
            && own_options(CompactionStyle::Tiered).contains(&name)
        {
            continue;
        }
        let Some(reader) = CompactionStyle::ALL
            .into_iter()
            .find(|s| own_options(*s).contains(&name))
        else {
            continue;
        };
        if defaults.iter().any(|(n, v)| *n == name && *v == value) {
            continue;
        }
        return Err(crate::error::Error::invalid(format!(
            "option `{name}` is set to {value}, but only compaction style `{}` reads it and \
             this database runs `{}`: leave the option unset, or choose \
             `compaction_style={}`",
            reader.name(),
            style.name(),
            reader.name()
        )));
    }
    Ok(())
}
