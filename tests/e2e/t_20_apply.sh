# apply mode with a saved profile: threads are pinned exactly as `cmlb map` plans; sbatch
# propagation; degraded (unpinned) runs with a warning; strict mode; off/default= behaviour.
CMLB=$repo/target/debug/cmlb
gcc -O2 -pthread -o "$WORK/pairs" tests/e2e/pairs.c || { fail "compile pairs.c"; return; }

# A profile with known sharing: threads 0-2 and 1-3 talk (partners creation order does not pair),
# pairs do not; equal loads. Both held-out halves agree, each pair seen on 10 cache lines, so the
# guard keeps the plan (a profile it cannot support pins nothing: docs/evidence.md).
mkprofile() { # DIR
    mkdir -p "$1"
    printf '0,2,100,2\n2,0,2,100\n100,2,0,2\n2,100,2,0\n' > "$1/comm.csv"
    for h in a b; do
        printf '0,1,50,1\n1,0,1,50\n50,1,0,1\n1,50,1,0\n' > "$1/comm.$h.csv"
        printf '0,1,10,1\n1,0,1,10\n10,1,0,1\n1,10,1,0\n' > "$1/lines.$h.csv"
    done
    printf '1\n2\n1\n2\n' > "$1/load.csv"
    printf 'schema: 1\ncommand: [pairs]\nbackend: hand\nthreads:\n' > "$1/profile.yaml"
    for k in 0 1 2 3; do echo "- {index: $k, tid: $((100 + k))}" >> "$1/profile.yaml"; done
    # The raw-sample log dagtm maps from: 0 and 2 sweep the same 8 lines, 1 and 3 another 8.
    { echo "tid_index,time_ns,addr"
      t=0
      for _ in 1 2 3; do for line in 0 1 2 3 4 5 6 7; do for k in 0 1 2 3; do
          t=$((t + 1)); echo "$k,$t,$(( (k % 2 == 0 ? 4096 : 36864) + line * 64 ))"
      done; done; done; } > "$1/samples.csv"
    chmod -R a+rX "$1"
}
P=$WORK/prof4
mkprofile "$P"

# threads FILE: "K CPUS" per thread reported by pairs, sorted by K.
threads() { awk '$1 == "thread" {print $2, $6}' "$1" | sort -n; }
# planned STRATEGY CPUSET [TOPOLOGY]: "K PU" per thread from cmlb map.
planned() {
    "$CMLB" map --profile "$P" --topology "${3:-live}" --cpuset "$2" --strategy "$1" --format yaml \
        | awk '/^- thread:/ {t=$3} /^ +pu:/ {print t, $2}' | sort -n
}
unpinned() { # FILE ALLCPUS: every thread reports the whole allocation
    local n
    n=$(threads "$1" | awk -v c="$2" '$2 != c' | wc -l)
    [ "$(threads "$1" | wc -l)" -ge 2 ] && [ "$n" -eq 0 ]
}

start_cluster "scratch=$WORK/scratch/%u" || return
ALL=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)

# dagtm maps from the profile's samples.csv: every front end hands it over (mapper::pipeline).
for s in compact scatter cmlb dagtm; do
    srun -n1 -c2 --cmlb-map="apply:profile=$P,strategy=$s" "$WORK/pairs" 4 0.2 >"$WORK/a_$s" 2>"$WORK/a_$s.err"
    planned "$s" "$ALL" > "$WORK/plan_$s"
    threads "$WORK/a_$s" > "$WORK/got_$s"
    check "apply strategy=$s pins every thread where cmlb map plans it" diff "$WORK/plan_$s" "$WORK/got_$s"
    check "apply strategy=$s logs strategy, profile and metrics once" \
        test "$(grep -c "cmlb: apply: strategy $s, profile $P (4 threads)" "$WORK/a_$s.err")" -eq 1
    check "... RemoteComm and Load_std vs compact" contains "$WORK/a_$s.err" "RemoteComm"
