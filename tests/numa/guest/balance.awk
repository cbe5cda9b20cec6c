# Promised vs measured memory per NUMA node (tests/numa/guest/checks.sh, check_balance).
# stdin: "thread pu numa" per planned thread (cmlb map --format json's assignment).
# -v loadf: per-thread first-touch fault counts (profile.yaml load_samples): the promise in pages
# -v before, after: "node:pages ..." from numastat (numa_hit + numa_miss) around the run
# -v out: the workload's output (cpus= of each thread: were they where the plan said?)
# -v cpunode: "cpu:node ..." (a node's capacity = its CPUs)
# -v kib: the skewed workload's KiB per light thread (heavy: w % 4 == 1, 4x): the true memory
# Prints one line of key=value; shares are per node in node order.
#   promised  the plan's per-node load share (profile loads summed per node)
#   truth     the share the plan gives each node of the memory the threads really own
#   measured  the share of pages the kernel allocated on each node during the run
#   capacity  each node's share of the CPUs
#   dev_promise / dev_truth: max |promised - measured|, max |truth - measured|
#   imb: max |measured - capacity|, how far the run is from memory in proportion to CPUs
#   imb_truth: max |truth - capacity|, the same for the plan's placement of the threads' real
#     memory (what the plan decides; measured follows it within dev_truth, checked apart)
# busybox awk here is built without math: square root by Newton's method
function root(x,   r, i) { if (x <= 0) return 0; r = x < 1 ? 1 : x; for (i = 0; i < 60; i++) r = (r + x / r) / 2; return r }
function absv(x) { return x < 0 ? -x : x }
BEGIN { k = 0; while ((getline l < loadf) > 0) load[k++] = l
    n = split(before, x, " "); for (i = 1; i <= n; i++) { split(x[i], y, ":"); b[y[1]] = y[2] }
    n = split(after, x, " "); for (i = 1; i <= n; i++) { split(x[i], y, ":"); d[y[1]] = y[2] - b[y[1]]; nodes[y[1]] = 1 }
    n = split(cpunode, x, " "); for (i = 1; i <= n; i++) { split(x[i], y, ":"); cap[y[2]]++; ncpu++ }
    while ((getline l < out) > 0) if (l ~ /^cmlb-wl thread=/) { split(l, f, " "); split(f[2], t, "="); split(f[5], c, "="); cpus[t[2]] = c[2] } }
{ p[$3] += load[$1]; pl += load[$1]
  m = ($1 % 4 == 1) ? 4 * kib : kib; tr[$3] += m; tl += m
  if (cpus[$1] != $2) bad = bad " t" $1 ":" cpus[$1] "!=" $2 }
END { for (nd in nodes) md += d[nd]
    ps = ""; ms = ""; ts = ""; cs = ""; dp = 0; dt = 0; imb = 0; imt = 0; sp = 0; sm = 0; nn = 0
    for (nd = 0; nd in nodes; nd++) { nn++
        pp = pl ? p[nd] / pl : 0; mm = md ? d[nd] / md : 0; tt = tl ? tr[nd] / tl : 0; cc = ncpu ? cap[nd] / ncpu : 0
        sep = nd ? "," : ""
        ps = ps sep sprintf("%.3f", pp); ms = ms sep sprintf("%.3f", mm); ts = ts sep sprintf("%.3f", tt); cs = cs sep sprintf("%.3f", cc)
        if (absv(pp - mm) > dp) dp = absv(pp - mm)
        if (absv(tt - mm) > dt) dt = absv(tt - mm)
        if (absv(mm - cc) > imb) imb = absv(mm - cc)
        if (absv(tt - cc) > imt) imt = absv(tt - cc)
        sp += pp * pp; sm += mm * mm }
    printf "promised=%s truth=%s measured=%s capacity=%s pages=%d dev_promise=%.3f dev_truth=%.3f imb=%.3f imb_truth=%.3f std_measured=%.4f%s\n",
        ps, ts, ms, cs, md, dp, dt, imb, imt, root(sm / nn - 1 / (nn * nn)), bad ? " wrong_pu=" bad : "" }
