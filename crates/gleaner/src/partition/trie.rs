//! DP-KV's prefix hotness statistics (paper §4.1), as a pure structure driven by its caller:
//! [`HotnessTrie::record`] for each access, [`HotnessTrie::tick`] every decay interval (the
//! caller's clock decides when, so tests replay a moving hot spot without waiting).
//!
//! - A count-min sketch counts each key's accesses; a key counted fewer than `gate` times
//!   since the decays is cold and does not reach the trie (the paper's per-key counter, in
//!   fixed memory instead of a map of every key).
//! - Each trie node counts the accesses of its prefix that reached it. A node is *expanded*
//!   when it is on the hot path: its children then appear as keys under them are accessed.
//! - A node's *density* is its share of the trie's accesses divided by its share of the key
//!   space, the space measured by the child bytes seen under each ancestor (so a prefix every
//!   key shares, like `user`, is not dense for being short, and ten decimal digits split the
//!   space ten ways, not 256).
//! - At a tick every count halves; then, from the root: a node at least as dense as the
//!   average (density ≥ 1, the paper's "much higher than its siblings" taken against the
//!   space it covers) expands; an expanded node whose children are similar (the largest at
//!   most `similar_ratio` times their mean) or that is no longer dense gives its children
//!   back; a node at least `hot_density` dense whose children are similar, or not yet
//!   known, is a *hot prefix*. Hot prefixes never nest: a node is hot only where the walk
//!   stops.
//! - Nodes are created only within `trie_bytes`; an access that would pass it stops at the
//!   deepest node there is.

use super::sketch::CountMinSketch;

/// Most bytes of trie nodes any configuration may ask for (the bound of `dpkv_trie_bytes`).
pub const MAX_TRIE_BYTES: usize = 64 << 20;
/// Longest prefix any configuration may resolve.
pub const MAX_DEPTH: usize = 255;

/// What the trie is tuned by (options `dpkv_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct HotnessConfig {
    /// Accesses of one key (halved at each tick, as the sketch decays) before its accesses
    /// count in the trie. Default 2.
    pub gate: u32,
    /// Density at which a prefix is hot. Default 4.0.
    pub hot_density: f64,
    /// Children are similar when the largest count is at most this times their mean.
    /// Default 2.0.
    pub similar_ratio: f64,
    /// Fewest accesses (after decay) on which a node is judged: fewer are noise. Default 16.
    pub min_count: f64,
    /// Most bytes of trie nodes (estimated: see [`HotnessTrie::bytes`]). Default 1 MiB.
    pub trie_bytes: usize,
    /// Bytes of the sketch's counters. Default 256 KiB.
    pub sketch_bytes: usize,
    /// Longest prefix the trie resolves. Default 32.
    pub max_depth: usize,
}

impl HotnessConfig {
    /// The loosest bounds: what a dump decodes any file with.
    pub fn widest() -> Self {
        HotnessConfig {
            trie_bytes: MAX_TRIE_BYTES,
            max_depth: MAX_DEPTH,
            ..HotnessConfig::default()
        }
    }
}

impl Default for HotnessConfig {
    fn default() -> Self {
        HotnessConfig {
            gate: 2,
            hot_density: 4.0,
            similar_ratio: 2.0,
            min_count: 16.0,
            trie_bytes: 1 << 20,
            sketch_bytes: 256 << 10,
            max_depth: 32,
        }
    }
}

/// One node: the accesses of its prefix, the child bytes seen under it, its children.
#[derive(Debug, Clone)]
pub(super) struct Node {
    pub(super) count: f64,
    /// Bit `b` set: an access went on with byte `b` after this prefix (since the node last
    /// gave its children back).
    pub(super) seen: [u64; 4],
    /// Children by byte, sorted; only while expanded.
    pub(super) children: Vec<(u8, u32)>,
    pub(super) expanded: bool,
}

