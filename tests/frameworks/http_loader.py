"""Network-bound scenario: a training loader fetching 8 MiB objects over HTTP.

The pipeline is the one people write when their shards sit behind an object
store / HTTP server: a couple of loader threads each call
``urllib.request.urlopen(url, timeout=30)``, read the response fully and put
the bytes into a bounded ``queue.Queue(maxsize=4)``; the training loop (main
thread) takes items from the queue and runs a short step (a 5 ms sleep
standing for the compute). The server (``serve``) is a stdlib
``http.server.ThreadingHTTPServer`` run inside a network namespace whose
egress (the download direction) is shaped to 200 Mbit/s by tbf
(``netns_link.sh``).

Truth: NETWORK-BOUND. 200 Mbit/s is 25 MB/s, about 3 objects/s, while the
consumer alone does ~190 steps/s; the same loader through an unshaped veth is
tens of objects/s; the loader threads spend their time waiting for the socket
to become readable (the socket timeout makes CPython poll() for readiness
before each recv), so the loader's CPU is low (cpu_s / seconds << 0.3).
Controls (DS-Analyzer's differential method):
  * loader  (shaped)   : the same 2 threads, main thread drops each item;
  * consumer           : the same step loop on one in-memory 8 MiB item;
  * loader  (unshaped) : the loader through a `netns_link.sh up NAME 0` link.
  consumer rate / shaped loader rate >= 3 and unshaped / shaped loader >= 3.

Usage (as root; Python = the test venv's python, stdlib only):
  python http_loader.py prep --data DIR [--objects 16] [--size-mib 8]
  ADDR=$(sh netns_link.sh up pmnet 200)          # 0 = unshaped
  ip netns exec pmnet python http_loader.py serve --data DIR --port 8000 --bind $ADDR &
  python http_loader.py job      --url http://$ADDR:8000 --data DIR [--duration 8]
  python http_loader.py loader   --url http://$ADDR:8000 --data DIR [--duration 4]
  python http_loader.py consumer --data DIR [--duration 4]
  kill %1; sh netns_link.sh down pmnet
Common client options: --threads 2 --step 0.005 --queue 4 --objects N
(object names come from the listing of DIR, or obj_00000.bin.. for
--objects N when DIR is not readable on the client side).
The client waits up to --wait-server 10 s for the server to accept
connections, so server and client can be started back to back.

Each client mode prints one line ``SCENARIO_RESULT {json}`` at the end.
"""

import argparse
import functools
import http.server
import json
import os
import queue
import resource
import signal
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request

OBJ_PREFIX = "obj_"
OBJ_SUFFIX = ".bin"


def obj_name(i):
    return "%s%05d%s" % (OBJ_PREFIX, i, OBJ_SUFFIX)


def cpu_seconds():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


# --------------------------------------------------------------------- prep

def cmd_prep(args):
    os.makedirs(args.data, exist_ok=True)
    size = args.size_mib << 20
    n = args.objects or 16
    written = 0
    for i in range(n):
        path = os.path.join(args.data, obj_name(i))
        try:
            if os.path.getsize(path) == size:
                continue
        except OSError:
            pass
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(os.urandom(size))  # incompressible payload
        os.replace(tmp, path)
        written += 1
    print("prep: %d objects of %d MiB in %s (%d written)"
          % (n, args.size_mib, args.data, written), file=sys.stderr)
    return 0


# -------------------------------------------------------------------- serve

class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *a):  # no per-request stderr lines
        pass


