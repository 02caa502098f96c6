//! The value tables of a version: which are live, how much of each is garbage, and the
//! inheritance records that let handles naming a garbage-collected table find their records.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use super::file_meta::{FileKind, ObsoleteFileSink};
use crate::key::SeqNo;

/// What the manifest records about one value table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueTableMeta {
    /// File number (`NNNNNN.vst`).
    pub number: u64,
    /// Size in bytes.
    pub file_size: u64,
    /// Number of records.
    pub records: u64,
    /// Bytes of all records (headers, keys and values).
    pub record_bytes: u64,
    /// Smallest user key.
    pub smallest_key: Vec<u8>,
    /// Largest user key.
    pub largest_key: Vec<u8>,
    /// Smallest sequence number.
    pub smallest_seq: SeqNo,
    /// Largest sequence number.
    pub largest_seq: SeqNo,
    /// Class tag (0 = default; hotness and lifetime policies use others).
    pub class: u32,
    /// What the GC policy that wrote the table keeps about it (TTLs, levels, groups: the
    /// policy's own bytes), or `None`.
    pub policy_meta: Option<PolicyTableMeta>,
    /// When every record of the table expires: the latest expiry among them (milliseconds since
    /// the Unix epoch; manifest field 16). Once it has passed for every reader that can read a
    /// record of the table, nothing in it is readable and the table is deleted whole
    /// (docs/gc.md, "Expiry-grouped value tables"). `None` when some record does not expire.
    pub max_expiry: Option<u64>,
}

/// Most bytes of [`PolicyTableMeta::data`].
pub const MAX_POLICY_TABLE_META: usize = 4096;

/// A GC policy's metadata of one value table: made by its value router when the table is
/// written ([`ValueRouter::table_meta`](crate::gc::ValueRouter::table_meta)), kept in the
/// manifest (docs/format.md, field 8), shown to the victim picker, `gleaner check` and
/// `gleaner dump`. Opaque to the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyTableMeta {
    /// The name of the policy that wrote it (a built-in policy's, or a custom one's): an open
    /// that knows no policy of that name is refused, naming it.
    pub tag: String,
    /// The policy's bytes, at most [`MAX_POLICY_TABLE_META`].
    pub data: Vec<u8>,
}

impl ValueTableMeta {
    /// True when `user_key` lies within the table's key range.
    pub fn covers(&self, user_key: &[u8]) -> bool {
        self.smallest_key.as_slice() <= user_key && user_key <= self.largest_key.as_slice()
    }
}

/// A value table in a version, shared by every version that lists it; it derefs to its
/// metadata. When the table is removed from the current version (by GC, or because every
/// record became garbage), the file is deleted once the last version, iterator or job holding
/// this object lets go.
pub struct ValueFile {
    meta: ValueTableMeta,
    obsolete: OnceLock<Arc<dyn ObsoleteFileSink>>,
}

impl std::ops::Deref for ValueFile {
    type Target = ValueTableMeta;

    fn deref(&self) -> &ValueTableMeta {
        &self.meta
    }
}

impl std::fmt::Debug for ValueFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueFile")
            .field("number", &self.number)
            .field("records", &self.records)
            .field("record_bytes", &self.record_bytes)
            .finish()
    }
}

impl ValueFile {
    /// A live value table.
    pub fn new(meta: ValueTableMeta) -> Self {
        ValueFile {
            meta,
            obsolete: OnceLock::new(),
        }
    }

    /// The recorded metadata.
    pub fn meta(&self) -> &ValueTableMeta {
        &self.meta
    }

    /// Marks the table as removed by a durable manifest edit (see
    /// [`FileMetaData::mark_obsolete`](super::FileMetaData::mark_obsolete)).
    pub fn mark_obsolete(&self, sink: Arc<dyn ObsoleteFileSink>) {
        let _ = self.obsolete.set(sink);
    }
}

impl Drop for ValueFile {
    fn drop(&mut self) {
        if let Some(sink) = self.obsolete.get() {
            sink.file_unreferenced(FileKind::ValueTable, self.meta.number);
        }
    }
}

