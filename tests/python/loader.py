"""Test workload of the Python-frames acceptance test (tests/python_frames.rs)
and scripts/compare-pyspy.sh: a DataLoader-like parent forks 2 workers; each
reads a small Parquet file, decodes its row groups with pyarrow and formats
a large dict into a string per item, until SECONDS have passed; prints the
items done, the workers' CPU time and its own with theirs.

    python3 loader.py DATA_DIR [SECONDS] [WORKERS]
"""
import multiprocessing
import os
import resource
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq


def make_parquet(path):
    rows = 40_000
    table = pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "value": pa.array([i * 0.25 for i in range(rows)], pa.float64()),
        "label": pa.array([f"label-{i % 1013}" for i in range(rows)]),
    })
    pq.write_table(table, path, row_group_size=4_000)


def format_item(table, index):
    record = {f"field_{k}": (index * k, table.num_rows, "x" * (k % 13)) for k in range(300)}
    return str(record)


def decode_row_groups(path):
    # The whole file is read, then decoded from memory (as a loader does
    # with an object fetched from S3): the decoding runs on the worker's
    # thread without waits on pyarrow's I/O threads.
    with open(path, "rb") as f:
        parquet = pq.ParquetFile(pa.BufferReader(f.read()))
    for group in range(parquet.num_row_groups):
        # One thread, like a DataLoader worker: the decoding runs on the
        # worker's own (Python) thread.
        yield parquet.read_row_group(group, use_threads=False)


def worker(path, seconds, results):
    deadline = time.monotonic() + seconds
    items = 0
    while time.monotonic() < deadline:
        for table in decode_row_groups(path):
            for index in range(0, table.num_rows, 1_000):
                format_item(table, index)
                items += 1
    results.put(items)


def main():
    data_dir = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, "loader.parquet")
    if not os.path.exists(path):
        make_parquet(path)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    procs = [context.Process(target=worker, args=(path, seconds, results)) for _ in range(workers)]
    for proc in procs:
        proc.start()
    items = sum(results.get() for _ in procs)
    for proc in procs:
        proc.join()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    cpu = children.ru_utime + children.ru_stime
    total = cpu + own.ru_utime + own.ru_stime
    print(f"loader: {workers} workers, {items} items in {seconds:.1f} s, "
          f"workers' cpu {cpu:.2f} s, total cpu {total:.2f} s")


if __name__ == "__main__":
    main()
