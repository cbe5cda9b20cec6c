#!/bin/bash
# The Slurm part of the multi-NUMA guest checks (tests/numa/README.md). Runs inside the guest,
# chrooted into the host's root file system (9p, read-only; /tmp and /run are tmpfs), so the
# host's Slurm 22.05, munge and cmlb build run on a kernel with two sockets / NUMA nodes.
#   slurm.sh REPO WLDIR "cpu:node ..."
# Prints NUMA-RESULT / NUMA-MEASURE / NUMA-LOG lines like checks.sh.
set -u
repo=$1
wl=$2
cpunode=$3
cd "$repo" || exit 1
pass() { echo "NUMA-RESULT PASS $1 $2"; }
fail() { echo "NUMA-RESULT FAIL $1 $2"; }
measure() { echo "NUMA-MEASURE $*"; }
log() { sed "s/^/NUMA-LOG $1| /"; }
export CMLB_CLUSTER_DIR=/tmp/cmlb-numa-cluster
build=$(sed -n 's/.* cmlb\.build=\([^ ]*\).*/\1/p' /proc/cmdline)
export CMLB_SPANK_SO=$repo/target/${build:-release}/libcmlb_spank.so
export HOME=/tmp XDG_CACHE_HOME=/tmp/cache
node_of() { echo " $cpunode " | sed -n "s/.* $1:\([0-9]*\) .*/\1/p"; }

# No systemd in the guest: slurmd's cgroup/v2 plugin must not ask systemd's dbus for a scope
# (slurmd 22.05 loads a cgroup plugin even with proctrack/linuxproc). `cluster start` writes
# this cgroup.conf beside slurm.conf (the e2e suite's clusters too).
export CMLB_CGROUP_CONF='CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes'
mkdir -p "$CMLB_CLUSTER_DIR"
step() { echo "NUMA-LOG slurm| $(cut -d' ' -f1 /proc/uptime) $*"; }
step "cluster start"
# To files, not a pipe: the daemons it starts keep a pipe open and $(...) would never end.
if ! timeout -k 5 90 slurm-conf/cluster start >/tmp/cluster.out 2>/tmp/cluster.err </dev/null; then
    log cluster </tmp/cluster.err
    for f in "$CMLB_CLUSTER_DIR"/*.log "$CMLB_CLUSTER_DIR"/*.err; do [ -f "$f" ] && tail -15 "$f" | log "${f##*/}"; done
    fail slurm-cluster "the local Slurm cluster did not start in the guest: $(tail -c 300 /tmp/cluster.err)"
    exit 0
fi
export SLURM_CONF=$CMLB_CLUSTER_DIR/slurm.conf
shape=$(slurmd -C | head -1)
measure slurm-node "$(echo "$shape" | tr ' ' '\n' | grep -E '^(CPUs|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' ')"
case "$shape" in
*SocketsPerBoard=2*CoresPerSocket=2*) pass slurm-cluster "Slurm $(sinfo -V | cut -d' ' -f2) up in the guest; slurmd -C: 2 sockets x 2 cores" ;;
*) fail slurm-cluster "slurmd -C in the guest: $shape (expected 2 sockets x 2 cores)" ;;
esac

# A job holds two cores; the next step gets the two others. Whichever socket that is, the
# plugin must pin to the PUs of the cores Slurm gave (S_STEP_ALLOC_CORES), and the threads'
# first-touched memory must be on that socket's NUMA node.
step "cluster up; job holding two cores"
timeout 120 srun -n1 -c2 --cmlb-map=off sleep 60 >/dev/null 2>&1 &
holder=$!
for _ in $(seq 1 100); do
    [ "$(squeue -h -o %T 2>/dev/null | head -1)" = RUNNING ] && break
    sleep 0.2
