"""The API surface: reads and writes, the dict protocol, batches, iterators, snapshots,
maintenance calls, options, read-only opens and the lock."""

import os

import pytest

import gleaner
from conftest import SMALL


def test_put_get_delete_and_the_dict_protocol(path):
    with gleaner.Db(path) as db:
        db.put(b"a", b"1")
        db[b"b"] = b"2"
        db["c"] = "3"  # str is encoded UTF-8
        db.put(bytearray(b"d"), memoryview(b"4"), sync=True)
        assert db.get(b"a") == b"1"
        assert db[b"b"] == b"2"
        assert db[b"c"] == b"3" and db.get("c") == b"3"
        assert db.get(b"d") == b"4"
        assert b"a" in db and b"zz" not in db
        assert db.get(b"zz") is None
        with pytest.raises(KeyError):
            db[b"zz"]
        db.delete(b"a")
        del db[b"b"]
        del db[b"never"]  # no KeyError: a delete of an absent key is a write
        assert db.get(b"a") is None and b"b" not in db
        assert list(db) == [b"c", b"d"]
        assert isinstance(db.get(b"c"), bytes)


def test_keys_and_values_must_be_bytes_or_str(path):
    with gleaner.Db(path) as db:
        with pytest.raises(TypeError, match="key must be bytes or str, not int"):
            db.put(1, b"x")
        with pytest.raises(TypeError, match="value must be bytes or str"):
            db.put(b"k", 2.5)
        assert b"k" not in db


def test_large_values_are_separated_and_read_back(path):
    big = os.urandom(1 << 20)
    with gleaner.Db(path, **SMALL) as db:
        db[b"big"] = big
        db.flush()
        assert db[b"big"] == big
        assert db.stats()["values"]["records"] >= 1


def test_write_batches_apply_atomically_and_stay_reusable(path):
    with gleaner.Db(path) as db:
        db[b"gone"] = b"x"
        for i in range(5):
            db[f"r{i}".encode()] = b"x"
        batch = gleaner.WriteBatch()
        batch.put(b"k1", b"v1")
        batch.put("k2", "v2")
        batch.delete(b"gone")
        batch.delete_range(b"r1", b"r3")
        assert len(batch) == 4
        db.write(batch, sync=True)
        assert db[b"k1"] == b"v1" and db[b"k2"] == b"v2"
        assert b"gone" not in db
        assert list(db.keys(b"r", b"s")) == [b"r0", b"r3", b"r4"]
        assert len(batch) == 4, "write leaves the batch as it was"
        batch.clear()
        assert len(batch) == 0


def test_delete_range_removes_the_half_open_range(path):
    with gleaner.Db(path, **SMALL) as db:
        for i in range(100):
            db[b"k%03d" % i] = b"v%d" % i
        db.flush()
        db.delete_range(b"k010", b"k020", sync=True)
        keys = list(db.keys())
        assert b"k009" in keys and b"k020" in keys
        assert not any(b"k010" <= k < b"k020" for k in keys)
        assert len(keys) == 90


def test_iterators_are_lazy_bounded_and_run_both_ways(path):
    with gleaner.Db(path, **SMALL) as db:
        expect = {b"k%04d" % i: os.urandom(100 + i) for i in range(500)}
        for k, v in expect.items():
            db[k] = v
        db.flush()
        ordered = sorted(expect.items())
        assert list(db.items()) == ordered
        assert list(db.iter()) == ordered
        assert list(db.keys()) == [k for k, _ in ordered]
        assert list(db.values()) == [v for _, v in ordered]
        assert list(db.items(reverse=True)) == ordered[::-1]
        window = [(k, v) for k, v in ordered if b"k0100" <= k < b"k0200"]
        assert list(db.items(b"k0100", b"k0200")) == window
        assert list(db.items(b"k0100", b"k0200", reverse=True)) == window[::-1]
        assert list(db.keys(start="k0490")) == [b"k%04d" % i for i in range(490, 500)]
        # Lazy: a generator's worth of work per step, and seek repositions.
        it = db.items()
        assert next(it) == ordered[0]
        it.seek(b"k0250")
        assert next(it) == ordered[250]
        assert next(it) == ordered[251]
        back = db.keys(reverse=True)
        back.seek(b"k0250x")
        assert next(back) == b"k0250"
        assert list(db.items(b"x", b"y")) == []


