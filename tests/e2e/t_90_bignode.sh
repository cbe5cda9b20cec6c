# A node of 2 048 PUs, as Slurm sees it (config_overrides: Slurm's bookkeeping; this VM has
# far fewer): 8 sockets × 128 cores × 2 threads, 2 NUMA nodes per socket. The plugin plans on the same shape (topology=
# an hwloc XML of it, written by `cmlb topology --export`), so Slurm's core numbers, the
# restriction to the step's cores and the plans all run at that size. The step gets core 0,
# which is PUs 0-1 of the synthetic machine and exist here too: profile and apply then behave
# as on a small node, and the pins are real.
BIG=$WORK/big2048.xml
target/debug/cmlb topology --topology "pack:8 numa:2 core:64 pu:2" --export "$BIG" >"$WORK/big.txt" 2>&1
check "2048-PU node: cmlb topology writes its XML" test -s "$BIG"
check "2048-PU node: cmlb topology shows 16 NUMA nodes, 2048 PUs" \
    grep -q "8 packages, 16 NUMA nodes (16 × 128 PUs), 1024 cores, 2048 PUs" "$WORK/big.txt"
target/debug/cmlb topology --topology "pack:16 numa:2 core:64 pu:2" >"$WORK/big4k.txt" 2>&1
check "cmlb topology on a synthetic 4096-PU machine" \
    grep -q "16 packages, 32 NUMA nodes (32 × 128 PUs), 2048 cores, 4096 PUs" "$WORK/big4k.txt"
SHAPE="CPUs=2048 Boards=1 SocketsPerBoard=8 CoresPerSocket=128 ThreadsPerCore=2"
CMLB_NODE_SHAPE="$SHAPE RealMemory=1000" start_cluster "scratch=$WORK/scratch/%u topology=$BIG" \
    || return
# The same 2-thread pairs program as on the small node: profile, then apply from that profile.
srun -n1 -c2 --cmlb-map=profile:name=big "$WORK/pairs" 2 0.3 >"$WORK/bp.out" 2>"$WORK/bp.err"
rc=$?
check "2048-PU node: profile succeeds (rc=$rc)" test $rc -eq 0
check "2048-PU node: the program ran to its end" test "$(grep -c '^thread ' "$WORK/bp.out")" -eq 2
BP=$(sed -n 's/^cmlb: profiling .*; profile: //p' "$WORK/bp.err" | head -1)
check "2048-PU node: profile written" test -n "$BP" -a -f "$BP/profile.yaml"
srun -n1 -c2 --cmlb-map=apply:name=big "$WORK/pairs" 2 0.3 >"$WORK/ba.out" 2>"$WORK/ba.err"
rc=$?
check "2048-PU node: apply succeeds (rc=$rc)" test $rc -eq 0
check "2048-PU node: apply planned from that profile on core 0 of 2048 PUs" \
    grep -q "cmlb: apply: strategy cmlb-refine, profile $BP (2 threads).*cores 0 (PUs 0-1)" "$WORK/ba.err"
check "2048-PU node: no warning" lacks "$WORK/ba.err" "warning"
check "2048-PU node: every thread stays on the step's PUs (0-1)" \
    awk '$1 == "thread" && $6 !~ /^(0|1|0-1|0,1)$/ { bad = 1 } END { exit bad }' "$WORK/ba.out"
