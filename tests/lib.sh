# Shared by the shell suites that run on the host against a local Slurm cluster (tests/e2e,
# tests/multinode/{run,ranks,mpirun}, tests/soak, tests/sanitizers, tests/packaging; the
# cleanup also by tests/bench/ranks-cluster, the skip rule by tests/slurm-releases/run):
# counted checks, their summary, the whole-suite skip rule and the cleanup of the cluster. The caller sets TAG, the prefix of every line it prints
# (e2e, multinode, asan, soak, ...), before sourcing this file. Summary lines are parsed
# elsewhere (tests/slurm-releases/run reads "e2e: N passed, M failed"): keep their wording.
# Not used by tests/numa/guest/*.sh (they run inside a qemu guest, which has no copy of this
# file, and print NUMA-RESULT lines that tests/numa/run counts), nor by tests/fuzz/run.
: "${TAG:?set TAG (the line prefix of the suite) before sourcing tests/lib.sh}"
PASS=0
FAILED=()
SKIPPED=()
CMLB_TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

ok() { PASS=$((PASS + 1)); echo "$TAG: ok   $*"; }
fail() { FAILED+=("$*"); echo "$TAG: FAIL $*"; }
# skip NAME REASON: a check that cannot run here; counted and listed, never as passed.
skip() { SKIPPED+=("$1 ($2)"); echo "$TAG: SKIP $1: $2"; }

# check NAME CONDITION-COMMAND... : pass when the command succeeds.
check() {
    local name=$1; shift
    if "$@"; then ok "$name"; else fail "$name"; fi
}

# contains FILE TEXT / lacks FILE TEXT: fixed-string grep, printing the file on failure.
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

# summary: "TAG: N passed, M failed[, K skipped][ SUMMARY_TAIL]" (the skipped checks listed
# before it, the failed ones after it), then exit: 1 on any failure, else 0. A skipped check
# does not fail the run: it names a check this release or machine cannot have (the whole
# suite skipped is another matter, see suite_skip).
summary() {
    local f line="$TAG: $PASS passed, ${#FAILED[@]} failed"
    if [ ${#SKIPPED[@]} -gt 0 ]; then
        for f in "${SKIPPED[@]}"; do echo "$TAG: skipped: $f"; done
        line+=", ${#SKIPPED[@]} skipped"
    fi
    echo "$line${SUMMARY_TAIL:+ $SUMMARY_TAIL}"
    if [ ${#FAILED[@]} -gt 0 ]; then
        for f in "${FAILED[@]}"; do echo "$TAG: failed: $f"; done
        exit 1
    fi
    exit 0
}

# require_all: true under CI=true or CMLB_REQUIRE_ALL=1, where every part must run.
require_all() { [ "${CI:-}" = true ] || [ "${CMLB_REQUIRE_ALL:-0}" = 1 ]; }
# suite_skip REASON: skip the whole suite. That passes a developer's run (exit 0), never CI's
# (CI=true) or one that asked for every part (CMLB_REQUIRE_ALL=1): tests/run must not pass
# without a single Slurm test.
suite_skip() {
    echo "$TAG: SKIP: $1"
    if require_all; then
        echo "$TAG: FAIL: the whole suite would be skipped under CI=true/CMLB_REQUIRE_ALL=1" >&2
        exit 1
    fi
    exit 0
}

# cluster_cleanup [--purge|--purge-always] [--no-logs] [--kept WHAT]: the EXIT trap of a suite
# that starts a local cluster (slurm-conf/cluster, with the caller's CMLB_CLUSTER_DIR) and
# works in $WORK. Stops the cluster. A run without failures (and without KEEP=1) then removes
# $WORK, and with --purge the cluster directory too (cluster stop --purge; --purge-always:
# whatever the outcome). Otherwise $WORK stays, with the cluster's *.log copied into it (not
# with --no-logs), and one line says "TAG: WHAT kept in $WORK" (default WHAT: outputs and
# Slurm logs). KEEP=1 keeps $WORK of a passing run too.
cluster_cleanup() {
    local purge=no logs=1 kept="outputs and Slurm logs" cl=$CMLB_TESTS_DIR/../slurm-conf/cluster
    while [ $# -gt 0 ]; do
        case $1 in
            --purge) purge=pass ;;
            --purge-always) purge=always ;;
            --no-logs) logs=0 ;;
            --kept) kept=$2; shift ;;
            *) echo "$TAG: cluster_cleanup: unknown argument '$1'" >&2 ;;
        esac
        shift
    done
    "$cl" stop >/dev/null 2>&1
    if [ ${#FAILED[@]} -eq 0 ] && [ "${KEEP:-0}" != 1 ]; then
        [ $purge = no ] || "$cl" stop --purge >/dev/null 2>&1
        [ -z "${WORK:-}" ] || rm -rf "$WORK"
    else
        [ $purge != always ] || "$cl" stop --purge >/dev/null 2>&1
        [ $logs -eq 0 ] || cp "$CMLB_CLUSTER_DIR"/*.log "$WORK/" 2>/dev/null
        echo "$TAG: $kept kept in $WORK"
    fi
}
