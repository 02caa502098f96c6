//! Lookups over the results schema that the report (and anyone else reading results) needs:
//! which phases to show, in what order, and which engine the ratios are against.
//! Methods only: the schema's fields stay exactly as `results.rs` documents them.

use crate::results::{EngineResult, PhaseResult, Results, WorkloadInfo};

/// One phase of the run as the report shows it. A workload may run the same phase twice
/// (e.g. `update` before and after `read`); `occurrence` tells them apart (0 for the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseKey<'a> {
    /// Phase name.
    pub name: &'a str,
    /// Earlier phases of the same name in the engine's phase list.
    pub occurrence: usize,
}

/// The engine that ratios (`× ref`) are computed against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference {
    /// Index into `Results::engines`.
    pub index: usize,
    /// Whether it is a peer engine; `false` when the run had no peer and the first engine
    /// stands in.
    pub is_peer: bool,
}

impl EngineResult {
    /// Whether this engine is a peer: neither Gleaner itself nor the `null` baseline, so the
    /// natural thing to compare Gleaner against.
    pub fn is_peer(&self) -> bool {
        self.kind != "gleaner" && self.kind != "null"
    }

    /// The engine's result for `key`, if it ran that phase (it may have failed before).
    pub fn phase(&self, key: PhaseKey<'_>) -> Option<&PhaseResult> {
        self.phases
            .iter()
            .filter(|p| p.name == key.name)
            .nth(key.occurrence)
    }
}

impl WorkloadInfo {
    /// The space budget in bytes, `space_budget × load_bytes`, when a budget was set (and is a
    /// positive finite multiple: anything else cannot be enforced, so it counts as none).
    pub fn budget_bytes(&self) -> Option<u64> {
        let multiple = self.space_budget.filter(|b| b.is_finite() && *b > 0.0)?;
        // `as` saturates, so an absurd multiple cannot wrap around.
        Some((multiple * self.load_bytes as f64) as u64)
    }
}

impl Results {
    /// Every phase some engine reported, in the workload's order; phases the workload does not
    /// list (there should be none) follow in the order engines report them.
    pub fn phase_keys(&self) -> Vec<PhaseKey<'_>> {
        let mut reported: Vec<PhaseKey<'_>> = Vec::new();
        for engine in &self.engines {
            for key in keys_of(engine.phases.iter().map(|p| p.name.as_str())) {
                if !reported.contains(&key) {
                    reported.push(key);
                }
            }
        }
        let mut ordered: Vec<PhaseKey<'_>> =
            keys_of(self.workload.phases.iter().map(String::as_str))
                .filter(|k| reported.contains(k))
                .collect();
        for key in reported {
            if !ordered.contains(&key) {
                ordered.push(key);
            }
        }
        ordered
    }

    /// The reference engine for ratios: the first peer, or else the first engine.
    /// `None` only when there are no engines.
    pub fn reference(&self) -> Option<Reference> {
        match self.engines.iter().position(EngineResult::is_peer) {
            Some(index) => Some(Reference {
                index,
                is_peer: true,
            }),
            None if !self.engines.is_empty() => Some(Reference {
                index: 0,
                is_peer: false,
            }),
            None => None,
        }
    }
}

/// Numbers repeated names: `load, update, update` → (load, 0), (update, 0), (update, 1).
fn keys_of<'a>(names: impl Iterator<Item = &'a str>) -> impl Iterator<Item = PhaseKey<'a>> {
    let mut seen: Vec<&'a str> = Vec::new();
    names.map(move |name| {
        let occurrence = seen.iter().filter(|n| **n == name).count();
        seen.push(name);
        PhaseKey { name, occurrence }
    })
}

#[cfg(test)]
mod tests {
    use crate::report::fixture;
    use crate::results::{EngineResult, PhaseResult, Results};

    use super::*;

    fn engine(kind: &str, phases: &[&str]) -> EngineResult {
        EngineResult {
            name: kind.to_string(),
            kind: kind.to_string(),
            phases: phases
                .iter()
                .map(|p| PhaseResult {
                    name: p.to_string(),
                    ..PhaseResult::default()
                })
                .collect(),
            ..EngineResult::default()
        }
    }

    #[test]
    fn report_phase_keys_follow_the_workload_then_appearance() {
        let mut results = Results::default();
        results.workload.phases = vec!["load".into(), "update".into(), "read".into()];
        results.engines = vec![
            engine("gleaner", &["load", "scan"]),
            engine("rocksdb", &["load", "update", "update"]),
        ];
        let names: Vec<(&str, usize)> = results
            .phase_keys()
            .iter()
            .map(|k| (k.name, k.occurrence))
            .collect();
        // `read` ran nowhere, so it has no table; the unlisted `scan` and second `update` follow.
        assert_eq!(
            names,
            [("load", 0), ("update", 0), ("scan", 0), ("update", 1)]
        );
        let second = PhaseKey {
            name: "update",
            occurrence: 1,
        };
        assert!(results.engines[1].phase(second).is_some());
        assert!(results.engines[0].phase(second).is_none());
    }

    #[test]
    fn report_budget_bytes() {
        let mut w = fixture::results().workload;
        assert_eq!(w.budget_bytes(), Some(12 << 30));
        for unusable in [
            None,
            Some(0.0),
            Some(-1.0),
            Some(f64::NAN),
            Some(f64::INFINITY),
        ] {
            w.space_budget = unusable;
            assert_eq!(w.budget_bytes(), None, "{unusable:?}");
        }
    }

    #[test]
    fn report_reference_is_the_first_peer() {
        let results = fixture::results();
        assert_eq!(
            results.reference(),
            Some(Reference {
                index: 1,
                is_peer: true
            })
        );
        let mut results = Results::default();
        assert_eq!(results.reference(), None);
        results.engines = vec![engine("null", &[]), engine("gleaner", &[])];
        assert_eq!(
            results.reference(),
            Some(Reference {
                index: 0,
                is_peer: false
            })
        );
    }
}
