#!/usr/bin/env python3
"""PyTorch CPU image-classification training job (real-framework scenario).

What it is
----------
A small CNN (ResNet-like stride-2 stem, four 3x3 conv+BatchNorm+ReLU stages,
global average pooling, linear head; 64x64 RGB input, 10 classes) trained
with SGD+momentum and cross-entropy (``loss.backward()``,
``optimizer.step()``), fed by ``torch.utils.data.DataLoader`` over a
map-style ``Dataset`` of one file per sample under ``--data DIR``, laid out
like torchvision's ImageFolder (``DIR/<kind>/class_XX/NNNNNN.<ext>``).
The same model is used for both data kinds:

``--data-kind npy`` (default; 1 worker by default)
    One cached, already preprocessed sample per ``.npy`` file (float32 CHW
    3x64x64, normalised); ``__getitem__`` is ``np.load`` +
    ``torch.from_numpy``.  Truth: **compute-bound** -- the loader alone
    delivers far more samples/s than the training step consumes (the
    consumer alone is >= 3x slower than the loader alone).

``--data-kind jpeg`` (2 workers by default)
    One 800x600 photo-like JPEG (smooth colour fields + texture + sensor-like
    noise, Pillow quality 90, ~160 KB) per sample, decoded and augmented in
    the workers with Pillow: open + convert RGB, a random crop of random area
    (25-100 %) and aspect ratio (3/4-4/3) (the RandomResizedCrop box), random
    horizontal flip, colour jitter at crop resolution (ImageEnhance
    Brightness, Contrast, Color 0.4 and a hue shift 0.1 through HSV, in
    random order, like torchvision's ColorJitter), resize to 64x64, to tensor
    + normalise.  Truth: **cpu-bound-reader** -- decoding and augmenting a
    photo costs ~16 ms of worker CPU, so 2 workers on 2 vCPUs deliver ~125
    samples/s (any start method) while the training step alone does ~700
    samples/s: the loader alone is >= 3x (measured 5.3-5.6x) slower than the
    consumer alone.

The npy loader (1 worker) delivers ~5500 samples/s, ~8x the step rate.

Threads: the trainer calls ``torch.set_num_threads(1)`` (``--threads``;
PyTorch's default here is 2, one per vCPU).  Reason: the truth must not
depend on what else runs on the 2 vCPUs (DataLoader workers, a profiler,
other tests).  With 2 intra-op (OpenMP) threads, every op waits at a
barrier for a descheduled peer as soon as any other process wants a CPU:
measured on this machine, the consumer alone does ~1100-1230 samples/s with
2 threads and ~700 with 1 on an idle machine, but with ONE competing busy
process 14 samples/s with 2 threads (80x slower) and 350 with 1 (its fair
share).  One intra-op thread per process when the cores are shared is
PyTorch's CPU tuning advice (avoid oversubscription).  DataLoader workers
run with 1 thread (DataLoader's own setting for workers).

Modes (protocol of tests/frameworks/)
------------------------------------
``prep``      create the dataset of ``--data-kind`` (default: both) under
              DIR/npy and DIR/jpeg (idempotent; ~2 + ~4 s, 130 + 65 MB).
``job``       the real training loop: DataLoader feeding the model.
``loader``    the same DataLoader (same workers, same transforms, same
              epochs), batches dropped: the delivery rate at zero compute.
``consumer``  one random batch of the right shape made in memory, then the
              same training step repeated: the step rate alone.

Timing starts at the end of the first step (job/consumer) or at the first
batch (loader), so imports, worker start-up and the first batch are
excluded; a run stops after ``--duration`` s of that steady state (default
job 8, controls 4) or when ``--epochs`` passes over the dataset are done,
whichever comes first.  An epoch lasts about 3-4 s in job mode (npy: 2600
samples, jpeg: 400 samples), so with the default ``--epochs 1`` a job's
steady state lasts 3-4 s and the npy loader control, 7x faster, about
0.5 s (pass ``--epochs N`` for longer runs).  Without
``--persistent-workers`` (PyTorch's default), each epoch starts fresh
workers, as real jobs do; the epoch boundaries are listed in the result
(``epochs``: start, first-batch wait, end) and on stderr.

``--stop-workers-after S`` (job mode): after S s of training the trainer
SIGSTOPs its DataLoader worker processes (``multiprocessing.active_children``,
which also finds forkserver workers, which are not its direct children) and
keeps iterating: a hung job.  A daemon thread then prints every second
``SCENARIO_PROGRESS {"items_before_stop", "items_after_stop",
"seconds_after_stop", ...}``: ``items_before_stop`` = samples trained when
SIGSTOP was sent, ``items_drained_after_stop`` = samples of batches the
workers had already produced before the stop (at most prefetch_factor x
workers batches) that the trainer consumed afterwards, ``items_after_stop``
= samples beyond that, i.e. real progress after the stop (stays 0).  The
job never ends by itself in that mode (``--epochs`` and ``--duration`` are
ignored); SIGTERM/SIGINT SIGCONT+SIGKILL the stopped workers and exit 143.

In every mode SIGTERM/SIGINT end the run cleanly within about a second
(workers shut down, result line printed with ``"terminated": true``, exit
143).  Workers keep a plain PyTorch worker's signal dispositions: a SIGTERM
to the process group kills them at once, a SIGTERM to the trainer alone
makes it shut them down.

Output: one ``SCENARIO_RESULT {json}`` line on stdout (unit "item" =
samples): mode, items, seconds, items_per_s, cpu_s (getrusage SELF +
CHILDREN plus /proc of live descendants, e.g. the forkserver and what it
reaped), au_percentage (job: 100 x time in the training step / timed wall
time), first_batch_s (worker start-up + first batch), epochs, ...

Usage
-----
  PY=/work/main/target/dlio-venv/bin/python
  $PY torch_train.py prep --data DIR [--data-kind npy|jpeg]
  $PY torch_train.py job      --data DIR --data-kind npy  [--workers 1]
  $PY torch_train.py job      --data DIR --data-kind jpeg [--workers 2] \\
        [--start fork|spawn|forkserver] [--batch-size 16] \\
        [--persistent-workers] [--epochs E] [--duration S]
  $PY torch_train.py loader   --data DIR --data-kind jpeg --start spawn
  $PY torch_train.py consumer --data DIR
  $PY torch_train.py job --data DIR --data-kind jpeg --stop-workers-after 3
  $PY torch_train.py job --data DIR --workers 0 --url http://ADDR:8000
        (npy samples fetched over HTTP from a server serving DIR)
"""

