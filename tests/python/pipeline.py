"""Test workload of the root scenario tests: a training job shaped like a
PyTorch DataLoader with num_workers > 0 (without torch), so that the kernel's
wake-up graph shows the real structure of who waits for whom.

The main process is the trainer: its main thread takes one batch per step
(blocking), then "computes" with time.sleep(computation_time) as DLIO does;
with --pin-thread a second thread moves the results into a queue.Queue the
main thread reads (pin_memory's thread); 4 started, idle ThreadPoolExecutor
threads stand for the OpenMP/BLAS pools. N worker processes (fork or spawn)
have an index queue each, fed round-robin with --prefetch batches in flight
per worker, and put small results (a checksum, not the data) into one shared
queue; batches are consumed in order, so the trainer waits for one worker.

--format parquet: a sample is a row group, read with pq.ParquetFile(path)
.read_row_group(i, use_threads=...) (pyarrow's pool threads exist unless
--no-pyarrow-threads), then a ~2000-entry dict is str()-ed a few times (the
DLIO #330 shape) so CPython formatting leads the workers' CPU (off with
--no-format-dict). --format files: a ~300 KB JPEG-like file per sample,
open/read/close and a light decode (sha256, crc32), the retinanet shape.
--odirect reads with O_DIRECT (aligned mmap buffer, 1 MiB chunks) so that
reads reach the device. --loader threads: --workers threads (default 4) in
the trainer hold ONE global threading.Lock around each whole load, so they
serialize on it (futex waits; pyarrow and hashlib drop the GIL).

At the end the trainer prints `PIPELINE_RESULT {json}` (and writes it to
--result-file): steps, samples, au_percentage (100 x compute time / time,
from the end of the first step to the last compute's end: DLIO leaves the
first step out, metric_exclude_start_steps = 1),
samples_per_second, train_start_unix, train_end_unix, computation_time,
workers, start_method, format. SIGTERM or SIGINT ends the training early,
with a clean shutdown and exit code 0.

    python3 pipeline.py --make-data DIR [--format parquet|files]
    python3 pipeline.py --data DIR [--format parquet|files] [--workers N]
        [--start fork|spawn] [--prefetch 2] [--batch-size B]
        [--computation-time 0.005] [--duration 6 | --steps N] [--pin-thread]
        [--no-pyarrow-threads] [--no-format-dict] [--odirect]
        [--loader processes|threads] [--result-file PATH]
"""
import argparse
import concurrent.futures
import contextlib
import hashlib
import json
import mmap
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
import zlib


class Stop(BaseException):
    """SIGTERM (or SIGINT in the trainer): stop early, but cleanly."""


class _Signals:
    stop = False
    interruptible = False


def _on_term(signum, frame):
    # Raise only inside a blocking wait or a load: raised within a queue's
    # put or close, it can leave the queue's feeder thread never joined, so
    # the process hangs at exit (seen with spawn and a group-wide SIGTERM).
    _Signals.stop = True
    if _Signals.interruptible:
        _Signals.interruptible = False
        raise Stop()


@contextlib.contextmanager
def interruptible():
    _Signals.interruptible = True
    try:
        if _Signals.stop:
            raise Stop()
        yield
    finally:
        _Signals.interruptible = False


if __name__ == "__main__":  # before the slow imports: a SIGTERM stops cleanly
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)

try:  # imported at start, as a training script does (and again by spawn)
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # the files format runs without pyarrow
    pa = pq = None

PARQUET_FILES, ROW_GROUPS, ROWS, DIM = 4, 4, 4096, 256  # 4 MiB decoded per group
JPEG_FILES, JPEG_BYTES = 400, 300_000
FORMAT_ENTRIES, FORMAT_REPEATS = 2000, 4
CHUNK = 1 << 20
STATUS_INTERVAL = 5.0  # DataLoader's _MP_STATUS_CHECK_INTERVAL


