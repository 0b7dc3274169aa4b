"""Three processes spinning in Python on this machine's CPUs (one more
than two CPUs hold): each is preempted every few milliseconds, so its
off-CPU time is runnable time, spent in spin_preempted.

Usage: preempted.py SECONDS
"""

import os
import sys
import time


def spin_preempted(until):
    n = 0
    while time.monotonic() < until:
        n += 1
    return n


def main():
    seconds = float(sys.argv[1])
    workers = max(3, (os.cpu_count() or 2) + 1)
    until = time.monotonic() + seconds
    children = []
    for _ in range(workers - 1):
        pid = os.fork()
        if pid == 0:
            spin_preempted(until)
            os._exit(0)
        children.append(pid)
    spin_preempted(until)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
