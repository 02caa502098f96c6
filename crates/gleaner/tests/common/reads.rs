//! Checks of what a database reads, shared by the policy tests.
#![allow(dead_code, reason = "each test binary uses a part of it")]

use std::collections::BTreeMap;

use gleaner::{Db, ReadOptions};

/// The policy's own figure `name` (`stats().gc.policy_stats`); panics naming it when absent.
pub fn own_figure(db: &Db, name: &str) -> u64 {
    db.stats()
        .gc
        .policy_stats
        .get(name)
        .copied()
        .unwrap_or_else(|| panic!("no figure {name}"))
}

/// Every key of `model` reads its value, and a full scan yields exactly the model.
pub fn assert_reads(db: &Db, model: &BTreeMap<String, Vec<u8>>, ctx: &str) {
    for (k, v) in model {
        assert_eq!(
            db.get(k).expect("get").as_deref(),
            Some(&v[..]),
            "{ctx}: {k}"
        );
    }
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
        .range(.., &ReadOptions::default())
        .expect("range")
        .map(|r| r.expect("scan"))
        .collect();
    let expect: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
        .collect();
    assert!(scanned == expect, "{ctx}: the scan differs from the model");
}