def make_data(root, fmt):
    os.makedirs(root, exist_ok=True)
    if fmt == "files":
        for i in range(JPEG_FILES):
            with open(os.path.join(root, f"img_{i:04d}.jpg"), "wb") as f:
                f.write(b"\xff\xd8\xff\xe0" + os.urandom(JPEG_BYTES - 6) + b"\xff\xd9")
        return
    import numpy as np
    rng = np.random.default_rng(0)
    rows = ROWS * ROW_GROUPS
    for i in range(PARQUET_FILES):
        # Rounded values: pyarrow dictionary-encodes and zstd-compresses
        # them, so reading a group is real decoding work, not a memcpy.
        feats = np.round(rng.standard_normal((rows, DIM), dtype=np.float32), 3)
        table = pa.table({
            "label": pa.array(rng.integers(0, 1000, rows)),
            "name": pa.array([f"sample-{i}-{r:06d}" for r in range(rows)]),
            "features": pa.FixedSizeListArray.from_arrays(pa.array(feats.ravel()), DIM),
        })
        pq.write_table(table, os.path.join(root, f"part_{i}.parquet"),
                       row_group_size=ROWS, compression="zstd")


def list_samples(root, fmt):
    """The dataset's index, built in the main process (a Dataset's __init__)."""
    names = sorted(os.listdir(root))
    if fmt == "files":
        return [os.path.join(root, n) for n in names if n.endswith(".jpg")]
    paths = [os.path.join(root, n) for n in names if n.endswith(".parquet")]
    return [(p, g) for p in paths for g in range(pq.ParquetFile(p).num_row_groups)]


_direct_buf = None  # one per process (threads use it under the global lock)


def read_direct(path):
    # O_DIRECT needs an aligned buffer: an anonymous mmap is page-aligned.
    global _direct_buf
    if _direct_buf is None:
        _direct_buf = mmap.mmap(-1, CHUNK)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        parts, offset, n = [], 0, CHUNK
        while n == CHUNK:  # a short read is the end of the file
            n = os.preadv(fd, [_direct_buf], offset)
            parts.append(_direct_buf[:n])
            offset += n
        return b"".join(parts)
    finally:
        os.close(fd)


def format_dict(table, key):
    # A large per-sample dict str()-ed several times (a metadata or log
    # string built per sample): pure CPython work, holding the GIL.
    labels = table.column("label").slice(0, 64).to_pylist()
    record = {f"{key}/{k}": (k, k * 0.001, labels[k % 64], k / 7.0, {"row": k, "scale": k * 1e-3})
              for k in range(FORMAT_ENTRIES)}
    text = ""
    for _ in range(FORMAT_REPEATS):
        text = str(record)
    return len(text)


def load_sample(sample, opts):
    """Reads and decodes one sample; returns a small checksum, not the data."""
    if opts["format"] == "files":
        if opts["odirect"]:
            data = read_direct(sample)
        else:
            with open(sample, "rb") as f:
                data = f.read()
        return zlib.crc32(hashlib.sha256(data).digest())
    path, group = sample
    source = pa.BufferReader(read_direct(path)) if opts["odirect"] else path
    table = pq.ParquetFile(source).read_row_group(group, use_threads=opts["pyarrow_threads"])
    total = table.num_rows
    if opts["format_dict"]:
        total += format_dict(table, f"{os.path.basename(path)}:{group}")
    return total


def load_batch(samples, indices, opts):
    try:
        return "%08x" % (sum(load_sample(samples[i], opts) for i in indices) & 0xFFFFFFFF)
    except Exception as exc:  # sent to the trainer, which raises it
        return RuntimeError(f"loading {indices}: {exc!r}")


def worker_loop(wid, samples, opts, index_queue, result_queue):
    """A DataLoader worker: index batch in, small result out, None ends it."""
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the trainer handles Ctrl-C
    parent = os.getppid()
    try:
        while True:
            try:
                with interruptible():
                    task = index_queue.get(timeout=STATUS_INTERVAL)
            except queue.Empty:
                if os.getppid() != parent:  # the trainer died: do not linger
                    break
                continue
            if task is None:
                break
            with interruptible():
                result = load_batch(samples, task[1], opts)
            result_queue.put((task[0], wid, result))
    except Stop:
        pass
    result_queue.close()
    result_queue.join_thread()


