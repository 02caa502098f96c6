//! DropCache tests: LRU order, sequence numbers, the byte bound, collisions, counters,
//! concurrency, and a randomized comparison with a reference LRU.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::drop_cache::{MAX_SHARDS, hash_key};
use super::*;

/// A cache with one shard that holds exactly `n` one-byte keys.
fn one_shard_for(n: usize) -> DropCache {
    let cache = DropCache::new(n * entry_charge(1));
    assert_eq!(cache.shard_count(), 1);
    cache
}

fn order(cache: &DropCache) -> Vec<(Vec<u8>, u64)> {
    cache.shard_order(0)
}

fn keys(cache: &DropCache) -> Vec<Vec<u8>> {
    order(cache).into_iter().map(|(k, _)| k).collect()
}

/// A key hash function, as `DropCache::with_shards_and_hash` takes it.
type HashFn = fn(&[u8]) -> u64;

/// Every key collides: all in shard 0, all in one probe run.
fn constant_hash(_: &[u8]) -> u64 {
    0
}

/// Few distinct hashes, and equal hashes for different keys: long runs that interleave homes.
fn weak_hash(key: &[u8]) -> u64 {
    (key.len() % 5) as u64 + (key.first().copied().unwrap_or(0) % 3) as u64 * 7
}

#[test]
fn lru_evicts_least_recently_used_key() {
    let cache = one_shard_for(3);
    cache.insert(b"a", 1);
    cache.insert(b"b", 2);
    cache.insert(b"c", 3);
    assert_eq!(keys(&cache), [b"c", b"b", b"a"]);
    cache.insert(b"d", 4);
    assert_eq!(keys(&cache), [b"d", b"c", b"b"]);
    assert_eq!(cache.peek(b"a"), None);
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.inserts, stats.evictions), (3, 4, 1));
    assert_eq!(stats.used_bytes, 3 * entry_charge(1) as u64);
    cache.check_invariants();
}

#[test]
fn update_keeps_max_seq_and_promotes() {
    let cache = one_shard_for(3);
    cache.insert(b"a", 10);
    cache.insert(b"b", 11);
    cache.insert(b"a", 5);
    assert_eq!(order(&cache), [(b"a".to_vec(), 10), (b"b".to_vec(), 11)]);
    cache.insert(b"b", 20);
    assert_eq!(order(&cache), [(b"b".to_vec(), 20), (b"a".to_vec(), 10)]);
    let stats = cache.stats();
    assert_eq!((stats.inserts, stats.updates, stats.entries), (2, 2, 2));
    // An update does not change the charge.
    assert_eq!(stats.used_bytes, 2 * entry_charge(1) as u64);
    cache.check_invariants();
}

#[test]
fn lookups_promote_and_peek_does_not() {
    let cache = one_shard_for(3);
    for (i, k) in [b"a", b"b", b"c"].into_iter().enumerate() {
        cache.insert(k, i as u64);
    }
    assert_eq!(cache.newest_seq(b"a"), Some(0));
    assert_eq!(keys(&cache), [b"a", b"c", b"b"]);
    assert!(cache.is_hot(b"b"));
    assert_eq!(keys(&cache), [b"b", b"a", b"c"]);
    assert_eq!(cache.peek(b"c"), Some(2));
    assert_eq!(
        keys(&cache),
        [b"b", b"a", b"c"],
        "peek leaves the order alone"
    );
    cache.insert(b"d", 3);
    assert!(!cache.is_hot(b"c"), "c was least recently used");
    assert_eq!(keys(&cache), [b"d", b"b", b"a"]);
    cache.check_invariants();
}

#[test]
fn hits_and_misses_are_counted() {
    let cache = one_shard_for(4);
    cache.insert(b"a", 1);
    assert!(cache.is_hot(b"a"));
    assert_eq!(cache.newest_seq(b"a"), Some(1));
    assert!(!cache.is_hot(b"x"));
    assert_eq!(cache.newest_seq(b"y"), None);
    assert_eq!(cache.newest_seq(b"z"), None);
    assert_eq!(cache.peek(b"a"), Some(1));
    assert_eq!(cache.peek(b"q"), None);
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (2, 3), "peek is not counted");
}

