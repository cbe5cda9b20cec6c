# Helpers for tests/e2e/t_*.sh (sourced by tests/e2e/run).
PASS=0
FAILED=()

ok() { PASS=$((PASS + 1)); echo "e2e: ok   $*"; }
fail() { FAILED+=("$*"); echo "e2e: FAIL $*"; }

# check NAME CONDITION-COMMAND... : pass when the command succeeds.
check() {
    local name=$1; shift
    if "$@"; then ok "$name"; else fail "$name"; fi
}

# contains FILE TEXT: fixed-string grep, printing the file on failure.
contains() {
    if grep -qF -- "$2" "$1"; then return 0; fi
    echo "--- expected '$2' in $1:" >&2; sed 's/^/    /' "$1" >&2
    return 1
}
lacks() {
    if ! grep -qF -- "$2" "$1"; then return 0; fi
    echo "--- did not expect '$2' in $1:" >&2; sed 's/^/    /' "$1" >&2
    return 1
}

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

summary() {
    echo "e2e: $PASS passed, ${#FAILED[@]} failed"
    if [ ${#FAILED[@]} -gt 0 ]; then
        printf 'e2e: failed: %s\n' "${FAILED[@]}"
        exit 1
    fi
}

# wait_idle: until no job is left on the cluster (srun --uid fails if its job has to queue).
wait_idle() {
    for _ in $(seq 1 300); do
        if [ -z "$(squeue -h 2>/dev/null)" ] && [ "$(sinfo -h -o %T 2>/dev/null | head -1)" = idle ]; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# A lost controller must fail a check, not hang the suite: every Slurm client call is bounded.
srun() { timeout --foreground -k 5 120 env srun "$@"; }
sbatch() { timeout --foreground -k 5 60 env sbatch "$@"; }
salloc() { timeout --foreground -k 5 120 env salloc "$@"; }
