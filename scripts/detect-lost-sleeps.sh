#!/usr/bin/env bash
# Counts timed sleeps that storprof's scheduler probes lose (README, Known
# limits: a sleep now and then counted as time on a CPU). PROCS forked
# Python processes each sleep SLEEPS times for 50 ms under `storprof
# record`; each appends the kernel's /proc/self/schedstat to a log at the end. The
# script prints, per process, storprof's on-CPU time beside the kernel's
# and the sleeps missing from the 32-67 ms bucket of its clock_nanosleep
# histogram. The loss shows under load (e.g. DLIO generating JPEGs beside
# it), rarely on a quiet machine.
#
# usage (root): STORPROF=target/release/storprof scripts/detect-lost-sleeps.sh OUT [PROCS] [SLEEPS]
set -euo pipefail
out=${1:?usage: $0 OUT [PROCS] [SLEEPS]}
procs=${2:-6}
sleeps=${3:-300}
storprof=${STORPROF:-target/release/storprof}
py=$(mktemp --suffix=.py)
log=$(mktemp)
trap 'rm -f "$py" "$log"' EXIT
cat > "$py" <<'PY'
import os, sys, time
n, k, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
kids = []
for _ in range(n - 1):
    pid = os.fork()
    if pid == 0:
        kids = None
        break
    kids.append(pid)
for _ in range(k):
    time.sleep(0.05)
with open('/proc/self/schedstat') as f, open(log, 'a') as out:
    out.write(f"PID {os.getpid()} {f.read().strip()}\n")
for pid in kids or []:
    os.waitpid(pid, 0)
PY
rm -rf "$out"
"$storprof" record -o "$out" -- python3 "$py" "$procs" "$sleeps" "$log" > /dev/null 2>&1
python3 - "$out" "$log" <<'PY'
import json, re, sys
out, log = sys.argv[1], sys.argv[2]
kernel = {}
for line in open(log):
    m = re.match(r'PID (\d+) (\d+) (\d+) (\d+)', line)
    if m:
        kernel[int(m.group(1))] = int(m.group(2))
lost_total = 0
seen = set()
for t in json.load(open(out + '/threads.json')):
    if t['tid'] not in kernel:
        continue
    seen.add(t['tid'])
    calls = [s for s in t['syscalls'] if s['name'] == 'clock_nanosleep']
    count = sum(s['count'] for s in calls)
    in_bucket = sum(s['latency_log2_ns'][25] for s in calls if len(s['latency_log2_ns']) > 25)
    lost_total += count - in_bucket
    print(f"pid {t['tid']}: on CPU {t['on_cpu_ns'] / 1e6:.1f} ms (kernel {kernel[t['tid']] / 1e6:.1f}), "
          f"sleeps {count}, outside 32-67 ms {count - in_bucket}")
for pid in sorted(set(kernel) - seen):
    print(f"pid {pid}: printed its schedstat but is not in threads.json")
print(f"processes that printed: {len(kernel)}; lost sleeps: {lost_total}")
PY