#[test]
fn byte_bound_holds_after_every_random_insert() {
    for (shards, capacity) in [(1, 4000), (1, 257), (4, 6000), (16, 20_000)] {
        let cache = DropCache::with_shards_and_hash(capacity, shards, hash_key);
        let mut rng = StdRng::seed_from_u64(0xd20c + capacity as u64);
        for i in 0..3000u64 {
            let len = rng.random_range(1..200);
            // A small alphabet so keys repeat and updates happen too.
            let key: Vec<u8> = (0..len).map(|_| rng.random_range(b'a'..b'c')).collect();
            cache.insert(&key, i);
            let stats = cache.stats();
            assert!(
                stats.used_bytes <= capacity as u64,
                "{} bytes used of {capacity} after insert {i}",
                stats.used_bytes
            );
            if rng.random_bool(0.3) {
                cache.is_hot(&key);
            }
            cache.check_invariants();
        }
        let stats = cache.stats();
        assert_eq!(stats.inserts - stats.evictions, stats.entries);
        assert!(stats.evictions > 0, "the test should exercise eviction");
    }
}

#[test]
fn oversize_key_is_not_cached() {
    let cache = DropCache::new(entry_charge(100));
    cache.insert(&[7; 100], 1);
    cache.insert(&[8; 101 + 16], 2);
    assert_eq!(
        cache.peek(&[7; 100]),
        Some(1),
        "a rejected key evicts nothing"
    );
    assert_eq!(cache.peek(&[8; 117]), None);
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.rejected, stats.evictions), (1, 1, 0));
    cache.check_invariants();

    // A key of the 64 KiB maximum fits a default shard (1 MiB).
    let cache = DropCache::default();
    let big = vec![1u8; 64 << 10];
    cache.insert(&big, 9);
    assert_eq!(cache.peek(&big), Some(9));
    // ...but not a shard that got the minimum budget split from a tiny capacity.
    let cache = DropCache::new(32 << 10);
    cache.insert(&big, 9);
    assert_eq!((cache.peek(&big), cache.stats().rejected), (None, 1));
}

#[test]
fn zero_capacity_disables_the_cache() {
    let cache = DropCache::new(0);
    assert!(!cache.is_enabled());
    assert_eq!(cache.shard_count(), 0);
    cache.insert(b"a", 1);
    assert_eq!(cache.newest_seq(b"a"), None);
    assert!(!cache.is_hot(b"a"));
    assert_eq!(cache.peek(b"a"), None);
    assert_eq!(cache.stats(), DropCacheStats::default());
    cache.check_invariants();
}

#[test]
fn tiny_capacity_caches_nothing_but_stays_consistent() {
    let cache = DropCache::new(entry_charge(1) - 1);
    assert!(cache.is_enabled());
    cache.insert(b"a", 1);
    assert_eq!(cache.peek(b"a"), None);
    assert_eq!(cache.stats().rejected, 1);
    cache.check_invariants();
}

#[test]
fn colliding_hashes_are_told_apart_by_key() {
    let per_key = entry_charge(4);
    let cache = DropCache::with_shards_and_hash(40 * per_key, 1, constant_hash);
    for i in 0..40u32 {
        cache.insert(&i.to_be_bytes(), u64::from(i));
    }
    for i in 0..40u32 {
        assert_eq!(cache.peek(&i.to_be_bytes()), Some(u64::from(i)));
    }
    assert_eq!(cache.peek(&99u32.to_be_bytes()), None);
    cache.check_invariants();
    // Evictions remove from the middle of the single probe run; the rest stay reachable.
    for i in 40..100u32 {
        cache.insert(&i.to_be_bytes(), u64::from(i));
        cache.check_invariants();
    }
    for i in 0..100u32 {
        let expect = (i >= 60).then_some(u64::from(i));
        assert_eq!(cache.peek(&i.to_be_bytes()), expect, "key {i}");
    }
}

#[test]
fn shard_count_scales_with_capacity() {
    let cases = [
        (1, 1),
        (300 << 10, 1),
        (600 << 10, 2),
        (3 << 20, 8),
        (DEFAULT_DROP_CACHE_BYTES, MAX_SHARDS),
        (1 << 30, MAX_SHARDS),
    ];
    for (capacity, shards) in cases {
        let cache = DropCache::new(capacity);
        assert_eq!(cache.shard_count(), shards, "capacity {capacity}");
        let budgets: usize = (0..shards).map(|i| cache.shard_budget(i)).sum();
        assert_eq!(budgets, capacity);
        cache.check_invariants();
    }
    let cache = DropCache::with_shards_and_hash(1003, 4, hash_key);
    let budgets: Vec<_> = (0..4).map(|i| cache.shard_budget(i)).collect();
    assert_eq!(budgets, [251, 251, 251, 250]);
    assert_eq!(DropCache::default().capacity(), DEFAULT_DROP_CACHE_BYTES);
}