def test_snapshots_read_the_past_and_release(path):
    with gleaner.Db(path) as db:
        db[b"k"] = b"old"
        with db.snapshot() as snap:
            db[b"k"] = b"new"
            db[b"added"] = b"x"
            assert snap.get(b"k") == b"old"
            assert db.get(b"k", snapshot=snap) == b"old"
            assert db.get(b"added", snapshot=snap) is None
            assert list(db.items(snapshot=snap)) == [(b"k", b"old")]
            assert snap.sequence > 0 and not snap.released
        assert snap.released
        with pytest.raises(gleaner.InvalidArgumentError, match="released"):
            snap.get(b"k")
        with pytest.raises(ValueError):
            db.get(b"k", snapshot=snap)
        snap.release()  # twice is harmless
        assert db[b"k"] == b"new"


def test_maintenance_calls_return_dicts(path):
    # GC only when asked: no background job races run_gc to the victims.
    with gleaner.Db(path, gc_policy="titan", titan_discardable_ratio=0.1, gc_threads=0,
                    **SMALL) as db:
        for rnd in range(4):
            # Every key, then every third: tables left partly garbage, for GC to collect.
            for i in range(0, 300, 1 if rnd == 0 else 3):
                db[b"k%04d" % i] = os.urandom(500)
        db.flush()
        db.compact_range()
        db.compact_range(b"k0000", b"k0100")
        gc = db.run_gc()
        assert gc["jobs"] >= 1, gc
        recount = db.recount_garbage()
        assert recount["mismatches"] == [] and recount["tables"] >= 1, recount
        stats = db.stats()
        assert stats["gc"]["policy"] == "titan"
        assert stats["gc"]["jobs"] >= 1
        assert isinstance(stats["levels"], list)
        db.sync_wal()


def test_options_are_validated_by_the_engine_naming_them(path):
    with pytest.raises(gleaner.InvalidArgumentError, match="unknown option `no_such_option`"):
        gleaner.Db(path, no_such_option=1)
    with pytest.raises(gleaner.InvalidArgumentError, match="option `memtable_size`"):
        gleaner.Db(path, memtable_size="lots")
    with pytest.raises(gleaner.InvalidArgumentError, match="unknown GC policy"):
        gleaner.Db(path, gc_policy="nope")
    with pytest.raises(TypeError, match="option `memtable_size` must be"):
        gleaner.Db(path, memtable_size=[1])
    # Range checks at open, named too; nothing was created.
    with pytest.raises(gleaner.InvalidArgumentError, match="num_levels"):
        gleaner.Db(path, num_levels=99)
    assert "gc_policy" in gleaner.option_names()
    # Every kind of value: bool, int, float, size string.
    with gleaner.Db(path, use_direct_io_for_reads=False, num_levels=5, gc_garbage_ratio=0.25,
                    memtable_size="1MiB", gc_policy="titan") as db:
        db[b"k"] = b"v"
    # Persisted options come back at the next open without being given.
    with gleaner.Db(path) as db:
        assert db.stats()["gc"]["policy"] == "titan"


def test_read_only_opens_refuse_writes_and_the_lock_refuses_a_second_writer(path):
    with gleaner.Db(path) as db:
        db[b"k"] = b"v"
        with pytest.raises(gleaner.LockedError):
            gleaner.Db(path)
    with gleaner.Db(path, read_only=True) as ro:
        assert ro[b"k"] == b"v"
        with gleaner.Db(path, read_only=True) as ro2:
            assert ro2[b"k"] == b"v"
        with pytest.raises(gleaner.OpenedReadOnlyError, match="read-only"):
            ro[b"x"] = b"y"
        with pytest.raises(gleaner.OpenedReadOnlyError):
            ro.flush()


def test_close_makes_every_handle_refuse_with_closed_error(path):
    db = gleaner.Db(path, **SMALL)
    for i in range(2000):
        db[b"k%05d" % i] = b"v" * 200
    it = db.items()
    keys = db.keys()
    assert next(it)[0] == b"k00000"
    snap = db.snapshot()
    db.close()
    assert db.closed
    db.close()  # twice is harmless
    with pytest.raises(gleaner.ClosedError, match="closed"):
        next(it)
    with pytest.raises(gleaner.ClosedError):
        list(keys)
    with pytest.raises(gleaner.ClosedError):
        snap.get(b"k00000")
    with pytest.raises(gleaner.ClosedError):
        db[b"k00000"]
    with pytest.raises(gleaner.ClosedError):
        db[b"x"] = b"y"
    with pytest.raises(gleaner.ClosedError):
        db.items()
    with pytest.raises(gleaner.ClosedError):
        db.stats()
    assert "closed" in repr(db)
    # Reopened, everything is there.
    with gleaner.Db(path) as db:
        assert len(list(db.keys())) == 2000


