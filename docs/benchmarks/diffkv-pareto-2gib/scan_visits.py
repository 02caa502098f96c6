#!/usr/bin/env python3
"""What forward scans visit in a Gleaner database, counted offline.

Usage: scan_visits.py DB_DIR [GLEANER_BINARY]   (default binary: target/release/gleaner)

Reads the newest entry of every key from all key tables (`gleaner dump`), then samples 2,000
scans the way the benchmark's scan phase does (a start key, a length uniform in 1..=1000) and
prints, per scan on average: entries, separated records and their bytes; the reads a reader
makes that joins records of one value table only when adjacent to the previous one in key
order; the reads when the records of a whole scan that lie in one table within GAP bytes of
each other share a read, for several GAPs, with the bytes those reads cover; the distinct
value tables a scan meets (median, 90th percentile, maximum); and, from the manifest, those
tables and records by value class and (for the vTree class 0 of `diffkv`) vTree level, "/gc"
for tables a GC job wrote.

Scan starts are uniform over the keys here (the benchmark draws them from its key
distribution), so the figures describe the layout, not a particular run's scans.
"""
import collections
import os
import random
import subprocess
import sys

DB = sys.argv[1]
GLEANER = sys.argv[2] if len(sys.argv) > 2 else "target/release/gleaner"
SCANS = 2000
GAPS = [0, 4096, 16384, 65536, 262144]


def dump(name, hex_keys=False):
    args = [GLEANER] + (["--hex"] if hex_keys else []) + ["dump", DB, name]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def newest_entries():
    """Key -> (seq, (table, offset, len) | None for inline | 'del')."""
    newest = {}
    for name in sorted(os.listdir(DB)):
        if not name.endswith(".sst"):
            continue
        for line in dump(name, hex_keys=True).splitlines():
            cols = line.split("\t")
            if len(cols) < 3 or not cols[1].startswith("seq="):
                continue
            seq = int(cols[1][4:])
            key = cols[0]
            if key in newest and newest[key][0] >= seq:
                continue
            if cols[2] == "kind=handle":
                f = dict(x.split("=", 1) for x in cols[3].split(" ") if "=" in x)
                newest[key] = (seq, (int(f["file"]), int(f["offset"]), int(f["len"])))
            elif cols[2].startswith("kind=del") or cols[2].startswith("kind=tomb"):
                newest[key] = (seq, "del")
            else:
                newest[key] = (seq, None)
    return newest


def table_kinds():
    """Value table -> 'classC[/Llevel][/gc]' from the manifest's policy metadata."""
    current = open(os.path.join(DB, "CURRENT")).read().split()[0]
    kinds, cur = {}, None
    for line in dump(current).splitlines():
        if line.startswith("new_value_table:"):
            f = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
            cur = int(f["number"])
            kinds[cur] = f"class{f['class']}"
        elif line.startswith("  policy_meta:") and cur is not None:
            meta = bytes.fromhex(line.split("data=")[1].strip())
            # diffkv metadata: format byte, flags (bit 0: written by GC), level (varint < 128).
            if kinds[cur] == "class0" and len(meta) > 2:
                kinds[cur] += f"/L{meta[2]}"
            if len(meta) > 1 and meta[1] & 1:
                kinds[cur] += "/gc"
        elif not line.startswith("  "):
            cur = None
    return kinds


def main():
    newest = newest_entries()
    keys = sorted(k for k, v in newest.items() if v[1] != "del")
    kinds = table_kinds()
    print("keys", len(keys), "separated", sum(1 for k in keys if newest[k][1]))
    rng = random.Random(1)
    tot = collections.Counter()
    tables_per_scan = []
    kind_tables, kind_records = collections.Counter(), collections.Counter()
    for _ in range(SCANS):
        i = rng.randrange(len(keys))
        n = rng.randint(1, 1000)
        recs = [newest[k][1] for k in keys[i:i + n] if newest[k][1]]
        tot["entries"] += len(keys[i:i + n])
        tot["separated"] += len(recs)
        tot["record_bytes"] += sum(r[2] for r in recs)
        by_table = collections.defaultdict(list)
        for r in recs:
            by_table[r[0]].append(r)
        tables_per_scan.append(len(by_table))
        prev, reads = None, 0
        for r in recs:
            if not (prev and prev[0] == r[0] and prev[1] + prev[2] == r[1]):
                reads += 1
            prev = r
        tot["reads_adjacent_in_key_order"] += reads
        for gap in GAPS:
            reads = covered = 0
            for rs in by_table.values():
                rs.sort(key=lambda r: r[1])
                start, end = rs[0][1], rs[0][1] + rs[0][2]
                for r in rs[1:]:
                    if r[1] - end <= gap:
                        end = max(end, r[1] + r[2])
                    else:
                        reads += 1
                        covered += end - start
                        start, end = r[1], r[1] + r[2]
                reads += 1
                covered += end - start
            tot[f"reads_gap_{gap}"] += reads
            tot[f"bytes_gap_{gap}"] += covered
        for table, rs in by_table.items():
            kind = kinds.get(table, "?")
            kind_tables[kind] += 1
            kind_records[kind] += len(rs)
    for name, value in tot.items():
        print(name, round(value / SCANS, 1))
    tables_per_scan.sort()
    print("tables per scan p50/p90/max", tables_per_scan[SCANS // 2],
          tables_per_scan[SCANS * 9 // 10], tables_per_scan[-1])
    print("tables per scan by kind:",
          {k: round(v / SCANS, 1) for k, v in sorted(kind_tables.items())})
    print("records per scan by kind:",
          {k: round(v / SCANS, 1) for k, v in sorted(kind_records.items())})


if __name__ == "__main__":
    main()
