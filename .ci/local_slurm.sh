#!/usr/bin/env bash
# A real SLURM on this machine (no accounting, no GPUs), to try the slurm profile and run
# tests/test_slurm*.py. Needs root; Debian's slurm-wlm and munge are installed with
# apt-get when missing.
#   .ci/local_slurm.sh start             one node: this host (slurmctld and slurmd here)
#   .ci/local_slurm.sh start --nodes N   N nodes imnode1..N, each a network namespace with
#                                        its own address on the bridge imbr0 and, through a
#                                        UTS namespace, its own hostname; each gets a slice
#                                        of the cores and memory; all share this filesystem
#   .ci/local_slurm.sh status            sinfo, one line per node
#   .ci/local_slurm.sh stop              stop the daemons (by their pid files); remove the
#                                        namespaces, bridge and /etc/hosts lines start made
# Kill every process of one node's namespace to lose that node (tests/test_slurm_nodes.py):
#   for p in $(ip netns pids imnode1); do kill -9 $p; done
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
# The N-node cluster: a bridge and addresses of a private range, only ever those this
# script creates (node i is imnode<i> at $NET.<10+i>, the controller $NET.1).
BRIDGE=imbr0
NET=10.239.39
NODE=imnode

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

# The controller's state folder: one per node count, so that a cluster of another shape
# never reads a state that names other nodes (an N-node one starts with its state cleared).
state_dir() {
    if [ "$1" = 1 ]; then echo /var/spool/slurmctld; else echo "/var/spool/slurmctld-$1"; fi
}

# The node lines: this host as slurmd sees it, or N nodes sharing its cores and memory.
node_lines() {
    local n=$1
    if [ "$n" = 1 ]; then
        echo "$(slurmd -C | head -n 1) State=UNKNOWN"
        echo "PartitionName=main Nodes=$HOST Default=YES MaxTime=INFINITE State=UP"
        return
    fi
    local cpus mem i
    cpus=$(( $(nproc) / n )); [ "$cpus" -ge 1 ] || cpus=1
    mem=$(( $(slurmd -C | head -n 1 | sed 's/.*RealMemory=\([0-9]*\).*/\1/') / n ))
    for i in $(seq "$n"); do
        echo "NodeName=$NODE$i NodeAddr=$NET.$((10 + i)) CPUs=$cpus RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=main Nodes=$NODE[1-$n] Default=YES MaxTime=INFINITE State=UP"
}

write_conf() {
    local n=$1 ctld=$HOST slurmd_pid=$SLURMD_PID spool=/var/spool/slurmd
    local slurmd_log=/var/log/slurm/slurmd.log state
    if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        echo "local_slurm.sh: $CONF exists and is not ours; not overwriting it" >&2
        exit 1
    fi
    state=$(state_dir "$n")
    if [ "$n" != 1 ]; then  # each node its own files
        ctld="$HOST($NET.1)" slurmd_pid=/run/slurmd-%n.pid spool=/var/spool/slurmd-%n
        slurmd_log=/var/log/slurm/slurmd-%n.log
    fi
    install -d -o slurm -g slurm "$state" /var/log/slurm
    install -d /var/spool/slurmd
    cat > "$CONF" <<EOF
$MARK
ClusterName=initmem
SlurmctldHost=$ctld
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
StateSaveLocation=$state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$slurmd_pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=$slurmd_log
EOF
    if [ "$n" != 1 ]; then  # a lost node is down in about 30 s; its job requeued, pending
        # for cred_expire seconds (120 by default) before it may start again, then started
        # by the backfill scheduler's next pass (every 30 s by default)
        printf '%s\n' SlurmdTimeout=10 SlurmctldTimeout=10 AuthInfo=cred_expire=10 \
            SchedulerParameters=bf_interval=2 >> "$CONF"
    fi
    node_lines "$n" >> "$CONF"
}

running() {  # pid file names a live process
    [ -f "$1" ] && kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null
}

