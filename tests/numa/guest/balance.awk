# Promised vs measured memory per NUMA node (tests/numa/guest/checks.sh, check_balance).
# stdin: "thread pu numa" per planned thread (cmlb map --format json's assignment);
# -v loadf: the profile's load.csv; before/after: "node:pages ..." from numastat; out: the
# workload's output (cpus= of each thread). Prints one line of key=value.
# busybox awk here is built without math: square root by Newton's method
function root(x,   r, i) { if (x <= 0) return 0; r = x < 1 ? 1 : x; for (i = 0; i < 60; i++) r = (r + x / r) / 2; return r }
BEGIN { k = 0; while ((getline l < loadf) > 0) load[k++] = l
    n = split(before, x, " "); for (i = 1; i <= n; i++) { split(x[i], y, ":"); b[y[1]] = y[2] }
    n = split(after, x, " "); for (i = 1; i <= n; i++) { split(x[i], y, ":"); d[y[1]] = y[2] - b[y[1]]; nodes[y[1]] = 1 }
    while ((getline l < out) > 0) if (l ~ /^cmlb-wl thread=/) { split(l, f, " "); split(f[2], t, "="); split(f[5], c, "="); cpus[t[2]] = c[2] } }
{ p[$3] += load[$1]; pl += load[$1]; if (cpus[$1] != $2) bad = bad " t" $1 ":" cpus[$1] "!=" $2; threads++ }
END { for (nd in nodes) md += d[nd]
    ps = ""; ms = ""; maxdev = 0; sp = 0; sm = 0; nn = 0
    for (nd = 0; nd in nodes; nd++) { nn++
        pp = pl ? p[nd] / pl : 0; mm = md ? d[nd] / md : 0
        ps = ps (nd ? "," : "") sprintf("%.3f", pp); ms = ms (nd ? "," : "") sprintf("%.3f", mm)
        dv = pp - mm; if (dv < 0) dv = -dv; if (dv > maxdev) maxdev = dv
        sp += pp * pp; sm += mm * mm }
    # std of the shares (1/nodes = perfect balance)
    printf "promised=%s measured=%s pages=%d max_dev=%.3f std_promised=%.4f std_measured=%.4f%s\n", ps, ms, md, maxdev,
        root(sp / nn - 1 / (nn * nn)), root(sm / nn - 1 / (nn * nn)),
        bad ? " wrong_pu=" bad : "" }
