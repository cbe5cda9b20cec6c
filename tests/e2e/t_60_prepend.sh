# How profile mode and the apply pre-run start the task, per release. Slurm >= 23.11 has
# spank_prepend_task_argv: the task itself is started as `cmlb profile ... -- prog` / `cmlb run
# ... -- prog`, so a statically linked program (which ignores LD_PRELOAD) is profiled too.
# Older releases (22.05) use the preload library's exec-wrap, which such a program never loads:
# it runs, unprofiled (the documented limit). Both paths are checked where they apply.
CMLB=$repo/target/debug/cmlb
[ -x "$WORK/pairs" ] || { fail "prepend tests need t_20's workload"; return; }

# The plugin has the prepend path exactly when the headers it was built against declare it.
if grep -q 'spank_prepend_task_argv *(' /usr/include/slurm/spank.h 2>/dev/null; then hdr=1; else hdr=0; fi
check "plugin built with spank_prepend_task_argv ($PREPEND) iff this Slurm's spank.h declares it ($hdr)" \
    test "$PREPEND" -eq "$hdr"

if ! gcc -static -O2 -pthread -o "$WORK/pairs-static" tests/e2e/pairs.c 2>"$WORK/static.cc"; then
    fail "compile pairs.c with -static: $(head -1 "$WORK/static.cc")"; return
fi
check "pairs-static is statically linked (no program interpreter)" \
    bash -c '! readelf -l "$1" | grep -q "Requesting program interpreter"' - "$WORK/pairs-static"
mkdir -p "$WORK/scratch" && chmod 1777 "$WORK/scratch"
start_cluster "scratch=$WORK/scratch/%u" || return

srun -n1 -c2 --cmlb-map=profile "$WORK/pairs-static" 4 1.0 >"$WORK/st.out" 2>"$WORK/st.err"
rc=$?
check "static program, profile mode: the job succeeds (rc=$rc)" test $rc -eq 0
check "static program, profile mode: the program ran to its end" test "$(grep -c '^thread ' "$WORK/st.out")" -eq 4
S=$(sed -n 's/^cmlb: profiling .*; profile: //p' "$WORK/st.err" | head -1)
check "static program, profile mode: the plugin names the profile directory" test -n "$S"

if [ "$PREPEND" -eq 1 ]; then
    check "static program profiled (prepend path): profile written" test -f "${S:-/nonexistent}/profile.yaml"
    check "static program profiled: 4 threads" \
        test "$(grep -c '^- ' <(sed -n '/^threads:/,$p' "${S:-/nonexistent}/profile.yaml" 2>/dev/null))" -ge 4
    check "static program profiled: the known sharing (0-1, 2-3) dominates" awk -F, '
        {for (j = 1; j <= NF; j++) a[NR-1, j-1] = $j}
        END {inside = a[0,1] + a[2,3]; across = a[0,2] + a[0,3] + a[1,2] + a[1,3];
             if (!(inside > 0 && inside > 4 * across)) {print "inside " inside " across " across > "/dev/stderr"; exit 1}}' \
        "${S:-/nonexistent}/comm.csv"
    # The apply pre-run goes the same way: `cmlb run` profiles the static program for time=,
    # saves the profile, then runs it (its threads cannot be pinned without the preload, only
    # the task mask applies).
    start=$(date +%s)
    srun -n1 -c2 --cmlb-map=apply:time=1,strategy=scatter "$WORK/pairs-static" 4 3 >"$WORK/sp.out" 2>"$WORK/sp.err"
    rc=$?
    took=$(( $(date +%s) - start ))
    check "static program, apply pre-run: announced" contains "$WORK/sp.err" "(pre-run), then running pinned"
    check "static program, apply pre-run: the real run succeeds (rc=$rc)" test $rc -eq 0
    check "static program, apply pre-run: bounded by time= (took ${took}s for a 3 s program)" test "$took" -lt 9
    check "static program, apply pre-run: the profile was saved" \
        test "$(find "$WORK/scratch/root" -maxdepth 2 -path '*pairs-static*' -name profile.yaml | wc -l)" -ge 2
    check "static program, apply pre-run: only the real run's output on stdout" test "$(grep -c '^thread ' "$WORK/sp.out")" -eq 4
    skip "exec-wrap limit (static program unprofiled)" "Slurm $SLURM_RELEASE starts tasks with spank_prepend_task_argv instead"
else
    skip "static program profiled (prepend path)" "Slurm $SLURM_RELEASE has no spank_prepend_task_argv (from 23.11)"
    check "exec-wrap path: a static program runs unprofiled, as documented" test ! -e "${S:-/nonexistent}/profile.yaml"
fi
