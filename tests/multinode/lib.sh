# Shared by tests/multinode/run, ranks and mpirun: Open MPI launches retried once on a known
# Open MPI race. The counted checks, their summary and the cluster cleanup come from
# tests/lib.sh. The caller sets TAG (the line prefix, default multinode).
TAG=${TAG:-multinode}
# shellcheck source=tests/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# ompi_launch OUT ERR CMD...: an Open MPI launch, stdout to OUT, stderr to ERR. Debian 12's Open
# MPI 4.1.4 has a TCP connect race (open-mpi/ompi#10734: "connect() ... failed: Operation now in
# progress (115)"), after which a rank may die with SIGSEGV at a null address: 2 of about 40
# multi-node Open MPI launches on 2026-11-26, a smoke program without cmlb included. That
# signature, and only it, gets one more try, said on its own line; the second must pass every
# check. RETRY_PREP, when set, is run first (a command line, word-split and globbed: remove a
# half-written profile, re-read counters). docs/cluster.md.
ompi_launch() {
    local out=$1 err=$2 rc
    shift 2
    "$@" >"$out" 2>"$err"
    rc=$?
    if [ $rc -ne 0 ] && grep -q "Open MPI failed to TCP connect" "$err"; then
        echo "$TAG: RETRY $(basename "$out"): Open MPI 4.1.4 TCP connect race (rc $rc; first stderr kept in $err.1)"
        mv "$err" "$err.1"
        # shellcheck disable=SC2086 # a command line, globs on purpose
        [ -z "${RETRY_PREP:-}" ] || $RETRY_PREP
        "$@" >"$out" 2>"$err"
        rc=$?
    fi
    return $rc
}