#[test]
#[cfg(target_pointer_width = "64")]
fn entry_charge_matches_the_documented_estimate() {
    // Entry 40 + index 16 + key chunk 32.
    assert_eq!(entry_charge(24), 88);
    assert_eq!(entry_charge(0), 88);
    assert_eq!(entry_charge(25), 104);
    assert_eq!(entry_charge(64 << 10), 56 + (64 << 10) + 16);
}

#[test]
fn hash_spreads_sequential_keys_over_shards() {
    let cache = DropCache::new(DEFAULT_DROP_CACHE_BYTES);
    let n = 160_000;
    let mut per_shard = [0usize; MAX_SHARDS];
    for i in 0..n {
        let h = hash_key(format!("user{i:020}").as_bytes());
        per_shard[(h >> 48) as usize & (MAX_SHARDS - 1)] += 1;
    }
    let mean = n / MAX_SHARDS;
    for (i, &c) in per_shard.iter().enumerate() {
        assert!(
            c.abs_diff(mean) < mean / 20,
            "shard {i} got {c} of {n} keys"
        );
    }
    // And the same keys cached: every shard is used and the bound holds.
    for i in 0..n {
        cache.insert(format!("user{i:020}").as_bytes(), i as u64);
    }
    let stats = cache.stats();
    assert!(stats.used_bytes <= stats.capacity_bytes);
    assert_eq!(stats.entries, n as u64, "160 000 short keys fit in 16 MiB");
    cache.check_invariants();
}

#[test]
fn stats_serialize_with_stable_names() {
    let cache = one_shard_for(2);
    cache.insert(b"a", 1);
    let json = serde_json::to_value(cache.stats()).expect("serialize");
    for name in [
        "entries",
        "used_bytes",
        "capacity_bytes",
        "inserts",
        "updates",
        "evictions",
        "rejected",
        "hits",
        "misses",
    ] {
        assert!(json.get(name).is_some(), "missing {name}");
    }
    assert_eq!(json["entries"], 1);
}

#[test]
fn cache_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<DropCache>();
    assert_send_sync::<Arc<DropCache>>();
}

/// The key with id `id`: a deterministic length of 8..=100 bytes, so a key's bytes never change.
fn key_of(id: u64) -> Vec<u8> {
    let len = 1 + (id.wrapping_mul(0x9e37_79b9) % 100) as usize;
    let mut key = id.to_le_bytes().to_vec();
    key.resize(len.max(8), b'x');
    key
}

#[test]
fn concurrent_inserts_and_lookups_keep_the_bound_and_invariants() {
    const THREADS: u64 = 4;
    const OPS: u64 = 20_000;
    let capacity = 16 << 10;
    let cache = Arc::new(DropCache::with_shards_and_hash(capacity, 4, hash_key));
    let lookups = AtomicU64::new(0);
    let max_seq: Vec<AtomicU64> = (0..2000).map(|_| AtomicU64::new(0)).collect();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (cache, lookups, max_seq) = (&cache, &lookups, &max_seq);
                scope.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(t);
                    for _ in 0..OPS {
                        let id = rng.random_range(0..max_seq.len() as u64);
                        let key = key_of(id);
                        match rng.random_range(0..4) {
                            0 | 1 => {
                                let seq = rng.random_range(1..1_000_000);
                                max_seq[id as usize].fetch_max(seq, Ordering::Relaxed);
                                cache.insert(&key, seq);
                            }
                            2 => {
                                lookups.fetch_add(1, Ordering::Relaxed);
                                cache.is_hot(&key);
                            }
                            _ => {
                                lookups.fetch_add(1, Ordering::Relaxed);
                                cache.newest_seq(&key);
                            }
                        }
                    }
                })
            })
            .collect();
        // A checker walks the shards while the workers run: each shard is consistent whenever
        // its lock is free.
        let checker = scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                cache.check_invariants();
                assert!(cache.stats().used_bytes <= capacity as u64);
            }
        });
        for w in workers {
            w.join().expect("worker");
        }
        done.store(true, Ordering::Relaxed);
        checker.join().expect("checker");
    });
    cache.check_invariants();
    let stats = cache.stats();
    assert!(stats.used_bytes <= capacity as u64);
    assert_eq!(stats.inserts - stats.evictions, stats.entries);
    assert_eq!(stats.hits + stats.misses, lookups.load(Ordering::Relaxed));
    assert!(stats.evictions > 0 && stats.hits > 0 && stats.updates > 0);
    for (id, max) in max_seq.iter().enumerate() {
        if let Some(seq) = cache.peek(&key_of(id as u64)) {
            assert!(
                seq <= max.load(Ordering::Relaxed),
                "key {id} has an unseen seq"
            );
        }
    }
}