def thread_loader(wid, samples, opts, lock, index_queue, result_queue):
    """--loader threads: the whole load of a batch under one global lock."""
    for batch, indices in iter(index_queue.get, None):
        with lock:
            result = load_batch(samples, indices, opts)
        result_queue.put((batch, wid, result))


def pin_loop(in_queue, out_queue, done):
    """pin_memory's thread: worker results moved into a queue.Queue."""
    while not done.is_set():
        try:
            item = in_queue.get(timeout=STATUS_INTERVAL)
        except queue.Empty:
            continue
        if item is None:  # the trainer's wake-up at shutdown
            return
        out_queue.put(item)


class Loader:
    """The iterator side of a DataLoader: workers, index dispatch with
    prefetch, in-order reassembly of the results, shutdown."""

    def __init__(self, samples, args, opts):
        self.samples, self.batch_size = samples, args.batch_size
        self.index_queues, self.workers, self.pin_thread = [], [], None
        self.threads = args.loader == "threads"
        if self.threads:
            lock = threading.Lock()
            self.results = queue.Queue()
            for wid in range(args.workers):
                self.index_queues.append(queue.Queue())
                self.workers.append(threading.Thread(
                    target=thread_loader, name=f"loader-{wid}",
                    args=(wid, samples, opts, lock, self.index_queues[-1], self.results)))
        else:
            ctx = multiprocessing.get_context(args.start)
            self.results = ctx.Queue()
            for wid in range(args.workers):
                self.index_queues.append(ctx.Queue())
                self.workers.append(ctx.Process(
                    target=worker_loop, name=f"worker-{wid}", daemon=True,
                    args=(wid, samples, opts, self.index_queues[-1], self.results)))
        for w in self.workers:
            w.start()
        self.data_queue = self.results
        if args.pin_thread:
            self.done, self.data_queue = threading.Event(), queue.Queue()
            self.pin_thread = threading.Thread(
                target=pin_loop, name="pin_memory",
                args=(self.results, self.data_queue, self.done))
            self.pin_thread.start()
        self.send_idx = self.rcvd_idx = self.next_sample = 0
        self.reorder = {}
        for _ in range(args.prefetch * args.workers):
            self._put_index()

    def _put_index(self):
        # Round-robin over the workers, like DataLoader's _try_put_index.
        n = len(self.samples)
        indices = [(self.next_sample + j) % n for j in range(self.batch_size)]
        self.next_sample = (self.next_sample + self.batch_size) % n
        self.index_queues[self.send_idx % len(self.workers)].put((self.send_idx, indices))
        self.send_idx += 1

    def _get(self):
        while True:  # a timeout only to notice dead workers, as DataLoader
            try:
                with interruptible():
                    return self.data_queue.get(timeout=STATUS_INTERVAL)
            except queue.Empty:
                dead = [w.name for w in self.workers if not w.is_alive()]
                if dead:
                    raise RuntimeError(f"loader exited unexpectedly: {dead}")

    def next_batch(self):
        # In order: wait for batch rcvd_idx, keeping the ones that come first.
        while self.rcvd_idx not in self.reorder:
            batch, _, result = self._get()
            self.reorder[batch] = result
        result = self.reorder.pop(self.rcvd_idx)
        self.rcvd_idx += 1
        if isinstance(result, Exception):
            raise result
        self._put_index()
        return result

    def shutdown(self):
        if self.pin_thread is not None:
            self.done.set()
            self.results.put(None)  # wakes the pin thread, as DataLoader does
            self.pin_thread.join()
        for iq in self.index_queues:
            iq.put(None)
        killed = False
        for w in self.workers:
            w.join(timeout=10)
            if not self.threads and w.is_alive():
                w.terminate()
                w.join()
                killed = True
        if not self.threads:
            # Join our feeder threads now: left to the exit, a daemon feeder
            # can drop the last reference to a queue's semaphore while the
            # interpreter stops (resource_tracker then warns of a leak). Not
            # if a worker was killed: it may have died holding a queue lock.
            for q in self.index_queues + [self.results]:
                q.close()
                q.cancel_join_thread() if killed else q.join_thread()


