# Helpers for tests/e2e/t_*.sh (sourced by tests/e2e/run): the counted checks (ok, fail, check,
# skip, contains, lacks, summary) come from tests/lib.sh; the cluster and client helpers below
# are the e2e suite's own.
TAG=e2e
# shellcheck source=tests/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# start_cluster [PLUGSTACK ARGS...]: (re)start the local cluster with these plugstack arguments.
start_cluster() {
    CMLB_PLUGSTACK_ARGS="$*" slurm-conf/cluster start >/dev/null 2>"$WORK/cluster.err" || {
        cat "$WORK/cluster.err" >&2
        fail "cluster start ($*)"
        return 1
    }
}

# wait_job JOBID: wait until the batch job left the queue (max 60 s).
wait_job() {
    for _ in $(seq 1 600); do
        [ -n "$(squeue -h -j "$1" 2>/dev/null)" ] || return 0
        sleep 0.1
    done
    return 1
}

# A lost controller must fail a check, not hang the suite: every Slurm client call is bounded.
srun() { timeout --foreground -k 5 120 env srun "$@"; }
sbatch() { timeout --foreground -k 5 60 env sbatch "$@"; }
salloc() { timeout --foreground -k 5 120 env salloc "$@"; }

# srun_as USER ARGS...: srun started by USER itself (not `srun --uid`, which Slurm 24.11 and
# later refuse), from $WORK so the job's working directory is one the user may enter.
srun_as() {
    local u=$1; shift
    (cd "$WORK" && timeout --foreground -k 5 120 \
        setpriv --reuid="$(id -u "$u")" --regid="$(id -g "$u")" --init-groups -- env srun "$@")
}