impl Node {
    pub(super) fn new() -> Self {
        Node {
            count: 0.0,
            seen: [0; 4],
            children: Vec::new(),
            expanded: false,
        }
    }

    fn fanout(&self) -> u32 {
        self.seen.iter().map(|w| w.count_ones()).sum::<u32>().max(1)
    }

    pub(super) fn child(&self, b: u8) -> Option<u32> {
        self.children
            .binary_search_by_key(&b, |(c, _)| *c)
            .ok()
            .map(|i| self.children[i].1)
    }
}

/// The estimated bytes of one node: the node and its entry in its parent's children (with as
/// much again for the vector's spare capacity).
pub(super) const NODE_BYTES: usize = size_of::<Node>() + 2 * size_of::<(u8, u32)>();

/// What a tick found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickOutcome {
    /// The hot prefixes now, sorted (none is a prefix of another).
    pub hot: Vec<Vec<u8>>,
    /// Whether they differ from the last tick's.
    pub changed: bool,
}

/// The statistics.
#[derive(Debug, Clone)]
pub struct HotnessTrie {
    pub(super) config: HotnessConfig,
    sketch: CountMinSketch,
    /// Nodes by index; index 0 is the root. `None`: free.
    pub(super) nodes: Vec<Option<Node>>,
    pub(super) free: Vec<u32>,
    pub(super) live: usize,
    pub(super) hot: Vec<Vec<u8>>,
    /// Accesses recorded and those that reached the trie, since the open (not decayed).
    pub accesses: u64,
    pub trie_accesses: u64,
}

impl HotnessTrie {
    /// An empty trie (the root only).
    pub fn new(config: HotnessConfig) -> Self {
        let sketch = CountMinSketch::with_bytes(config.sketch_bytes);
        HotnessTrie {
            config,
            sketch,
            nodes: vec![Some(Node::new())],
            free: Vec::new(),
            live: 1,
            hot: Vec::new(),
            accesses: 0,
            trie_accesses: 0,
        }
    }

    /// The estimated bytes the nodes take: at most `trie_bytes` (the root aside).
    pub fn bytes(&self) -> usize {
        self.live * NODE_BYTES
    }

    /// The bytes of the sketch's counters.
    pub fn sketch_bytes(&self) -> usize {
        self.sketch.bytes()
    }

    /// Nodes in the trie, the root included.
    pub fn nodes(&self) -> usize {
        self.live
    }

    /// The hot prefixes of the last tick, sorted.
    pub fn hot_prefixes(&self) -> &[Vec<u8>] {
        &self.hot
    }

    /// Whether the next tick has accesses enough to judge: after its decay, at least
    /// `min_count` at the root. A tick without finds nothing hot for want of evidence, not
    /// because nothing is.
    pub fn judged(&self) -> bool {
        self.node(0).count / 2.0 >= self.config.min_count
    }

    /// Whether `key` lies under a hot prefix of the last tick.
    pub fn is_hot(&self, key: &[u8]) -> bool {
        // The greatest prefix not above the key is the only one that can be its prefix: hot
        // prefixes never nest.
        let i = self.hot.partition_point(|p| p.as_slice() <= key);
        i > 0 && key.starts_with(&self.hot[i - 1])
    }

    /// Counts one access of `key`.
    pub fn record(&mut self, key: &[u8]) {
        self.accesses += 1;
        if self.sketch.add(key) < self.config.gate {
            return;
        }
        self.trie_accesses += 1;
        let max_depth = self.config.max_depth;
        let mut at = 0u32;
        self.node_mut(at).count += 1.0;
        for (depth, &b) in key.iter().enumerate() {
            let node = self.node_mut(at);
            node.seen[usize::from(b / 64)] |= 1 << (b % 64);
            if !node.expanded || depth >= max_depth {
                return;
            }
            let next = match node.child(b) {
                Some(c) => c,
                None => match self.add_child(at, b) {
                    Some(c) => c,
                    None => return,
                },
            };
            self.node_mut(next).count += 1.0;
            at = next;
        }
    }