done
held=$(scontrol show job -d "$(squeue -h -o %i | head -1)" | sed -n 's/.*CPU_IDs=\([^ ]*\).*/\1/p')
step "other job on $held; srun --cmlb-map=apply (profiling pre-run, then pinned)"
timeout 180 srun -n1 -c2 --cmlb-map=apply "$wl/ftcheck" 2 1024 256 0.3 >/tmp/sl-ft0.out 2>/tmp/sl-ft0.err
log sl-ft0 </tmp/sl-ft0.err
# Again, now from the saved profile: the plugin's "apply:" line names the step's cores.
step "srun --cmlb-map=apply from the profile"
timeout 180 srun -n1 -c2 --cmlb-map=apply "$wl/ftcheck" 2 1024 256 0.3 >/tmp/sl-ft.out 2>/tmp/sl-ft.err
rc=$?
kill $holder 2>/dev/null
scancel --quiet -u root 2>/dev/null
log sl-ft </tmp/sl-ft.err
log sl-ft </tmp/sl-ft.out
line=$(grep 'cmlb: apply:' /tmp/sl-ft.err | head -1)
cores=$(echo "$line" | sed -n 's/.* on cores \([^ ]*\) (PUs \([^)]*\)).*/\1/p')
pus=$(echo "$line" | sed -n 's/.* on cores \([^ ]*\) (PUs \([^)]*\)).*/\2/p')
threads=$(grep '^ftcheck thread=' /tmp/sl-ft.out | sed 's/.* cpus=\([^ ]*\) .*priv_nodes=\([^ ]*\) .*shared_nodes=\([^ ]*\) .*/\1@\2@\3/' | tr '\n' ' ')
measure slurm-apply "held_by_other_job=$held step_cores=$cores plugin_pus=$pus threads=$threads rc=$rc"
if [ $rc -ne 0 ] || [ -z "$pus" ]; then
    fail slurm-apply "srun --cmlb-map=apply exited $rc, apply line '$line'"
else
    # PUs the plugin chose: the two not held by the other job, all on one NUMA node
    want=""
    for c in $(echo "$cpunode" | tr ' ' '\n' | cut -d: -f1); do
        case ",$(echo "$held" | sed 's/-/,/')," in *",$c,"*) ;; *) want="$want${want:+,}$c" ;; esac
    done
    pl=$(echo "$pus" | sed 's/\([0-9]*\)-\([0-9]*\)/\1,\2/')
    n1=$(node_of "${pl%%,*}")
    n2=$(node_of "${pl##*,}")
    bad=""
    [ "$pl" = "$want" ] || bad="$bad plugin PUs $pus, free PUs $want;"
    [ "$n1" = "$n2" ] || bad="$bad PUs $pus span nodes $n1 and $n2;"
    for t in $threads; do
        c=${t%%@*}
        case ",$pl," in *",$c,"*) ;; *) bad="$bad a thread ran on '$c';" ;; esac
        rest=${t#*@}
        for nodes in ${rest%@*} ${rest#*@}; do
            case "$nodes" in "$n1":*) [ "${nodes#*,}" = "$nodes" ] || bad="$bad pages on several nodes $nodes;" ;;
            *) bad="$bad pages on $nodes, not node $n1;" ;; esac
        done
    done
    if [ -z "$bad" ]; then
        pass slurm-apply "2-socket guest: other job holds CPUs $held; step cores $cores -> PUs $pus (node $n1); both threads pinned there, all first-touched pages on node $n1"
    else
        fail slurm-apply "$bad (apply line: $line)"
    fi
fi
slurm-conf/cluster stop >/dev/null 2>&1

# The end-to-end suite once in the guest (it uses the debug build tests/run makes).
if [ "${NUMA_E2E:-1}" = 1 ] && [ -f target/debug/libcmlb_spank.so ] && [ -f target/debug/cmlb ]; then
    t0=$(cut -d' ' -f1 /proc/uptime)
    step "tests/e2e/run"
    CMLB_CLUSTER_DIR=/tmp/cmlb-e2e timeout 900 tests/e2e/run >/tmp/e2e.out 2>&1
    rc=$?
    log e2e </tmp/e2e.out
    sum=$(grep '^e2e: [0-9]* passed' /tmp/e2e.out | tail -1)
    measure slurm-e2e "rc=$rc $sum seconds=$(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.0f", b - a }')"
    if [ $rc -eq 0 ] && [ -n "$sum" ]; then
        pass slurm-e2e "tests/e2e/run in the 2-socket guest: $sum"
    else
        fail slurm-e2e "tests/e2e/run in the 2-socket guest exited $rc: ${sum:-no summary} $(grep 'e2e: FAIL' /tmp/e2e.out | head -3 | tr '\n' ' ')"
    fi
elif [ "${NUMA_E2E:-1}" = 1 ]; then
    echo "NUMA-RESULT SKIP slurm-e2e target/debug/{cmlb,libcmlb_spank.so} missing: tests/run builds them before tests/numa/run"
else
    echo "NUMA-RESULT SKIP slurm-e2e left out on request (NUMA_E2E=0)"
fi
