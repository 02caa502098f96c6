//! The inheritance records of the recovered version: well formed, free of cycles, and needed.

use std::collections::{BTreeMap, BTreeSet};

use super::{Checker, Problem};
use crate::filename::manifest_file_name;
use crate::version::{Inheritor, ValueSet};

/// Where a depth-first walk of the inheritance graph stands with a record.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// On the current path: reaching it again closes a cycle.
    Open,
    /// Fully explored.
    Done,
}

impl Checker {
    /// Checks every inheritance record of `values`:
    /// - each child's key range is a range, and the children's ranges are disjoint (a key must
    ///   pick exactly one child);
    /// - each child is a live value table, a retired one (a database switched to a write-back
    ///   policy retires a child its GC collected, readable until released), or was itself collected
    ///   with an inheritance record (applying an edit forgets children that are gone, so any
    ///   other child is damage);
    /// - following children never returns to a record (a cycle would make resolution loop);
    /// - with `named` (the table numbers the handles of all key tables name, when every key
    ///   table was read), each record is reachable from a named table: an unreachable one is a
    ///   warning, since pruning would have dropped it.
    pub(super) fn check_inheritance(
        &mut self,
        manifest: u64,
        values: &ValueSet,
        named: Option<&BTreeSet<u64>>,
    ) {
        let file = manifest_file_name(manifest);
        let records = values.inheritance();
        for (&victim, children) in records {
            let class_of = |n: u64| {
                values
                    .live(n)
                    .or_else(|| values.retired_table(n))
                    .map(|v| v.class)
            };
            if let Some(why) = children_fault(children, class_of) {
                self.problem(Problem::new(
                    &file,
                    None,
                    format!("inheritance record of value table {victim}: {why}"),
                ));
            }
            for c in children {
                if values.live(c.number).is_none()
                    && values.retired_table(c.number).is_none()
                    && !records.contains_key(&c.number)
                {
                    self.problem(Problem::new(
                        &file,
                        None,
                        format!(
                            "inheritance record of value table {victim} names child {}, which is \
                             neither live, nor retired, nor collected into other tables",
                            c.number
                        ),
                    ));
                }
            }
        }
        if let Some(start) = find_cycle(records) {
            self.problem(Problem::new(
                &file,
                None,
                format!("inheritance records starting at value table {start} form a cycle"),
            ));
        }
        if let Some(named) = named {
            let reached = reachable(records, named);
            for &victim in records.keys().filter(|n| !reached.contains(n)) {
                self.warning(
                    &file,
                    None,
                    format!(
                        "inheritance record of value table {victim} is reachable from no value \
                         handle of any key table (pruning drops it at the next change)"
                    ),
                );
            }
        }
    }
}

/// What is wrong with a record's list of children, if anything. Children of one run (one class
/// tag) must have disjoint key ranges; a hot and a cold run of one GC job overlap. `class_of`
/// gives a live child's class (a child collected since has none, and is not compared).
fn children_fault(children: &[Inheritor], class_of: impl Fn(u64) -> Option<u32>) -> Option<String> {
    if let Some(c) = children.iter().find(|c| c.smallest_key > c.largest_key) {
        return Some(format!(
            "child {} has its smallest key after its largest",
            c.number
        ));
    }
    let mut sorted: Vec<(&Inheritor, u32)> = children
        .iter()
        .filter_map(|c| class_of(c.number).map(|class| (c, class)))
        .collect();
    sorted.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.smallest_key.cmp(&b.0.smallest_key)));
    sorted
        .windows(2)
        .find(|w| w[0].1 == w[1].1 && w[0].0.largest_key >= w[1].0.smallest_key)
        .map(|w| (w[0].0, w[1].0))
        .map(|w| {
            format!(
                "children {} and {} have overlapping key ranges",
                w.0.number, w.1.number
            )
        })
}

