//! DumpKV's lifetime model (§4.4): a gradient-boosted tree binary classifier, short (0) or
//! long (1) remaining lifetime, trained with `forust-ml` (binary logloss, the authors' 32
//! iterations, 32 leaves, learning rate 0.1, one thread) and kept in a form of our own:
//! flat node arrays walked without the crate, which is what the GC path calls (about a
//! microsecond), and what the model file holds (docs/format.md, "DumpKV model").

use forust_ml::gradientbooster::GrowPolicy;
use forust_ml::objective::ObjectiveType;
use forust_ml::{GradientBooster, Matrix};

use super::features::FEATURES;
use crate::coding::{decode_fixed32, decode_fixed64, put_fixed32, put_fixed64};

/// Boosting rounds (trees) of a training (the authors' `num_iterations`).
pub const ITERATIONS: usize = 32;
/// Leaves per tree, at most (the authors' `num_leaves`).
pub const LEAVES: usize = 32;
/// Learning rate (the authors').
pub const LEARNING_RATE: f32 = 0.1;

/// Most trees a model file may hold: checked when reading one.
pub const MAX_TREES: usize = 256;
/// Most nodes of all trees of a model file: checked when reading one (a model of
/// [`ITERATIONS`] trees of [`LEAVES`] leaves has about 2 000).
pub const MAX_NODES: usize = 1 << 16;
/// Most rows one training reads.
pub const MAX_TRAINING_ROWS: usize = 1 << 22;

const MAGIC: &[u8; 4] = b"DKVM";
const FORMAT: u32 = 1;
/// A leaf's feature.
const LEAF: u16 = u16::MAX;
/// Bytes of one encoded node: feature u16, missing-left u8, threshold f64, left u32,
/// right u32, value f32.
const NODE_BYTES: usize = 2 + 1 + 8 + 4 + 4 + 4;
/// Bytes of the header: magic, format, feature count (u32), unit, rows trained on, base score,
/// trees, nodes.
const HEADER_BYTES: usize = 4 + 4 + 4 + 8 + 8 + 8 + 4 + 4;

/// One node of a tree: a split (`x[feature] < threshold` goes left, a missing `x[feature]`
/// goes left if `missing_left`) or a leaf adding `value` to the log-odds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Node {
    feature: u16,
    missing_left: bool,
    threshold: f64,
    left: u32,
    right: u32,
    value: f32,
}

/// A trained model.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// The time unit its inputs were bucketed with (option `dumpkv_time_unit`).
    pub unit: u64,
    /// Rows it was trained on.
    pub trained_on: u64,
    base: f64,
    /// The first node of each tree.
    roots: Vec<u32>,
    nodes: Vec<Node>,
}

/// Why a training did not produce a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrainError {
    /// No rows, or rows of one label only: nothing to tell apart.
    OneLabel,
    /// The crate failed.
    Crate(String),
}