done
# Several strategy parameters in one option (docs/spank.md, "Option syntax").
S2="cmlb-refine:spare=count,anneal=0"
srun -n1 -c2 --cmlb-map="apply:profile=$P,strategy=$S2,verbose" "$WORK/pairs" 4 0.2 >"$WORK/a_s2" 2>"$WORK/a_s2.err"
planned "$S2" "$ALL" > "$WORK/plan_s2"
threads "$WORK/a_s2" > "$WORK/got_s2"
check "apply strategy=$S2 (two parameters) pins where cmlb map --strategy $S2 plans" diff "$WORK/plan_s2" "$WORK/got_s2"
check "... and logs it once" test "$(grep -c "cmlb: apply: strategy cmlb-refine, profile $P (4 threads)" "$WORK/a_s2.err")" -eq 1
srun -n1 --cmlb-map="apply:strategy=spectral:k=0,verbose" true >"$WORK/o_s2" 2>&1
check "a bad strategy parameter stops srun with the words cmlb map uses" \
    contains "$WORK/o_s2" "$("$CMLB" map --comm "$P/comm.csv" --topology live --strategy spectral:k=0 2>&1 | sed -n "s/.*': //p" | head -1)"

# An OpenMP program with bind=omp only: the runtime places team member k where the plan says.
if gcc -O2 -fopenmp -o "$WORK/omp" tests/e2e/omp.c 2>"$WORK/omp.cc"; then
    for s in compact scatter "$("$CMLB" map --list 2>/dev/null | awk '$1 == "cmlb" {print "cmlb"}')"; do
        [ -n "$s" ] || continue
        # The user's team of 4, as profiled (cmlb does not size the team).
        OMP_NUM_THREADS=4 srun -n1 -c2 --cmlb-map="apply:profile=$P,strategy=$s,bind=omp" "$WORK/omp" >"$WORK/omp_$s" 2>/dev/null
        check "bind=omp, OpenMP program, strategy=$s: team member k on the planned PU" diff "$WORK/plan_$s" <(threads "$WORK/omp_$s")
    done
else
    fail "compile omp.c with -fopenmp: $(head -1 "$WORK/omp.cc")"
fi

# Two tasks on one node: each gets a disjoint share of the step's cores (here one PU each, in
# core order), and all its threads stay inside it.
if [ "$(nproc)" -ge 2 ]; then
    srun -l -n2 -c1 --cmlb-map="apply:profile=$P" "$WORK/pairs" 4 0.1 >"$WORK/two.out" 2>/dev/null
    first=$(echo "$ALL" | sed 's/[-,].*//')
    t0=$(awk '$2 == "thread" && $1 == "0:" {print $7}' "$WORK/two.out" | sort -u | tr '\n' ' ')
    t1=$(awk '$2 == "thread" && $1 == "1:" {print $7}' "$WORK/two.out" | sort -u | tr '\n' ' ')
    check "2 tasks: task 0's 4 threads share one PU" test "$(awk '$2 == "thread" && $1 == "0:"' "$WORK/two.out" | wc -l)" -eq 4 -a "$t0" = "$first "
    check "2 tasks: task 1's threads on another single PU ($t0/$t1)" test -n "$t1" -a "$t1" != "$t0" -a "$(echo $t1 | wc -w)" -eq 1
fi

# bind=omp: OpenMP variables set, no preload; OMP_NUM_THREADS never set (the program's thread
# count is its own: docs/spank.md, "Binding").
srun -n1 -c2 --cmlb-map="apply:profile=$P,strategy=scatter,bind=omp" env >"$WORK/env_omp" 2>&1
pl=$(planned scatter "$ALL" | awk '{printf "%s{%s}", (NR>1?",":""), $2}')
check "bind=omp exports OMP_PLACES in thread order" contains "$WORK/env_omp" "OMP_PLACES=$pl"
check "bind=omp exports OMP_PROC_BIND=true" contains "$WORK/env_omp" "OMP_PROC_BIND=true"
check "bind=omp exports GOMP_CPU_AFFINITY" contains "$WORK/env_omp" "GOMP_CPU_AFFINITY="
check "bind=omp exports KMP_AFFINITY" contains "$WORK/env_omp" "KMP_AFFINITY=granularity=fine,explicit,proclist=["
check "bind=omp leaves OMP_NUM_THREADS unset" lacks "$WORK/env_omp" "OMP_NUM_THREADS="
check "bind=omp does not preload" lacks "$WORK/env_omp" "libcmlb_preload"
OMP_NUM_THREADS=4 srun -n1 -c2 --cmlb-map="apply:profile=$P,bind=preload" env >"$WORK/env_pre" 2>&1
check "bind=preload preloads the pthread wrapper" contains "$WORK/env_pre" "libcmlb_preload.so"
check "bind=preload sets no OpenMP places" lacks "$WORK/env_pre" "OMP_PLACES="

