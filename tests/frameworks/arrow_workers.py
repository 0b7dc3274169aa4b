#!/usr/bin/env python3
"""Forked pyarrow Parquet readers that spend their CPU formatting samples
(the MLPerf Storage issue #330 reader pathology), with no trainer.

Scenario
--------
A parent process forks 2 worker processes (multiprocessing "fork" context,
a Pool of 2; each worker takes one shard of the Parquet files).  Each worker
loops over its files, for each row group

    table = pq.ParquetFile(path).read_row_group(i)     # use_threads=True (default)
    for sample in table.to_pylist():                   # one Python dict per sample
        text = str(sample)                             # format the whole sample

i.e. pyarrow's own C++ CPU and I/O thread pools run inside every worker, then
the decoded samples become Python dicts of lists of floats and each dict is
formatted with str(), as DLIO's reader did in MLPerf Storage issue #330 (the
benchmark's "storage" throughput was really the reader's CPU formatting
samples).  Only a count and a checksum go back to the parent, at the end:
the parent just waits for the Pool (there is no consumer / trainer, so there
is no au_percentage).

Truth: cpu-bound-reader.  The control is `read-only`: the same Pool, the same
workers and files, but each worker only reads the raw file bytes with
f.read() (no decode, no formatting).  On cached data (prep leaves the ~180 MB
in the page cache) read-only runs far faster (GB/s) than `job`, and in `job`
the two workers keep both CPUs busy (cpu_s / (seconds * 2) close to 1), so
the work per sample (decode + to_pylist + str), not the storage, is the
limit.  `loader` is an alias of `job` (the workers ARE the loader).
Measured (2 vCPUs, cached data): read-only ~0.9 M samples/s (~4 GB/s);
job ~3-6 k samples/s (~14-27 MB/s), i.e. >100x slower, and a job worker's
main thread sits in float_repr/_Py_dg_dtoa (str() of the float lists) while
its 3 Arrow pool threads (std::thread, unnamed, so comm "python") are almost
idle: the Parquet decode is a few % of the CPU.

Data (prep): 4 files x 16 row groups x 600 rows (38 400 samples, ~180 MB):
id int64, label int32, filename string, features list<float32>[512],
embedding list<float32>[256] (random, so incompressible).

Timing: each worker times itself from the end of its first row group (or
first file in read-only) for --duration seconds (default: job 8, read-only
4), then stops at the next row group / file boundary and returns
(samples, bytes, seconds, cpu, checksum).  items = total samples, seconds =
the longest worker window, items_per_s = sum of the workers' rates.  bytes
are on-disk Parquet bytes (a row group's compressed column chunks; a whole
file in read-only).  SIGTERM/SIGINT on the parent (or the workers) sets a
shared stop event; the workers stop at the next boundary, the parent joins
them and prints its result.

Usage
-----
    PY=/work/main/target/dlio-venv/bin/python
    $PY arrow_workers.py prep      --data /tmp/arrow_data
    $PY arrow_workers.py job       --data /tmp/arrow_data [--duration 8] [--workers 2]
    $PY arrow_workers.py read-only --data /tmp/arrow_data [--duration 4]
Prints one line `SCENARIO_RESULT {json}` at the end.
"""

import argparse
import json
import multiprocessing as mp
import os
import resource
import signal
import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FILES = 4
ROW_GROUPS = 16          # per file
ROWS_PER_GROUP = 600
FEATURES = 512           # float32 per sample, column "features"
EMBEDDING = 256          # float32 per sample, column "embedding"

_stop = None             # multiprocessing.Event, inherited by the forked workers


# ----------------------------------------------------------------- prep

def prep(data, seed=330):
    os.makedirs(data, exist_ok=True)
    marker = os.path.join(data, ".prep-done")
    if os.path.exists(marker):
        print(f"prep: {data} already prepared", file=sys.stderr)
        return
    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    total = 0
    rows = 0
    for f in range(FILES):
        path = os.path.join(data, f"part-{f:03d}.parquet")
        writer = None
        for g in range(ROW_GROUPS):
            n = ROWS_PER_GROUP
            base = (f * ROW_GROUPS + g) * n
            feats = rng.standard_normal((n, FEATURES), dtype=np.float32)
            emb = rng.random((n, EMBEDDING), dtype=np.float32)
            table = pa.table({
                "id": pa.array(np.arange(base, base + n, dtype=np.int64)),
                "label": pa.array(rng.integers(0, 1000, n, dtype=np.int32)),
                "filename": pa.array([f"img_{base + i:08d}.jpg" for i in range(n)]),
                "features": pa.FixedSizeListArray.from_arrays(feats.reshape(-1), FEATURES)
                              .cast(pa.list_(pa.float32())),
                "embedding": pa.FixedSizeListArray.from_arrays(emb.reshape(-1), EMBEDDING)
                               .cast(pa.list_(pa.float32())),
            })
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table, row_group_size=n)
            rows += n
        writer.close()
        total += os.path.getsize(path)
    with open(marker, "w") as fh:
        json.dump({"files": FILES, "rows": rows, "bytes": total}, fh)
    print(f"prep: {FILES} files, {rows} rows, {total} bytes in "
          f"{time.perf_counter() - t:.1f}s", file=sys.stderr)


# ----------------------------------------------------------------- workers