/// Where some drop keys of a value table are: a block of a drop file, as the
/// manifest records it (field 15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DropBlock {
    /// The drop file's number (`NNNNNN.vdk`).
    pub file: u64,
    /// First byte of the block in it.
    pub offset: u64,
    /// Length of the block, CRC included.
    pub len: u64,
    /// Drop keys in the block.
    pub keys: u64,
    /// The value table the block was written for (the one the dropped handles named): the
    /// table it is attached to, or one whose records a GC job copied to that table. Reading
    /// the block checks it, so a manifest pointing at another table's block is corruption.
    pub named_table: u64,
}

impl DropBlock {
    /// What a reader of the drop file expects to find.
    pub fn expected(&self) -> crate::value::WrittenBlock {
        crate::value::WrittenBlock {
            named_table: self.named_table,
            offset: self.offset,
            len: self.len,
            keys: self.keys,
        }
    }
}

/// A drop file listed by a version, shared by every version that lists it. When no live value
/// table of the current version lists a block of it any more, it is deleted once the last
/// version holding this object lets go.
pub struct DropFile {
    number: u64,
    obsolete: OnceLock<Arc<dyn ObsoleteFileSink>>,
}

impl DropFile {
    /// Drop file `number`.
    pub fn new(number: u64) -> Self {
        DropFile {
            number,
            obsolete: OnceLock::new(),
        }
    }

    /// Its number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Marks the file as removed by a durable manifest edit.
    pub fn mark_obsolete(&self, sink: Arc<dyn ObsoleteFileSink>) {
        let _ = self.obsolete.set(sink);
    }
}

impl std::fmt::Debug for DropFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DropFile")
            .field("number", &self.number)
            .finish()
    }
}

impl Drop for DropFile {
    fn drop(&mut self) {
        if let Some(sink) = self.obsolete.get() {
            sink.file_unreferenced(FileKind::DropFile, self.number);
        }
    }
}

/// A drop block in a version, holding its drop file.
#[derive(Debug, Clone)]
pub struct DropBlockRef {
    /// The block's place.
    pub block: DropBlock,
    /// Its file, kept on disk while this exists.
    pub file: Arc<DropFile>,
}

/// Garbage of one value table: records no key-table entry references any more.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Garbage {
    /// Garbage records.
    pub records: u64,
    /// Bytes of those records.
    pub bytes: u64,
}

/// One table a garbage-collected value table's records were rewritten into, with the user-key
/// range it holds. GC output is one sorted run per temperature (hot and cold with
/// hotness-aware writing), each cut between user keys, so a key falls in at most one child of
/// each run; which run holds a record is found by looking it up (see
/// [`ValueSet::candidates`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inheritor {
    /// The child table.
    pub number: u64,
    /// Smallest user key in it.
    pub smallest_key: Vec<u8>,
    /// Largest user key in it.
    pub largest_key: Vec<u8>,
}

/// How many handles, and to how many record bytes, one key table holds into one value table
/// ("dependence"). Live key tables' dependences decide which inheritance records are still
/// needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dependence {
    /// The value table the handles name.
    pub value_table: u64,
    /// Number of handles.
    pub count: u64,
    /// Sum of the handles' record lengths.
    pub bytes: u64,
}

/// Where a handle's record is now.
#[derive(Debug, Clone)]
pub enum Resolved {
    /// In this live table.
    Live(Arc<ValueFile>),
    /// Nowhere: no live table can hold it (garbage collected away, or a dangling handle).
    Gone,
}

/// A value table a GC job collected by writing the new places of its live records back into
/// the index tree (a write-back commit): no longer live (it holds no garbage account and is never a
/// victim again), but still readable by handles that older versions in the tree name, until no
/// reader can reach those versions.
#[derive(Debug, Clone)]
pub struct RetiredTable {
    /// The table, kept on disk while this entry exists.
    pub file: Arc<ValueFile>,
    /// The newest sequence number when the job finished writing back: every version naming
    /// the table is shadowed by a version at or below it, so readers at or above it never read
    /// the table.
    pub obsolete_seq: SeqNo,
}