# sbatch --cmlb-map reaches the sruns of the script; the batch shell itself stays unpinned.
cat > "$WORK/job.sh" <<EOF
#!/bin/bash
echo "batch OMP_PLACES=\${OMP_PLACES:-unset} cpus \$(awk '/^Cpus_allowed_list/ {print \$2}' /proc/self/status)"
srun -n1 -c2 $WORK/pairs 4 0.2
EOF
chmod +x "$WORK/job.sh"
jid=$(sbatch --parsable -n1 -c2 -o "$WORK/batch.out" --cmlb-map="apply:profile=$P,strategy=scatter" "$WORK/job.sh")
wait_job "$jid"
threads "$WORK/batch.out" > "$WORK/got_batch"
check "sbatch --cmlb-map=apply pins the threads of the script's srun" diff "$WORK/plan_scatter" "$WORK/got_batch"
check "the batch script itself is not pinned" contains "$WORK/batch.out" "batch OMP_PLACES=unset cpus $ALL"

salloc -n1 -c2 --cmlb-map="apply:profile=$P,strategy=scatter" srun "$WORK/pairs" 4 0.2 >"$WORK/salloc.out" 2>/dev/null
threads "$WORK/salloc.out" > "$WORK/got_salloc"
check "salloc --cmlb-map=apply pins the threads of its srun" diff "$WORK/plan_scatter" "$WORK/got_salloc"

# Degraded runs: one warning, exit status of the program, all threads on the whole allocation.
mkdir -p "$WORK/corrupt" && cp -r "$P"/. "$WORK/corrupt/" && echo "1,2,x" > "$WORK/corrupt/comm.csv"
srun -n1 -c2 --cmlb-map="apply:profile=$WORK/corrupt" "$WORK/pairs" 4 0.1 >"$WORK/c.out" 2>"$WORK/c.err"
rc=$?
check "corrupt profile: the job still succeeds (rc=$rc)" test $rc -eq 0
check "corrupt profile: one warning naming the file" test "$(grep -c "cmlb: warning: profile $WORK/corrupt is unusable: .*comm.csv.*; the step runs unpinned" "$WORK/c.err")" -eq 1
check "corrupt profile: threads run unpinned" unpinned "$WORK/c.out" "$ALL"
srun -n1 -c2 --cmlb-map="apply:profile=$WORK/nonexistent" "$WORK/pairs" 2 0.1 >"$WORK/m.out" 2>"$WORK/m.err"
check "missing profile= : warning and unpinned run" contains "$WORK/m.err" "profile=$WORK/nonexistent has no profile.yaml; the step runs unpinned"
check "missing profile= : threads unpinned" unpinned "$WORK/m.out" "$ALL"
OMP_NUM_THREADS=3 srun -n1 -c2 --cmlb-map="apply:profile=$P" "$WORK/pairs" 3 0.1 >"$WORK/n.out" 2>"$WORK/n.err"
check "thread-count mismatch: warning" contains "$WORK/n.err" "has 4 threads but OMP_NUM_THREADS=3"
check "thread-count mismatch: unpinned" unpinned "$WORK/n.out" "$ALL"

# off: nothing from cmlb at all.
srun -n1 -c2 --cmlb-map=off "$WORK/pairs" 4 0.1 >"$WORK/off.out" 2>"$WORK/off.err"
check "--cmlb-map=off: no cmlb output" lacks "$WORK/off.err" "cmlb"
check "--cmlb-map=off: threads unpinned" unpinned "$WORK/off.out" "$ALL"
srun -n1 -c2 "$WORK/pairs" 4 0.1 >"$WORK/def.out" 2>"$WORK/def.err"
check "no option, default=off: unpinned and silent" lacks "$WORK/def.err" "cmlb"

# strict=1: the same corrupt profile fails the step.
start_cluster "scratch=$WORK/scratch/%u strict=1" || return
srun -n1 -c2 --cmlb-map="apply:profile=$WORK/corrupt" "$WORK/pairs" 4 0.1 >"$WORK/s.out" 2>"$WORK/s.err"
rc=$?
check "strict=1: a corrupt profile fails the step (rc=$rc)" test $rc -ne 0
check "strict=1: says why" contains "$WORK/s.err" "strict=1: failing the step"
# The shipped plugstack line says "optional", and Slurm ignores an optional plugin's failing
# task_init: strict mode must still stop the tasks there.
CMLB_PLUGSTACK_KIND=optional start_cluster "scratch=$WORK/scratch/%u strict=1" || return
srun -n2 -c1 --cmlb-map="apply:profile=$WORK/corrupt" touch "$WORK/strict-optional-ran" >"$WORK/so.out" 2>"$WORK/so.err"
rc=$?
check "strict=1, optional plugin: a corrupt profile fails the step (rc=$rc)" test $rc -ne 0
check "strict=1, optional plugin: no task ran" test ! -e "$WORK/strict-optional-ran"
check "strict=1, optional plugin: says why" contains "$WORK/so.err" "strict=1: task not started"

