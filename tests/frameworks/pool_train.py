#!/usr/bin/env python3
"""A training loop fed by a concurrent.futures.ThreadPoolExecutor.

Scenario
--------
The loader is the idiom people write when they "just want the files read in
the background": a ThreadPoolExecutor and, per epoch,

    for sample in executor.map(load, paths):   # (paths shuffled each epoch)
        train_step(sample)

(executor.map submits the whole epoch at once and yields the results in
order; breaking out of the loop closes the generator, which cancels the
futures not yet started.)  The consumer's "device step" is
time.sleep(--step) (default 2 ms), so the consumer alone runs at up to
~1/step = 500 steps/s.

--kind gil   (truth: cpu-bound-reader)
    Each task reads one CSV text file (prep writes 1200 files of 20-170 KB,
    120-900 rows: ids, ISO timestamps, coordinates, prices, a "|"-separated
    tag list and a free-text column; ~110 MB) and parses it in pure Python:
    split lines and fields, int()/float() conversions, ISO dates split by
    hand into datetime objects (not datetime.strptime: _strptime takes a
    module lock, whose convoys under the GIL would make this a
    lock-contention scenario), a dict per row, a
    vocabulary lookup per word and a hashed bag of character trigrams of the
    text column, per-file feature normalisation: ~10 ms of bytecode a file.
    The 4 pool threads are serialised by the GIL: the pool delivers ~100
    files/s, no faster with 4 threads than with 1 (compare `loader
    --threads 1` with `loader --threads 4`), i.e. ~5x slower than the
    consumer alone (~475 steps/s).  The reader's CPU (the
    GIL: the process uses ~1 of the 2 CPUs) is the limit, not storage: the
    files are in the page cache after prep.  In `job` the 2 ms step itself
    takes ~4 ms, because the main thread must win the GIL back from the
    parsing threads after each sleep (sys.getswitchinterval() = 5 ms).

--kind io    (truth: storage-bound when run in a throttled blkio cgroup)
    Same pool and loop, but each task reads one 1-4 MiB binary file with
    O_DIRECT (os.open(..., O_RDONLY | O_DIRECT) into an anonymous mmap, which
    is page aligned, with os.preadv) and computes zlib.crc32 over it.  The
    threads spend their time waiting for the disk (O_DIRECT bypasses the page
    cache, so every epoch goes to the device and a blkio throttle applies).
    Under a read throttle of e.g. 20 MiB/s on the data disk the loader
    delivers ~9 files/s (~21 MB/s), far below the consumer alone (~475/s) and
    far below the same loader unthrottled (~470 files/s, ~1.1 GB/s).  To
    throttle by hand (cgroup v1; MAJ:MIN of the disk under --data from
    lsblk; /work and /tmp are on vda 254:0):
        mkdir /sys/fs/cgroup/blkio/ptest
        echo "254:0 20971520" > /sys/fs/cgroup/blkio/ptest/blkio.throttle.read_bps_device
        echo $$ > /sys/fs/cgroup/blkio/ptest/cgroup.procs   # in the shell that runs it
        ...; then move the shell out (echo $$ > /sys/fs/cgroup/blkio/cgroup.procs)
        and rmdir /sys/fs/cgroup/blkio/ptest

Modes (protocol of tests/frameworks/): `job` (pool feeding the step loop,
reports au_percentage), `loader` (the same executor.map iteration, each
sample dropped), `consumer` (one sample loaded before timing, then the same
step loop).  The timed window starts after the first sample (job: after the
first step) and lasts --duration seconds.

Usage
-----
    PY=/work/main/target/dlio-venv/bin/python
    $PY pool_train.py prep     --kind gil --data /tmp/pool_gil
    $PY pool_train.py loader   --kind gil --data /tmp/pool_gil [--threads 1]
    $PY pool_train.py consumer --kind gil --data /tmp/pool_gil
    $PY pool_train.py job      --kind gil --data /tmp/pool_gil
    $PY pool_train.py prep     --kind io  --data /tmp/pool_io
    $PY pool_train.py loader   --kind io  --data /tmp/pool_io   # throttled or not
Options: --threads N (pool size, default 4), --step S (default 0.002),
--duration S (default: job 8, controls 4).
Prints one line `SCENARIO_RESULT {json}` at the end.
"""

import argparse
import json
import mmap
import os
import random
import resource
import signal
import sys
import time
import zlib
from datetime import datetime
from concurrent.futures import ThreadPoolExecutor

# ----------------------------------------------------------------- dataset

GIL_FILES = 1200
GIL_ROWS = (120, 900)         # rows per CSV file (~190 bytes a row)
IO_FILES = 80
IO_SIZES = (1 << 20, 4 << 20)  # bytes per binary file
ALIGN = 4096