/// A record from which following children leads back to a record already on the path, if any.
fn find_cycle(records: &BTreeMap<u64, Vec<Inheritor>>) -> Option<u64> {
    let mut marks: BTreeMap<u64, Mark> = BTreeMap::new();
    for &root in records.keys() {
        if marks.contains_key(&root) {
            continue;
        }
        // Iterative depth-first walk: (record, index of the next child to visit).
        let mut stack: Vec<(u64, usize)> = vec![(root, 0)];
        marks.insert(root, Mark::Open);
        while let Some((n, i)) = stack.pop() {
            let children = records.get(&n).map(Vec::as_slice).unwrap_or_default();
            let Some(child) = children.get(i) else {
                marks.insert(n, Mark::Done);
                continue;
            };
            stack.push((n, i + 1));
            if !records.contains_key(&child.number) {
                continue;
            }
            match marks.get(&child.number) {
                Some(Mark::Open) => return Some(child.number),
                Some(Mark::Done) => {}
                None => {
                    marks.insert(child.number, Mark::Open);
                    stack.push((child.number, 0));
                }
            }
        }
    }
    None
}

/// The records reachable from `named`: a handle naming a collected table needs its record, and
/// the records of every table the walk can lead to.
fn reachable(records: &BTreeMap<u64, Vec<Inheritor>>, named: &BTreeSet<u64>) -> BTreeSet<u64> {
    let mut reached = BTreeSet::new();
    let mut stack: Vec<u64> = named
        .iter()
        .copied()
        .filter(|n| records.contains_key(n))
        .collect();
    while let Some(n) = stack.pop() {
        if !reached.insert(n) {
            continue;
        }
        for c in records.get(&n).into_iter().flatten() {
            if records.contains_key(&c.number) {
                stack.push(c.number);
            }
        }
    }
    reached
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(number: u64, lo: &str, hi: &str) -> Inheritor {
        Inheritor {
            number,
            smallest_key: lo.as_bytes().to_vec(),
            largest_key: hi.as_bytes().to_vec(),
        }
    }

    #[test]
    fn cycles_are_found_and_chains_are_not_cycles() {
        let mut records = BTreeMap::new();
        records.insert(1, vec![child(2, "a", "m"), child(3, "n", "z")]);
        records.insert(2, vec![child(4, "a", "m")]);
        records.insert(3, vec![child(4, "n", "z")]);
        assert_eq!(find_cycle(&records), None, "a diamond is not a cycle");
        records.insert(4, vec![child(1, "a", "z")]);
        assert!(find_cycle(&records).is_some());
        records.insert(4, vec![child(4, "a", "z")]);
        assert_eq!(find_cycle(&records), Some(4), "a self-loop");
    }

    #[test]
    fn reachability_follows_children() {
        let mut records = BTreeMap::new();
        records.insert(1, vec![child(2, "a", "z")]);
        records.insert(2, vec![child(5, "a", "z")]);
        records.insert(9, vec![child(5, "a", "z")]);
        let reached = reachable(&records, &BTreeSet::from([1, 5]));
        assert_eq!(reached, BTreeSet::from([1, 2]));
    }

    #[test]
    fn children_must_have_disjoint_ranges() {
        let one_run = |_| Some(0);
        assert_eq!(
            children_fault(&[child(2, "a", "f"), child(3, "g", "z")], one_run),
            None
        );
        assert!(children_fault(&[child(3, "f", "z"), child(2, "a", "f")], one_run).is_some());
        assert!(children_fault(&[child(2, "b", "a")], one_run).is_some());
        // A hot run (class 1) and a cold run (class 2) may overlap; within a run they may not.
        let hot_cold = |n: u64| Some(if n.is_multiple_of(2) { 1 } else { 2 });
        assert_eq!(
            children_fault(&[child(2, "a", "m"), child(3, "c", "z")], hot_cold),
            None
        );
        assert!(children_fault(&[child(2, "a", "m"), child(4, "c", "z")], hot_cold).is_some());
        // Children collected since (no class known) are not compared.
        assert_eq!(
            children_fault(&[child(2, "a", "m"), child(4, "c", "z")], |_| None),
            None
        );
    }
}
