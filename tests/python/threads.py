"""Two threads for the Python frames tests: the main thread spins in pure
Python (spin_a, holding the GIL), a second one hashes a large buffer
(hash_b), where hashlib releases the GIL. Each thread's samples must show
its own Python frames: sha256 under hash_b, never under spin_a.

    pythonX.Y threads.py [SECONDS]
"""
import hashlib
import sys
import threading
import time

BIG = b"x" * (16 << 20)


def spin_a(deadline):
    n = 0
    while time.monotonic() < deadline:
        for i in range(10000):
            n += i * i % 7
    return n


def hash_b(deadline):
    while time.monotonic() < deadline:
        hashlib.sha256(BIG).digest()


def main():
    deadline = time.monotonic() + float(sys.argv[1] if len(sys.argv) > 1 else 2)
    thread = threading.Thread(target=hash_b, args=(deadline,))
    thread.start()
    spin_a(deadline)
    thread.join()


if __name__ == "__main__":
    main()
