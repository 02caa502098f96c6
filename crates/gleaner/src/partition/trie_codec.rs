//! The bytes of the hotness statistics (docs/format.md, "Hotness files"): the whole trie, for
//! the full snapshot, and the hot prefixes of one tick with their counts, for the incremental
//! log (paper §4.3: "the prefix judged as a hot spot node and its access frequency").
//!
//! Decoding checks every length, count and bound against the configuration it restores into
//! (`dpkv_trie_bytes`, the depth), so a damaged file, or one written under a smaller budget, is
//! refused and the statistics are learned again; it is never trusted into a larger trie.

use super::trie::{HotnessConfig, HotnessTrie, NODE_BYTES, Node};
use crate::coding::{decode_fixed64, decode_varint32, decode_varint64, put_fixed64, put_varint32};
use crate::coding::{put_length_prefixed, put_varint64};

/// A hot prefix and its node's count, as the log records them.
pub type HotCount = (Vec<u8>, f64);

/// Reads fields off a byte slice; every read is bounds-checked.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    fn fixed64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        Ok(decode_fixed64(b))
    }

    fn count(&mut self) -> Result<f64, String> {
        let c = f64::from_bits(self.fixed64()?);
        if !(c.is_finite() && c >= 0.0) {
            return Err(format!("count {c} is not a finite non-negative number"));
        }
        Ok(c)
    }

    fn varint64(&mut self) -> Result<u64, String> {
        let (v, n) = decode_varint64(&self.data[self.pos..]).ok_or("bad varint")?;
        self.pos += n;
        Ok(v)
    }

    fn varint32(&mut self) -> Result<u32, String> {
        let (v, n) = decode_varint32(&self.data[self.pos..]).ok_or("bad varint")?;
        self.pos += n;
        Ok(v)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| format!("{n} bytes wanted past the end"))?;
        let b = &self.data[self.pos..end];
        self.pos = end;
        Ok(b)
    }

    fn finish(&self) -> Result<(), String> {
        if self.pos != self.data.len() {
            return Err(format!("{} bytes left over", self.data.len() - self.pos));
        }
        Ok(())
    }
}

/// Appends the hot list: its length, then each prefix (length-prefixed) and count.
pub fn encode_hot(hot: &[HotCount], out: &mut Vec<u8>) {
    put_varint32(out, u32::try_from(hot.len()).expect("a hot list fits u32"));
    for (prefix, count) in hot {
        put_length_prefixed(out, prefix);
        put_fixed64(out, count.to_bits());
    }
}

/// The hot list `data` holds, checked against `config`: at most as many prefixes as the trie
/// can hold nodes, each at most `max_depth` bytes, sorted, none a prefix of the next.
pub fn decode_hot(config: &HotnessConfig, data: &[u8]) -> Result<Vec<HotCount>, String> {
    let mut input = Input { data, pos: 0 };
    let hot = read_hot(config, &mut input)?;
    input.finish()?;
    Ok(hot)
}

fn read_hot(config: &HotnessConfig, input: &mut Input<'_>) -> Result<Vec<HotCount>, String> {
    let n = input.varint32()? as usize;
    let most = node_limit(config);
    if n > most {
        return Err(format!(
            "{n} hot prefixes, more than the {most} nodes dpkv_trie_bytes allows"
        ));
    }
    let mut hot: Vec<HotCount> = Vec::with_capacity(n);
    for _ in 0..n {
        let len = input.varint32()? as usize;
        if len > config.max_depth {
            return Err(format!("hot prefix of {len} bytes, beyond the depth limit"));
        }
        let prefix = input.take(len)?.to_vec();
        let count = input.count()?;
        if let Some((last, _)) = hot.last()
            && (last.as_slice() >= prefix.as_slice() || prefix.starts_with(last))
        {
            return Err("hot prefixes out of order or nested".into());
        }
        hot.push((prefix, count));
    }
    Ok(hot)
}

/// Most nodes a trie under `config` holds.
fn node_limit(config: &HotnessConfig) -> usize {
    (config.trie_bytes / NODE_BYTES).max(1)
}

impl HotnessTrie {
    /// The hot prefixes of the last tick with their nodes' counts (0 for a prefix whose node
    /// is gone).
    pub fn hot_counts(&self) -> Vec<HotCount> {
        self.hot
            .iter()
            .map(|p| {
                let count = self.find(p).map_or(0.0, |i| self.node(i).count);
                (p.clone(), count)
            })
            .collect()
    }