import argparse
import gc
import io
import itertools
import json
import math
import multiprocessing
import os
import random
import resource
import shutil
import signal
import sys
import threading
import time
import urllib.parse
import urllib.request
from multiprocessing import resource_tracker

T_SCRIPT = time.perf_counter()
TERM_SIGNALS = {signal.SIGTERM, signal.SIGINT}

# numpy's OpenBLAS starts a thread pool at import; let it inherit a mask that
# blocks SIGTERM/SIGINT so that they reach the main thread (see
# main_thread_signals below).
_mask = signal.pthread_sigmask(signal.SIG_BLOCK, TERM_SIGNALS)
import numpy as np
import torch
import torch.nn as nn
from PIL import Image, ImageEnhance
from torch.utils.data import DataLoader, Dataset

signal.pthread_sigmask(signal.SIG_SETMASK, _mask)

NUM_CLASSES = 10
IMAGE_SIZE = 64  # model input: 3 x 64 x 64
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
JPEG_W, JPEG_H = 800, 600
# Sized so that one epoch lasts about 3-4 s in job mode.
NUM_SAMPLES = {"npy": 2600, "jpeg": 400}
DEFAULT_WORKERS = {"npy": 1, "jpeg": 2}
PREFETCH_FACTOR = 2  # DataLoader's default


# --------------------------------------------------------------------------
# Model


def conv_bn_relu(cin, cout, stride=1):
    return [
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    ]


class SmallCNN(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES, width=20):
        super().__init__()
        w = width
        self.features = nn.Sequential(
            *conv_bn_relu(3, w, stride=2),  # 64 -> 32
            *conv_bn_relu(w, w),
            nn.MaxPool2d(2),  # 16
            *conv_bn_relu(w, 2 * w),
            nn.MaxPool2d(2),  # 8
            *conv_bn_relu(2 * w, 4 * w),
            nn.MaxPool2d(2),  # 4
            *conv_bn_relu(4 * w, 8 * w),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8 * w, num_classes)

    def forward(self, x):
        x = self.pool(self.features(x))
        return self.fc(torch.flatten(x, 1))


