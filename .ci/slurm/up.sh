#!/usr/bin/env bash
# A one-node SLURM cluster on 127.0.0.1 for the cluster tests (tests/test_slurm.py): munge, MariaDB, slurmdbd,
# slurmctld and slurmd from Debian's packages, as root, without systemd. Every daemon writes its PID file under
# $STATE (default /tmp/yocou-slurm); .ci/slurm/down.sh stops them by those files. Accounting (slurmdbd) is on:
# snakemake-executor-plugin-slurm reads job states with sacct.
#
#   .ci/slurm/up.sh --install   # apt-get the packages first (root, network to the Debian mirror)
#   .ci/slurm/up.sh             # start; prints the node's state when it is up; exit 1 (and a reason) otherwise
set -euo pipefail
STATE=${YOCOU_SLURM_STATE:-/tmp/yocou-slurm}
PKGS="slurm-wlm slurmdbd munge mariadb-server"

if [[ ${1:-} == --install ]]; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PKGS >/dev/null
fi
for cmd in munged mariadbd slurmdbd slurmctld slurmd sacctmgr sinfo; do
  command -v "$cmd" >/dev/null || { echo "slurm up: $cmd not found (run with --install as root)" >&2; exit 1; }
done
[[ $(id -u) == 0 ]] || { echo "slurm up: needs root (the daemons run as munge, mysql and slurm)" >&2; exit 1; }

host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p "$STATE"/{log,spool/ctld,spool/d} /etc/slurm /run/munge /run/mysqld
chmod 1777 "$STATE"   # each daemon (root, mysql, slurm) writes its PID file here
chown slurm: "$STATE/spool/ctld"; chmod 777 "$STATE/log"
chown munge: /run/munge
chown mysql: /run/mysqld

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local t=$1 what=$2; shift 2
  for _ in $(seq "$t"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "slurm up: $what did not come up in ${t} s (logs: $STATE/log)" >&2; exit 1
}

# munge: one key for this host
[[ -s /etc/munge/munge.key ]] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null;
                                   chown munge: /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
# (munged refuses a log or PID file in a folder others could write: its own folders, the PID file read by down.sh)
mkdir -p /var/log/munge && chown munge: /var/log/munge
runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid 2>"$STATE/log/munged.err" || true
wait_for 10 munge munge -n

# MariaDB on 127.0.0.1 only (its data folder made by the package), for slurmdbd
mariadbd --user=mysql --bind-address=127.0.0.1 --pid-file="$STATE/mariadb.pid" --socket=/run/mysqld/mysqld.sock \
  --log-error="$STATE/log/mariadb.log" >/dev/null 2>&1 &
wait_for 30 MariaDB mariadb --socket=/run/mysqld/mysqld.sock -e "select 1"
mariadb --socket=/run/mysqld/mysqld.sock -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

cat > /etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=slurm
EOF
chown slurm: /etc/slurm/slurmdbd.conf
chmod 600 /etc/slurm/slurmdbd.conf

cat > /etc/slurm/slurm.conf <<EOF
ClusterName=yocou
SlurmctldHost=$host
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
MinJobAge=300
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

slurmdbd
wait_for 30 slurmdbd sacctmgr -n list cluster
sacctmgr -i add cluster yocou >/dev/null 2>&1 || true
slurmctld
slurmd
wait_for 60 "the node" bash -c "sinfo -h -N -o '%t' | grep -Eq '^(idle|mix|alloc)'"
sinfo -N -o "%N %t %c %m"
