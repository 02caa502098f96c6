# Per synced group: one log (values and handles in one file, one fdatasync) against a value
# segment beside a handle-only WAL (two files, synced one after the other or side by side).
import os, sys, time, threading, statistics
d = sys.argv[1]; groups = int(sys.argv[2])
def files(n):
    fs = []
    for i in range(n):
        p = os.path.join(d, f"f{i}")
        if os.path.exists(p): os.remove(p)
        fs.append(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    return fs
def one_log(size):
    (f,) = files(1); buf = b"v" * (size + 64); t = []
    for _ in range(groups):
        s = time.perf_counter(); os.write(f, buf); os.fdatasync(f); t.append(time.perf_counter() - s)
    os.close(f); return t
def two_files(size, parallel):
    seg, wal = files(2); vb = b"v" * size; hb = b"h" * 64; t = []
    for _ in range(groups):
        s = time.perf_counter(); os.write(seg, vb); os.write(wal, hb)
        if parallel:
            th = threading.Thread(target=os.fdatasync, args=(seg,)); th.start(); os.fdatasync(wal); th.join()
        else:
            os.fdatasync(seg); os.fdatasync(wal)
        t.append(time.perf_counter() - s)
    os.close(seg); os.close(wal); return t
for size in [8 << 10, 64 << 10, 1 << 20]:
    for name, fn in [("one log", lambda: one_log(size)), ("two, in turn", lambda: two_files(size, False)), ("two, side by side", lambda: two_files(size, True))]:
        t = sorted(fn())
        print(f"{size>>10:5} KiB  {name:18} median {statistics.median(t)*1e3:6.3f} ms  p99 {t[int(len(t)*0.99)]*1e3:6.3f} ms  groups/s {len(t)/sum(t):8.0f}")
