#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the Slurm tests (issue: sweeps on Slurm).
#   .ci/slurm.sh start DIR   install (Debian: slurmctld slurmd slurm-client munge) if missing,
#                            write DIR/slurm.conf, start munged, slurmctld, slurmd; wait for the
#                            node to be idle; print "SLURM_CONF=DIR/slurm.conf"
#   .ci/slurm.sh stop DIR    stop the daemons by the PIDs recorded in DIR
# Needs root (apt-get, munge key). Exits non-zero with a message when Slurm cannot start.
set -euo pipefail
action=${1:?usage: slurm.sh start|stop DIR}
dir=$(mkdir -p "${2:?usage: slurm.sh start|stop DIR}" && cd "$2" && pwd)

stop() {
  for name in slurmd slurmctld munged; do
    [ -f "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done  # gone before the next start
    rm -f "$dir/$name.pid"
  done
}

if [ "$action" = stop ]; then stop; exit 0; fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
fi

host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$dir/state" "$dir/spool" "$dir/log" /run/munge /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key /run/munge; chmod 400 /etc/munge/munge.key; chmod 755 /run/munge
cat > "$dir/slurm.conf" <<CONF
ClusterName=robustkit
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# Test jobs are seconds long: schedule (and resolve dependencies) every second, not every 30-60 s.
SchedulerParameters=bf_interval=1,sched_interval=1,sched_min_interval=100000
# scancel sends SIGTERM, which submitit's jobs ignore (they wait for Slurm's USR2), then SIGKILL
# after KillWait seconds (default 30): a test that cancels a job wants that at once.
KillWait=1
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MaxArraySize=1000
NodeName=$host CPUs=$cpus RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$dir/slurm.conf"

# The package's own service may already run munged (a machine with an init system): use it.
if ! munge -n >/dev/null 2>&1; then
  su -s /bin/sh munge -c "munged --pid-file=/run/munge/munged.pid" || munged --force --pid-file=/run/munge/munged.pid
  cp /run/munge/munged.pid "$dir/munged.pid"
fi
if pgrep -r R,S,D -x slurmctld >/dev/null || pgrep -r R,S,D -x slurmd >/dev/null; then
  echo "slurm.sh: a slurmctld or slurmd is already running; stop it first" >&2
  exit 1
fi
slurmctld -f "$SLURM_CONF"
for _ in $(seq 50); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
  state=$(sinfo -h -N -o %T 2>/dev/null | head -1)
  if [ "$state" = idle ]; then echo "SLURM_CONF=$SLURM_CONF"; exit 0; fi
  sleep 0.2
done
echo "slurm.sh: node did not become idle (state: ${state:-none}); logs in $dir/log" >&2
stop
exit 1
