"""tf.data image-classification input pipeline feeding an eager TF2 loop.

The pipeline is the one in the TensorFlow tutorials and most TF2 training
scripts (ImageNet-style TFRecords of JPEGs):

    files = sorted(glob(DIR/train-*.tfrecord))
    ds = tf.data.TFRecordDataset(files)
    ds = ds.shuffle(512).repeat()
    ds = ds.map(parse_and_decode, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(32, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    for batch in ds:                      # eager iteration from Python
        batch["image"].shape              # the trainer touches the batch
        time.sleep(step)                  # the step (stands for an
                                          # accelerator's train step)

parse_and_decode = tf.io.parse_single_example -> tf.io.decode_jpeg ->
tf.image.random_flip_left_right -> tf.image.resize to 224x224 (bilinear,
float32) -> scale to [0,1].  The records are 384x384 noisy RGB JPEGs
(quality 90, ~100 KB each), so decoding + resizing is the dominant cost
and it runs on TF's own C++ threads, not on the Python thread: tf.data's
default optimizations fuse map+batch into MapAndBatchDataset, whose map
calls run on two Eigen thread-pool workers (one per vCPU).  Those threads,
like tf.data's prefetch / runner / autotune threads, have no OS name of
their own: /proc/PID/task/*/comm shows "python" for them (only
"tf_Compute" x2, "tf_graph_runner" and "jemalloc_bg_thd" are named, and
they stay idle).  TF's threading defaults are left as they are (no
inter/intra-op or tf.data threadpool options).

Two scenario settings, chosen with --step:

  --step short  (= 0.005 s)  truth: CPU-BOUND READER.  The loader alone
      delivers ~12-27 batches/s of 32 (both vCPUs busy decoding JPEGs; the
      spread is other load on the 2 vCPUs) while the consumer alone does
      ~193 steps/s: the loop waits for the loader; consumer rate / loader
      rate is 7-15x.
  --step long   (= 0.5 s)    truth: COMPUTE-BOUND.  The consumer alone does
      2.0 steps/s while the loader alone delivers ~12-27 batches/s; loader
      rate / consumer rate is 6-13x, so the prefetch buffer stays full and
      the loop almost never waits.
  --step S (seconds, a number) is also accepted.

Controls (DS-Analyzer's differential method):
  loader   : the identical dataset iterated without sleeping (each batch
             touched the same way and dropped) -> delivery rate;
  consumer : one batch taken from the same dataset once before timing,
             then the same touch + sleep step loop without the dataset.

Usage (Python = /work/main/target/dlio-venv/bin/python):
  python tfdata_train.py prep     --data DIR   [--records 1024 --files 4
                                                --src-size 384]
  python tfdata_train.py job      --data DIR --step short|long|S [--duration 8]
  python tfdata_train.py loader   --data DIR --step short|long|S [--duration 4]
  python tfdata_train.py consumer --data DIR --step short|long|S [--duration 4]
Other options: --batch 32 --size 224 (output image side).
(--step does not change what loader mode does; it is accepted for symmetry.)

Importing TensorFlow takes ~2.5-4 s on an idle machine (up to ~10 s when
the 2 vCPUs are busy); the first batch (shuffle-buffer fill, AUTOTUNE
warm-up) ~0.5 s; both are start-up, excluded from the timed part.  Exit
(TF teardown) takes ~0.6 s more.  prep takes ~5 s + the import, ~104 MB.
TF_CPP_MIN_LOG_LEVEL=2 is set before the import; TF still prints an absl
"oneDNN custom operations are on" line to stderr, which is harmless.

Each mode prints one line ``SCENARIO_RESULT {json}`` to stdout at the end;
job mode adds ``au_percentage`` (time in the step / timed wall time, from
the end of the first step).  SIGTERM/SIGINT stop the loop at the next
batch or step boundary; the result is still printed and the exit code is 0.
"""

import argparse
import collections
import glob
import json
import os
import resource
import signal
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

STEP_PRESETS = {"short": 0.005, "long": 0.5}
FILE_GLOB = "train-*-of-*.tfrecord"
MARKER = "PREP_DONE.json"

_stop = False


def _on_signal(signum, frame):
    global _stop
    _stop = True


def cpu_seconds():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def thread_names():
    names = collections.Counter()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                names[f.read().strip()] += 1
        except OSError:
            pass
    return dict(sorted(names.items()))


def parse_step(text):
    if text in STEP_PRESETS:
        return STEP_PRESETS[text]
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("step must be >= 0")
    return value


# --------------------------------------------------------------------- prep

