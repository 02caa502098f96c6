//! DumpKV (Zhuang et al., "DumpKV: Learning based lifetime aware garbage collection for key
//! value separation in LSM-tree"), policy `dumpkv` (docs/gc.md, "DumpKV"): values expected to
//! die together are written together, and a value table is collected when its predicted
//! lifetime has passed, mostly empty.
//!
//! - `features.rs`: a key's write history (deltas, decayed write counters), kept in its
//!   handle's payload, and the model's input made from it;
//! - `lifetime.rs`: the lifetime histograms, the points `l_s`, `l_l`, `l_d` and the labels;
//! - `samples.rs`: the two bounded sample queues and the training sets drawn from them;
//! - `model.rs`: the gradient-boosted tree classifier, its training and its file;
//! - `state.rs`: what the roles share and learn at run time;
//! - `roles.rs`: the router (default, short and long classes) and the TTL picker;
//! - `hooks.rs`: history folding in compactions out of L0, learning from GC.

mod features;
mod hooks;
mod lifetime;
mod model;
mod roles;
mod samples;
mod state;
mod trainer;

use std::sync::Arc;

pub use self::model::Model;
use self::roles::{LifetimePicker, LifetimeRouter};
use self::state::{DumpKv, Settings};
use self::trainer::Trainer;
use super::oracle::{IndexOracle, LookupKind};
use super::policy::{CommitStyle, GcReadMode, PolicySet};
use super::runtime::PolicyContext;
use crate::error::Result;

pub use self::features::{FEATURES, Features};
pub use self::roles::TableLifetime;
pub use self::state::MODEL_SLOT;

/// The options only `dumpkv` reads.
pub const OWN_OPTIONS: &[&str] = &[
    "dumpkv_model",
    "dumpkv_time_unit",
    "dumpkv_train_samples",
    "dumpkv_force_ratio",
];

/// Most samples between trainings and rows per training (`dumpkv_train_samples`).
pub const MAX_TRAIN_SAMPLES: u64 = self::model::MAX_TRAINING_ROWS as u64;

/// What `gleaner dump` prints of the policy file `slot` holding `data` (its model, node by
/// node), and what `gleaner check` verifies of it.
///
/// Errors: a slot this policy does not write; a model that does not decode (the open sets it
/// aside and training starts over).
pub fn describe_file(slot: &str, data: &[u8]) -> std::result::Result<Vec<String>, String> {
    if slot != MODEL_SLOT {
        return Err(format!("slot `{slot}` is not one dumpkv writes (`{MODEL_SLOT}`)"));
    }
    Model::decode(data).map(|m| m.describe())
}

/// The roles of `dumpkv`, its model read from its file (a read-only open reads it and never
/// trains or writes), and its training task when GC runs in the background.
///
/// Errors: the training task cannot start.
pub fn policy_set(ctx: &PolicyContext<'_>) -> Result<PolicySet> {
    let opts = ctx.opts;
    let settings = Settings {
        unit: opts.dumpkv_time_unit(),
        use_model: opts.dumpkv_model(),
        train_samples: opts.dumpkv_train_samples() as usize,
        force_ratio: opts.dumpkv_force_ratio(),
        learns: !ctx.read_only,
    };
    // Trainings go to a task of their own when GC jobs run on background threads; under
    // inline work, or with GC only in `run_gc`, the job that makes one due runs it (replays).
    let background = settings.learns
        && settings.use_model
        && !opts.inline_background_work()
        && opts.gc_threads() > 0;
    let trainer = background.then(|| Trainer::new(ctx.tasks.clone()));
    let dk = Arc::new(DumpKv::new(settings, ctx.files.clone(), trainer));
    if background {
        let task = Arc::clone(&dk);
        ctx.tasks
            .spawn(trainer::TASK_NAME, move |stop| task.run_trainer(&stop))?;
    }
    Ok(PolicySet {
        name: opts.gc_policy().name().to_string(),
        picker: Box::new(LifetimePicker { dk: Arc::clone(&dk) }),
        read_mode: GcReadMode::Full,
        // The read path's lookup: it hands over the live version's payload, the history the
        // router predicts from.
        oracle: Box::new(IndexOracle::new(LookupKind::Get)),
        router: Arc::new(LifetimeRouter {
            dk: Arc::clone(&dk),
            min_size: opts.min_separated_value_size(),
        }),
        commit: CommitStyle::Inheritance,
        hooks: Box::new(hooks::LifetimeHooks { dk }),
        updates_handles_on_read: false,
    })
}