def start_idle_pool():
    # 4 threads that exist, then sit idle (like OpenMP/BLAS pools): the
    # barrier keeps each first task running until all 4 threads are started.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="omp")
    barrier = threading.Barrier(4)
    for f in [pool.submit(barrier.wait) for _ in range(4)]:
        f.result()
    return pool


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--make-data", metavar="DIR")
    ap.add_argument("--data", metavar="DIR")
    ap.add_argument("--format", choices=["parquet", "files"], default="parquet")
    ap.add_argument("--loader", choices=["processes", "threads"], default="processes")
    ap.add_argument("--workers", type=int, help="default 2 (4 with --loader threads)")
    ap.add_argument("--start", choices=["fork", "spawn"], default="fork")
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--batch-size", type=int, help="default 1 (parquet), 4 (files)")
    ap.add_argument("--computation-time", type=float, default=0.005)
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--pin-thread", action="store_true")
    ap.add_argument("--no-pyarrow-threads", dest="pyarrow_threads", action="store_false")
    ap.add_argument("--format-dict", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--odirect", action="store_true")
    ap.add_argument("--result-file", metavar="PATH")
    args = ap.parse_args(argv)
    if not (args.make_data or args.data):
        ap.error("--make-data DIR or --data DIR is needed")
    if args.format == "parquet" and pa is None:
        ap.error("--format parquet needs pyarrow")
    if args.workers is None:
        args.workers = 4 if args.loader == "threads" else 2
    if args.batch_size is None:
        args.batch_size = 1 if args.format == "parquet" else 4
    return args


def main(argv):
    args = parse_args(argv)
    if args.make_data:
        make_data(args.make_data, args.format)
        return 0
    samples = list_samples(args.data, args.format)
    if not samples:
        raise SystemExit(f"no {args.format} samples in {args.data}")
    opts = {"format": args.format, "odirect": args.odirect,
            "pyarrow_threads": args.pyarrow_threads, "format_dict": args.format_dict}
    pool = start_idle_pool()
    loader, steps, compute = None, 0, 0.0
    start = end = measured_from = time.monotonic()
    start_unix = time.time()
    try:
        if _Signals.stop:  # SIGTERM during start-up: no workers to start
            raise Stop()
        loader = Loader(samples, args, opts)
        # Training starts at the first batch request (workers may still
        # be starting: with spawn, importing pyarrow).
        start = end = time.monotonic()
        start_unix = time.time()
        while (steps < args.steps if args.steps is not None
               else time.monotonic() - start < args.duration):
            loader.next_batch()
            t = time.monotonic()
            with interruptible():
                time.sleep(args.computation_time)
            end = time.monotonic()
            steps += 1
            if steps == 1:
                # DLIO's metric_exclude_start_steps = 1: the first step
                # (its wait for the workers' start-up, its compute) is not
                # measured.
                measured_from = end
            else:
                compute += end - t
    except Stop:
        pass
    finally:
        if loader is not None:
            loader.shutdown()
        pool.shutdown()
    elapsed = max(end - start, 1e-9)
    measured = max(end - measured_from, 1e-9) if steps > 1 else elapsed
    line = json.dumps({
        "steps": steps, "samples": steps * args.batch_size,
        "au_percentage": 100.0 * compute / measured,
        "samples_per_second": (steps - 1) * args.batch_size / measured if steps > 1 else 0.0,
        "train_start_unix": start_unix, "train_end_unix": start_unix + elapsed,
        "computation_time": args.computation_time, "workers": args.workers,
        "start_method": args.start if args.loader == "processes" else "threads",
        "format": args.format,
    })
    print("PIPELINE_RESULT " + line, flush=True)
    if args.result_file:
        with open(args.result_file, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