WORDS = ("the of and to in is was for on that with as by at from his it an "
         "were are which this be or has had not but have first one their its "
         "new after who they two her she been other when there all during into "
         "school time may years more most only over city some world would where "
         "later up such used many can state about national out known university "
         "united then made long people music team game season film series war "
         "album river village county north south east west house church park "
         "station line road party league club year group company family born").split()


def _done_marker(data, kind):
    return os.path.join(data, f".prep-{kind}-done")


def prep_gil(data, seed=1234):
    rng = random.Random(seed)
    os.makedirs(data, exist_ok=True)
    header = "id,user,ts,signup,lat,lon,price,qty,score,category,tags,text\n"
    cats = [f"cat{i:02d}" for i in range(40)]
    total = 0
    for i in range(GIL_FILES):
        rows = [header]
        rid = i * 1000
        ts = 1_600_000_000 + i * 3600
        for _ in range(rng.randint(*GIL_ROWS)):
            rid += 1
            ts += rng.randint(1, 60)
            rows.append("%d,%d,%s,%s,%.6f,%.6f,%.2f,%d,%.4f,%s,%s,%s\n" % (
                rid, rng.randint(1, 10**6),
                time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)),
                time.strftime("%Y-%m-%d", time.gmtime(ts - rng.randint(0, 10**8))),
                rng.uniform(-90, 90), rng.uniform(-180, 180),
                rng.uniform(0.5, 999.0), rng.randint(1, 50), rng.random(),
                rng.choice(cats),
                "|".join(rng.sample(WORDS, rng.randint(1, 4))),
                " ".join(rng.choices(WORDS, k=rng.randint(8, 24)))))
        text = "".join(rows)
        total += len(text)
        with open(os.path.join(data, f"part-{i:05d}.csv"), "w") as f:
            f.write(text)
    return {"files": GIL_FILES, "bytes": total}


def prep_io(data, seed=1234):
    rng = random.Random(seed)
    os.makedirs(data, exist_ok=True)
    total = 0
    for i in range(IO_FILES):
        size = rng.randint(*IO_SIZES) // ALIGN * ALIGN
        path = os.path.join(data, f"shard-{i:05d}.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(size))
            f.flush()
            os.fsync(f.fileno())
        total += size
    return {"files": IO_FILES, "bytes": total}


def list_files(data, kind):
    ext = ".csv" if kind == "gil" else ".bin"
    paths = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(ext))
    if not paths:
        sys.exit(f"no {ext} files under {data}: run `prep --kind {kind}` first")
    return paths


# ----------------------------------------------------------------- loaders

VOCAB = {w: i + 1 for i, w in enumerate(WORDS)}


def parse_iso(text):
    """`YYYY-MM-DD[THH:MM:SS]` -> datetime, in Python bytecode."""
    date, _, clock = text.partition("T")
    y, m, d = date.split("-")
    hh, mm, ss = clock.split(":") if clock else ("0", "0", "0")
    return datetime(int(y), int(m), int(d), int(hh), int(mm), int(ss))


def parse_csv(path):
    """Pure-Python CSV parsing + light feature engineering: one file -> sample."""
    with open(path) as f:
        text = f.read()
    lines = text.split("\n")
    names = lines[0].split(",")
    rows = []
    for line in lines[1:]:
        if not line:
            continue
        v = line.split(",")
        row = dict(zip(names, v))
        row["id"] = int(row["id"])
        row["user"] = int(row["user"])
        row["ts"] = parse_iso(row["ts"])
        row["signup"] = parse_iso(row["signup"])
        row["lat"] = float(row["lat"])
        row["lon"] = float(row["lon"])
        row["price"] = float(row["price"])
        row["qty"] = int(row["qty"])
        row["score"] = float(row["score"])
        row["tags"] = row["tags"].split("|")
        words = row["text"].lower().split()
        row["tokens"] = [VOCAB.get(w, 0) for w in words]
        grams = {}                       # hashed bag of character trigrams
        for w in words:
            w = "<" + w + ">"
            for k in range(len(w) - 2):
                h = hash(w[k:k + 3]) % 262144
                grams[h] = grams.get(h, 0) + 1
        row["trigrams"] = grams
        row["hour"] = row["ts"].hour
        row["weekday"] = row["ts"].weekday()
        row["tenure_days"] = (row["ts"] - row["signup"]).days
        rows.append(row)
    # per-file normalisation of the numeric features
    n = len(rows)
    mean_p = sum(r["price"] for r in rows) / n
    var_p = sum((r["price"] - mean_p) ** 2 for r in rows) / n
    std_p = var_p ** 0.5 or 1.0
    max_q = max(r["qty"] for r in rows)
    features = []
    labels = []
    for r in rows:
        toks = r["tokens"][:16]
        toks = toks + [0] * (16 - len(toks))
        features.append([(r["price"] - mean_p) / std_p, r["qty"] / max_q,
                         r["lat"] / 90.0, r["lon"] / 180.0, r["hour"] / 23.0,
                         r["weekday"] / 6.0, r["tenure_days"] / 1200.0,
                         float(len(r["tags"]))] + toks)
        labels.append(1 if r["score"] > 0.5 else 0)
    return {"path": path, "features": features, "labels": labels,
            "trigrams": [r["trigrams"] for r in rows]}