impl Model {
    /// Trains on `rows` labelled `labels` (true = long), inputs bucketed with `unit`.
    ///
    /// Errors: [`TrainError::OneLabel`] for no rows or one label only (the crate would make a
    /// model of infinite log-odds); the crate's error.
    pub fn train(
        rows: &[[f32; FEATURES]],
        labels: &[bool],
        unit: u64,
    ) -> Result<Model, TrainError> {
        assert_eq!(rows.len(), labels.len());
        let n = rows.len().min(MAX_TRAINING_ROWS);
        let longs = labels[..n].iter().filter(|l| **l).count();
        if longs == 0 || longs == n {
            return Err(TrainError::OneLabel);
        }
        // Column-major, as the crate reads it.
        let mut data = vec![0.0f64; n * FEATURES];
        for (i, row) in rows[..n].iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                data[j * n + i] = f64::from(*v);
            }
        }
        let y: Vec<f64> = labels[..n].iter().map(|l| f64::from(u8::from(*l))).collect();
        let mut b = GradientBooster::default()
            .set_objective_type(ObjectiveType::LogLoss)
            .set_iterations(ITERATIONS)
            .set_learning_rate(LEARNING_RATE)
            .set_max_leaves(LEAVES)
            // Leaves bound the trees; the crate's depth default (5) would bind first.
            .set_max_depth(16)
            // One thread, no pool: training must not take the machine's cores.
            .set_parallel(false)
            .set_num_threads(None)
            .set_seed(27);
        b.grow_policy = GrowPolicy::LossGuide;
        b.fit_unweighted(&Matrix::new(&data, n, FEATURES), &y, None)
            .map_err(|e| TrainError::Crate(e.to_string()))?;
        Self::from_booster(&b, unit, n as u64).map_err(TrainError::Crate)
    }

    /// The crate's trees in our form.
    fn from_booster(b: &GradientBooster, unit: u64, trained_on: u64) -> Result<Model, String> {
        let mut model = Model {
            unit,
            trained_on,
            base: b.base_score,
            roots: Vec::with_capacity(b.trees.len()),
            nodes: Vec::new(),
        };
        if !b.base_score.is_finite() {
            return Err(format!("base score {}", b.base_score));
        }
        for tree in &b.trees {
            let first = model.nodes.len() as u32;
            model.roots.push(first);
            for (i, n) in tree.nodes.iter().enumerate() {
                if n.num != i {
                    return Err(format!("node {i} numbered {}", n.num));
                }
                if n.is_leaf {
                    model.nodes.push(Node {
                        feature: LEAF,
                        missing_left: false,
                        threshold: 0.0,
                        left: 0,
                        right: 0,
                        value: n.weight_value,
                    });
                    continue;
                }
                if n.missing_node != n.left_child && n.missing_node != n.right_child {
                    return Err("a separate missing branch".into());
                }
                model.nodes.push(Node {
                    feature: u16::try_from(n.split_feature).map_err(|e| e.to_string())?,
                    missing_left: n.missing_node == n.left_child,
                    threshold: n.split_value,
                    left: first + n.left_child as u32,
                    right: first + n.right_child as u32,
                    value: 0.0,
                });
            }
        }
        model.validate().map_err(|e| e.to_string())?;
        Ok(model)
    }

    /// The log-odds of a long remaining lifetime for input `x`.
    pub fn log_odds(&self, x: &[f32; FEATURES]) -> f64 {
        let mut sum = self.base;
        for &root in &self.roots {
            let mut n = &self.nodes[root as usize];
            while n.feature != LEAF {
                let v = f64::from(x[usize::from(n.feature)]);
                let left = if v.is_nan() {
                    n.missing_left
                } else {
                    v < n.threshold
                };
                n = &self.nodes[if left { n.left } else { n.right } as usize];
            }
            sum += f64::from(n.value);
        }
        sum
    }

    /// Whether the model predicts a long remaining lifetime for `x` (probability above 0.5).
    pub fn predicts_long(&self, x: &[f32; FEATURES]) -> bool {
        self.log_odds(x) > 0.0
    }

    /// Trees.
    pub fn trees(&self) -> usize {
        self.roots.len()
    }

    /// Nodes of all trees.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The model as text, for `gleaner dump`: a summary line, then one line per node
    /// (`tree T node I: x[F] < THRESHOLD ? L : R, missing left|right`, or `leaf VALUE`).
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![format!(
            "model: trees={} nodes={} inputs={FEATURES} time_unit={} trained_on={} base={}",
            self.roots.len(),
            self.nodes.len(),
            self.unit,
            self.trained_on,
            self.base
        )];
        let mut tree = 0;
        for (i, n) in self.nodes.iter().enumerate() {
            while self.roots.get(tree + 1).is_some_and(|r| *r as usize <= i) {
                tree += 1;
            }
            out.push(if n.feature == LEAF {
                format!("tree {tree} node {i}: leaf {}", n.value)
            } else {
                format!(
                    "tree {tree} node {i}: x[{}] < {} ? {} : {}, missing {}",
                    n.feature,
                    n.threshold,
                    n.left,
                    n.right,
                    if n.missing_left { "left" } else { "right" }
                )
            });
        }
        out
    }

    /// The model file's data (docs/format.md, "DumpKV model").
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.roots.len() * 4 + self.nodes.len() * NODE_BYTES);
        out.extend_from_slice(MAGIC);
        put_fixed32(&mut out, FORMAT);
        put_fixed32(&mut out, FEATURES as u32);
        put_fixed64(&mut out, self.unit);
        put_fixed64(&mut out, self.trained_on);
        put_fixed64(&mut out, self.base.to_bits());
        put_fixed32(&mut out, self.roots.len() as u32);
        put_fixed32(&mut out, self.nodes.len() as u32);
        for r in &self.roots {
            put_fixed32(&mut out, *r);
        }
        for n in &self.nodes {
            out.extend_from_slice(&n.feature.to_le_bytes());
            out.push(u8::from(n.missing_left));
            put_fixed64(&mut out, n.threshold.to_bits());
            put_fixed32(&mut out, n.left);
            put_fixed32(&mut out, n.right);
            out.extend_from_slice(&n.value.to_le_bytes());
        }
        out
    }

    /// The model `data` encodes.
    ///
    /// Errors: a description of what is wrong (wrong magic, format or feature count, a count
    /// beyond [`MAX_TREES`] or [`MAX_NODES`], a length that does not match, a node out of its
    /// tree or pointing backwards, a value that is not finite).
    pub fn decode(data: &[u8]) -> Result<Model, String> {
        if data.len() < HEADER_BYTES {
            return Err("shorter than its header".into());
        }
        if &data[..4] != MAGIC {
            return Err("bad magic".into());
        }
        let format = decode_fixed32(&data[4..8]);
        if format != FORMAT {
            return Err(format!("format {format}, unknown to this build (it reads {FORMAT})"));
        }
        let features = decode_fixed32(&data[8..12]);
        if features as usize != FEATURES {
            return Err(format!("{features} inputs; this build has {FEATURES}"));
        }
        let unit = decode_fixed64(&data[12..20]);
        let trained_on = decode_fixed64(&data[20..28]);
        let base = f64::from_bits(decode_fixed64(&data[28..36]));
        let trees = decode_fixed32(&data[36..40]) as usize;
        let nodes = decode_fixed32(&data[40..44]) as usize;
        if trees > MAX_TREES || nodes > MAX_NODES {
            return Err(format!(
                "{trees} trees of {nodes} nodes; at most {MAX_TREES} (MAX_TREES) of {MAX_NODES} \
                 (MAX_NODES)"
            ));
        }
        if data.len() != HEADER_BYTES + trees * 4 + nodes * NODE_BYTES {
            return Err("length does not match its counts".into());
        }
        let mut at = HEADER_BYTES;
        let mut roots = Vec::with_capacity(trees);
        for _ in 0..trees {
            roots.push(decode_fixed32(&data[at..at + 4]));
            at += 4;
        }
        let mut list = Vec::with_capacity(nodes);
        for _ in 0..nodes {
            let b = &data[at..at + NODE_BYTES];
            list.push(Node {
                feature: u16::from_le_bytes([b[0], b[1]]),
                missing_left: b[2] != 0,
                threshold: f64::from_bits(decode_fixed64(&b[3..11])),
                left: decode_fixed32(&b[11..15]),
                right: decode_fixed32(&b[15..19]),
                value: f32::from_le_bytes([b[19], b[20], b[21], b[22]]),
            });
            at += NODE_BYTES;
        }
        let model = Model {
            unit,
            trained_on,
            base,
            roots,
            nodes: list,
        };
        model.validate()?;
        Ok(model)
    }

    /// Checks what a walk relies on: every tree's nodes lie between its root and the next
    /// tree's, children come after their parent (so a walk ends), split features are inputs,
    /// and numbers are finite.
    fn validate(&self) -> Result<(), String> {
        if !self.base.is_finite() || self.unit == 0 {
            return Err("base score not finite, or a zero unit".into());
        }
        for (t, &root) in self.roots.iter().enumerate() {
            let end = self
                .roots
                .get(t + 1)
                .map_or(self.nodes.len() as u32, |next| *next);
            if root >= end || end as usize > self.nodes.len() {
                return Err(format!("tree {t} has no nodes, or overlaps the next"));
            }
            for i in root..end {
                let n = &self.nodes[i as usize];
                if n.feature == LEAF {
                    if !n.value.is_finite() {
                        return Err(format!("leaf {i} is not finite"));
                    }
                    continue;
                }
                let inside = |c: u32| c > i && c < end;
                if usize::from(n.feature) >= FEATURES
                    || !inside(n.left)
                    || !inside(n.right)
                    || n.threshold.is_nan()
                {
                    return Err(format!("node {i} of tree {t} is malformed"));
                }
            }
        }
        if self.roots.first().is_some_and(|r| *r != 0)
            || (self.roots.is_empty() && !self.nodes.is_empty())
        {
            return Err("nodes outside every tree".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows whose label is `x[0] < 3` (age bucket), with noise in other inputs.
    fn data(n: usize, seed: u64) -> (Vec<[f32; FEATURES]>, Vec<bool>) {
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let mut rows = Vec::new();
        let mut labels = Vec::new();
        for _ in 0..n {
            let mut x = [f32::NAN; FEATURES];
            x[0] = (next() % 6) as f32;
            for v in x.iter_mut().skip(1 + FEATURES / 2) {
                *v = (next() % 100) as f32;
            }
            labels.push(x[0] < 3.0);
            rows.push(x);
        }
        (rows, labels)
    }

    #[test]
    fn trains_predicts_and_round_trips() {
        let (rows, labels) = data(4000, 1);
        let m = Model::train(&rows, &labels, 1024).expect("train");
        assert_eq!(m.trees(), ITERATIONS);
        assert!(m.node_count() <= ITERATIONS * (2 * LEAVES - 1));
        let (test, truth) = data(1000, 2);
        let right = test
            .iter()
            .zip(&truth)
            .filter(|(x, y)| m.predicts_long(x) == **y)
            .count();
        assert!(right >= 990, "{right} of 1000");
        let bytes = m.encode();
        let back = Model::decode(&bytes).expect("decode");
        assert_eq!(back, m);
        for x in &test {
            assert_eq!(back.log_odds(x).to_bits(), m.log_odds(x).to_bits());
        }
        // Training is deterministic: the same rows make the same model.
        assert_eq!(Model::train(&rows, &labels, 1024).expect("again"), m);
    }

    #[test]
    fn one_label_is_refused_not_trained() {
        let (rows, _) = data(100, 3);
        assert_eq!(
            Model::train(&rows, &[true; 100], 1),
            Err(TrainError::OneLabel)
        );
        assert_eq!(Model::train(&[], &[], 1), Err(TrainError::OneLabel));
    }

    #[test]
    fn damaged_models_are_refused() {
        let (rows, labels) = data(500, 4);
        let bytes = Model::train(&rows, &labels, 1).expect("train").encode();
        assert!(Model::decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(Model::decode(&[]).is_err());
        let mut bad_magic = bytes.clone();
        bad_magic[0] ^= 1;
        assert!(Model::decode(&bad_magic).is_err());
        let mut future = bytes.clone();
        future[4] = 9;
        assert!(Model::decode(&future).unwrap_err().contains("format 9"));
        // Any node pointing backwards or out of its tree, or a split on no input, is refused
        // (a walk could loop or read out of bounds).
        let first_node = HEADER_BYTES + ITERATIONS * 4;
        let mut backwards = bytes.clone();
        backwards[first_node + 11..first_node + 15].copy_from_slice(&0u32.to_le_bytes());
        assert!(Model::decode(&backwards).is_err());
        let mut no_input = bytes.clone();
        no_input[first_node..first_node + 2].copy_from_slice(&(FEATURES as u16).to_le_bytes());
        assert!(Model::decode(&no_input).is_err());
        let mut too_many = bytes;
        too_many[36..40].copy_from_slice(&((MAX_TREES + 1) as u32).to_le_bytes());
        assert!(Model::decode(&too_many).unwrap_err().contains("MAX_TREES"));
    }
}
