#!/usr/bin/env bash
# Stop the one-node cluster of .ci/slurm/up.sh by its daemons' PID files (never by name: other SLURM or MariaDB
# processes on the machine are not ours). Leaves $STATE's logs.
set -uo pipefail
STATE=${YOCOU_SLURM_STATE:-/tmp/yocou-slurm}
for d in slurmd slurmctld slurmdbd mariadb munged; do
  f="$STATE/$d.pid"
  [[ $d == munged ]] && f=/run/munge/munged.pid   # munged keeps its PID file in its own folder
  [[ -s $f ]] || continue
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$f"
done
echo "slurm down: stopped the daemons of $STATE"