    /// The node of `prefix`, if the trie has one.
    fn find(&self, prefix: &[u8]) -> Option<u32> {
        let mut at = 0u32;
        for &b in prefix {
            at = self.node(at).child(b)?;
        }
        Some(at)
    }

    /// Appends the full snapshot: the counters since the open, the hot list, then every node
    /// in pre-order (count, seen bitmap, expanded flag, fanout, and each child's byte before
    /// the child).
    pub fn encode_snapshot(&self, out: &mut Vec<u8>) {
        put_varint64(out, self.accesses);
        put_varint64(out, self.trie_accesses);
        encode_hot(&self.hot_counts(), out);
        let mut stack = vec![(None, 0u32)];
        while let Some((byte, at)) = stack.pop() {
            if let Some(b) = byte {
                out.push(b);
            }
            let node = self.node(at);
            put_fixed64(out, node.count.to_bits());
            for w in node.seen {
                put_fixed64(out, w);
            }
            out.push(u8::from(node.expanded));
            put_varint32(out, node.children.len() as u32);
            // Reversed onto the stack, so children come out in byte order.
            stack.extend(node.children.iter().rev().map(|&(b, i)| (Some(b), i)));
        }
    }

    /// The trie a snapshot holds, under `config` (its sketch starts empty: the paper keeps the
    /// prefixes, not every key's count).
    ///
    /// Errors: a description of the first thing wrong — a short or overlong record, a count
    /// that is not a finite non-negative number, children out of order, a node deeper than
    /// `max_depth`, more nodes than `trie_bytes` allows, a bad hot list.
    pub fn decode_snapshot(config: HotnessConfig, data: &[u8]) -> Result<Self, String> {
        let mut input = Input { data, pos: 0 };
        let accesses = input.varint64()?;
        let trie_accesses = input.varint64()?;
        let hot = read_hot(&config, &mut input)?;
        let most = node_limit(&config);
        let max_depth = config.max_depth;
        let mut t = HotnessTrie::new(config);
        t.accesses = accesses;
        t.trie_accesses = trie_accesses;
        t.hot = hot.into_iter().map(|(p, _)| p).collect();
        // Pending: (node, children still to read, depth).
        let (root, fanout) = read_node(&mut input)?;
        *t.node_mut(0) = root;
        let mut pending: Vec<(u32, u32, usize)> = vec![(0, fanout, 0)];
        while let Some(top) = pending.last_mut() {
            if top.1 == 0 {
                pending.pop();
                continue;
            }
            top.1 -= 1;
            let (parent, depth) = (top.0, top.2 + 1);
            if depth > max_depth {
                return Err(format!("a node at depth {depth}, beyond the limit"));
            }
            let b = input.byte()?;
            if t.node(parent).children.last().is_some_and(|&(c, _)| c >= b) {
                return Err("children out of order".into());
            }
            let (node, fanout) = read_node(&mut input)?;
            if t.live >= most {
                return Err(format!(
                    "more than the {most} nodes dpkv_trie_bytes allows"
                ));
            }
            let i = u32::try_from(t.nodes.len()).map_err(|_| "too many nodes")?;
            t.nodes.push(Some(node));
            t.live += 1;
            t.node_mut(parent).children.push((b, i));
            pending.push((i, fanout, depth));
        }
        input.finish()?;
        Ok(t)
    }

    /// Sets the hot prefixes to `hot` and each one's node count, creating the nodes on the
    /// way where the budget allows (an ancestor's count is raised to at least its hot
    /// descendant's; a prefix whose node does not fit stays hot, without a count): the
    /// incremental log's record of one tick, replayed.
    pub fn restore_hot(&mut self, hot: Vec<HotCount>) {
        self.hot = hot.iter().map(|(p, _)| p.clone()).collect();
        'prefixes: for (prefix, count) in hot {
            let mut at = 0u32;
            for &b in &prefix {
                let node = self.node_mut(at);
                node.count = node.count.max(count);
                node.seen[usize::from(b / 64)] |= 1 << (b % 64);
                node.expanded = true;
                at = match node.child(b) {
                    Some(c) => c,
                    None => match self.add_child(at, b) {
                        Some(c) => c,
                        None => continue 'prefixes,
                    },
                };
            }
            self.node_mut(at).count = count;
        }
    }
}

