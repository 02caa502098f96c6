//! A partition's share of an iterator: the entries whose user keys the routing sends to one
//! partition of the index tree (`version/routing.rs`). A flush of a partitioned tree writes
//! each partition's share into that partition's L0.

use std::sync::Arc;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::user_key;
use crate::range_del::RangeTombstone;
use crate::version::routing::Routing;

/// Which partition's share of a flush, and by what routing.
#[derive(Debug, Clone)]
pub struct FlushPart {
    /// The routing of the version the flush installs into.
    pub routing: Arc<Routing>,
    /// The partition written.
    pub partition: usize,
}

/// The pieces of `tombstones` over keys `routing` sends to `partition`, each at its
/// tombstone's sequence number, in order: what of them covers a key there.
pub(crate) fn tombstone_pieces<'a>(
    routing: &Routing,
    partition: usize,
    tombstones: impl IntoIterator<Item = &'a RangeTombstone>,
) -> Vec<RangeTombstone> {
    tombstones
        .into_iter()
        .flat_map(|t| {
            routing
                .pieces(partition, &t.start, &t.end)
                .into_iter()
                .map(move |(start, end)| RangeTombstone {
                    start,
                    end,
                    seq: t.seq,
                })
        })
        .collect()
}

/// The entries of `inner` whose keys `part` routes to its partition, in `inner`'s order.
pub(crate) struct PartitionShare<I> {
    inner: I,
    part: FlushPart,
}

impl<I: InternalIterator> PartitionShare<I> {
    pub(crate) fn new(inner: I, part: FlushPart) -> Self {
        PartitionShare { inner, part }
    }

    fn ours(&self) -> bool {
        self.part.routing.partition_of(user_key(self.inner.key())) == self.part.partition
    }

    /// Moves forward past entries of the other partition.
    fn skip_forward(&mut self) -> Result<()> {
        while self.inner.valid() && !self.ours() {
            self.inner.next()?;
        }
        Ok(())
    }

    /// Moves backward past entries of the other partition.
    fn skip_backward(&mut self) -> Result<()> {
        while self.inner.valid() && !self.ours() {
            self.inner.prev()?;
        }
        Ok(())
    }
}

impl<I: InternalIterator> InternalIterator for PartitionShare<I> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()?;
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()?;
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)?;
        self.skip_forward()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek_for_prev(target)?;
        self.skip_backward()
    }

    fn next(&mut self) -> Result<()> {
        self.inner.next()?;
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        self.inner.prev()?;
        self.skip_backward()
    }

    fn key(&self) -> &[u8] {
        self.inner.key()
    }

    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};
    use crate::memtable::MemTable;
    use crate::version::routing::{COLD, HOT, KeyRange};

    #[test]
    fn each_share_holds_its_partition_s_keys_both_ways() {
        let mem = Arc::new(MemTable::new(1, 1 << 20));
        for (i, k) in ["a", "user30", "user31", "user5", "user39", "z"].iter().enumerate() {
            mem.add(i as u64 + 1, ValueKind::Value, k.as_bytes(), b"v");
        }
        let routing = Arc::new(Routing::new(vec![KeyRange::of_prefix(b"user3")]));
        let keys = |p: usize, backward: bool| {
            let mut it = PartitionShare::new(
                mem.iter(),
                FlushPart {
                    routing: Arc::clone(&routing),
                    partition: p,
                },
            );
            let mut out = Vec::new();
            if backward {
                it.seek_to_last().expect("seek");
            } else {
                it.seek_to_first().expect("seek");
            }
            while it.valid() {
                out.push(String::from_utf8(user_key(it.key()).to_vec()).expect("utf-8"));
                if backward {
                    it.prev().expect("prev");
                } else {
                    it.next().expect("next");
                }
            }
            out
        };
        assert_eq!(keys(HOT, false), ["user30", "user31", "user39"]);
        assert_eq!(keys(COLD, false), ["a", "user5", "z"]);
        assert_eq!(keys(HOT, true), ["user39", "user31", "user30"]);
        let mut it = PartitionShare::new(
            mem.iter(),
            FlushPart {
                routing,
                partition: COLD,
            },
        );
        it.seek(&make_internal_key(b"user30", 99, ValueKind::Value))
            .expect("seek");
        assert_eq!(user_key(it.key()), b"user5");
    }
}