/// The value-table part of a version.
///
/// Every edit of the tree makes a new version from a clone of the last one, a flush dozens of
/// times a second with small memtables, and a database holds thousands of value tables: each
/// map is therefore shared between versions and copied only by the first edit that changes it
/// (`Arc::make_mut`), and a table's drop-block list is shared the same way. An edit that adds a
/// table and its references copies those two maps, not the inheritance records, drop blocks or
/// garbage accounts of every table.
#[derive(Debug, Clone, Default)]
pub struct ValueSet {
    tables: Arc<BTreeMap<u64, Arc<ValueFile>>>,
    garbage: Arc<BTreeMap<u64, Garbage>>,
    inheritance: Arc<BTreeMap<u64, Vec<Inheritor>>>,
    /// Handles from live key tables, per value-table number they name.
    refs: Arc<BTreeMap<u64, u64>>,
    /// Collected by write-back, still readable (see [`RetiredTable`]).
    retired: Arc<BTreeMap<u64, RetiredTable>>,
    /// Live tables a write-back GC job installed and is still writing back into the index
    /// tree: their references are not all in place yet (see docs/gc.md, "write-back").
    awaiting_write_back: Arc<BTreeSet<u64>>,
    /// Drop blocks per live value table, in the order they were attached.
    drop_blocks: Arc<BTreeMap<u64, Arc<Vec<DropBlockRef>>>>,
    /// The drop files those blocks are in.
    drop_files: Arc<BTreeMap<u64, Arc<DropFile>>>,
}

impl ValueSet {
    /// The live table `number`.
    pub fn live(&self, number: u64) -> Option<&Arc<ValueFile>> {
        self.tables.get(&number)
    }

