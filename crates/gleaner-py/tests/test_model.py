"""Every GC policy against a Python dict: random puts (small and separated values), deletes,
range deletes and batches, with flushes, compactions, GC runs and reopens between rounds; the
database must equal the dict after every round and every reopen, and its garbage accounting
must recount exactly."""

import os
import random

import pytest

import gleaner
from conftest import POLICIES, SMALL


def check(db, model, ctx):
    assert dict(db.items()) == model, ctx
    for k in random.Random(len(model)).sample(sorted(model), min(50, len(model))):
        assert db[k] == model[k], (ctx, k)
    assert list(db.keys(reverse=True)) == sorted(model, reverse=True), ctx


@pytest.mark.parametrize("policy", POLICIES)
def test_a_policy_matches_a_dict_across_gc_and_reopens(path, policy):
    rng = random.Random(f"model-{policy}")
    model = {}
    opts = dict(SMALL, gc_policy=policy, gc_garbage_ratio=0.2)
    if policy == "diffkv":
        # DiffKV separates by its own size classes, not by min_separated_value_size.
        del opts["min_separated_value_size"]
        opts.update(diffkv_small_max=64, diffkv_large_min=4096)
    keys = [b"key%04d" % i for i in range(400)]
    for round_ in range(4):
        with gleaner.Db(path, **opts) as db:
            check(db, model, f"{policy}: reopened before round {round_}")
            for _ in range(1500):
                k = rng.choice(keys)
                r = rng.random()
                if r < 0.70:
                    v = os.urandom(rng.choice([8, 40, 300, 2000, 9000]))
                    db[k] = v
                    model[k] = v
                elif r < 0.85:
                    del db[k]
                    model.pop(k, None)
                elif r < 0.90:
                    lo = rng.choice(keys)[:-1]  # b"key012": ten keys, key0120 to key0129
                    hi = lo[:-1] + bytes([lo[-1] + 1])
                    db.delete_range(lo, hi)
                    for key in [key for key in model if lo <= key < hi]:
                        del model[key]
                else:
                    batch = gleaner.WriteBatch()
                    for _ in range(5):
                        bk, bv = rng.choice(keys), os.urandom(rng.choice([20, 500]))
                        batch.put(bk, bv)
                        model[bk] = bv
                    db.write(batch)
            check(db, model, f"{policy}: round {round_}")
            db.flush()
            db.compact_range()
            db.run_gc()
            check(db, model, f"{policy}: after GC in round {round_}")
            assert db.recount_garbage()["mismatches"] == [], policy
    report = gleaner.check(path)
    assert report["problems"] == [], report
