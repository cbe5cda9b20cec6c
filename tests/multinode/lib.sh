# Shared by tests/multinode/run and tests/multinode/ranks: counted checks and their summary.
# The caller sets TAG (the line prefix, default multinode).
PASS=0
FAILED=()
ok() { PASS=$((PASS + 1)); echo "${TAG:-multinode}: ok   $*"; }
fail() { FAILED+=("$*"); echo "${TAG:-multinode}: FAIL $*"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else fail "$name"; fi; }
summary() {
    echo "${TAG:-multinode}: $PASS passed, ${#FAILED[@]} failed"
    if [ ${#FAILED[@]} -gt 0 ]; then
        for f in "${FAILED[@]}"; do echo "${TAG:-multinode}: failed: $f"; done
        exit 1
    fi
    exit 0
}
# contains FILE TEXT: fixed-string grep, printing the file on failure.
contains() {
    if grep -qF -- "$2" "$1"; then return 0; fi
    echo "--- expected '$2' in $1:" >&2; sed 's/^/    /' "$1" >&2
    return 1
}

