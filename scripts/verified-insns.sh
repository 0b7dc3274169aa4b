#!/usr/bin/env bash
# Instructions the kernel's verifier walked for each probe program (the
# kernel's `verified_insns`, kernel 5.16+): the main cost of a recording's
# start. Runs `STORPROF record -- sleep 3`, and at 2 s reads the programs it
# holds (their ids from /proc/PID/fdinfo) with BPF_OBJ_GET_INFO_BY_FD.
# Prints one line per program and the total. Needs root.
#   sudo bash scripts/verified-insns.sh [STORPROF=target/release/storprof]
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "verified-insns.sh: needs root" >&2; exit 1; }
STORPROF=${1:-target/release/storprof}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$STORPROF" record -q -o "$WORK/s" -- sleep 3 > /dev/null 2>&1 &
pid=$!
sleep 2
ids=$(awk '/^prog_id:/ {print $2}' /proc/$pid/fdinfo/* 2> /dev/null | sort -un)
python3 - $ids <<'PY'
import ctypes, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
SYS_BPF, PROG_GET_FD_BY_ID, OBJ_GET_INFO_BY_FD = 321, 13, 15
# struct bpf_prog_info: name[16] at byte 64, verified_insns at byte 216.
INFO_SIZE, NAME_AT, VERIFIED_AT = 256, 64, 216

def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    return libc.syscall(SYS_BPF, cmd, buf, 128)

rows = []
for prog_id in map(int, sys.argv[1:]):
    fd = bpf(PROG_GET_FD_BY_ID, struct.pack("I", prog_id))
    if fd < 0:
        continue
    info = ctypes.create_string_buffer(INFO_SIZE)
    if bpf(OBJ_GET_INFO_BY_FD, struct.pack("IIQ", fd, INFO_SIZE, ctypes.addressof(info))) == 0:
        name = info.raw[NAME_AT:NAME_AT + 16].split(b"\0")[0].decode()
        rows.append((struct.unpack_from("I", info, VERIFIED_AT)[0], name))
for insns, name in sorted(rows, reverse=True):
    print(f"{name:<28} {insns:>8}")
print(f"{'all (' + str(len(rows)) + ' programs)':<28} {sum(i for i, _ in rows):>8}")
PY
wait "$pid"