def cmd_serve(args):
    handler = functools.partial(QuietHandler, directory=args.data)
    httpd = http.server.ThreadingHTTPServer((args.bind, args.port), handler)
    httpd.daemon_threads = True

    def on_signal(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print("serve: %s on %s:%d" % (args.data, args.bind, args.port),
          file=sys.stderr, flush=True)
    try:
        httpd.serve_forever()
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        httpd.server_close()
    return 0


# ------------------------------------------------------------------ clients

def object_names(args):
    names = []
    try:
        names = sorted(n for n in os.listdir(args.data)
                       if n.startswith(OBJ_PREFIX) and n.endswith(OBJ_SUFFIX))
    except OSError:
        pass
    if args.objects:
        names = names[:args.objects] if len(names) >= args.objects \
            else [obj_name(i) for i in range(args.objects)]
    if not names:
        raise SystemExit("no objects: run prep on --data, or pass --objects N")
    return names


def wait_for_server(url, deadline_s, stop):
    u = urllib.parse.urlsplit(url)
    host, port = u.hostname, u.port or 80
    t_end = time.monotonic() + deadline_s
    while not stop.is_set():
        try:
            socket.create_connection((host, port), timeout=1.0).close()
            return True
        except OSError:
            if time.monotonic() >= t_end:
                return False
            time.sleep(0.1)
    return False


def fetch_loop(base, names, tid, nthreads, q, stop, errors):
    """One loader thread: fetch its share of the objects, round and round."""
    i = tid
    try:
        while not stop.is_set():
            url = "%s/%s" % (base, names[i % len(names)])
            with urllib.request.urlopen(url, timeout=30) as resp:
                data = resp.read()
            i += nthreads
            while not stop.is_set():
                try:
                    q.put(data, timeout=0.2)
                    break
                except queue.Full:
                    pass
    except Exception as e:  # report, and let the main thread end the run
        errors.append("thread %d: %r" % (tid, e))
        stop.set()


def run_client(args):
    mode = args.mode
    duration = args.duration if args.duration is not None \
        else (8.0 if mode == "job" else 4.0)
    stop = threading.Event()
    interrupted = []

    def on_signal(signum, frame):
        interrupted.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    result = {"mode": mode, "unit": "item", "scenario": "http_loader",
              "threads": args.threads if mode != "consumer" else 0,
              "step_s": args.step, "queue_maxsize": args.queue}

    if mode == "consumer":
        # One item made once before timing (an object from DIR if present).
        names = []
        try:
            names = sorted(n for n in os.listdir(args.data)
                           if n.startswith(OBJ_PREFIX))
        except OSError:
            pass
        if names:
            with open(os.path.join(args.data, names[0]), "rb") as f:
                item = f.read()
        else:
            item = os.urandom(8 << 20)
        items = 0
        t0 = time.perf_counter()
        while not stop.is_set():
            _ = len(item)
            time.sleep(args.step)  # the training step
            items += 1
            if time.perf_counter() - t0 >= duration:
                break
        seconds = time.perf_counter() - t0
        result.update(items=items, seconds=round(seconds, 4),
                      items_per_s=round(items / seconds, 3),
                      item_bytes=len(item))
        return finish(result, interrupted)

    base = args.url.rstrip("/")
    names = object_names(args)
    if not wait_for_server(base, args.wait_server, stop):
        if interrupted:
            result.update(items=0, seconds=0.0, items_per_s=0.0)
            return finish(result, interrupted)
        print("http_loader: server %s not reachable within %.0f s"
              % (base, args.wait_server), file=sys.stderr)
        return 1

    q = queue.Queue(maxsize=args.queue)
    errors = []
    threads = [threading.Thread(target=fetch_loop, name="loader-%d" % t,
                                args=(base, names, t, args.threads, q, stop,
                                      errors), daemon=True)
               for t in range(args.threads)]
    for t in threads:
        t.start()

    def next_item():
        while True:
            try:
                return q.get(timeout=0.2)
            except queue.Empty:
                if stop.is_set():
                    return None

    items = 0
    nbytes = 0
    step_time = 0.0
    t0 = None
    if mode == "loader":
        # The loader alone: drop each item. Timing starts at the first item.
        first = next_item()
        if first is not None:
            t0 = time.perf_counter()
            cpu0 = cpu_seconds()
            while True:
                data = next_item()
                if data is None:
                    break
                items += 1
                nbytes += len(data)
                if time.perf_counter() - t0 >= duration:
                    break
    else:  # job: the training loop
        first = next_item()
        if first is not None:
            time.sleep(args.step)  # first step: start-up, not timed
            t0 = time.perf_counter()
            cpu0 = cpu_seconds()
            while True:
                data = next_item()
                if data is None:
                    break
                ts = time.perf_counter()
                time.sleep(args.step)  # the training step on `data`
                step_time += time.perf_counter() - ts
                items += 1
                nbytes += len(data)
                if time.perf_counter() - t0 >= duration:
                    break
    seconds = (time.perf_counter() - t0) if t0 is not None else 0.0
    cpu_timed = (cpu_seconds() - cpu0) if t0 is not None else 0.0

    stop.set()
    for t in threads:
        t.join(timeout=40)
    alive = sum(t.is_alive() for t in threads)

    result.update(items=items, seconds=round(seconds, 4),
                  items_per_s=round(items / seconds, 3) if seconds else 0.0,
                  mb_per_s=round(nbytes / seconds / 1e6, 2) if seconds else 0.0,
                  cpu_s_timed=round(cpu_timed, 4),
                  url=base, objects=len(names))
    if mode == "job":
        result["au_percentage"] = round(100.0 * step_time / seconds, 2) \
            if seconds else 0.0
    if errors:
        result["errors"] = errors[:4]
    if alive:
        result["threads_not_joined"] = alive
    rc = finish(result, interrupted)
    if errors and not interrupted:
        print("http_loader: " + "; ".join(errors[:4]), file=sys.stderr)
        return 1
    return rc


def finish(result, interrupted):
    result["cpu_s"] = round(cpu_seconds(), 4)
    if interrupted:
        result["interrupted"] = True
    print("SCENARIO_RESULT " + json.dumps(result), flush=True)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)

    sp = sub.add_parser("prep", help="write the objects")
    sp.add_argument("--data", required=True)
    sp.add_argument("--objects", type=int, default=16)
    sp.add_argument("--size-mib", type=int, default=8)

    ss = sub.add_parser("serve", help="HTTP server for DIR")
    ss.add_argument("--data", required=True)
    ss.add_argument("--port", type=int, default=8000)
    ss.add_argument("--bind", default="0.0.0.0")

    for m in ("job", "loader", "consumer"):
        sc = sub.add_parser(m)
        sc.add_argument("--data", required=True)
        sc.add_argument("--url", default="http://10.231.77.2:8000")
        sc.add_argument("--objects", type=int, default=0)
        sc.add_argument("--threads", type=int, default=2)
        sc.add_argument("--step", type=float, default=0.005)
        sc.add_argument("--queue", type=int, default=4)
        sc.add_argument("--duration", type=float, default=None)
        sc.add_argument("--wait-server", type=float, default=10.0)

    args = p.parse_args(argv)
    if args.mode == "prep":
        return cmd_prep(args)
    if args.mode == "serve":
        return cmd_serve(args)
    return run_client(args)


if __name__ == "__main__":
    sys.exit(main())