def cmd_prep(args):
    params = {"records": args.records, "files": args.files,
              "src_size": args.src_size, "version": 2}
    os.makedirs(args.data, exist_ok=True)
    marker = os.path.join(args.data, MARKER)
    try:
        with open(marker) as f:
            if json.load(f) == params:
                print("prep: %s already prepared" % args.data, file=sys.stderr)
                return 0
    except (OSError, ValueError):
        pass
    import numpy as np
    import tensorflow as tf

    for old in glob.glob(os.path.join(args.data, FILE_GLOB)):
        os.unlink(old)

    rng = np.random.default_rng(1234)
    side = args.src_size
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32) / side
    # pixel noise (sigma 40) cut at a random offset from one larger field
    noise_pool = 40 * rng.standard_normal((2 * side, 2 * side, 3),
                                          dtype=np.float32)
    per_file = -(-args.records // args.files)
    written = 0
    total_bytes = 0
    t0 = time.perf_counter()
    for fi in range(args.files):
        name = "train-%05d-of-%05d.tfrecord" % (fi, args.files)
        path = os.path.join(args.data, name)
        with tf.io.TFRecordWriter(path + ".tmp") as writer:
            for _ in range(per_file):
                if written >= args.records or _stop:
                    break
                label = int(rng.integers(0, 1000))
                # a smooth colour field (the "scene") plus strong pixel noise
                base = np.stack([
                    128 + 100 * np.sin(6.28 * (xx * rng.uniform(0.5, 3)
                                               + yy * rng.uniform(0.5, 3)
                                               + rng.uniform()))
                    for _ in range(3)], axis=-1)
                oy, ox = rng.integers(0, side, size=2)
                noise = noise_pool[oy:oy + side, ox:ox + side]
                img = np.clip(base + noise, 0, 255).astype(np.uint8)
                jpeg = tf.io.encode_jpeg(img, quality=90).numpy()
                total_bytes += len(jpeg)
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image/encoded": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[jpeg])),
                    "image/class/label": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[label])),
                    "image/height": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[side])),
                    "image/width": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[side])),
                }))
                writer.write(example.SerializeToString())
                written += 1
        if _stop:
            os.unlink(path + ".tmp")
            print("prep: interrupted", file=sys.stderr)
            return 0
        os.replace(path + ".tmp", path)
    with open(marker, "w") as f:
        json.dump(params, f)
    print("prep: %d records in %d files, %.1f MB of JPEG, %.1f s"
          % (written, args.files, total_bytes / 1e6,
             time.perf_counter() - t0), file=sys.stderr)
    return 0


# ----------------------------------------------------------------- pipeline

def make_dataset(tf, data_dir, batch_size, out_size):
    files = sorted(glob.glob(os.path.join(data_dir, FILE_GLOB)))
    if not files:
        sys.exit("no %s under %s: run prep first" % (FILE_GLOB, data_dir))

    feature_spec = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse_and_decode(serialized):
        ex = tf.io.parse_single_example(serialized, feature_spec)
        image = tf.io.decode_jpeg(ex["image/encoded"], channels=3)
        image = tf.image.random_flip_left_right(image)
        image = tf.image.resize(image, [out_size, out_size])
        image = image / 255.0
        label = tf.cast(ex["image/class/label"], tf.int32)
        return {"image": image, "label": label}

    ds = tf.data.TFRecordDataset(files)
    ds = ds.shuffle(512).repeat()
    ds = ds.map(parse_and_decode, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    return ds


def touch(batch):
    # what a trainer does with the batch on the host before the step:
    # look at its shape and pull the (small) labels to numpy
    n = batch["image"].shape[0]
    batch["label"].numpy()
    return n


def run(args):
    t_start = time.perf_counter()
    import tensorflow as tf
    t_import = time.perf_counter() - t_start

    step = args.step
    dataset = make_dataset(tf, args.data, args.batch, args.size)
    extra = {}

    if args.mode == "consumer":
        # one batch made once from the same dataset, before timing
        batch = next(iter(dataset))
        del dataset
        t_ready = time.perf_counter()
        touch(batch)
        time.sleep(step)
        t0 = time.perf_counter()
        items = 0
        while not _stop and time.perf_counter() - t0 < args.duration:
            touch(batch)
            time.sleep(step)
            items += 1
        seconds = time.perf_counter() - t0
    else:
        it = iter(dataset)
        batch = next(it)                   # start-up: first batch
        t_ready = time.perf_counter()
        touch(batch)
        if args.mode == "job":
            time.sleep(step)               # first step, excluded
        t0 = time.perf_counter()
        items = 0
        wait_s = 0.0
        step_s = 0.0
        while not _stop:
            ta = time.perf_counter()
            if ta - t0 >= args.duration:
                break
            try:
                batch = next(it)
            except StopIteration:
                break
            tb = time.perf_counter()
            touch(batch)
            if args.mode == "job":
                time.sleep(step)
            tc = time.perf_counter()
            wait_s += tb - ta
            step_s += tc - tb
            items += 1
        seconds = time.perf_counter() - t0
        if args.mode == "job":
            extra["au_percentage"] = round(100.0 * step_s / seconds, 2)
            extra["wait_s"] = round(wait_s, 3)
            extra["step_s"] = round(step_s, 3)
            extra["threads"] = thread_names()
        del it

    result = {
        "mode": args.mode,
        "items": items,
        "seconds": round(seconds, 4),
        "items_per_s": round(items / seconds, 3) if seconds > 0 else 0.0,
        "cpu_s": round(cpu_seconds(), 3),
        "unit": "batch",
        "batch_size": args.batch,
        "images_per_s": round(items * args.batch / seconds, 1)
        if seconds > 0 else 0.0,
        "step_s_setting": step,
        "src_size": None,
        "out_size": args.size,
        "tf_version": tf.__version__,
        "tf_import_s": round(t_import, 2),
        "startup_s": round(t_ready - t_start, 2),
        "stopped_by_signal": _stop,
    }
    try:
        with open(os.path.join(args.data, MARKER)) as f:
            result["src_size"] = json.load(f).get("src_size")
    except (OSError, ValueError):
        pass
    result.update(extra)
    sys.stdout.write("SCENARIO_RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["prep", "job", "loader", "consumer"])
    ap.add_argument("--data", required=True)
    ap.add_argument("--duration", type=float, default=None,
                    help="timed seconds (default: job 8, controls 4)")
    ap.add_argument("--step", type=parse_step, default=STEP_PRESETS["short"],
                    help="short (%.3f s), long (%.2f s) or seconds"
                    % (STEP_PRESETS["short"], STEP_PRESETS["long"]))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224,
                    help="output image side after resize")
    ap.add_argument("--records", type=int, default=1024)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--src-size", type=int, default=384,
                    help="side of the JPEGs written by prep")
    args = ap.parse_args(argv)
    if args.duration is None:
        args.duration = 8.0 if args.mode == "job" else 4.0

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    if args.mode == "prep":
        return cmd_prep(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
