#!/usr/bin/env bash
# A real single-node SLURM on this machine (no accounting, no GPUs), to try the slurm
# profile and run tests/test_slurm.py. Needs root; Debian's slurm-wlm and munge are
# installed with apt-get when missing.
#   .ci/local_slurm.sh start     write the configs, start munged, slurmctld, slurmd
#   .ci/local_slurm.sh status    sinfo
#   .ci/local_slurm.sh stop      stop the three daemons (by their pid files)
# The workflow then runs with (the target before --configfile, which takes several files)
#   initmem slurm-profile && snakemake --profile slurm all --slurm-no-account \
#       --slurm-status-command squeue --configfile config/test.yaml
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARK="# written by initmem .ci/local_slurm.sh"
HOST=$(hostname -s)
MUNGE_PID=/run/munge/munged.pid
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid

install_packages() {
    if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge
    fi
}

start_munge() {
    install -d -o munge -g munge -m 0700 /etc/munge /var/log/munge /var/lib/munge
    install -d -o munge -g munge -m 0755 /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    if ! munge -n >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged
    fi
    munge -n | unmunge >/dev/null
}

write_conf() {
    if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        echo "local_slurm.sh: $CONF exists and is not ours; not overwriting it" >&2
        exit 1
    fi
    install -d -o slurm -g slurm /var/spool/slurmctld /var/log/slurm
    install -d /var/spool/slurmd
    # The node line (CPUs, sockets, cores, RealMemory) exactly as slurmd sees this machine.
    local node
    node=$(slurmd -C | head -n 1)
    cat > "$CONF" <<EOF
$MARK
ClusterName=initmem
SlurmctldHost=$HOST
SlurmUser=slurm
AuthType=auth/munge
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MinJobAge=600
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
$node State=UNKNOWN
PartitionName=main Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
}

running() {  # pid file names a live process
    [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

start() {
    install_packages
    start_munge
    write_conf
    running "$CTLD_PID" || slurmctld
    running "$SLURMD_PID" || slurmd
    for _ in $(seq 30); do
        state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null || true)
        case "$state" in
            idle*|mix*|alloc*) sinfo; return 0 ;;
            down*|drain*) scontrol update nodename="$HOST" state=resume || true ;;
        esac
        sleep 1
    done
    echo "local_slurm.sh: node $HOST did not become idle (state: ${state:-none});" \
         "see /var/log/slurm/" >&2
    exit 1
}

stop() {
    for pid_file in "$SLURMD_PID" "$CTLD_PID" "$MUNGE_PID"; do
        if running "$pid_file"; then
            kill "$(cat "$pid_file")"
        fi
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) sinfo ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