# --------------------------------------------------------------------------
# Datasets (module level so that spawn/forkserver workers can unpickle them)


def list_samples(root, ext):
    samples = []
    for cls in sorted(os.listdir(root)):
        cdir = os.path.join(root, cls)
        if not cls.startswith("class_") or not os.path.isdir(cdir):
            continue
        label = int(cls.split("_")[1])
        for name in sorted(os.listdir(cdir)):
            if name.endswith(ext):
                samples.append((os.path.join(cdir, name), label))
    return samples


class NpyDataset(Dataset):
    """Cached preprocessed samples: one float32 CHW array per .npy file."""

    def __init__(self, root):
        self.samples = list_samples(root, ".npy")

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, label = self.samples[index]
        return torch.from_numpy(np.load(path)), label


class HttpNpyDataset(NpyDataset):
    """The same samples fetched from an HTTP server serving ``--data``
    (``--url``): one ``urllib.request.urlopen`` per sample, with a timeout as
    object-store clients set one (CPython then polls the socket for
    readiness before each receive)."""

    def __init__(self, root, url):
        super().__init__(root)
        self.base = os.path.dirname(root.rstrip("/"))
        self.url = url.rstrip("/")

    def __getitem__(self, index):
        path, label = self.samples[index]
        rel = urllib.parse.quote(os.path.relpath(path, self.base))
        with urllib.request.urlopen(f"{self.url}/{rel}", timeout=30) as response:
            body = response.read()
        return torch.from_numpy(np.load(io.BytesIO(body))), label


def adjust_hue(img, factor):
    """Rotate the hue by factor (in [-0.5, 0.5]) turns, as torchvision does
    for PIL images: through HSV."""
    h, s, v = img.convert("HSV").split()
    shift = np.uint8(int(round(factor * 255)) % 256)
    h = Image.fromarray(np.asarray(h, dtype=np.uint8) + shift, "L")  # wraps mod 256
    return Image.merge("HSV", (h, s, v)).convert("RGB")


class TrainTransform:
    """Training augmentation written with Pillow: a random crop of random
    area (25-100 %) and aspect ratio (3/4-4/3) taken from the source photo
    (the RandomResizedCrop box), random horizontal flip, colour jitter
    (brightness, contrast, saturation 0.4, hue 0.1, in random order) at crop
    resolution, then resize to the model size, to tensor and normalise."""

    def __init__(self, size, scale=(0.25, 1.0), ratio=(3 / 4, 4 / 3), jitter=0.4, hue=0.1):
        self.size = size
        self.scale = scale
        self.log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        self.jitter = jitter
        self.hue = hue
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def crop_box(self, width, height):
        area = width * height
        for _ in range(10):
            target = area * random.uniform(*self.scale)
            aspect = math.exp(random.uniform(*self.log_ratio))
            w = int(round(math.sqrt(target * aspect)))
            h = int(round(math.sqrt(target / aspect)))
            if 0 < w <= width and 0 < h <= height:
                left = random.randint(0, width - w)
                top = random.randint(0, height - h)
                return left, top, left + w, top + h
        side = min(width, height)  # fallback: central square crop
        left, top = (width - side) // 2, (height - side) // 2
        return left, top, left + side, top + side

    def color_jitter(self, img):
        lo, hi = 1 - self.jitter, 1 + self.jitter
        ops = [
            lambda im: ImageEnhance.Brightness(im).enhance(random.uniform(lo, hi)),
            lambda im: ImageEnhance.Contrast(im).enhance(random.uniform(lo, hi)),
            lambda im: ImageEnhance.Color(im).enhance(random.uniform(lo, hi)),
            lambda im: adjust_hue(im, random.uniform(-self.hue, self.hue)),
        ]
        random.shuffle(ops)
        for op in ops:
            img = op(img)
        return img

    def __call__(self, img):
        img = img.crop(self.crop_box(*img.size))
        if random.random() < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        img = self.color_jitter(img)
        img = img.resize((self.size, self.size), Image.Resampling.BILINEAR)
        x = torch.from_numpy(np.asarray(img, dtype=np.float32)).permute(2, 0, 1)
        return (x / 255.0 - self.mean) / self.std