    /// The periodic update: halves every count, expands, gives back and judges the nodes (the
    /// module doc), and returns the hot prefixes.
    pub fn tick(&mut self) -> TickOutcome {
        self.sketch.decay();
        for n in self.nodes.iter_mut().flatten() {
            n.count /= 2.0;
        }
        let total = self.node(0).count;
        let mut hot = Vec::new();
        if total >= self.config.min_count {
            let mut prefix = Vec::new();
            self.visit(0, 1.0, 1.0, &mut prefix, &mut hot);
        } else {
            self.give_back(0);
        }
        hot.sort();
        let changed = hot != self.hot;
        self.hot = hot.clone();
        debug_assert!(self.bytes() <= self.config.trie_bytes.max(NODE_BYTES));
        TickOutcome { hot, changed }
    }

    /// Judges node `at` (prefix `prefix`, a `share` of the key space and `accessed`, its
    /// share of the trie's accesses), and the nodes under it where the walk goes on. A child's
    /// share of accesses is its parent's times its part of its siblings' counts: children
    /// appear after their parent, so their counts cover a shorter past than the parent's.
    fn visit(
        &mut self,
        at: u32,
        share: f64,
        accessed: f64,
        prefix: &mut Vec<u8>,
        hot: &mut Vec<Vec<u8>>,
    ) {
        let c = &self.config;
        let (min_count, hot_density, similar_ratio) = (c.min_count, c.hot_density, c.similar_ratio);
        let max_depth = c.max_depth;
        let node = self.node(at);
        let density = accessed / share;
        let judged = node.count >= min_count;
        if !judged || density < 1.0 {
            // Off the hot path: nothing under it is worth its memory.
            self.give_back(at);
            return;
        }
        if !node.expanded {
            if density >= hot_density {
                hot.push(prefix.clone());
            }
            if prefix.len() < max_depth {
                self.node_mut(at).expanded = true;
            }
            return;
        }
        let fanout = node.fanout();
        let counts: Vec<f64> = node
            .children
            .iter()
            .map(|&(_, i)| self.node(i).count)
            .collect();
        let sum: f64 = counts.iter().sum();
        let max = counts.iter().copied().fold(0.0, f64::max);
        let mean = sum / f64::from(fanout);
        // One child byte seen (a prefix every key under the node shares) is never "alike":
        // the walk goes on through it.
        if sum < min_count || (fanout > 1 && max <= similar_ratio * mean) {
            // Children not known yet, or alike: the node is the prefix to judge. Alike ones
            // go back (the paper recycles them); the node expands again at the next tick, so
            // a hot spot that forms inside it later is found.
            if density >= hot_density {
                hot.push(prefix.clone());
            }
            if sum >= min_count {
                self.give_back(at);
            }
            return;
        }
        let children = self.node(at).children.clone();
        let child_share = share / f64::from(fanout);
        for (b, i) in children {
            if self.node(i).count < 1.0 && !self.node(i).expanded {
                self.remove_child(at, b);
                continue;
            }
            let child_accessed = accessed * self.node(i).count / sum;
            prefix.push(b);
            self.visit(i, child_share, child_accessed, prefix, hot);
            prefix.pop();
        }
    }

    /// Frees every node under `at` and leaves it a leaf that has seen no child byte.
    fn give_back(&mut self, at: u32) {
        let node = self.node_mut(at);
        node.expanded = false;
        node.seen = [0; 4];
        let mut stack: Vec<u32> = std::mem::take(&mut node.children)
            .into_iter()
            .map(|(_, i)| i)
            .collect();
        while let Some(i) = stack.pop() {
            let n = self.nodes[i as usize].take().expect("a live node");
            stack.extend(n.children.into_iter().map(|(_, c)| c));
            self.free.push(i);
            self.live -= 1;
        }
    }

