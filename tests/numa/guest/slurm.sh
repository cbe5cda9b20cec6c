#!/bin/bash
# The Slurm part of the multi-NUMA guest checks (tests/numa/README.md). Runs inside the guest,
# chrooted into the host's root file system (9p, read-only; /tmp and /run are tmpfs), so the
# host's Slurm 22.05, munge and cmlb build run on a kernel with two sockets / NUMA nodes.
#   slurm.sh REPO WLDIR "cpu:node ..."
# Prints NUMA-RESULT / NUMA-MEASURE / NUMA-LOG / NUMA-TIME lines like checks.sh. Its parts
# (kernel command line cmlb.slurm=, default apply,mpi): apply (one task pinned beside another
# job), mpi (MPI ranks placed on the NUMA nodes by the rank matrix); then tests/e2e/run if asked.
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
arg() { sed -n "s/.* cmlb\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
build=$(arg build)
mpi_seed=$(arg mpiseed)
mpi_seed_right=$(arg mpiseedright)
parts=$(arg slurm)
parts=${parts:-apply,mpi}
wanted() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
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

check_apply() {
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
            # Pinned to one of the step's PUs, or (the guard found no plan) left in the share.
            case ",$pl," in *",$c,"*) ;; *)
                case "$c:$line" in "$pus":*"threads left as they are"*) ;; *) bad="$bad a thread ran on '$c';" ;; esac ;;
            esac
            rest=${t#*@}
            for nodes in ${rest%@*} ${rest#*@}; do
                case "$nodes" in "$n1":*) [ "${nodes#*,}" = "$nodes" ] || bad="$bad pages on several nodes $nodes;" ;;
                *) bad="$bad pages on $nodes, not node $n1;" ;; esac
            done
        done
        if [ -z "$bad" ]; then
            pass slurm-apply "2-socket guest: other job holds CPUs $held; step cores $cores -> PUs $pus (node $n1); both threads there (pinned, or left in the step's share when the guard found no plan), all first-touched pages on node $n1"
        else
            fail slurm-apply "$bad (apply line: $line)"
        fi
    fi
}

# MPI ranks inside one two-socket node: the real plugin, Open MPI under `srun --mpi=pmix` and
# MPICH under `srun --mpi=pmi2`, the bundled workload's `pairs` pattern on 4 ranks (one core
# each). The shuffled run's WL_SEED (cmlb.mpiseed=, chosen by tests/numa/run from the
# workload's own truth) pairs ranks {0,3} and {1,2}: rank order puts both pairs across the two
# NUMA nodes whether cores go to ranks in block (0,1 | 2,3) or socket-cyclic (0,2 | 1,3) order. Profile, then
# apply must put each pair on one NUMA node; the other seed (cmlb.mpiseedright=) pairs {0,2}
# and {1,3}, which Slurm's own socket-cyclic order already places right: apply must keep it. Both are compared with Slurm's own placement of
# the same run (--cmlb-map=off): the inter-NUMA point-to-point bytes from the workload's truth
# and the CPUs each rank printed.
MPI_ARGS="pairs 20 64"
# Another argument, so the already-right run has a profile key (directory) of its own.
MPI_ARGS_NATURAL="pairs 20 32"

