#!/usr/bin/env bash
# Counts timed sleeps that storprof's scheduler probes lose (README, Known
# limits: switch-ins without a scheduler event). PROCS forked
# Python processes each sleep SLEEPS times for 50 ms under `storprof
# record`; each appends the kernel's /proc/self/schedstat to a log at the end. The
# script prints, per process, storprof's on-CPU time beside the kernel's
# and the sleeps its clock_nanosleep histogram puts under 32 ms (lost:
# their blocked time went missing) or over 67 ms (late: woken late under
# load, not a loss), and the switch-ins the probes repaired. The loss
# showed under load (e.g. DLIO generating JPEGs beside it).
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
    short = sum(sum(s['latency_log2_ns'][:25]) for s in calls)
    late = sum(sum(s['latency_log2_ns'][26:]) for s in calls)
    lost_total += short
    print(f"pid {t['tid']}: on CPU {t['on_cpu_ns'] / 1e6:.1f} ms (kernel {kernel[t['tid']] / 1e6:.1f}), "
          f"sleeps {count}, under 32 ms {short}, over 67 ms {late}")
for pid in sorted(set(kernel) - seen):
    print(f"pid {pid}: printed its schedstat but is not in threads.json")
missed = json.load(open(out + '/session.json')).get('missed_switch_ins', 0)
print(f"processes that printed: {len(kernel)}; lost sleeps: {lost_total}; "
      f"switch-ins repaired: {missed}")
PY
