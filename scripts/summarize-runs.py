"""Median [min..max] of repeated benchmark figures, and ratios between them.

Usage: summarize-runs.py LOG [A/B ...]
LOG holds one "name value" line per measurement; each A/B argument prints
median(A) / median(B) as a percentage when both were measured.
"""
import statistics
import sys

runs = {}
for line in open(sys.argv[1]):
    name, value = line.split()
    runs.setdefault(name, []).append(float(value))
med = {k: statistics.median(v) for k, v in runs.items()}
width = max((len(k) for k in runs), default=0) + 2
for k, v in runs.items():
    print(f"{k:{width}s} {med[k]:8.3f} [{min(v):.3f}..{max(v):.3f}]")
for pair in sys.argv[2:]:
    a, b = pair.split("/")
    if a in med and b in med and med[b] > 0:
        print(f"{a} / {b}: {med[a] / med[b] * 100:.0f}%")