    fn remove_child(&mut self, at: u32, b: u8) {
        let node = self.node_mut(at);
        let Ok(pos) = node.children.binary_search_by_key(&b, |(c, _)| *c) else {
            return;
        };
        let (_, i) = node.children.remove(pos);
        self.give_back(i);
        self.nodes[i as usize] = None;
        self.free.push(i);
        self.live -= 1;
    }

    /// A new child of `at` under byte `b`, or `None` when it would pass `trie_bytes`.
    pub(super) fn add_child(&mut self, at: u32, b: u8) -> Option<u32> {
        if (self.live + 1) * NODE_BYTES > self.config.trie_bytes.max(NODE_BYTES) {
            return None;
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = Some(Node::new());
                i
            }
            None => {
                self.nodes.push(Some(Node::new()));
                u32::try_from(self.nodes.len() - 1).ok()?
            }
        };
        self.live += 1;
        let node = self.node_mut(at);
        let pos = node
            .children
            .binary_search_by_key(&b, |(c, _)| *c)
            .unwrap_err();
        node.children.insert(pos, (b, i));
        Some(i)
    }

    pub(super) fn node(&self, i: u32) -> &Node {
        self.nodes[i as usize].as_ref().expect("a live node")
    }

    pub(super) fn node_mut(&mut self, i: u32) -> &mut Node {
        self.nodes[i as usize].as_mut().expect("a live node")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic generator (xorshift), so every run replays.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// `user` and six digits: ten regions `user0`..`user9` of 100,000 keys each.
    fn key(n: u64) -> Vec<u8> {
        format!("user{n:06}").into_bytes()
    }

    /// One interval: `count` accesses, a share `hot_share` of them in region `hot` (keys
    /// uniform inside it), the rest uniform over all keys; then a tick.
    fn interval(
        t: &mut HotnessTrie,
        rng: &mut Rng,
        count: usize,
        hot: u64,
        hot_share: u64,
    ) -> TickOutcome {
        for _ in 0..count {
            let n = if rng.below(100) < hot_share {
                // A small hot set (2,000 keys) inside the region, so keys repeat and pass the
                // gate.
                hot * 100_000 + rng.below(2000) * 50
            } else {
                rng.below(1_000_000)
            };
            t.record(&key(n));
        }
        t.tick()
    }

    #[test]
    fn finds_the_hot_region_and_follows_it_when_it_moves() {
        let mut t = HotnessTrie::new(HotnessConfig::default());
        let mut rng = Rng(7);
        let mut found = None;
        for tick in 0..12 {
            let out = interval(&mut t, &mut rng, 40_000, 3, 80);
            if out.hot.iter().any(|p| p.starts_with(b"user3")) {
                found.get_or_insert(tick);
            }
        }
        assert!(found.is_some(), "user3 not found: {:?}", t.hot_prefixes());
        assert!(t.is_hot(&key(300_050)), "{:?}", t.hot_prefixes());
        assert!(!t.is_hot(&key(700_050)));
        assert!(!t.is_hot(&key(50)));
        // Every hot prefix lies inside the hot region, whose keys 3xxxxx are a tenth of the space.
        assert!(t.hot_prefixes().iter().all(|p| p.starts_with(b"user3")));
        // The hot spot moves to user7: within a few intervals user7 is hot and user3 is not.
        let mut moved = false;
        for _ in 0..12 {
            let out = interval(&mut t, &mut rng, 40_000, 7, 80);
            if t.is_hot(&key(700_050)) && !t.is_hot(&key(300_050)) {
                assert!(out.hot.iter().all(|p| p.starts_with(b"user7")), "{:?}", out.hot);
                moved = true;
                break;
            }
        }
        assert!(moved, "did not follow the move: {:?}", t.hot_prefixes());
        assert!(t.bytes() <= HotnessConfig::default().trie_bytes);
    }

    #[test]
    fn a_uniform_workload_has_no_hot_prefix_and_keeps_the_trie_small() {
        let mut t = HotnessTrie::new(HotnessConfig::default());
        let mut rng = Rng(11);
        for _ in 0..10 {
            // Keys from a small set so they pass the gate, spread over the whole space.
            for _ in 0..40_000 {
                t.record(&key(rng.below(5000) * 200));
            }
            let out = t.tick();
            assert!(out.hot.is_empty(), "{:?}", out.hot);
        }
        // The common prefix and one digit level at most: a few dozen nodes.
        assert!(t.nodes() < 64, "{} nodes", t.nodes());
    }

    #[test]
    fn the_gate_keeps_keys_accessed_once_out_of_the_trie() {
        // 1 MiB of counters (65,536 a row) for 10,000 keys: a key passes by collisions in all
        // four rows with probability about (5,000 / 65,536)^4, so none is expected.
        let config = HotnessConfig {
            sketch_bytes: 1 << 20,
            ..HotnessConfig::default()
        };
        let mut t = HotnessTrie::new(config);
        for n in 0..10_000 {
            t.record(&key(n * 97));
        }
        assert_eq!(t.accesses, 10_000);
        assert!(t.trie_accesses < 5, "{}", t.trie_accesses);
        // A key accessed twice passes.
        t.record(&key(97));
        t.record(&key(97));
        assert!(t.trie_accesses >= 1);
    }

    #[test]
    fn memory_stays_within_the_budget() {
        // Room for the root and three nodes: the path to the hot region (`user3`, five bytes)
        // does not fit, so the trie stops at `use` and finds nothing, but never passes it.
        let config = HotnessConfig {
            trie_bytes: 4 * NODE_BYTES,
            ..HotnessConfig::default()
        };
        let mut t = HotnessTrie::new(config);
        let mut rng = Rng(3);
        for _ in 0..12 {
            let out = interval(&mut t, &mut rng, 20_000, 3, 80);
            assert!(t.bytes() <= 4 * NODE_BYTES, "{} nodes", t.nodes());
            assert!(out.hot.is_empty(), "{:?}", out.hot);
        }
        assert_eq!(t.nodes(), 4, "it used its budget");
        // With room for the path it finds the region.
        let mut roomy = HotnessTrie::new(HotnessConfig {
            trie_bytes: 32 * NODE_BYTES,
            ..HotnessConfig::default()
        });
        for _ in 0..12 {
            interval(&mut roomy, &mut rng, 20_000, 3, 80);
            assert!(roomy.bytes() <= 32 * NODE_BYTES);
        }
        assert!(roomy.is_hot(&key(300_050)), "{:?}", roomy.hot_prefixes());
    }

    #[test]
    fn counts_decay_and_an_idle_trie_gives_its_nodes_back() {
        let mut t = HotnessTrie::new(HotnessConfig::default());
        let mut rng = Rng(5);
        for _ in 0..8 {
            interval(&mut t, &mut rng, 20_000, 5, 90);
        }
        assert!(!t.hot_prefixes().is_empty());
        assert!(t.nodes() > 1);
        // No access for a while: counts halve each tick until nothing is judged.
        let mut last = None;
        for _ in 0..40 {
            last = Some(t.tick());
        }
        let last = last.expect("ticks");
        assert!(last.hot.is_empty());
        assert_eq!(t.nodes(), 1, "only the root is left");
    }

    #[test]
    fn hot_lookups_match_prefixes_exactly() {
        let mut t = HotnessTrie::new(HotnessConfig::default());
        t.hot = vec![b"ab".to_vec(), b"b".to_vec(), b"user3".to_vec()];
        assert!(t.is_hot(b"ab"));
        assert!(t.is_hot(b"abz"));
        assert!(!t.is_hot(b"a"));
        assert!(!t.is_hot(b"aa"));
        assert!(t.is_hot(b"b"));
        assert!(t.is_hot(b"bzz"));
        assert!(!t.is_hot(b"c"));
        assert!(t.is_hot(b"user300"));
        assert!(!t.is_hot(b"user2"));
        assert!(!t.is_hot(b""));
    }
}
