# The plugin's failure paths and what Slurm makes of them (docs/spank.md, "Return values and
# failure modes"): a job fails only where the user made the mistake in srun/sbatch (a bad
# --cmlb-map, covered in t_10) or where the site asked for it (strict=1); no path drains the
# node. The batch step's placement fails here on a scratch directory owned by someone else.
nodes_up() { # every node idle (not drained, down or failing)
    local st
    for _ in $(seq 1 50); do
        st=$(sinfo -h -N -o %T 2>/dev/null | sort -u | tr '\n' ' ')
        [ "$st" = "idle " ] && return 0
        sleep 0.2
    done
    echo "--- node states: $st $(sinfo -h -N -o '%N %T %E' 2>/dev/null | tr '\n' ';')" >&2
    return 1
}
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -n 1; }

B=$WORK/notmine
mkdir -p "$B/root"
if ! id nobody >/dev/null 2>&1; then
    skip "batch step placement failure" "no user 'nobody' to own the scratch directory"
    return
fi
chown nobody "$B/root" && chmod 700 "$B/root"

# Not strict: the script runs, Slurm's own placement, one warning in the job's output.
start_cluster "scratch=$B/%u" || return
jid=$(sbatch --parsable -n1 -c2 -o "$WORK/rb.out" --cmlb-map=apply --wrap "touch $WORK/rb-ran")
wait_job "$jid"
check "batch placement fails, not strict: the script ran" test -e "$WORK/rb-ran"
check "batch placement fails, not strict: the job completed ($(job_state "$jid"))" \
    test "$(job_state "$jid")" = COMPLETED
check "batch placement fails, not strict: one warning" \
    test "$(grep -c "cmlb: warning: .*; the job's ranks are placed as Slurm distributes them" "$WORK/rb.out")" -eq 1
check "batch placement fails, not strict: the node stays up" nodes_up

# strict=1: the job fails with the reason, its script never runs, the node stays up (no
# requeue, no hold, no drain).
start_cluster "scratch=$B/%u strict=1" || return
jid=$(sbatch --parsable -n1 -c2 -o "$WORK/rs.out" --cmlb-map=apply --wrap "touch $WORK/rs-ran")
wait_job "$jid"
check "batch placement fails, strict=1: the script did not run" test ! -e "$WORK/rs-ran"
check "batch placement fails, strict=1: the job failed ($(job_state "$jid"))" \
    test "$(job_state "$jid")" = FAILED
check "batch placement fails, strict=1: says why" contains "$WORK/rs.out" "strict=1: task not started"
check "batch placement fails, strict=1: the node stays up" nodes_up

# A step that fails under strict=1 (corrupt profile, t_20) leaves the node up too.
srun -n1 -c2 --cmlb-map="apply:profile=$WORK/corrupt" true >/dev/null 2>&1
check "step fails, strict=1: the node stays up" nodes_up
