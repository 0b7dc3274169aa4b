"""THREADS Python threads fight over one threading.Lock for SECONDS, each
holding it for some pure-Python work (tests/probes.rs).

usage: lock_pool.py THREADS SECONDS
"""

import sys
import threading
import time


def main() -> None:
    threads, seconds = int(sys.argv[1]), float(sys.argv[2])
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def contend() -> None:
        while time.monotonic() < end:
            with lock:
                total = 0
                for i in range(3000):
                    total += i

    pool = [threading.Thread(target=contend) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


if __name__ == "__main__":
    main()
