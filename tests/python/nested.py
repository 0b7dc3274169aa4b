"""Pure-Python workload for the per-version Python frame tests: a forked
child and the parent each spin in outer → middle → leaf for SECONDS.

    pythonX.Y nested.py [SECONDS]
"""
import os
import sys
import time


def leaf(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def middle(n):
    return leaf(n) + 1


def outer(deadline):
    while time.monotonic() < deadline:
        middle(20_000)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    deadline = time.monotonic() + seconds
    pid = os.fork()
    outer(deadline)
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
