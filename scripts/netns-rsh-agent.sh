#!/bin/sh
# OpenMPI launch agent for test hosts made as network namespaces on one machine
# (mpirun --mca plm_rsh_agent scripts/netns-rsh-agent.sh --host h1:1,h2:1 ...).
# mpirun calls it as `AGENT HOST COMMAND...` to start its daemon on HOST; the
# daemon and the ranks it forks then run inside HOST's namespace with
# STORPROF_HOST=HOST, so summary.json and the host list name the test hosts
# (they share this machine's hostname). Used by tests/multihost.rs.
#
# To record each host, run `storprof record --netns HOST --output DIR/HOST`
# beside the job (it finds the daemon and ranks in HOST's namespace), or set
# STORPROF_RECORD_DIR: the daemon then runs under
# `storprof record --output $STORPROF_RECORD_DIR/HOST`, so the host's ranks land
# in one session named after the host; merge them with
# `storprof merge $STORPROF_RECORD_DIR/* -o MERGED`.
set -eu
host=$1
shift
if [ -n "${STORPROF_RECORD_DIR:-}" ]; then
    exec ip netns exec "$host" env STORPROF_HOST="$host" \
        "${STORPROF:-storprof}" record --output "$STORPROF_RECORD_DIR/$host" -- sh -c "$*"
fi
exec ip netns exec "$host" env STORPROF_HOST="$host" sh -c "$*"
