# Dry run on a synthetic 4-NUMA node: Slurm claims 2 sockets x 4 cores x 2 threads
# (config_overrides, bookkeeping only) and the plugin maps on the cached topology= XML. Each
# task's plan (disjoint share of the step's cores) must equal `cmlb map` on that share.
CMLB=$repo/target/debug/cmlb
SYN="pack:2 numa:2 core:2 pu:2"
lstopo-no-graphics -i "$SYN" --of xml "$WORK/syn.xml" 2>/dev/null \
    || "$CMLB" topology --topology "$SYN" --format xml > "$WORK/syn.xml" 2>/dev/null \
    || { fail "write the synthetic topology XML"; return; }
[ -d "$WORK/prof4" ] || { fail "dry run needs the profile of t_20"; return; }
CMLB_NODE_SHAPE="Sockets=2 CoresPerSocket=4 ThreadsPerCore=2" \
    start_cluster "scratch=$WORK/scratch/%u topology=$WORK/syn.xml" || return

plan_pus() { awk '/^- thread:/ {t=$3} /^ +pu:/ {print t, $2}' "$1" | sort -n; }
strategies="compact scatter $("$CMLB" map --list 2>/dev/null | awk '$1 == "cmlb" {print "cmlb"}')"
for s in $strategies; do
    srun -n2 -c8 --cmlb-map="apply:profile=$WORK/prof4,dryrun,strategy=$s" true >/dev/null 2>"$WORK/d_$s.err"
    check "dry run ($s, 2 tasks): a summary line for the step" contains "$WORK/d_$s.err" "cmlb: apply: strategy $s, profile $WORK/prof4 (4 threads), 2 tasks on cores 0-7 (PUs 0-15)"
    # A plan the profile cannot support pins nothing, so a dry run writes none, and says why.
    if grep -qF "threads left as they are" "$WORK/d_$s.err"; then
        check "dry run ($s): the guard keeps what the tasks have: no plan written" \
            test "$(grep -c '^cmlb: dry run: plan of task' "$WORK/d_$s.err")" -eq 0
        continue
    fi
    for t in 0 1; do
        f=$(sed -n "s/^cmlb: dry run: plan of task $t written to //p" "$WORK/d_$s.err")
        if [ -z "$f" ] || [ ! -f "$f" ]; then fail "dry run ($s): plan of task $t written"; continue; fi
        share=$([ $t -eq 0 ] && echo 0-7 || echo 8-15)
        "$CMLB" map --profile "$WORK/prof4" --topology "$WORK/syn.xml" --cpuset "$share" --strategy "$s" --format yaml > "$WORK/m_$s$t.yaml"
        plan_pus "$f" > "$WORK/dp_$s$t"
        plan_pus "$WORK/m_$s$t.yaml" > "$WORK/mp_$s$t"
        check "dry run ($s): task $t plan on PUs $share equals cmlb map" diff "$WORK/mp_$s$t" "$WORK/dp_$s$t"
        check "dry run ($s): task $t plan stays in its share" test -z "$(awk -v lo=$((t * 8)) -v hi=$((t * 8 + 7)) '$2 < lo || $2 > hi' "$WORK/dp_$s$t")"
    done
done
srun -n1 -c16 --cmlb-map="apply:profile=$WORK/prof4,dryrun,strategy=scatter" true >/dev/null 2>"$WORK/d1.err"
f=$(sed -n 's/^cmlb: dry run: plan of task 0 written to //p' "$WORK/d1.err")
"$CMLB" map --profile "$WORK/prof4" --topology "$WORK/syn.xml" --cpuset 0-15 --strategy scatter --format yaml > "$WORK/m1.yaml"
check "dry run, 1 task on the whole node equals cmlb map" diff <(plan_pus "$WORK/m1.yaml") <(plan_pus "${f:-/dev/null}")
check "dry run spreads scatter over 4 NUMA nodes" test "$(awk '/^ +numa:/ {print $2}' "${f:-/dev/null}" | sort -u | wc -l)" -eq 4