def read_direct(path):
    """O_DIRECT read of a whole file into a page-aligned buffer + crc32."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        size = os.fstat(fd).st_size
        buf = mmap.mmap(-1, max(ALIGN, (size + ALIGN - 1) // ALIGN * ALIGN))
        view = memoryview(buf)
        off = 0
        chunk = 1 << 20
        while off < size:
            n = os.preadv(fd, [view[off:off + chunk]], off)
            if n <= 0:
                break
            off += n
        crc = zlib.crc32(view[:off])
        view.release()
    finally:
        os.close(fd)
    return {"path": path, "data": buf, "nbytes": off, "crc": crc}


def epochs(executor, load, paths, seed=0):
    """Endless stream of samples: one executor.map per (shuffled) epoch."""
    rng = random.Random(seed)
    order = list(paths)
    while True:
        rng.shuffle(order)
        yield from executor.map(load, order)


# ----------------------------------------------------------------- main

class Stop(Exception):
    pass


_stopping = False


def _on_signal(signum, frame):
    global _stopping
    if not _stopping:
        _stopping = True
        raise Stop(signum)


def cpu_seconds():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["prep", "job", "loader", "consumer"])
    ap.add_argument("--data", required=True)
    ap.add_argument("--kind", choices=["gil", "io"], default="gil")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--step", type=float, default=0.002)
    ap.add_argument("--duration", type=float, default=None)
    args = ap.parse_args()

    if args.mode == "prep":
        marker = _done_marker(args.data, args.kind)
        if os.path.exists(marker):
            print(f"prep: {args.data} already prepared ({args.kind})", file=sys.stderr)
            return 0
        t = time.perf_counter()
        info = (prep_gil if args.kind == "gil" else prep_io)(args.data)
        with open(marker, "w") as f:
            json.dump(info, f)
        print(f"prep: {info} in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        return 0

    duration = args.duration if args.duration is not None else (8.0 if args.mode == "job" else 4.0)
    load = parse_csv if args.kind == "gil" else read_direct
    paths = list_files(args.data, args.kind)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    items = 0
    nbytes = 0
    step_time = 0.0
    wait_time = 0.0
    seconds = 0.0
    interrupted = False
    executor = None
    stream = None
    t_start = None
    try:
        if args.mode == "consumer":
            sample = load(paths[0])          # in memory, loaded once
            t_start = time.perf_counter()
            while time.perf_counter() - t_start < duration:
                time.sleep(args.step)        # the device step
                items += 1
            seconds = time.perf_counter() - t_start
        else:
            executor = ThreadPoolExecutor(max_workers=args.threads,
                                          thread_name_prefix="loader")
            stream = epochs(executor, load, paths)
            sample = next(stream)            # start-up: first sample
            if args.mode == "job":
                time.sleep(args.step)        # first step (excluded, as DLIO)
            t_start = time.perf_counter()
            if args.mode == "loader":
                while time.perf_counter() - t_start < duration:
                    sample = next(stream)
                    items += 1
                    nbytes += sample.get("nbytes", 0)
                    del sample
            else:
                while time.perf_counter() - t_start < duration:
                    t0 = time.perf_counter()
                    sample = next(stream)
                    t1 = time.perf_counter()
                    time.sleep(args.step)    # train_step(sample)
                    t2 = time.perf_counter()
                    wait_time += t1 - t0
                    step_time += t2 - t1
                    items += 1
                    nbytes += sample.get("nbytes", 0)
                    del sample
            seconds = time.perf_counter() - t_start
    except Stop:
        interrupted = True
        if t_start is not None:
            seconds = time.perf_counter() - t_start
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if stream is not None:
            stream.close()                   # cancels the futures not started
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    res = {
        "mode": args.mode,
        "kind": args.kind,
        "items": items,
        "seconds": round(seconds, 4),
        "items_per_s": round(items / seconds, 3) if seconds > 0 else 0.0,
        "cpu_s": round(cpu_seconds(), 3),
        "unit": "item",
        "threads": args.threads if args.mode != "consumer" else 0,
        "step_s": args.step,
        "idiom": "ThreadPoolExecutor.map per epoch",
        "files": len(paths),
    }
    if args.kind == "io":
        res["bytes"] = nbytes
        res["bytes_per_s"] = round(nbytes / seconds, 1) if seconds > 0 else 0.0
        res["o_direct"] = True
    if args.mode == "job":
        res["au_percentage"] = round(100.0 * step_time / seconds, 2) if seconds > 0 else 0.0
        res["wait_s"] = round(wait_time, 4)
        res["step_s_total"] = round(step_time, 4)
    if interrupted:
        res["interrupted"] = True
    print("SCENARIO_RESULT " + json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
