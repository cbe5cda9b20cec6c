# GPU steps: a node with two GPUs as Slurm's gres/gpu sees them (character devices made here,
# gres.conf with Cores= locality, node shape with Gres=gpu:2; Slurm's bookkeeping, no real GPU).
# Under --cmlb-map=apply with a rank profile, the plugin sees that the step has GPUs (from the
# step's environment: SLURM_STEP_GPUS, which Slurm sets before the plugin plans) and keeps every
# rank on the NUMA node of the share Slurm gave it, saying so; each task keeps the GPU Slurm
# bound to its cores. Without GPUs the same step's line says nothing of them.
D=$WORK/gpudev
mkdir -p "$D"
# Two distinct character devices (those of /dev/null and /dev/zero): slurmd checks the type.
mknod "$D/gpu0" c 1 3 2>/dev/null
mknod "$D/gpu1" c 1 5 2>/dev/null
if [ ! -c "$D/gpu0" ] || [ ! -c "$D/gpu1" ]; then
    fail "GPU step: could not make the device files for gres.conf (mknod in $D)"
    return
fi
# Two sockets of one core each (Slurm's bookkeeping: config_overrides), one GPU per socket:
# from 24.11 on, a GPU's Cores= must cover whole sockets.
SHAPE="CPUs=2 Boards=1 SocketsPerBoard=2 CoresPerSocket=1 ThreadsPerCore=1"
CMLB_NODE_SHAPE="$SHAPE RealMemory=1000 Gres=gpu:2" CMLB_SLURM_CONF_EXTRA="GresTypes=gpu" \
    CMLB_GRES_CONF="Name=gpu File=$D/gpu0 Cores=0\nName=gpu File=$D/gpu1 Cores=1" \
    start_cluster "scratch=$WORK/scratch/%u" || return
# A job rank profile of two ranks that exchange: what apply plans ranks from.
J=$WORK/gpujob
mkdir -p "$J/ranks"
printf 'schema: 1\nranks: 2\n' >"$J/ranks/ranks.yaml"
printf '0 1 1000 1\n1 0 1000 1\n' >"$J/ranks/comm.edges"
chmod -R a+rX "$J"
show='echo "task $SLURM_PROCID gpu=$CUDA_VISIBLE_DEVICES cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
srun -n2 --gpus-per-task=1 --gpu-bind=closest --cmlb-map="apply:profile=$J" bash -c "$show" \
    >"$WORK/g.out" 2>"$WORK/g.err"
rc=$?
check "GPU step: apply with --gpus-per-task=1 --gpu-bind=closest exits 0 (rc=$rc)" test $rc -eq 0
check "GPU step: the plugin knows the step has GPUs and keeps ranks on their NUMA nodes" \
    contains "$WORK/g.err" "GPU step (SLURM_STEP_GPUS=0,1): ranks keep their NUMA nodes, so none moves away from its GPUs"
check "GPU step: each task kept the GPU bound to its core (task 0 on CPU 0 with GPU 0, task 1 on CPU 1 with GPU 1)" \
    test "$(sort "$WORK/g.out" | tr '\n' ' ')" = "task 0 gpu=0 cpus=0 task 1 gpu=1 cpus=1 "
srun -n2 --cmlb-map="apply:profile=$J" true >"$WORK/g0.out" 2>"$WORK/g0.err"
check "no GPUs asked for: the line says nothing of GPUs" lacks "$WORK/g0.err" "GPU step"
check "... and still plans the ranks" contains "$WORK/g0.err" "ranks 0-1 of 2 on this node"
# The next file (or the end of the run) starts its own cluster: the GRES settings go with it.
