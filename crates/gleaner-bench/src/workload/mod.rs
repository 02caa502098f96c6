//! Workload generators: keys, key choice, value sizes and contents, phases and YCSB mixes.

mod dist;
mod key_spec;
mod keys;
mod load;
mod permute;
mod phase;
mod seed;
mod size_spec;
mod spec;
mod values;
mod ycsb;
mod zipf;

pub use dist::KeyChooser;
pub use key_spec::{DEFAULT_ZIPF_THETA, KeyDistSpec};
pub use keys::{DEFAULT_KEY_LEN, KeyFormat, KeyFormatError, MIN_KEY_LEN};
pub use load::LoadOrder;
pub use phase::{PhaseSpec, YcsbWorkload};
pub use seed::{WorkloadRng, thread_rng, thread_seed};
pub use size_spec::{
    MAX_VALUE_SIZE, MIXED_LARGE, MIXED_SMALL_MAX, MIXED_SMALL_MIN, PARETO_MAX, PARETO_SHAPE,
    ValueSizeSpec,
};
pub use spec::SpecError;
pub use values::{FILLER_BYTE, ValueGen};
pub use ycsb::{DEFAULT_MAX_SCAN, OpKind, OpMix, OpMixError, ScanLength, YCSB_MAX_SCAN};
