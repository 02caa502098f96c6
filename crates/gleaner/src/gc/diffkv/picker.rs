//! DiffKV's GC (the authors' greedy vLog GC, extended to cold vTree ranges): victims by
//! garbage ratio, highest first. vLogs, and tables another policy wrote, qualify at
//! `diffkv_gc_ratio`; vTables, which merges collect wherever the index tree compacts, only at
//! `diffkv_vtree_gc_ratio` — the garbage of key ranges no compaction reaches, which the
//! authors' keyless vTables could never give back.

use super::classes::{CLASS_VLOG_HOT, CLASS_VTREE, TAG};
use crate::gc::picker::{PickContext, VictimCandidate, VictimPicker, pick_by_ratio};

/// The picker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GreedyPicker {
    /// Option `diffkv_gc_ratio`.
    pub vlog_ratio: f64,
    /// Option `diffkv_vtree_gc_ratio`.
    pub vtree_ratio: f64,
}

/// Whether `c` is a vTable of this policy.
fn is_vtable(c: &VictimCandidate<'_>) -> bool {
    c.class == CLASS_VTREE && c.policy_meta.is_some_and(|m| m.tag == TAG)
}

impl VictimPicker for GreedyPicker {
    fn pick(&self, candidates: &[VictimCandidate], ctx: &PickContext) -> Vec<u64> {
        // The space throttle's ratio, when it presses, holds for every table alike.
        let vlog = ctx.garbage_ratio.unwrap_or(self.vlog_ratio);
        let vtree = ctx.garbage_ratio.unwrap_or(self.vtree_ratio);
        // Each table at its own kind's ratio; then the highest ratios first, whatever the kind.
        let eligible: Vec<VictimCandidate<'_>> = candidates
            .iter()
            .filter(|c| c.garbage_ratio() >= if is_vtable(c) { vtree } else { vlog })
            .cloned()
            .collect();
        // At equal ratio new vLogs first: their garbage keeps growing.
        pick_by_ratio(&eligible, 0.0, ctx.max_input, |c| {
            c.class == CLASS_VLOG_HOT && c.policy_meta.is_some_and(|m| m.tag == TAG)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gc::diffkv::classes::{CLASS_VLOG_COLD, TableMeta};
    use crate::gc::picker::tests::cand;
    use crate::version::PolicyTableMeta;

    #[test]
    fn vlogs_at_their_ratio_vtables_only_at_theirs_highest_first() {
        let meta = PolicyTableMeta {
            tag: TAG.to_string(),
            data: TableMeta {
                by_gc: false,
                level: 2,
                written_at: Some(1),
            }
            .encode(),
        };
        let mut c = vec![
            cand(1, 100, 40),
            cand(2, 100, 50),
            cand(3, 100, 60),
            cand(4, 100, 80),
            cand(5, 100, 20),
        ];
        for (x, class) in c.iter_mut().zip([
            CLASS_VLOG_HOT,
            CLASS_VTREE,
            CLASS_VLOG_COLD,
            CLASS_VTREE,
            CLASS_VLOG_HOT,
        ]) {
            x.class = class;
            x.policy_meta = Some(&meta);
        }
        let p = GreedyPicker {
            vlog_ratio: 0.3,
            vtree_ratio: 0.7,
        };
        let ctx = PickContext {
            max_input: 1 << 20,
            garbage_ratio: None,
            latest_seq: 0,
        };
        // 2 (a vTable at 0.5) waits for a merge; 5 is below the vLog ratio.
        assert_eq!(p.pick(&c, &ctx), vec![4, 3, 1]);
        // The throttle's ratio holds for all.
        let pressed = PickContext {
            garbage_ratio: Some(0.1),
            ..ctx
        };
        assert_eq!(p.pick(&c, &pressed), vec![4, 3, 2, 1, 5]);
        // A vTable of another policy's making is collected as a vLog.
        c[1].policy_meta = None;
        assert_eq!(p.pick(&c, &ctx), vec![4, 3, 2, 1]);
    }
}