    /// Every live value table, by number.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<ValueFile>> {
        self.tables.values()
    }

    /// Number of live value tables.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// True when there is no live value table.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Garbage of live table `number` (zero for unknown tables).
    pub fn garbage(&self, number: u64) -> Garbage {
        self.garbage.get(&number).copied().unwrap_or_default()
    }

    /// The inheritance records: garbage-collected table → the tables its records went to.
    pub fn inheritance(&self) -> &BTreeMap<u64, Vec<Inheritor>> {
        &self.inheritance
    }

    /// Handles held by live key tables, per value-table number they name.
    pub fn refs(&self) -> &BTreeMap<u64, u64> {
        &self.refs
    }

    /// The retired tables (collected by write-back, still readable), by number.
    pub fn retired(&self) -> &BTreeMap<u64, RetiredTable> {
        &self.retired
    }

    /// The retired table `number`, if it is one.
    pub fn retired_table(&self, number: u64) -> Option<&Arc<ValueFile>> {
        self.retired.get(&number).map(|r| &r.file)
    }

    /// Table `number` when a record in it can be read where it was written: a live table, or a
    /// retired one (which stays readable for the versions that name it).
    pub fn readable(&self, number: u64) -> Option<&Arc<ValueFile>> {
        self.live(number).or_else(|| self.retired_table(number))
    }

    /// Live tables whose write-back is still in progress (or was interrupted by a crash).
    pub fn awaiting_write_back(&self) -> &BTreeSet<u64> {
        &self.awaiting_write_back
    }

    /// The drop blocks of live table `number`, in the order they were attached.
    pub fn drop_blocks(&self, number: u64) -> &[DropBlockRef] {
        self.drop_blocks.get(&number).map_or(&[], |b| b.as_slice())
    }

    /// Every live table's drop blocks, by table.
    pub fn all_drop_blocks(&self) -> impl Iterator<Item = (u64, &[DropBlockRef])> {
        self.drop_blocks.iter().map(|(n, b)| (*n, b.as_slice()))
    }

    /// The drop files some live table lists a block of, by number.
    pub fn drop_files(&self) -> &BTreeMap<u64, Arc<DropFile>> {
        &self.drop_files
    }

    /// The live table that holds the record of `user_key` that a handle naming table `number`
    /// points at, when following inheritance records by key range leads to exactly one live
    /// table; `Gone` when it leads to none or to several (a GC job that wrote hot and cold
    /// outputs: use [`ValueSet::candidates`] and look the record up). It does not check that the
    /// record is really there; readers look it up by key and sequence.
    pub fn resolve(&self, number: u64, user_key: &[u8]) -> Resolved {
        let mut found = self.candidates(number, user_key);
        if found.len() == 1 {
            Resolved::Live(found.remove(0))
        } else {
            Resolved::Gone
        }
    }

    /// Every live table that may hold the record of `user_key` that a handle naming table
    /// `number` points at: the table itself when live, else the live tables reached by
    /// following inheritance records through every child whose key range covers the key, hot
    /// run before cold run as recorded, each listed once.
    ///
    /// The records form a DAG, not a tree: every victim of a job names all of the job's
    /// outputs, so when hot and cold outputs that both cover a key are collected together, the
    /// paths to a live table double with each such generation while the live tables stay few.
    /// The walk therefore visits each table once (a visited set), which bounds it by the number
    /// of distinct tables in the records, not by the number of paths, and never gives up before
    /// it has reached every live table that covers the key.
    pub fn candidates(&self, number: u64, user_key: &[u8]) -> Vec<Arc<ValueFile>> {
        if let Some(t) = self.tables.get(&number) {
            return vec![Arc::clone(t)];
        }
        let mut out = Vec::new();
        let mut visited: BTreeSet<u64> = BTreeSet::new();
        let mut stack = vec![number];
        while let Some(n) = stack.pop() {
            if !visited.insert(n) {
                continue;
            }
            // A retired table still holds every record it held (a policy switch may have left
            // inheritance records leading to it).
            if let Some(t) = self.tables.get(&n).or_else(|| self.retired_table(n)) {
                out.push(Arc::clone(t));
                continue;
            }
            let Some(children) = self.inheritance.get(&n) else {
                continue;
            };
            // Pushed in reverse so the first recorded child is visited first.
            stack.extend(
                children
                    .iter()
                    .rev()
                    .filter(|c| {
                        !visited.contains(&c.number)
                            && c.smallest_key.as_slice() <= user_key
                            && user_key <= c.largest_key.as_slice()
                    })
                    .map(|c| c.number),
            );
        }
        // Every table is visited at most once, and only tables named by the records are.
        debug_assert!(
            visited.len() <= self.tables.len() + self.retired.len() + self.inheritance.len() + 1
        );
        out
    }

    pub(super) fn add_refs(&mut self, deps: &[Dependence]) {
        for d in deps {
            *Arc::make_mut(&mut self.refs)
                .entry(d.value_table)
                .or_insert(0) += d.count;
        }
    }

    pub(super) fn remove_refs(&mut self, deps: &[Dependence]) -> Result<(), String> {
        for d in deps {
            let refs = Arc::make_mut(&mut self.refs);
            let r = refs
                .get_mut(&d.value_table)
                .filter(|r| **r >= d.count)
                .ok_or_else(|| {
                    format!(
                        "reference count of value table {} would go negative",
                        d.value_table
                    )
                })?;
            *r -= d.count;
            if *r == 0 {
                refs.remove(&d.value_table);
            }
        }
        Ok(())
    }

    pub(super) fn add_table(&mut self, meta: ValueTableMeta) -> Result<(), String> {
        let n = meta.number;
        if self.tables.contains_key(&n)
            || self.inheritance.contains_key(&n)
            || self.retired.contains_key(&n)
        {
            return Err(format!("value table {n} added twice"));
        }
        Arc::make_mut(&mut self.tables).insert(n, Arc::new(ValueFile::new(meta)));
        Ok(())
    }

    /// Attaches a drop block to live table `number`. The same block may be attached to several
    /// tables (a GC job hands its victims' late blocks to each of its outputs), never twice to
    /// one.
    pub(super) fn add_drop_block(&mut self, number: u64, block: DropBlock) -> Result<(), String> {
        if !self.tables.contains_key(&number) {
            return Err(format!(
                "drop block attached to value table {number}, which is not live"
            ));
        }
        if self
            .drop_blocks
            .get(&number)
            .is_some_and(|list| list.iter().any(|b| b.block == block))
        {
            return Err(format!(
                "drop block at {} of drop file {} attached to value table {number} twice",
                block.offset, block.file
            ));
        }
        let file = Arc::clone(
            Arc::make_mut(&mut self.drop_files)
                .entry(block.file)
                .or_insert_with(|| Arc::new(DropFile::new(block.file))),
        );
        Arc::make_mut(
            Arc::make_mut(&mut self.drop_blocks)
                .entry(number)
                .or_default(),
        )
        .push(DropBlockRef { block, file });
        Ok(())
    }

    /// Forgets drop files no live table lists a block of any more (a file is left unlisted
    /// only when a table's blocks go with it: call this after an edit removed a table).
    pub(super) fn prune_drop_files(&mut self) {
        if self.drop_files.is_empty() {
            return;
        }
        let used: BTreeSet<u64> = self
            .drop_blocks
            .values()
            .flat_map(|b| b.iter())
            .map(|b| b.block.file)
            .collect();
        // Every listed block's file is in the map: equal sizes mean every file is used.
        if used.len() < self.drop_files.len() {
            Arc::make_mut(&mut self.drop_files).retain(|n, _| used.contains(n));
        }
    }

    pub(super) fn remove_table(&mut self, number: u64) -> Result<Arc<ValueFile>, String> {
        if self.garbage.contains_key(&number) {
            Arc::make_mut(&mut self.garbage).remove(&number);
        }
        if self.drop_blocks.contains_key(&number) {
            Arc::make_mut(&mut self.drop_blocks).remove(&number);
        }
        if self.awaiting_write_back.contains(&number) {
            Arc::make_mut(&mut self.awaiting_write_back).remove(&number);
        }
        Arc::make_mut(&mut self.tables)
            .remove(&number)
            .ok_or_else(|| format!("edit deletes value table {number}, which is not live"))
    }

    /// Moves live table `number` to the retired set, readable until `obsolete_seq` is below
    /// every reader.
    pub(super) fn retire(&mut self, number: u64, obsolete_seq: SeqNo) -> Result<(), String> {
        let file = self
            .remove_table(number)
            .map_err(|_| format!("edit retires value table {number}, which is not live"))?;
        Arc::make_mut(&mut self.retired).insert(number, RetiredTable { file, obsolete_seq });
        Ok(())
    }

    /// Forgets retired table `number` (its file is deleted once no reader holds it).
    pub(super) fn release(&mut self, number: u64) -> Result<Arc<ValueFile>, String> {
        Arc::make_mut(&mut self.retired)
            .remove(&number)
            .map(|r| r.file)
            .ok_or_else(|| format!("edit releases value table {number}, which is not retired"))
    }

    /// Marks live table `number` as awaiting its write-back, or clears the mark.
    pub(super) fn set_awaiting_write_back(
        &mut self,
        number: u64,
        awaiting: bool,
    ) -> Result<(), String> {
        if !self.tables.contains_key(&number) {
            return Err(format!(
                "edit marks value table {number} for write-back, but it is not live"
            ));
        }
        let set = Arc::make_mut(&mut self.awaiting_write_back);
        if awaiting {
            set.insert(number);
        } else {
            set.remove(&number);
        }
        Ok(())
    }

    pub(super) fn add_garbage(&mut self, number: u64, delta: Garbage) -> Result<(), String> {
        let t = self.tables.get(&number).ok_or_else(|| {
            format!("garbage recorded for value table {number}, which is not live")
        })?;
        let g = Arc::make_mut(&mut self.garbage).entry(number).or_default();
        g.records += delta.records;
        g.bytes += delta.bytes;
        if g.records > t.records || g.bytes > t.record_bytes {
            return Err(format!(
                "value table {number} would hold more garbage ({} records, {} bytes) than data ({} records, {} bytes)",
                g.records, g.bytes, t.records, t.record_bytes
            ));
        }
        Ok(())
    }

    pub(super) fn add_inheritance(
        &mut self,
        victim: u64,
        children: Vec<Inheritor>,
    ) -> Result<(), String> {
        if self.tables.contains_key(&victim) {
            return Err(format!(
                "inheritance recorded for value table {victim}, which is still live"
            ));
        }
        if Arc::make_mut(&mut self.inheritance)
            .insert(victim, children)
            .is_some()
        {
            return Err(format!(
                "inheritance of value table {victim} recorded twice"
            ));
        }
        Ok(())
    }

    /// Drops inheritance records no live key table can reach any more: a record is kept while
    /// some key table holds a handle naming its table or one of that table's ancestors. Only an
    /// edit that takes something away (a key table's references, a value table) or records
    /// inheritance can leave a record to drop (`VersionEdit::may_need_pruning`).
    pub(super) fn prune_inheritance(&mut self) {
        if self.inheritance.is_empty() {
            return;
        }
        // Children that are gone (freed because every record became garbage, with nothing
        // inherited) can hold no record a handle needs; forget them, and records left with no
        // child. The map is copied only when something goes.
        loop {
            let known: BTreeSet<u64> = self
                .tables
                .keys()
                .chain(self.retired.keys())
                .chain(self.inheritance.keys())
                .copied()
                .collect();
            let stale = self.inheritance.values().any(|children| {
                children.is_empty() || children.iter().any(|c| !known.contains(&c.number))
            });
            if !stale {
                break;
            }
            let inheritance = Arc::make_mut(&mut self.inheritance);
            for children in inheritance.values_mut() {
                children.retain(|c| known.contains(&c.number));
            }
            inheritance.retain(|_, children| !children.is_empty());
        }
        let mut needed: BTreeSet<u64> = BTreeSet::new();
        let mut stack: Vec<u64> = self
            .refs
            .keys()
            .copied()
            .filter(|n| self.inheritance.contains_key(n))
            .collect();
        while let Some(n) = stack.pop() {
            if !needed.insert(n) {
                continue;
            }
            if let Some(children) = self.inheritance.get(&n) {
                stack.extend(
                    children
                        .iter()
                        .map(|c| c.number)
                        .filter(|c| self.inheritance.contains_key(c)),
                );
            }
        }
        // `needed` holds keys of the map only: equal sizes mean every record is needed.
        if needed.len() < self.inheritance.len() {
            Arc::make_mut(&mut self.inheritance).retain(|n, _| needed.contains(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(number: u64, lo: &str, hi: &str) -> ValueTableMeta {
        ValueTableMeta {
            number,
            file_size: 100,
            records: 10,
            record_bytes: 1000,
            smallest_key: lo.as_bytes().to_vec(),
            largest_key: hi.as_bytes().to_vec(),
            smallest_seq: 1,
            largest_seq: 10,
            class: 0,
            policy_meta: None,
            max_expiry: None,
        }
    }

    fn child(number: u64, lo: &str, hi: &str) -> Inheritor {
        Inheritor {
            number,
            smallest_key: lo.as_bytes().to_vec(),
            largest_key: hi.as_bytes().to_vec(),
        }
    }

    #[test]
    fn resolution_follows_inheritance_by_key_range() {
        let mut s = ValueSet::default();
        s.add_table(meta(1, "a", "z")).expect("add");
        s.add_table(meta(4, "a", "f")).expect("add");
        s.add_table(meta(5, "m", "z")).expect("add");
        // 1 was collected into 2 (a..k) and 3 (m..z); 2 was later collected into 4.
        s.remove_table(1).expect("remove");
        s.add_inheritance(1, vec![child(2, "a", "k"), child(3, "m", "z")])
            .expect("inherit");
        s.add_inheritance(2, vec![child(4, "a", "f")])
            .expect("inherit");
        assert!(matches!(s.resolve(1, b"c"), Resolved::Live(t) if t.number == 4));
        assert!(
            matches!(s.resolve(1, b"h"), Resolved::Gone),
            "2 kept nothing beyond f"
        );
        assert!(
            matches!(s.resolve(1, b"l"), Resolved::Gone),
            "between the children"
        );
        assert!(
            matches!(s.resolve(3, b"x"), Resolved::Gone),
            "3 is neither live nor inherited"
        );
        assert!(matches!(s.resolve(5, b"x"), Resolved::Live(t) if t.number == 5));
    }

    /// Hot and cold outputs that both cover a key, collected together generation after
    /// generation, double the paths through the records while the live tables stay few. The
    /// record of the key sits in the cold child of the first generation, which the walk reaches
    /// last; a walk bounded by visits instead of distinct tables gave up inside the hot subtree
    /// after about ten generations and never reached it.
    #[test]
    fn a_walk_through_many_overlapping_generations_reaches_every_live_table_once() {
        const GENERATIONS: u64 = 24;
        let mut s = ValueSet::default();
        // Generation 1: victim 1 into hot 10 and cold 11; 11 stays live (it holds the record).
        s.add_inheritance(1, vec![child(10, "a", "z"), child(11, "a", "z")])
            .expect("inherit");
        s.add_table(meta(11, "a", "z")).expect("add");
        // Generation g ≥ 2: the hot and cold outputs of g - 1 are collected together into a
        // new hot (even numbers) and cold (odd) table; in generation 2, 10 goes with a cold
        // table 13 of other records.
        let (mut hot, mut cold) = (10, 13);
        for _ in 2..=GENERATIONS {
            let children = vec![child(hot + 2, "a", "z"), child(cold + 2, "a", "z")];
            s.add_inheritance(hot, children.clone()).expect("inherit");
            s.add_inheritance(cold, children).expect("inherit");
            hot += 2;
            cold += 2;
        }
        s.add_table(meta(hot, "a", "z")).expect("add");
        s.add_table(meta(cold, "a", "z")).expect("add");
        let found: Vec<u64> = s.candidates(1, b"m").iter().map(|t| t.number).collect();
        assert_eq!(
            found,
            vec![hot, cold, 11],
            "every live table once, hot run first"
        );
        assert!(
            matches!(s.resolve(1, b"m"), Resolved::Gone),
            "three candidates"
        );
        // Outside every child's range nothing is a candidate.
        assert!(s.candidates(1, b"~").is_empty());
    }

    #[test]
    fn inheritance_is_pruned_when_no_key_table_reaches_it() {
        let mut s = ValueSet::default();
        s.add_table(meta(4, "a", "z")).expect("add");
        s.add_inheritance(1, vec![child(2, "a", "z")])
            .expect("inherit");
        s.add_inheritance(2, vec![child(4, "a", "z")])
            .expect("inherit");
        s.add_inheritance(9, vec![child(4, "a", "z")])
            .expect("inherit");
        let dep = |n| Dependence {
            value_table: n,
            count: 3,
            bytes: 30,
        };
        s.add_refs(&[dep(1)]);
        s.prune_inheritance();
        assert_eq!(
            s.inheritance().keys().copied().collect::<Vec<_>>(),
            vec![1, 2],
            "9 is unreferenced"
        );
        s.remove_refs(&[dep(1)]).expect("remove");
        s.prune_inheritance();
        assert!(s.inheritance().is_empty());
        assert!(
            s.remove_refs(&[dep(1)]).is_err(),
            "references never go negative"
        );
    }

    #[test]
    fn children_that_are_gone_are_forgotten() {
        let mut s = ValueSet::default();
        s.add_table(meta(4, "a", "f")).expect("add");
        s.add_inheritance(1, vec![child(2, "a", "c"), child(4, "d", "f")])
            .expect("inherit");
        s.add_inheritance(3, vec![child(5, "a", "z")])
            .expect("inherit");
        s.add_refs(&[
            Dependence {
                value_table: 1,
                count: 1,
                bytes: 1,
            },
            Dependence {
                value_table: 3,
                count: 1,
                bytes: 1,
            },
        ]);
        s.prune_inheritance();
        assert_eq!(
            s.inheritance().get(&1).map(|c| c.len()),
            Some(1),
            "2 is gone, 4 stays"
        );
        assert!(
            !s.inheritance().contains_key(&3),
            "every child of 3 is gone"
        );
        assert!(matches!(s.resolve(1, b"e"), Resolved::Live(t) if t.number == 4));
    }

    /// An edit copies only the maps it changes: a flush's new table and references leave the
    /// inheritance records, drop blocks and garbage accounts shared with the version before,
    /// and a drop block attached to one table leaves the other tables' lists shared.
    #[test]
    fn an_edit_copies_only_the_maps_it_changes() {
        let block = |file, named_table| DropBlock {
            file,
            offset: 0,
            len: 30,
            keys: 1,
            named_table,
        };
        let mut s = ValueSet::default();
        for n in [4, 5] {
            s.add_table(meta(n, "a", "z")).expect("add");
        }
        s.add_inheritance(1, vec![child(4, "a", "z")])
            .expect("inherit");
        s.add_refs(&[Dependence {
            value_table: 1,
            count: 1,
            bytes: 1,
        }]);
        s.add_garbage(4, Garbage { records: 1, bytes: 1 })
            .expect("garbage");
        s.add_drop_block(4, block(50, 4)).expect("block");
        s.add_drop_block(5, block(50, 5)).expect("block");

        let mut flushed = s.clone();
        flushed.add_table(meta(6, "a", "z")).expect("add");
        flushed.add_refs(&[Dependence {
            value_table: 6,
            count: 1,
            bytes: 1,
        }]);
        flushed.prune_inheritance();
        assert!(!Arc::ptr_eq(&s.tables, &flushed.tables));
        assert!(!Arc::ptr_eq(&s.refs, &flushed.refs));
        for (shared, what) in [
            (Arc::ptr_eq(&s.inheritance, &flushed.inheritance), "inheritance"),
            (Arc::ptr_eq(&s.garbage, &flushed.garbage), "garbage"),
            (Arc::ptr_eq(&s.drop_blocks, &flushed.drop_blocks), "drop blocks"),
            (Arc::ptr_eq(&s.drop_files, &flushed.drop_files), "drop files"),
            (Arc::ptr_eq(&s.retired, &flushed.retired), "retired"),
        ] {
            assert!(shared, "{what} copied by an edit that does not change it");
        }
        assert_eq!(flushed.inheritance().len(), 1, "still reachable");

        let mut compacted = flushed.clone();
        compacted.add_drop_block(4, block(51, 4)).expect("block");
        assert_eq!(compacted.drop_blocks(4).len(), 2);
        assert_eq!(flushed.drop_blocks(4).len(), 1, "the version before is unchanged");
        assert!(Arc::ptr_eq(
            &flushed.drop_blocks[&5],
            &compacted.drop_blocks[&5]
        ));
        // Removing a table copies what held it, and the pruning forgets its drop file only.
        compacted.remove_table(4).expect("remove");
        compacted.prune_drop_files();
        assert_eq!(
            compacted.drop_files().keys().copied().collect::<Vec<_>>(),
            vec![50],
            "51 was listed by table 4 alone"
        );
        assert_eq!(flushed.drop_files().len(), 1, "51 was never in the version before");
        assert_eq!(flushed.garbage(4).records, 1, "the version before keeps its account");
    }

    #[test]
    fn garbage_is_bounded_by_the_table() {
        let mut s = ValueSet::default();
        s.add_table(meta(1, "a", "b")).expect("add");
        s.add_garbage(
            1,
            Garbage {
                records: 4,
                bytes: 400,
            },
        )
        .expect("garbage");
        s.add_garbage(
            1,
            Garbage {
                records: 6,
                bytes: 600,
            },
        )
        .expect("garbage");
        assert_eq!(
            s.garbage(1),
            Garbage {
                records: 10,
                bytes: 1000
            }
        );
        assert!(
            s.add_garbage(
                1,
                Garbage {
                    records: 1,
                    bytes: 1
                }
            )
            .is_err()
        );
        assert!(
            s.add_garbage(2, Garbage::default()).is_err(),
            "unknown table"
        );
        assert!(s.add_table(meta(1, "a", "b")).is_err(), "twice");
        s.remove_table(1).expect("remove");
        assert_eq!(s.garbage(1), Garbage::default());
    }
}
