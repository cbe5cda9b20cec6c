# Helpers for tests/e2e/t_*.sh (sourced by tests/e2e/run).
PASS=0
FAILED=()
SKIPPED=()

ok() { PASS=$((PASS + 1)); echo "e2e: ok   $*"; }
fail() { FAILED+=("$*"); echo "e2e: FAIL $*"; }
# skip NAME REASON: a check that cannot run here; counted and listed, never as passed.
skip() { SKIPPED+=("$1 ($2)"); echo "e2e: SKIP $1: $2"; }

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
    if [ ${#SKIPPED[@]} -gt 0 ]; then
        printf 'e2e: skipped: %s\n' "${SKIPPED[@]}"
        echo "e2e: $PASS passed, ${#FAILED[@]} failed, ${#SKIPPED[@]} skipped"
    else
        echo "e2e: $PASS passed, ${#FAILED[@]} failed"
    fi
    if [ ${#FAILED[@]} -gt 0 ]; then
        printf 'e2e: failed: %s\n' "${FAILED[@]}"
        exit 1
    fi
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