def _worker_init(stop):
    def on_signal(signum, frame):
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def _cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)   # all threads of this worker
    return r.ru_utime + r.ru_stime


def work(task):
    """One worker: loop over its shard until its timed window is over."""
    mode, paths, duration = task
    stop = _stop
    samples = nbytes = 0
    checksum = 0
    t_start = cpu_start = None
    units = 0
    while not stop.is_set():
        for path in paths:
            if mode == "read-only":
                with open(path, "rb") as f:
                    data = f.read()
                n_rows = _rows_of(path)
                steps = [(n_rows, len(data), len(data) + data[-1])]
                del data
            else:
                pf = pq.ParquetFile(path)
                steps = _formatted_row_groups(pf)
            for n, b, c in steps:
                if t_start is not None:
                    samples += n
                    nbytes += b
                    units += 1
                checksum = (checksum * 1000003 + c) & 0xFFFFFFFFFFFF
                now = time.perf_counter()
                if t_start is None:            # first row group / file = start-up
                    t_start, cpu_start = now, _cpu_self()
                elif now - t_start >= duration or stop.is_set():
                    return _report(samples, nbytes, now - t_start,
                                   _cpu_self() - cpu_start, checksum, units)
    now = time.perf_counter()
    return _report(samples, nbytes, (now - t_start) if t_start else 0.0,
                   (_cpu_self() - cpu_start) if t_start else 0.0, checksum, units)


def _formatted_row_groups(pf):
    """Generator: read, convert and format each row group of a ParquetFile."""
    meta = pf.metadata
    for i in range(pf.num_row_groups):
        rg = meta.row_group(i)
        on_disk = sum(rg.column(j).total_compressed_size for j in range(rg.num_columns))
        table = pf.read_row_group(i)                 # use_threads=True
        c = 0
        for sample in table.to_pylist():             # dict per sample
            text = str(sample)                       # the formatting of #330
            c += len(text)
        yield table.num_rows, on_disk, c
        if _stop.is_set():
            return


_ROWS = {}


def _rows_of(path):
    if path not in _ROWS:
        _ROWS[path] = pq.read_metadata(path).num_rows
    return _ROWS[path]


def _report(samples, nbytes, seconds, cpu, checksum, units):
    return {"pid": os.getpid(), "samples": samples, "bytes": nbytes,
            "seconds": seconds, "cpu_s": cpu, "checksum": checksum, "units": units,
            "threads": _thread_names()}


def _thread_names():
    names = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as f:
                n = f.read().strip()
            names[n] = names.get(n, 0) + 1
    except OSError:
        pass
    return names


# ----------------------------------------------------------------- parent

def cpu_seconds():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main():
    global _stop
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["prep", "job", "loader", "read-only"])
    ap.add_argument("--data", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--duration", type=float, default=None)
    args = ap.parse_args()

    if args.mode == "prep":
        prep(args.data)
        return 0

    mode = "job" if args.mode == "loader" else args.mode
    duration = args.duration if args.duration is not None else (8.0 if mode == "job" else 4.0)
    paths = sorted(os.path.join(args.data, n) for n in os.listdir(args.data)
                   if n.endswith(".parquet"))
    if not paths:
        sys.exit(f"no .parquet files under {args.data}: run prep first")
    shards = [paths[i::args.workers] for i in range(args.workers)]

    ctx = mp.get_context("fork")
    _stop = ctx.Event()

    def on_signal(signum, frame):
        _stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    t0 = time.perf_counter()
    with ctx.Pool(args.workers, initializer=_worker_init, initargs=(_stop,)) as pool:
        async_res = pool.map_async(work, [(mode, s, duration) for s in shards], chunksize=1)
        while not async_res.ready():        # the parent just waits
            async_res.wait(0.5)
        results = async_res.get()
        pool.close()
        pool.join()
    wall = time.perf_counter() - t0

    samples = sum(r["samples"] for r in results)
    nbytes = sum(r["bytes"] for r in results)
    seconds = max(r["seconds"] for r in results)
    rate = sum(r["samples"] / r["seconds"] for r in results if r["seconds"] > 0)
    brate = sum(r["bytes"] / r["seconds"] for r in results if r["seconds"] > 0)
    wcpu = sum(r["cpu_s"] for r in results)
    wsec = sum(r["seconds"] for r in results)
    res = {
        "mode": args.mode,
        "items": samples,
        "seconds": round(seconds, 4),
        "items_per_s": round(rate, 2),
        "bytes": nbytes,
        "bytes_per_s": round(brate, 1),
        "cpu_s": round(cpu_seconds(), 3),
        "unit": "item",
        "workers": args.workers,
        "start_method": "fork",
        "pool": "multiprocessing.Pool.map_async",
        "wall_s": round(wall, 3),
        "worker_cpu_timed_s": round(wcpu, 3),
        "worker_cpu_util": round(wcpu / wsec, 3) if wsec > 0 else 0.0,
        "cpu_util_2cpu": round(cpu_seconds() / (seconds * args.workers), 3) if seconds > 0 else 0.0,
        "units": sum(r["units"] for r in results),
        "checksum": [r["checksum"] for r in results],
        "worker_threads": results[0]["threads"] if results else {},
        "pyarrow": pa.__version__,
    }
    if _stop.is_set():
        res["interrupted"] = True
    print("SCENARIO_RESULT " + json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
