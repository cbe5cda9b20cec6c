# `cmlb bench --slurm` inside an allocation: a profiling step first, then srun steps with
# --cmlb-map=off and --cmlb-map=apply interleaved, their times compared (docs/benchmarks.md).
CMLB=$repo/target/debug/cmlb
[ -x "$WORK/pairs" ] || { fail "cmlb bench --slurm needs t_20's workload"; return; }
B=$WORK/bench-slurm
salloc -n1 -c2 "$CMLB" bench --slurm --srun "-n1 -c2" --runs 5 --max-runs 5 --warmup 0 \
    --out "$B" -- "$WORK/pairs" 4 0.2 >"$WORK/bench.out" 2>"$WORK/bench.err"
rc=$?
check "bench --slurm: finishes (rc=$rc)" test $rc -eq 0
check "bench --slurm: a profiling step first" \
    contains "$WORK/bench.err" "profiling step (untimed): srun -n1 -c2 --cmlb-map=profile $WORK/pairs 4 0.2"
check "bench --slurm: the verdict compares the plan with Slurm's own placement" \
    test "$(tail -1 "$WORK/bench.out" | grep -c '^verdict: cmlb took .*x the time of slurm (95% CI .*, 5 and 5 runs')" -eq 1
check "bench --slurm: 5 steps of each, interleaved" \
    test "$(cut -d, -f2 "$B/bench.csv" | tail -n +2 | tr '\n' ' ')" = "slurm cmlb cmlb slurm slurm cmlb cmlb slurm slurm cmlb "
# The last step was apply's: the plugin planned it from the profiling step's profile.
check "bench --slurm: the apply steps use the profile the first step took" \
    contains "$B/run.stderr" "cmlb: apply: strategy cmlb-refine, profile $WORK/scratch/root/pairs-t"
check "bench --slurm: ... without a pre-run" lacks "$B/run.stderr" "pre-run"
check "bench --slurm: srun's own CPU columns left out" \
    test "$(awk '$1 == "slurm" {print $6, $7, $8}' "$WORK/bench.out")" = "- - -"
check "bench --slurm: the plugin's plan line shown once for the apply steps" \
    test "$(grep -c '^cmlb bench: \[cmlb\] cmlb: apply: strategy cmlb-refine' "$WORK/bench.err")" -eq 1

# The site kit (docs/speedup.md) as a site runs it: sbatch with a list of programs.
printf '# two programs\n%s 4 0.2\n\nsleep 0.2\n' "$WORK/pairs" >"$WORK/programs"
jid=$(sbatch --parsable -n1 -c2 --output="$WORK/kit.out" --chdir="$WORK" \
    --export=ALL,CMLB="$CMLB",CMLB_SPEEDUP_RUNS=4,CMLB_SPEEDUP_OUT="$WORK/kit" \
    slurm-conf/cmlb-speedup "$WORK/programs")
check "site kit: sbatch accepts it ($jid)" test -n "$jid"
check "site kit: the job ends" wait_job "$jid"
check "site kit: every program measured, none failed" contains "$WORK/kit.out" "cmlb-speedup: 2 programs, 0 failed"
# 4 runs each, more (up to 8) while the interval is wider than 10 %.
check "site kit: the table has a row per program with ratio, interval and verdict" \
    test "$(grep -cE '^\| [12] \| `[^`]+` \| [0-9.]+ \| [0-9.]+-[0-9.]+ \| [4-8] and [4-8] \| [a-z ,]+ \| ' "$WORK/kit/table.md")" -eq 2
check "site kit: ... and names the sampling backend" contains "$WORK/kit/table.md" "sampling backend: "
