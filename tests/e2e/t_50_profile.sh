# profile mode: each task runs under `cmlb profile` from its first instruction (exec-wrap by the
# preload library), the profile lands in <scratch>/<key>/ as the job user; apply then finds it.
# apply without a profile: bounded pre-run, then the pinned run.
CMLB=$repo/target/debug/cmlb
if ! "$CMLB" profile --help >/dev/null 2>&1; then
    fail "profile mode: this cmlb has no 'profile' subcommand"; return
fi
[ -x "$WORK/pairs" ] || { fail "profile tests need t_20's workload"; return; }
mkdir -p "$WORK/scratch" && chmod 1777 "$WORK/scratch"
start_cluster "scratch=$WORK/scratch/%u" || return

srun -n1 -c2 --cmlb-map=profile "$WORK/pairs" 4 1.0 >"$WORK/p.out" 2>"$WORK/p.err"
rc=$?
check "profile: the program runs and succeeds (rc=$rc)" test $rc -eq 0
check "profile: the program's output passes through" test "$(grep -c '^thread ' "$WORK/p.out")" -eq 4
check "profile: the path is printed once" test "$(grep -c '^cmlb: profiling .*; profile: ' "$WORK/p.err")" -eq 1
D=$(sed -n 's/^cmlb: profiling .*; profile: //p' "$WORK/p.err" | head -1)
check "profile: written under the scratch dir of the user" test -n "$D" -a -f "$D/profile.yaml" -a "${D#"$WORK/scratch/root/"}" != "$D"
if [ -f "$D/comm.csv" ]; then
    check "profile: 4 threads in creation order" test "$(grep -c '^- ' <(sed -n '/^threads:/,$p' "$D/profile.yaml") )" -ge 4
    check "profile: comm.csv is 4x4" test "$(awk -F, 'END {print NR "x" NF}' "$D/comm.csv")" = 4x4
    # pairs: threads 0-1 and 2-3 share, the pairs do not.
    check "profile: the known sharing (0-1, 2-3) dominates" awk -F, '
        {for (j = 1; j <= NF; j++) a[NR-1, j-1] = $j}
        END {inside = a[0,1] + a[2,3]; across = a[0,2] + a[0,3] + a[1,2] + a[1,3];
             if (!(inside > 0 && inside > 4 * across)) {print "inside " inside " across " across > "/dev/stderr"; exit 1}}' "$D/comm.csv"
    "$CMLB" map --profile "$D" --topology live --format json --out "$WORK/pplan.json" >/dev/null
    check "profile: cmlb map accepts it" test -s "$WORK/pplan.json"
fi

# apply finds the profile by key (same command, threads, cores) and pins as cmlb map plans.
srun -n1 -c2 --cmlb-map=apply:strategy=scatter "$WORK/pairs" 4 1.0 >"$WORK/pa.out" 2>"$WORK/pa.err"
check "apply after profile: uses the scratch profile" contains "$WORK/pa.err" "profile $D (4 threads)"
"$CMLB" map --profile "$D" --cpuset "$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)" --strategy scatter --format yaml \
    | awk '/^- thread:/ {t=$3} /^ +pu:/ {print t, $2}' | sort -n > "$WORK/pa.plan"
check "apply after profile: threads pinned as planned" diff "$WORK/pa.plan" <(awk '$1 == "thread" {print $2, $6}' "$WORK/pa.out" | sort -n)

# time= bounds the sampling window in profile mode; the program still runs to its end.
srun -n1 -c2 --cmlb-map=profile:time=0.5 "$WORK/pairs" 4 2 >"$WORK/pt.out" 2>"$WORK/pt.err"
T=$(sed -n 's/^cmlb: profiling .*; profile: //p' "$WORK/pt.err" | head -1)
check "profile time=0.5: sampled about 0.5 s of a 2 s run" awk '/^duration_s:/ {d = $2} END {exit !(d > 0 && d < 1.2)}' "${T:-/dev/null}/profile.yaml"
check "profile time=0.5: the program ran to its end" test "$(grep -c '^thread ' "$WORK/pt.out")" -eq 4

# As an ordinary user (srun run by that user): the profile belongs to that user, in that
# user's scratch dir.
if id nobody >/dev/null 2>&1; then
    srun_as nobody -n1 -c2 --cmlb-map=profile "$WORK/pairs" 2 0.5 >"$WORK/u.out" 2>"$WORK/u.err"
    rc=$?
    check "profile as user nobody: the job succeeds (rc=$rc)" test $rc -eq 0
    check "profile as user nobody: the program ran" test "$(grep -c '^thread ' "$WORK/u.out")" -eq 2
    # stdout only: srun's own lines ("queued and waiting for resources" on a busy node) go to
    # stderr, and once made this check fail by chance.
    out=$(srun_as nobody -n1 id -un 2>"$WORK/id.err")
    check "srun run by nobody: the task runs as nobody ($out$(tr '\n' ' ' <"$WORK/id.err" | head -c 200))" \
        test "$out" = nobody
    U=$(sed -n 's/^cmlb: profiling .*; profile: //p' "$WORK/u.err" | head -1)
    check "profile as user nobody: written" test -n "$U" -a -f "$U/profile.yaml"
    check "profile as user nobody: owned by nobody" test "$(stat -c %U "$U" 2>/dev/null)" = nobody
    check "profile as user nobody: in nobody's scratch" test "${U#"$WORK/scratch/nobody/"}" != "$U"
