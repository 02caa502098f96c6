"""One `Db` shared by Python threads: the GIL is released around engine calls, so writers,
readers, iterators and GC make progress together, and every thread sees exactly its own
writes; snapshots and iterators made before GC read their view after it."""

import os
import threading

import gleaner
from conftest import SMALL


def test_threads_write_read_and_iterate_one_db(path):
    with gleaner.Db(path, gc_policy="scavenger", **SMALL) as db:
        errors = []
        barrier = threading.Barrier(5)

        def writer(t):
            try:
                barrier.wait()
                mine = {}
                for i in range(600):
                    k = b"t%d-%04d" % (t, i % 200)
                    v = os.urandom(50 + (i * 37) % 3000)
                    db[k] = v
                    mine[k] = v
                    assert db[k] == v
                assert dict(db.items(b"t%d-" % t, b"t%d." % t)) == mine
            except Exception as e:  # reported by the main thread
                errors.append(e)

        def maintainer():
            try:
                barrier.wait()
                for _ in range(3):
                    db.flush()
                    db.run_gc()
                    for _ in db.keys():
                        pass
            except Exception as e:
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        threads.append(threading.Thread(target=maintainer))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(list(db.keys())) == 800
        assert db.recount_garbage()["mismatches"] == []


def test_snapshots_and_iterators_outlive_gc_of_what_they_read(path):
    # GC only when asked (no background job races the test's run_gc).
    with gleaner.Db(path, gc_policy="titan", titan_discardable_ratio=0.05, gc_threads=0,
                    **SMALL) as db:
        keys = [b"k%04d" % i for i in range(300)]
        first = {k: os.urandom(1000) for k in keys}
        for k, v in first.items():
            db[k] = v
        db.flush()
        # Every other key again: half of the first tables' records become garbage.
        view = dict(first)
        for k in keys[::2]:
            view[k] = os.urandom(1000)
            db[k] = view[k]
        db.flush()
        db.compact_range()
        snap = db.snapshot()
        it = db.items()
        head = next(it)
        # Two thirds of the keys overwritten (inline): their records are dead for current
        # readers, and GC drops them (the tables stay readable for the snapshot and the
        # iterator, retired); the last third's records are live, and GC moves them.
        now = dict(view)
        for k in keys[0::3] + keys[2::3]:
            now[k] = b"now"
            db[k] = b"now"
        db.flush()
        db.compact_range()
        gc = db.run_gc()
        totals = gc["totals"]
        assert gc["jobs"] >= 1, gc
        assert totals["records_dropped"] > 0 and totals["records_written"] > 0, gc
        assert [head] + list(it) == sorted(view.items())
        assert dict(db.items(snapshot=snap)) == view
        assert all(snap.get(k) == v for k, v in view.items())
        assert dict(db.items()) == now
        snap.release()
        assert db.recount_garbage()["mismatches"] == []


def test_an_iterator_shared_by_threads_yields_each_entry_once(path):
    with gleaner.Db(path, **SMALL) as db:
        for i in range(3000):
            db[b"k%05d" % i] = b"v"
        it = db.keys()
        seen = []
        lock = threading.Lock()

        def drain():
            for k in it:
                with lock:
                    seen.append(k)

        threads = [threading.Thread(target=drain) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(seen) == [b"k%05d" % i for i in range(3000)]