class JpegDataset(Dataset):
    """One JPEG photo per sample, decoded and augmented on access."""

    def __init__(self, root, transform):
        self.samples = list_samples(root, ".jpg")
        self.transform = transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, label = self.samples[index]
        with Image.open(path) as im:
            img = im.convert("RGB")
        return self.transform(img), label


class main_thread_signals:
    """Block SIGTERM/SIGINT while threads are started (threads, and processes,
    inherit their creator's signal mask), so that only the main thread takes
    them.  A signal caught by another thread (e.g. DataLoader's queue feeder
    threads, started by iter(loader)) does not wake the main thread out of its
    wait for the next batch, which would then notice it only after the
    DataLoader's 5 s status-check timeout.  Pending signals are handled as
    soon as the mask is restored."""

    def __init__(self, start_method=None):
        if start_method in ("spawn", "forkserver"):
            # Start multiprocessing's resource tracker (these start methods
            # need it) now: starting it unblocks SIGTERM/SIGINT in the caller.
            resource_tracker.ensure_running()

    def __enter__(self):
        self.old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, TERM_SIGNALS)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_SETMASK, self.old_mask)


def worker_init_fn(worker_id):
    # Forked workers inherit the trainer's SIGTERM/SIGINT handlers: give them
    # back the defaults of a plain PyTorch worker (SIGTERM kills it, SIGINT is
    # a KeyboardInterrupt that DataLoader's worker loop swallows).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, TERM_SIGNALS)  # see main_thread_signals


# --------------------------------------------------------------------------
# prep