else
    skip "profile as an unprivileged user" "no user 'nobody' on this system"
fi

# apply without any profile: pre-run bounded by time=, then the pinned run.
start=$(date +%s)
srun -n1 -c2 --cmlb-map=apply:time=1,strategy=scatter,period=2 "$WORK/pairs" 4 4 >"$WORK/pr.out" 2>"$WORK/pr.err"
rc=$?
took=$(( $(date +%s) - start ))
check "pre-run: announced" contains "$WORK/pr.err" "profiling for 1 s first (pre-run), then running pinned"
check "pre-run: the real run succeeds (rc=$rc)" test $rc -eq 0
check "pre-run: stopped after time= (took ${took}s for a 4 s program)" test "$took" -lt 9
check "pre-run: the real run's threads are pinned" test "$(awk '$1 == "thread" && $6 ~ /^[0-9]+$/' "$WORK/pr.out" | wc -l)" -eq 4
check "pre-run: period= reaches the profiler" test "$(grep -l '^sample_period: 2$' "$WORK"/scratch/root/*/profile.yaml 2>/dev/null | wc -l)" -eq 1

# Named profiles: a short run profiled under a name serves a longer run with other arguments
# (whose command key differs); without the name, apply's pre-run line lists the program's
# other profiles, so the user learns what to name.
srun -n1 -c2 --cmlb-map=profile:name=short "$WORK/pairs" 4 0.5 >"$WORK/nm.out" 2>"$WORK/nm.err"
rc=$?
N=$WORK/scratch/root/short
check "named profile: written to <scratch>/short (rc=$rc)" test $rc -eq 0 -a -f "$N/profile.yaml"
check "named profile: the line names it" contains "$WORK/nm.err" "; profile: $N"
srun -n1 -c2 --cmlb-map=apply:name=short "$WORK/pairs" 4 1.5 >"$WORK/na.out" 2>"$WORK/na.err"
rc=$?
check "named apply: a run with other arguments uses the named profile (rc=$rc)" \
    contains "$WORK/na.err" "profile $N (4 threads)"
check "named apply: no pre-run" lacks "$WORK/na.err" "pre-run"
srun -n1 -c2 --cmlb-map=apply:time=0.5 "$WORK/pairs" 4 2.5 >"$WORK/nk.out" 2>"$WORK/nk.err"
check "unnamed apply with other arguments: the pre-run line lists the program's profiles" \
    contains "$WORK/nk.err" "short ($WORK/pairs 4 0.5)"
check "... and says how to name one" contains "$WORK/nk.err" "apply:name=NAME"
srun -n1 -c2 --cmlb-map=apply:name=../x "$WORK/pairs" 4 0.2 >"$WORK/nb.out" 2>"$WORK/nb.err"
rc=$?
check "a bad profile name is refused with the rule (rc=$rc)" contains "$WORK/nb.err" "name=../x is not a profile name"

# Profiling that cannot start (here: backend=hw on a machine without a sampling PMU) never
# fails the job: the program runs unprofiled with a warning. strict=1 fails it instead.
# (Captured, not piped into grep -q: under pipefail a reader that stops early fails the test.)
probe=$("$CMLB" profile --probe 2>/dev/null)
if ! grep -q '^hardware sampling: *none' <<<"$probe"; then
    skip "profile, sampling cannot start (backend=hw)" "this node has a sampling PMU, so hw starts"
else
    start_cluster "scratch=$WORK/scratch/%u backend=hw" || return
    srun -n1 -c2 --cmlb-map=profile "$WORK/pairs" 2 0.2 >"$WORK/nh.out" 2>"$WORK/nh.err"
    rc=$?
    check "profile, sampling cannot start: the job succeeds (rc=$rc)" test $rc -eq 0
    check "profile, sampling cannot start: the program ran" test "$(grep -c '^thread ' "$WORK/nh.out")" -eq 2
    check "profile, sampling cannot start: one warning" contains "$WORK/nh.err" "unprofiled (--run-anyway)"
    start_cluster "scratch=$WORK/scratch/%u backend=hw strict=1" || return
    srun -n1 -c2 --cmlb-map=profile "$WORK/pairs" 2 0.2 >"$WORK/nhs.out" 2>"$WORK/nhs.err"
    rc=$?
    check "profile, sampling cannot start, strict=1: the step fails (rc=$rc)" test $rc -ne 0
    check "profile, sampling cannot start, strict=1: the program did not run" test "$(grep -c '^thread ' "$WORK/nhs.out")" -eq 0
fi