/// One node's fields and its fanout (its children follow).
fn read_node(input: &mut Input<'_>) -> Result<(Node, u32), String> {
    let mut node = Node::new();
    node.count = input.count()?;
    for w in &mut node.seen {
        *w = input.fixed64()?;
    }
    node.expanded = match input.byte()? {
        0 => false,
        1 => true,
        f => return Err(format!("node flags {f}")),
    };
    let fanout = input.varint32()?;
    if fanout > 256 {
        return Err(format!("a node of {fanout} children"));
    }
    if fanout > 0 && !node.expanded {
        return Err("children under a node that is not expanded".into());
    }
    Ok((node, fanout))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned() -> HotnessTrie {
        let mut t = HotnessTrie::new(HotnessConfig::default());
        let mut x = 9u64;
        for _ in 0..8 {
            for _ in 0..30_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = if x % 100 < 80 {
                    400_000 + (x >> 8) % 2000 * 50
                } else {
                    (x >> 8) % 1_000_000
                };
                t.record(format!("user{n:06}").as_bytes());
            }
            t.tick();
        }
        assert!(!t.hot_prefixes().is_empty());
        t
    }

    #[test]
    fn a_snapshot_restores_the_same_trie() {
        let t = learned();
        let mut bytes = Vec::new();
        t.encode_snapshot(&mut bytes);
        let mut back =
            HotnessTrie::decode_snapshot(HotnessConfig::default(), &bytes).expect("decodes");
        assert_eq!(back.hot_prefixes(), t.hot_prefixes());
        assert_eq!(back.nodes(), t.nodes());
        assert_eq!(back.hot_counts(), t.hot_counts());
        let mut again = Vec::new();
        back.encode_snapshot(&mut again);
        assert_eq!(again, bytes, "the same bytes again");
        // And it goes on learning from where it was.
        let mut orig = t.clone();
        assert_eq!(back.tick().hot, orig.tick().hot);
    }

    #[test]
    fn damage_and_foreign_budgets_are_refused() {
        let t = learned();
        let mut bytes = Vec::new();
        t.encode_snapshot(&mut bytes);
        for cut in 0..bytes.len() {
            assert!(
                HotnessTrie::decode_snapshot(HotnessConfig::default(), &bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(HotnessTrie::decode_snapshot(HotnessConfig::default(), &long).is_err());
        // A smaller budget than the snapshot's nodes: refused, not trusted into the trie.
        let small = HotnessConfig {
            trie_bytes: (t.nodes() - 1) * NODE_BYTES,
            ..HotnessConfig::default()
        };
        let err = HotnessTrie::decode_snapshot(small, &bytes).expect_err("over budget");
        assert!(err.contains("dpkv_trie_bytes"), "{err}");
        // A shallower depth limit than the snapshot's deepest node: refused.
        let shallow = HotnessConfig {
            max_depth: 3,
            ..HotnessConfig::default()
        };
        assert!(HotnessTrie::decode_snapshot(shallow, &bytes).is_err());
    }

    #[test]
    fn hot_lists_round_trip_and_are_checked() {
        let hot = vec![(b"ab".to_vec(), 40.5), (b"user3".to_vec(), 1e6)];
        let mut bytes = Vec::new();
        encode_hot(&hot, &mut bytes);
        let cfg = HotnessConfig::default();
        assert_eq!(decode_hot(&cfg, &bytes).expect("decodes"), hot);
        for bad in [
            vec![(b"b".to_vec(), 1.0), (b"a".to_vec(), 1.0)],
            vec![(b"a".to_vec(), 1.0), (b"ab".to_vec(), 1.0)],
            vec![(b"a".to_vec(), f64::NAN)],
            vec![(b"a".to_vec(), -1.0)],
            vec![(vec![b'x'; 40], 1.0)],
        ] {
            let mut b = Vec::new();
            encode_hot(&bad, &mut b);
            assert!(decode_hot(&cfg, &b).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_replayed_tick_makes_its_prefixes_hot() {
        let mut t = HotnessTrie::new(HotnessConfig::default());
        t.restore_hot(vec![(b"user4".to_vec(), 500.0), (b"user7".to_vec(), 90.0)]);
        assert!(t.is_hot(b"user40001"));
        assert!(t.is_hot(b"user7"));
        assert!(!t.is_hot(b"user5"));
        assert_eq!(
            t.hot_counts(),
            vec![(b"user4".to_vec(), 500.0), (b"user7".to_vec(), 90.0)]
        );
        assert!(t.bytes() <= HotnessConfig::default().trie_bytes);
        // Within a tiny budget the prefixes are still hot; the nodes stop where it ends.
        let mut tiny = HotnessTrie::new(HotnessConfig {
            trie_bytes: 2 * NODE_BYTES,
            ..HotnessConfig::default()
        });
        tiny.restore_hot(vec![(b"user4".to_vec(), 500.0)]);
        assert!(tiny.is_hot(b"user40001"));
        assert!(tiny.nodes() <= 2);
    }
}
