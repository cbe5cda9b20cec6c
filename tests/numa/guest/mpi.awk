# Where the ranks of one mpi-wl run ran, and the point-to-point bytes that crossed NUMA nodes.
#   awk -v cpunode="CPU:NODE ..." -v n=RANKS -f mpi.awk TRUTH OUT
# TRUTH: the workload's own edge list (WL_TRUTH: SRC DST BYTES MESSAGES, directed, `#` comments);
# OUT: its stdout, one `cmlb-mpi-wl rank=R ... cpus=LIST[;LIST...] ...` line per rank (each
# thread's Cpus_allowed_list). A rank's node is the NUMA node of all its threads' CPUs; a rank
# whose CPUs lie on several nodes gets "A+B", one of the RANKS ranks that printed no line gets
# "missing"; both are listed in spans= and their edges are counted as `unplaced`, not guessed.
# Prints one line:
#   ranks=SEEN nodes=R:NODE,... spans=R,... inter_bytes=X intra_bytes=Y unplaced_bytes=Z
#   total_bytes=T inter_edges=a/b
function expand(list, out,   k, a, i, r, lo, hi, c) { # "0-1,3" -> out[0] out[1] out[3]
    k = split(list, a, ",")
    for (i = 1; i <= k; i++) {
        if (split(a[i], r, "-") == 2) { lo = r[1] + 0; hi = r[2] + 0 } else { lo = hi = a[i] + 0 }
        for (c = lo; c <= hi; c++) out[c] = 1
    }
}
BEGIN {
    m = split(cpunode, p, " ")
    for (i = 1; i <= m; i++) { split(p[i], q, ":"); node[q[1]] = q[2] }
}
FNR == NR {
    if ($0 ~ /^#/ || NF < 3) next
    ne++; src[ne] = $1; dst[ne] = $2; bytes[ne] = $3
    next
}
/^cmlb-mpi-wl rank=/ {
    r = ""; cpus = ""
    for (i = 2; i <= NF; i++) {
        if ($i ~ /^rank=/) r = substr($i, 6)
        if ($i ~ /^cpus=/) cpus = substr($i, 6)
    }
    nr++
    delete seen; delete nodes
    k = split(cpus, t, ";")
    for (i = 1; i <= k; i++) expand(t[i], seen)
    label = ""
    for (c in seen) {
        nd = (c in node) ? node[c] : "?"
        if (!(nd in nodes)) { nodes[nd] = 1; label = label (label == "" ? "" : "+") nd }
    }
    # Sorted "0+1" whatever order the CPUs came in (only ever 1 or 2 nodes here; good enough to
    # name, since a span is a failure in itself).
    if (split(label, s, "+") == 2 && s[1] > s[2]) label = s[2] "+" s[1]
    rnode[r] = label == "" ? "?" : label
}
END {
    if (n == "") n = nr
    nodes_s = ""; spans = ""
    for (r = 0; r < n; r++) {
        nodes_s = nodes_s (r ? "," : "") r ":" ((r "") in rnode ? rnode[r ""] : "missing")
        if (!((r "") in rnode) || rnode[r ""] ~ /[+?]/) spans = spans (spans == "" ? "" : ",") r
    }
    inter = intra = unplaced = total = ie = 0
    for (e = 1; e <= ne; e++) {
        a = rnode[src[e]]; b = rnode[dst[e]]; total += bytes[e]
        if (a == "" || b == "" || a ~ /[+?]/ || b ~ /[+?]/) unplaced += bytes[e]
        else if (a != b) { inter += bytes[e]; ie++ }
        else intra += bytes[e]
    }
    printf "ranks=%d nodes=%s spans=%s inter_bytes=%d intra_bytes=%d unplaced_bytes=%d total_bytes=%d inter_edges=%d/%d\n",
        nr, nodes_s, (spans == "" ? "none" : spans), inter, intra, unplaced, total, ie, ne
}