def test_check_verifies_a_closed_database_and_finds_damage(path):
    with gleaner.Db(path, compression="none", **SMALL) as db:
        for i in range(2000):
            db[b"k%05d" % i] = os.urandom(300)
        db.flush()
    report = gleaner.check(path)
    assert report["problems"] == [], report
    assert report["tables_checked"] >= 1
    tables = sorted(f for f in os.listdir(path) if f.endswith(".sst"))
    victim = os.path.join(path, tables[0])
    with open(victim, "r+b") as f:
        f.seek(10)
        b = f.read(1)
        f.seek(10)
        f.write(bytes([b[0] ^ 0x40]))
    report = gleaner.check(path)
    assert any(p["file"] == tables[0] for p in report["problems"]), report
    with pytest.raises(gleaner.InvalidArgumentError):
        gleaner.check(os.path.join(path, "nothing-here"))


def test_errors_form_one_hierarchy():
    assert issubclass(gleaner.IoError, gleaner.Error) and issubclass(gleaner.IoError, OSError)
    assert issubclass(gleaner.InvalidArgumentError, ValueError)
    for cls in (gleaner.CorruptionError, gleaner.LockedError, gleaner.SpaceBudgetExceededError,
                gleaner.OpenedReadOnlyError, gleaner.ReadOnlyError, gleaner.ClosedError):
        assert issubclass(cls, gleaner.Error)
    e = gleaner.IoError(5, "disk on fire")
    assert e.errno == 5 and isinstance(e, OSError)


def test_a_damaged_table_raises_corruption_error_naming_it(path):
    with gleaner.Db(path, compression="none", block_cache_size=0, **SMALL) as db:
        for i in range(2000):
            db[b"k%05d" % i] = b"v%05d" % i
        db.flush()
        db.compact_range()
    tables = sorted(f for f in os.listdir(path) if f.endswith(".sst"))
    for t in tables:
        victim = os.path.join(path, t)
        with open(victim, "r+b") as f:
            f.seek(10)
            b = f.read(1)
            f.seek(10)
            f.write(bytes([b[0] ^ 0x40]))
    with gleaner.Db(path) as db:
        it = db.items()
        with pytest.raises(gleaner.CorruptionError, match=r"\.sst"):
            list(it)
        # A failed iterator stays failed: the next step is an error, not a clean end.
        with pytest.raises(gleaner.InvalidArgumentError, match="failed at an earlier step"):
            next(it)


def test_paths_and_repr(path, tmp_path):
    with gleaner.Db(tmp_path / "p") as db:
        assert db.path.endswith("p")
        assert repr(db).startswith("<gleaner.Db")
        assert gleaner.__version__


def test_expiring_keys(path):
    with gleaner.Db(path) as db:
        now = db.time_ms
        assert now > 1_600_000_000_000
        db.put(b"later", b"v", ttl_ms=3_600_000)
        db.put(b"at", b"v", expiry_ms=now + 3_600_000, sync=True)
        with db.snapshot() as snap:
            # An expiry already past reads as a deletion, except at snapshots taken before.
            db.put(b"later", b"gone", expiry_ms=now - 1)
            assert b"later" not in db and db.get(b"later") is None
            assert snap.get(b"later") == b"v"
        assert db[b"at"] == b"v"
        batch = gleaner.WriteBatch()
        batch.put(b"b1", b"x", expiry_ms=now - 1)
        batch.put(b"b2", b"y", expiry_ms=now + 3_600_000)
        db.write(batch)
        assert list(db.keys()) == [b"at", b"b2"]
        with pytest.raises(gleaner.InvalidArgumentError, match="not both"):
            db.put(b"k", b"v", ttl_ms=1, expiry_ms=1)
        with pytest.raises(gleaner.InvalidArgumentError):
            db.put(b"k", b"v", ttl_ms=2**63)
        assert b"k" not in db


def test_a_snapshot_of_another_database_is_refused(tmp_path):
    with gleaner.Db(tmp_path / "a") as a, gleaner.Db(tmp_path / "b") as b:
        a[b"k"] = b"a"
        b[b"k"] = b"b"
        with a.snapshot() as snap:
            with pytest.raises(gleaner.InvalidArgumentError, match="not of this one"):
                b.get(b"k", snapshot=snap)
            with pytest.raises(gleaner.InvalidArgumentError, match="not of this one"):
                b.items(snapshot=snap)
            assert a.get(b"k", snapshot=snap) == b"a"


def test_a_handle_dropped_without_close_closes_the_database(path):
    db = gleaner.Db(path)
    db[b"k"] = b"v"
    it = db.keys()
    del db  # the iterator still holds the database open
    assert list(it) == [b"k"]
    del it  # the last handle: the database closes and unlocks
    with gleaner.Db(path) as db:
        assert db[b"k"] == b"v"