# The bridge, and per node a namespace with a veth into it, its address and a hosts line.
make_network() {
    local n=$1 i
    ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
    ip addr replace "$NET.1/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    for i in $(seq "$n"); do
        ip netns list | grep -qw "^$NODE$i" || ip netns add "$NODE$i"
        if ! ip link show "imv$i" >/dev/null 2>&1; then
            ip link add "imv$i" type veth peer name "imv${i}n"
            ip link set "imv${i}n" netns "$NODE$i"
        fi
        ip link set "imv$i" master "$BRIDGE" up
        ip -n "$NODE$i" addr replace "$NET.$((10 + i))/24" dev "imv${i}n"
        ip -n "$NODE$i" link set "imv${i}n" up
        ip -n "$NODE$i" link set lo up
        grep -q "^$NET.$((10 + i)) $NODE$i " /etc/hosts ||
            echo "$NET.$((10 + i)) $NODE$i $MARK" >> /etc/hosts
    done
}

# slurmd of node $1 in its namespace, under its own hostname (nsenter, not `ip netns
# exec`: that remounts /sys, and slurmd then fails on cgroups).
start_node() {
    running "/run/slurmd-$1.pid" ||
        nsenter --net="/run/netns/$1" unshare --uts sh -c "hostname $1; exec slurmd -N $1"
}

wait_idle() {  # every node idle (a node down from an earlier run is resumed)
    local state
    for _ in $(seq 60); do
        state=$(sinfo -h -N -o '%N %T' 2>/dev/null || true)
        if [ -n "$state" ] && ! echo "$state" | grep -qvE ' (idle|mix|alloc)'; then
            sinfo -N; return 0
        fi
        echo "$state" | while read -r node s; do
            case "$s" in down*|drain*) scontrol update nodename="$node" state=resume || true ;; esac
        done
        sleep 1
    done
    echo "local_slurm.sh: nodes did not become idle ($state); see /var/log/slurm/" >&2
    exit 1
}

start() {
    local n=1
    while [ $# -gt 0 ]; do
        case "$1" in
            --nodes) n=${2:-}; shift 2 || { echo "--nodes takes a number" >&2; exit 2; } ;;
            *) echo "local_slurm.sh: unknown option $1 (allowed: --nodes N)" >&2; exit 2 ;;
        esac
    done
    if ! [[ "$n" =~ ^[1-9][0-9]?$ ]]; then
        echo "local_slurm.sh: --nodes $n is not allowed; a number from 1 to 99" >&2; exit 2
    fi
    install_packages
    start_munge
    write_conf "$n"
    if [ "$n" = 1 ]; then
        running "$CTLD_PID" || slurmctld
        running "$SLURMD_PID" || slurmd
    else
        make_network "$n"
        running "$CTLD_PID" || slurmctld -c
        for i in $(seq "$n"); do start_node "$NODE$i"; done
    fi
    wait_idle
}

stop() {
    local pid_file ns i
    for pid_file in "$SLURMD_PID" /run/slurmd-"$NODE"*.pid "$CTLD_PID" "$MUNGE_PID"; do
        if running "$pid_file"; then
            kill "$(cat "$pid_file")"
            # gone before we return: a start right after must not find it still running
            for _ in $(seq 30); do running "$pid_file" || break; sleep 0.5; done
        fi
    done
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^$NODE[0-9]+$" || true); do
        for pid in $(ip netns pids "$ns"); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns delete "$ns"  # its end of the veth goes with it, and so the pair
    done
    for i in $(ip -o link show | sed -n 's/^[0-9]*: \(imv[0-9]*\)[@:].*/\1/p'); do
        ip link delete "$i" 2>/dev/null || true  # gone with its namespace meanwhile
    done
    ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
    # rewritten in place (not renamed: /etc/hosts may be a mount)
    local kept
    kept=$(grep -vF " $MARK" /etc/hosts || true)
    printf '%s\n' "$kept" > /etc/hosts
}

case "${1:-}" in
    start) shift; start "$@" ;;
    stop) stop ;;
    status) sinfo -N ;;
    *) echo "usage: $0 start [--nodes N]|stop|status" >&2; exit 2 ;;
esac