def make_photo(rng, label, noise_pool):
    """A photo-like 800x600 image: smooth colour fields with a class tint,
    mid-frequency texture and sensor-like noise."""
    coarse = rng.integers(0, 256, (3, 4, 3)).astype(np.int16)
    tint = np.array([(label * 53) % 256, (label * 97) % 256, (label * 151) % 256])
    coarse = ((coarse + tint) // 2).astype(np.uint8)
    base = Image.fromarray(coarse).resize((JPEG_W, JPEG_H), Image.Resampling.BICUBIC)
    texture = rng.integers(0, 256, (JPEG_H // 20, JPEG_W // 20, 3)).astype(np.uint8)
    texture = Image.fromarray(texture).resize((JPEG_W, JPEG_H), Image.Resampling.BILINEAR)
    pixels = np.asarray(Image.blend(base, texture, 0.35), dtype=np.int16)
    noise = noise_pool[rng.integers(len(noise_pool))]
    oy, ox = rng.integers(0, 64, 2)
    pixels = pixels + noise[oy : oy + JPEG_H, ox : ox + JPEG_W]
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def prep_kind(data_dir, kind):
    """Create DIR/<kind>/ (idempotent: skipped if complete and current)."""
    root = os.path.join(data_dir, kind)
    meta = {"kind": kind, "samples": NUM_SAMPLES[kind], "image_size": IMAGE_SIZE, "version": 1}
    if kind == "jpeg":
        meta["jpeg"] = [JPEG_W, JPEG_H, 90]
    marker = os.path.join(root, "DONE.json")
    try:
        with open(marker) as f:
            if json.load(f) == meta:
                log(f"prep: {root} already complete")
                return {"samples": meta["samples"], "skipped": True}
    except (OSError, ValueError):
        pass
    t0 = time.perf_counter()
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng(1234)
    if kind == "jpeg":
        noise_pool = [rng.normal(0, 10, (JPEG_H + 64, JPEG_W + 64, 3)).astype(np.int16) for _ in range(2)]
    mean = np.array(MEAN, dtype=np.float32).reshape(3, 1, 1)
    std = np.array(STD, dtype=np.float32).reshape(3, 1, 1)
    nbytes = 0
    for i in range(meta["samples"]):
        label = i % NUM_CLASSES
        cdir = os.path.join(tmp, f"class_{label:02d}")
        os.makedirs(cdir, exist_ok=True)
        if kind == "npy":
            # What a preprocessing pass would have cached: a normalised CHW tensor.
            img = rng.random((3, IMAGE_SIZE, IMAGE_SIZE), dtype=np.float32)
            img += np.float32(label / NUM_CLASSES)
            path = os.path.join(cdir, f"{i:06d}.npy")
            np.save(path, ((img / 2 - mean) / std).astype(np.float32))
        else:
            path = os.path.join(cdir, f"{i:06d}.jpg")
            make_photo(rng, label, noise_pool).save(path, "JPEG", quality=90)
        nbytes += os.path.getsize(path)
    with open(os.path.join(tmp, "DONE.json"), "w") as f:
        json.dump(meta, f)
    os.rename(tmp, root)
    secs = time.perf_counter() - t0
    log(f"prep: wrote {meta['samples']} {kind} samples, {nbytes / 1e6:.1f} MB, in {secs:.1f} s")
    return {"samples": meta["samples"], "bytes": nbytes, "seconds": round(secs, 3)}


def prep(args):
    kinds = [args.data_kind] if args.data_kind else ["npy", "jpeg"]
    result = {"mode": "prep"}
    for kind in kinds:
        result[kind] = prep_kind(args.data, kind)
    emit("SCENARIO_RESULT", result)
    return 0


# --------------------------------------------------------------------------
# Bookkeeping: output, CPU time, signals

_OUT_LOCK = threading.Lock()


def emit(tag, obj):
    line = f"{tag} {json.dumps(obj)}\n"
    with _OUT_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


def log(msg):
    with _OUT_LOCK:
        sys.stderr.write(f"[{time.perf_counter() - T_SCRIPT:7.3f}s] {msg}\n")
        sys.stderr.flush()


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def live_descendants_cpu():
    """CPU seconds of our live descendants (e.g. workers not yet joined, the
    forkserver and the workers it reaped, the resource tracker), which
    RUSAGE_CHILDREN does not cover."""
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        pid = int(entry)
        parent[pid] = int(fields[1])
        # utime + stime + cutime + cstime (its own reaped children)
        cpu[pid] = sum(int(v) for v in fields[11:15]) / _CLK_TCK
    total, frontier = 0.0, [os.getpid()]
    while frontier:
        p = frontier.pop()
        for child, ppid in parent.items():
            if ppid == p:
                total += cpu[child]
                frontier.append(child)
    return total


def cpu_seconds():
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = me.ru_utime + me.ru_stime
    children = ch.ru_utime + ch.ru_stime + live_descendants_cpu()
    return own, children


class Terminated(BaseException):
    pass


class State:
    terminated = False
    signum = None
    stopped_pids = []


def _ignore_signal(signum, frame):
    pass


def on_terminate(signum, frame):
    if State.terminated:
        return
    State.terminated = True
    State.signum = signum
    # Do not let DataLoader's SIGCHLD handler turn our own shutdown of the
    # workers into an error (a no-op handler, not SIG_DFL: a SIGCHLD already
    # pending would then raise "ignored due to race condition").
    signal.signal(signal.SIGCHLD, _ignore_signal)
    for pid in State.stopped_pids:  # best effort: no stopped orphans
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
    raise Terminated(signum)


# --------------------------------------------------------------------------
# Training


def make_dataset(args):
    root = os.path.join(args.data, args.data_kind)
    if args.data_kind == "npy" and args.url:
        ds = HttpNpyDataset(root, args.url)
    elif args.data_kind == "npy":
        ds = NpyDataset(root)
    else:
        ds = JpegDataset(root, TrainTransform(IMAGE_SIZE))
    if len(ds) == 0:
        raise SystemExit(f"no {args.data_kind} samples under {root}: run `prep` first")
    return ds


def make_loader(args, dataset):
    kwargs = dict(batch_size=args.batch_size, shuffle=True, num_workers=args.workers, drop_last=False)
    if args.workers > 0:
        kwargs.update(
            multiprocessing_context=args.start,
            persistent_workers=args.persistent_workers,
            prefetch_factor=PREFETCH_FACTOR,
            worker_init_fn=worker_init_fn,
        )
    return DataLoader(dataset, **kwargs)


def make_training():
    model = SmallCNN()
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()

    def train_step(images, labels):
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    return train_step


class Progress:
    """Counters shared with the progress thread (stop-workers mode)."""

    def __init__(self, capacity_items):
        self.items = 0
        self.t_stop = None
        self.items_at_stop = None
        self.capacity_items = capacity_items
        self.stopped_pids = []

    def snapshot(self):
        if self.t_stop is None:
            return {"workers_stopped": False, "items_before_stop": self.items, "items_drained_after_stop": 0,
                    "items_after_stop": 0, "seconds_after_stop": 0.0}
        consumed = self.items - self.items_at_stop
        drained = min(consumed, self.capacity_items)
        return {
            "workers_stopped": True,
            "items_before_stop": self.items_at_stop,
            "items_drained_after_stop": drained,
            "items_after_stop": consumed - drained,
            "seconds_after_stop": round(time.perf_counter() - self.t_stop, 3),
            "stopped_pids": self.stopped_pids,
        }


def progress_thread(progress):
    while True:
        time.sleep(1.0)
        emit("SCENARIO_PROGRESS", progress.snapshot())


def stop_workers(progress):
    pids = sorted(p.pid for p in multiprocessing.active_children())
    progress.items_at_stop = progress.items
    progress.stopped_pids = pids
    State.stopped_pids = pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            pass
    progress.t_stop = time.perf_counter()
    log(f"SIGSTOP sent to DataLoader workers {pids} after {progress.items_at_stop} items")


def run_pipeline(args, result):
    """job and loader modes: epochs over the DataLoader."""
    train_step = make_training() if args.mode == "job" else None
    dataset = make_dataset(args)
    loader = make_loader(args, dataset)
    result.update(dataset_items=len(dataset), batches_per_epoch=len(loader))

    progress = Progress(PREFETCH_FACTOR * max(args.workers, 1) * args.batch_size)
    if args.stop_workers_after is not None:
        with main_thread_signals():
            threading.Thread(target=progress_thread, args=(progress,), daemon=True).start()

    t_begin = None  # end of the first step: start of the steady state
    items = batches = 0
    step_s = wait_s = 0.0
    epochs = []
    result["epochs"] = epochs
    done = False
    it = None
    t_last = None  # end of the last step
    try:
        # A job whose workers get stopped is a long job: do not let the
        # epoch limit end it before the stop.
        epoch_range = itertools.count() if args.stop_workers_after is not None else range(args.epochs)
        for epoch in epoch_range:
            t_epoch = time.perf_counter()
            with main_thread_signals(args.start if args.workers > 0 else None):
                it = iter(loader)  # starts the workers (each epoch unless persistent)
            rec = {"epoch": epoch, "start_s": round(t_epoch - T_SCRIPT, 3), "items": 0}
            epochs.append(rec)
            log(f"epoch {epoch} start")
            t_wait = t_epoch
            while True:
                try:
                    images, labels = next(it)
                except StopIteration:
                    break
                t_got = time.perf_counter()
                if rec["items"] == 0:
                    rec["first_batch_s"] = round(t_got - t_epoch, 3)
                if train_step is not None:
                    train_step(images, labels)
                t_end = time.perf_counter()
                n = len(labels)
                rec["items"] += n
                progress.items += n
                if t_begin is None:
                    t_begin = t_end
                    result["first_batch_s"] = round(t_got - t_epoch, 3)
                    result["startup_s"] = round(t_begin - T_SCRIPT, 3)
                else:
                    items += n
                    batches += 1
                    wait_s += t_got - t_wait
                    step_s += t_end - t_got
                t_wait = t_last = t_end
                if (args.stop_workers_after is not None and progress.t_stop is None
                        and t_end - t_begin >= args.stop_workers_after):
                    stop_workers(progress)
                if args.stop_workers_after is None and t_end - t_begin >= args.duration:
                    done = True
                    break
            rec["end_s"] = round(time.perf_counter() - T_SCRIPT, 3)
            log(f"epoch {epoch} end: {rec['items']} items, first batch after {rec.get('first_batch_s')} s")
            if done:
                break
        result["epochs_completed"] = sum(1 for r in epochs if r["items"] >= len(dataset))
    finally:
        # The timed part ends with the last step, not after the shutdown of
        # the last epoch's workers (done inside the final next()).
        finished = not State.terminated and args.stop_workers_after is None and t_last is not None
        t_final = t_last if finished else time.perf_counter()
        seconds = (t_final - t_begin) if t_begin is not None else 0.0
        result.update(items=items, batches=batches, seconds=round(seconds, 3),
                      items_per_s=round(items / seconds, 2) if seconds > 0 else 0.0,
                      batches_per_s=round(batches / seconds, 2) if seconds > 0 else 0.0,
                      wait_s=round(wait_s, 3))
        if args.mode == "job":
            result["step_s"] = round(step_s, 3)
            result["au_percentage"] = round(100.0 * step_s / seconds, 2) if seconds > 0 else 0.0
        if args.stop_workers_after is not None:
            result["progress"] = progress.snapshot()
        # Shut the workers down (joined) before accounting their CPU time.
        del it
        del loader
        gc.collect()


def run_consumer(args, result):
    train_step = make_training()
    images = torch.randn(args.batch_size, 3, IMAGE_SIZE, IMAGE_SIZE)
    labels = torch.randint(0, NUM_CLASSES, (args.batch_size,))
    train_step(images, labels)  # first step (warm-up) excluded
    t_begin = time.perf_counter()
    result["startup_s"] = round(t_begin - T_SCRIPT, 3)
    items = batches = 0
    t_end = t_begin
    try:
        while t_end - t_begin < args.duration:
            train_step(images, labels)
            t_end = time.perf_counter()
            items += args.batch_size
            batches += 1
    finally:
        seconds = time.perf_counter() - t_begin
        result.update(items=items, batches=batches, seconds=round(seconds, 3),
                      items_per_s=round(items / seconds, 2) if seconds > 0 else 0.0,
                      batches_per_s=round(batches / seconds, 2) if seconds > 0 else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["prep", "job", "loader", "consumer"])
    ap.add_argument("--data", required=True, help="dataset directory")
    ap.add_argument("--data-kind", choices=["npy", "jpeg"], default=None,
                    help="default: npy (prep: both)")
    ap.add_argument("--workers", type=int, default=None, help="DataLoader workers (npy: 1, jpeg: 2)")
    ap.add_argument("--start", choices=["fork", "spawn", "forkserver"], default="fork",
                    help="DataLoader multiprocessing_context")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--persistent-workers", action="store_true")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--duration", type=float, default=None, help="steady-state seconds (job 8, controls 4)")
    ap.add_argument("--stop-workers-after", type=float, default=None,
                    help="job mode: SIGSTOP the DataLoader workers after S s of training")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (see docstring)")
    ap.add_argument("--url", default=None,
                    help="npy: fetch each sample from this HTTP server (serving --data) instead")
    args = ap.parse_args()
    if args.url and args.data_kind not in (None, "npy"):
        ap.error("--url needs --data-kind npy")
    if args.mode == "prep":
        return prep(args)
    if args.data_kind is None:
        args.data_kind = "npy"
    if args.workers is None:
        args.workers = DEFAULT_WORKERS[args.data_kind]
    if args.duration is None:
        args.duration = 8.0 if args.mode == "job" else 4.0
    if args.stop_workers_after is not None and (args.mode != "job" or args.workers == 0):
        ap.error("--stop-workers-after needs job mode and --workers >= 1")

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    random.seed(0)
    signal.signal(signal.SIGTERM, on_terminate)
    signal.signal(signal.SIGINT, on_terminate)

    result = {"mode": args.mode, "kind": args.data_kind, "unit": "item",
              "workers": args.workers if args.mode != "consumer" else 0,
              "start": args.start, "batch_size": args.batch_size,
              "persistent_workers": args.persistent_workers, "epochs_requested": args.epochs,
              "duration": args.duration, "threads": torch.get_num_threads(),
              "image_size": IMAGE_SIZE}
    if args.stop_workers_after is not None:
        result["stop_workers_after"] = args.stop_workers_after
    code = 0
    try:
        if args.mode == "consumer":
            run_consumer(args, result)
        else:
            run_pipeline(args, result)
    except BaseException:
        if not State.terminated:
            raise
        code = 143
        result["terminated"] = True
        log(f"terminated by signal {State.signum}: workers shut down")
    own, children = cpu_seconds()
    result.update(cpu_s=round(own + children, 3), cpu_s_main=round(own, 3), cpu_s_children=round(children, 3),
                  wall_s=round(time.perf_counter() - T_SCRIPT, 3))
    emit("SCENARIO_RESULT", result)
    if code:
        log("exiting")
    return code


if __name__ == "__main__":
    sys.exit(main())