# default=apply: no option means apply (here via CMLB_MAP's profile key), --cmlb-map=off opts out.
start_cluster "scratch=$WORK/scratch/%u default=apply" || return
CMLB_MAP="apply:profile=$P,strategy=scatter" srun -n1 -c2 "$WORK/pairs" 4 0.2 >"$WORK/e.out" 2>"$WORK/e.err"
threads "$WORK/e.out" > "$WORK/got_env"
check "CMLB_MAP=apply:... pins like --cmlb-map" diff "$WORK/plan_scatter" "$WORK/got_env"
srun -n1 -c2 --cmlb-map=off "$WORK/pairs" 4 0.1 >"$WORK/o.out" 2>"$WORK/o.err"
check "default=apply, --cmlb-map=off: unpinned" unpinned "$WORK/o.out" "$ALL"
check "default=apply, --cmlb-map=off: silent" lacks "$WORK/o.err" "cmlb"
# default=apply and no profile for this command yet: no pre-run (the user asked for nothing),
# the program runs once, unpinned and without a warning.
srun -n1 -c2 "$WORK/pairs" 4 0.15 >"$WORK/np.out" 2>"$WORK/np.err"
rc=$?
check "default=apply, no profile: the job succeeds (rc=$rc)" test $rc -eq 0
check "default=apply, no profile: no pre-run" lacks "$WORK/np.err" "pre-run"
check "default=apply, no profile: the program ran once" test "$(grep -c '^thread ' "$WORK/np.out")" -eq 4

# Unwritable scratch: profile mode warns once and the program runs normally.
start_cluster "scratch=/proc/cmlb-nope/%u" || return
srun -n1 -c2 --cmlb-map=profile "$WORK/pairs" 2 0.1 >"$WORK/w.out" 2>"$WORK/w.err"
rc=$?
check "unwritable scratch: the job succeeds (rc=$rc)" test $rc -eq 0
check "unwritable scratch: one warning naming the directory" test "$(grep -c "cmlb: warning: scratch directory /proc/cmlb-nope/root cannot be created: .*; the step runs unpinned" "$WORK/w.err")" -eq 1
check "unwritable scratch: the program ran" test "$(grep -c '^thread ' "$WORK/w.out")" -eq 2

# A scratch directory planted by another user (the default /tmp/cmlb-%u is guessable): apply
# reads nothing from it, warns once, and runs unpinned. Here the job user is root and the
# directory belongs to nobody.
if id nobody >/dev/null 2>&1; then
    mkdir -p "$WORK/planted/root" && chown nobody "$WORK/planted/root"
    start_cluster "scratch=$WORK/planted/%u" || return
    timeout 60 srun -n1 -c2 --cmlb-map=apply "$WORK/pairs" 2 0.1 >"$WORK/pl.out" 2>"$WORK/pl.err"
    rc=$?
    check "planted scratch: the job succeeds (rc=$rc)" test $rc -eq 0
    check "planted scratch: one warning naming the owner" test "$(grep -c "cmlb: warning: scratch directory $WORK/planted/root belongs to uid $(id -u nobody), not the job's uid 0; the step runs unpinned" "$WORK/pl.err")" -eq 1
    check "planted scratch: the program ran" test "$(grep -c '^thread ' "$WORK/pl.out")" -eq 2
fi

# Without the preload library (preload= points nowhere): bind=omp needs none and still pins
# through the environment; the default bind=both warns and runs unpinned.
start_cluster "scratch=$WORK/scratch/%u preload=$WORK/nonexistent/libcmlb_preload.so" || return
srun -n1 -c2 --cmlb-map="apply:profile=$P,strategy=scatter,bind=omp" env >"$WORK/np_omp" 2>&1
check "no preload library: bind=omp still exports OMP_PLACES" contains "$WORK/np_omp" "OMP_PLACES="
srun -n1 -c2 --cmlb-map="apply:profile=$P" env >"$WORK/np_both" 2>&1
check "no preload library: bind=both warns and runs unpinned" contains "$WORK/np_both" "libcmlb_preload.so not found"
