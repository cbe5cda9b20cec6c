# Option handling: bad values are rejected before anything runs, naming the valid choices;
# the option shows in --help; `off` and CMLB_MAP=off run normally.
start_cluster "scratch=$WORK/scratch/%u" || return

marker=$WORK/ran-bad-option
srun --cmlb-map=bogus touch "$marker" >"$WORK/o1" 2>&1
rc=$?
check "srun rejects --cmlb-map=bogus (rc=$rc)" test $rc -ne 0
check "srun names the valid modes" contains "$WORK/o1" "choose one of: profile, apply, off"
check "srun with a bad option ran nothing" test ! -e "$marker"

srun --cmlb-map=apply:strategy=nosuch touch "$marker" >"$WORK/o2" 2>&1
check "srun rejects an unknown strategy" contains "$WORK/o2" "unknown strategy 'nosuch'"
check "... and lists the strategies" contains "$WORK/o2" "compact"
check "... and ran nothing" test ! -e "$marker"

CMLB_MAP=apply:colour=red srun touch "$marker" >"$WORK/o3" 2>&1
rc=$?
check "srun rejects CMLB_MAP=apply:colour=red (rc=$rc)" test $rc -ne 0
check "CMLB_MAP error names the variable and valid keys" contains "$WORK/o3" "invalid CMLB_MAP value 'apply:colour=red': unknown key 'colour'; valid keys: strategy="
check "... and ran nothing" test ! -e "$marker"

# With the shipped "optional" line Slurm ignores the rejection: the error is shown and the step
# runs without cmlb (slurmstepd reports the same value and leaves the threads unpinned).
CMLB_PLUGSTACK_KIND=optional start_cluster "scratch=$WORK/scratch/%u" || return
CMLB_MAP=apply:colour=red srun touch "$marker" >"$WORK/o3b" 2>&1
rc=$?
check "optional plugin: bad CMLB_MAP is reported" contains "$WORK/o3b" "invalid CMLB_MAP value 'apply:colour=red'"
check "optional plugin: ... and the step runs unpinned (rc=$rc)" contains "$WORK/o3b" "the step runs unpinned"
check "optional plugin: ... the command ran" test -e "$marker"
rm -f "$marker"
srun --cmlb-map=bogus touch "$marker" >"$WORK/o1b" 2>&1
rc=$?
check "optional plugin: srun still rejects --cmlb-map=bogus (rc=$rc)" test $rc -ne 0
check "optional plugin: ... and ran nothing" test ! -e "$marker"
start_cluster "scratch=$WORK/scratch/%u" || return

sbatch --cmlb-map=prof --wrap "touch $marker" >"$WORK/o4" 2>&1
rc=$?
check "sbatch rejects --cmlb-map=prof (rc=$rc)" test $rc -ne 0
check "sbatch names the valid modes" contains "$WORK/o4" "unknown mode 'prof'; choose one of"

salloc --cmlb-map=apply:time=-3 true >"$WORK/o5" 2>&1
rc=$?
check "salloc rejects time=-3 (rc=$rc)" test $rc -ne 0
check "salloc says why" contains "$WORK/o5" "time=-3 is not a number of seconds"

srun --help >"$WORK/o6" 2>&1
check "srun --help documents --cmlb-map" contains "$WORK/o6" "--cmlb-map=MODE"
sbatch --help >"$WORK/o7" 2>&1
check "sbatch --help documents --cmlb-map" contains "$WORK/o7" "--cmlb-map=MODE"

out=$(srun --cmlb-map=off -n1 echo hello 2>"$WORK/o8")
check "srun --cmlb-map=off runs the command" test "$out" = hello
out=$(CMLB_MAP=off srun -n1 echo hello 2>"$WORK/o9")
check "CMLB_MAP=off runs the command" test "$out" = hello