# mpi_run NAME IMPL MODE SEED ARGS...: srun -n4 of mpi-wl.IMPL with WL_SEED=SEED and the truth
# in /tmp/mpi-NAME.truth; sets rc, out/err files /tmp/mpi-NAME.{out,err}, and `where`
# (mpi.awk: each rank's NUMA node, the inter-NUMA point-to-point bytes of this run).
mpi_run() {
    local name=$1 impl=$2 mode=$3 seed=$4 plug
    shift 4
    case $impl in openmpi) plug=pmix ;; mpich) plug=pmi2 ;; esac
    rm -f /tmp/mpi-$name.truth
    step "srun -n4 --mpi=$plug --cmlb-map=$mode mpi-wl.$impl $* (WL_SEED=$seed)"
    WL_SEED=$seed WL_TRUTH=/tmp/mpi-$name.truth timeout 180 srun -n4 --mpi=$plug --cmlb-map=$mode \
        "$wl/mpi/mpi-wl.$impl" "$@" >/tmp/mpi-$name.out 2>/tmp/mpi-$name.err
    rc=$?
    log mpi-$name </tmp/mpi-$name.err
    log mpi-$name </tmp/mpi-$name.out
    if [ -s /tmp/mpi-$name.truth ]; then
        where=$(awk -v n=4 -v cpunode="$cpunode" -f "$repo/tests/numa/guest/mpi.awk" /tmp/mpi-$name.truth /tmp/mpi-$name.out)
    else
        where="no truth written (rank 0 did not start)"
    fi
    measure mpi-$name "srun_rc=$rc seed=$seed $where"
}
field() { echo " $2" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
edges() { grep -v '^#' "$1" | sort; }

# mpi_profile NAME IMPL SEED ARGS...: the rank matrix and the thread profiles of a profiled run.
mpi_profile() {
    local name=$1 impl=$2 seed=$3 rdir bad="" g
    shift 3
    mpi_run "$name" "$impl" profile "$seed" "$@"
    rdir=$(sed -n 's/.*; MPI rank matrix: \(.*\)$/\1/p' /tmp/mpi-$name.err | head -1)
    [ $rc -eq 0 ] || bad="$bad srun exited $rc: $(grep -v '^cmlb: \(this run\|evidence\|settings\)' /tmp/mpi-$name.err | tail -c 300);"
    [ "$(grep -c '^cmlb-mpi-wl rank=' /tmp/mpi-$name.out)" = 4 ] || bad="$bad $(grep -c '^cmlb-mpi-wl rank=' /tmp/mpi-$name.out) of 4 ranks reported;"
    if [ -z "$rdir" ]; then
        bad="$bad the plugin named no rank matrix directory (profile line: $(grep 'cmlb: profiling' /tmp/mpi-$name.err | head -1));"
    elif [ ! -s /tmp/mpi-$name.truth ]; then
        bad="$bad no WL_TRUTH;"
    elif [ ! -f "$rdir/p2p.edges" ]; then
        bad="$bad no $rdir/p2p.edges ($(ls "$rdir" 2>&1 | tr '\n' ' '));"
    elif [ "$(edges "$rdir/p2p.edges")" != "$(edges /tmp/mpi-$name.truth)" ]; then
        bad="$bad p2p.edges [$(edges "$rdir/p2p.edges" | tr '\n' ';')] != truth [$(edges /tmp/mpi-$name.truth | tr '\n' ';')];"
    fi
    [ -n "$rdir" ] && for g in 0 1 2 3; do
        [ -s "${rdir%/ranks}/task$g/profile.yaml" ] || bad="$bad no thread profile task$g/;"
    done
    [ -n "$rdir" ] && [ -f "$rdir/p2p.edges" ] && log mpi-$name-p2p <"$rdir/p2p.edges"
    if [ -z "$bad" ]; then
        pass mpi-$name "srun -n4 --mpi=$(mpi_plugin "$impl") --cmlb-map=profile mpi-wl.$impl $* (WL_SEED=$seed): ranks/p2p.edges = the workload's truth [$(edges /tmp/mpi-$name.truth | awk '{ printf "%s%s>%s:%s", (NR > 1 ? "," : ""), $1, $2, $3 }')], thread profiles task0-3 written"
    else
        fail mpi-$name "$bad"
    fi
}
mpi_plugin() { case $1 in openmpi) echo pmix ;; mpich) echo pmi2 ;; esac; }