/// A reference LRU with the same byte accounting: a `Vec`, most recently used first.
struct ModelLru {
    budget: usize,
    used: usize,
    items: Vec<(Vec<u8>, u64)>,
}

impl ModelLru {
    fn insert(&mut self, key: &[u8], seq: u64) {
        if let Some(i) = self.items.iter().position(|(k, _)| k == key) {
            let (k, old) = self.items.remove(i);
            self.items.insert(0, (k, old.max(seq)));
            return;
        }
        let charge = entry_charge(key.len());
        if charge > self.budget {
            return;
        }
        while self.used + charge > self.budget {
            let (k, _) = self.items.pop().expect("non-empty while over budget");
            self.used -= entry_charge(k.len());
        }
        self.items.insert(0, (key.to_vec(), seq));
        self.used += charge;
    }

    fn get(&mut self, key: &[u8], promote: bool) -> Option<u64> {
        let i = self.items.iter().position(|(k, _)| k == key)?;
        let item = self.items.remove(i);
        let seq = item.1;
        self.items.insert(if promote { 0 } else { i }, item);
        Some(seq)
    }
}

#[test]
fn randomized_model_test_against_reference_lru() {
    let hashes: [(&str, HashFn); 3] = [
        ("hash_key", hash_key),
        ("weak_hash", weak_hash),
        ("constant_hash", constant_hash),
    ];
    for (name, hash) in hashes {
        for seed in 0..4u64 {
            let budget = 1500 + 700 * seed as usize;
            let cache = DropCache::with_shards_and_hash(budget, 1, hash);
            let mut model = ModelLru {
                budget,
                used: 0,
                items: Vec::new(),
            };
            let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
            // Mostly short keys, so they repeat and evict each other; every 17th is larger than
            // any budget here, so rejection is exercised too.
            let universe: Vec<Vec<u8>> = (0..80u32)
                .map(|i| {
                    let len = if i % 17 == 0 {
                        5000
                    } else {
                        rng.random_range(1..60)
                    };
                    let mut k = i.to_le_bytes().to_vec();
                    k.resize(len.max(4), (i % 7) as u8);
                    k
                })
                .collect();
            let (mut hits, mut misses) = (0, 0);
            for step in 0..4000 {
                let key = &universe[rng.random_range(0..universe.len())];
                let ctx = format!("{name} seed {seed} step {step}");
                match rng.random_range(0..10) {
                    0..=4 => {
                        let seq = rng.random_range(0..1000);
                        cache.insert(key, seq);
                        model.insert(key, seq);
                    }
                    5 | 6 => {
                        let want = model.get(key, true);
                        assert_eq!(cache.newest_seq(key), want, "{ctx}");
                        if want.is_some() {
                            hits += 1
                        } else {
                            misses += 1
                        }
                    }
                    7 => {
                        let want = model.get(key, true).is_some();
                        assert_eq!(cache.is_hot(key), want, "{ctx}");
                        if want { hits += 1 } else { misses += 1 }
                    }
                    _ => assert_eq!(cache.peek(key), model.get(key, false), "{ctx}"),
                }
                assert_eq!(order(&cache), model.items, "{ctx}");
                assert_eq!(cache.stats().used_bytes, model.used as u64, "{ctx}");
                cache.check_invariants();
            }
            let stats = cache.stats();
            assert_eq!(
                (stats.hits, stats.misses),
                (hits, misses),
                "{name} seed {seed}"
            );
            assert!(
                stats.evictions > 0 && stats.rejected > 0,
                "{name} seed {seed}"
            );
        }
    }
}
