# `cmlb run` without Slurm: the preload pins every thread of a pthreads program where `cmlb map`
# plans it, inside the CPUs the process may use.
CMLB=$repo/target/debug/cmlb
[ -x "$WORK/pairs" ] && [ -d "$WORK/prof4" ] || { fail "cmlb run tests need t_20's workload and profile"; return; }
ALL=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
for s in compact scatter dagtm; do
    "$CMLB" run --profile "$WORK/prof4" --strategy "$s" -- "$WORK/pairs" 4 0.2 >"$WORK/r_$s" 2>"$WORK/r_$s.err"
    "$CMLB" map --profile "$WORK/prof4" --cpuset self --strategy "$s" --format yaml \
        | awk '/^- thread:/ {t=$3} /^ +pu:/ {print t, $2}' | sort -n > "$WORK/rp_$s"
    awk '$1 == "thread" {print $2, $6}' "$WORK/r_$s" | sort -n > "$WORK/rg_$s"
    check "cmlb run --strategy $s pins every thread where cmlb map plans it" diff "$WORK/rp_$s" "$WORK/rg_$s"
    check "cmlb run --strategy $s reports its plan" contains "$WORK/r_$s.err" "cmlb: run: strategy $s, profile $WORK/prof4 (4 threads), PUs $ALL"
done
# The preload's own contract (CMLB_BIND_*): threads ended by pthread_exit or cancelled at once
# end normally while being pinned (a cancellation inside the trampoline used to abort).
if gcc -O2 -pthread -o "$WORK/exits" tests/e2e/exits.c; then
    LD_PRELOAD=$repo/target/debug/libcmlb_preload.so CMLB_BIND_PUS=0,0,0 CMLB_BIND_VERBOSE=1 \
        sh -c 'CMLB_BIND_PID=$$ exec "$0"' "$WORK/exits" >"$WORK/ex.out" 2>"$WORK/ex.err"
    rc=$?
    check "preload: pthread_exit and pthread_cancel in pinned threads (rc=$rc)" test $rc -eq 0
    check "preload: pthread_exit's value arrives" contains "$WORK/ex.out" "pthread_exit value 42"
    check "preload: the cancelled thread ends cancelled" contains "$WORK/ex.out" "cancelled yes"
    check "preload: both threads were pinned" contains "$WORK/ex.err" "thread 2 (tid"
else
    fail "compile exits.c"
fi
taskset -c 0 "$CMLB" run --profile "$WORK/prof4" --strategy scatter -- "$WORK/pairs" 4 0.1 >"$WORK/r1" 2>&1
check "cmlb run plans inside its own affinity (taskset -c 0)" test "$(awk '$1 == "thread" && $6 != "0"' "$WORK/r1" | wc -l)" -eq 0

# No profile yet: a pre-run bounded by --time writes the cache, the real run is pinned; the next
# run of the same command reuses the cached profile without a pre-run.
rm -rf "$WORK/cache"
start=$(date +%s)
"$CMLB" run --cache "$WORK/cache" --time 1 --strategy scatter -- "$WORK/pairs" 4 3 >"$WORK/rr1" 2>"$WORK/rr1.err"
rc=$?
took=$(( $(date +%s) - start ))
check "cmlb run pre-run: announced" contains "$WORK/rr1.err" "(pre-run)"
check "cmlb run pre-run: real run succeeds (rc=$rc)" test $rc -eq 0
check "cmlb run pre-run: bounded by --time (took ${took}s for a 3 s program)" test "$took" -lt 7
check "cmlb run pre-run: profile cached" test "$(find "$WORK/cache" -name profile.yaml | wc -l)" -eq 1
check "cmlb run pre-run: the real run is pinned (one CPU per thread)" test "$(awk '$1 == "thread" && $6 ~ /^[0-9]+$/' "$WORK/rr1" | wc -l)" -eq 4
check "cmlb run pre-run: only the real run's output on stdout" test "$(grep -c '^thread ' "$WORK/rr1")" -eq 4
"$CMLB" run --cache "$WORK/cache" --time 1 --strategy scatter -- "$WORK/pairs" 4 3 >"$WORK/rr2" 2>"$WORK/rr2.err"
check "cmlb run: second run reuses the cached profile" lacks "$WORK/rr2.err" "pre-run"