# mpi_apply NAME IMPL SEED WANT ARGS...: apply from that profile; every rank inside one NUMA
# node, no point-to-point byte across nodes, and the plugin's rank line says WANT.
mpi_apply() {
    local name=$1 impl=$2 seed=$3 wantline=$4 line bad=""
    shift 4
    mpi_run "$name" "$impl" apply "$seed" "$@"
    line=$(grep 'cmlb: apply:' /tmp/mpi-$name.err | head -1)
    [ $rc -eq 0 ] || bad="$bad srun exited $rc: $(tail -c 300 /tmp/mpi-$name.err);"
    case "$line" in *"$wantline"*) ;; *) bad="$bad the plugin's line does not say '$wantline': '$line';" ;; esac
    [ "$(field spans "$where")" = none ] || bad="$bad ranks not each inside one NUMA node: $(field nodes "$where");"
    [ "$(field inter_bytes "$where")" = 0 ] && [ "$(field unplaced_bytes "$where")" = 0 ] &&
        [ "$(field total_bytes "$where")" != 0 ] || bad="$bad pairs across NUMA nodes: $where;"
    ranks=$(echo "$line" | sed -n 's/.*; \(ranks [^;]* on this node: .*\)$/\1/p')
    if [ -z "$bad" ]; then
        pass mpi-$name "srun -n4 --mpi=$(mpi_plugin "$impl") --cmlb-map=apply (WL_SEED=$seed): rank:node $(field nodes "$where"), each pair on one NUMA node, inter-NUMA p2p bytes 0 of $(field total_bytes "$where"); plugin: $ranks"
    else
        fail mpi-$name "$bad"
    fi
}

# mpi_vs_off NAME IMPL SEED OP ARGS...: the same run with --cmlb-map=off (Slurm's own binding);
# the inter-NUMA bytes of the apply run just before ($where) must be OP (-lt, -le) those.
mpi_vs_off() {
    local name=$1 impl=$2 seed=$3 op=$4 applied=$where
    shift 4
    mpi_run "$name" "$impl" off "$seed" "$@"
    if [ $rc -eq 0 ] && [ "$(field spans "$where")" = none ] && [ "$(field spans "$applied")" = none ] &&
        [ "$(field inter_bytes "$applied")" "$op" "$(field inter_bytes "$where")" ]; then
        pass mpi-$name "WL_SEED=$seed, inter-NUMA point-to-point bytes: --cmlb-map=apply $(field inter_bytes "$applied"), Slurm's own placement (off) $(field inter_bytes "$where") of $(field total_bytes "$where") (rank:node apply $(field nodes "$applied"), off $(field nodes "$where"))"
    else
        fail mpi-$name "WL_SEED=$seed, inter-NUMA point-to-point bytes: apply [$applied] vs off [$where] (srun off rc=$rc; bar: apply $op off, every rank inside one NUMA node)"
    fi
}

check_mpi() {
    local t0 impl
    t0=$(now)
    # The other job of check_apply must be gone: the 4-task steps need every core.
    for _ in $(seq 1 100); do
        [ -z "$(squeue -h 2>/dev/null)" ] && break
        sleep 0.2
    done
    if [ -z "$mpi_seed" ] || [ -z "$mpi_seed_right" ]; then
        fail mpi-setup "no WL_SEED for the MPI check on the kernel command line (cmlb.mpiseed=, cmlb.mpiseedright=): tests/numa/run could not choose them"
        return
    fi
    for impl in openmpi mpich; do
        if [ ! -x "$wl/mpi/mpi-wl.$impl" ]; then
            fail mpi-$impl-setup "no $wl/mpi/mpi-wl.$impl (tests/numa/run builds it: make -C tests/workloads mpi)"
            continue
        fi
        mpi_profile $impl-profile $impl "$mpi_seed" $MPI_ARGS
        mpi_apply $impl-apply $impl "$mpi_seed" "cores by the rank matrix" $MPI_ARGS
        [ $impl = openmpi ] || continue
        # Slurm's own placement (the plugin off) of the same run: apply must cut the
        # inter-NUMA bytes.
        mpi_vs_off $impl-vs-off $impl "$mpi_seed" -lt $MPI_ARGS
        # Slurm's own order already right: apply must keep it, and be no worse than Slurm's
        # own placement of the same run.
        mpi_profile $impl-right-profile $impl "$mpi_seed_right" $MPI_ARGS_NATURAL
        mpi_apply $impl-right-apply $impl "$mpi_seed_right" "rank order kept" $MPI_ARGS_NATURAL
        mpi_vs_off $impl-right-vs-off $impl "$mpi_seed_right" -le $MPI_ARGS_NATURAL
    done
    echo "NUMA-TIME slurm-mpi $(since "$t0")"
}

t0=$(now)
if wanted apply; then
    check_apply
    echo "NUMA-TIME slurm-apply $(since "$t0")"
fi
wanted mpi && check_mpi

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
