# Diagnostic, not cmlb: a communication matrix from a profile's samples.csv counted per 4 KiB
# page with a fixed window (-v win=NS), instead of cmlb's 64-byte lines and per-thread
# sampling-interval expiration. NUMA hinting faults come once per page per scan pass (>= 1 s
# apart by default), so this shows whether the samples themselves carry the sharing.
# -v n=THREADS. Input: tid_index,time_ns,0xaddr (header line skipped). Output: n lines of CSV.
BEGIN { FS = "," }
NR == 1 { next }
{
    t = $1; tm = $2; a = $3
    pg = substr(a, 1, length(a) - 3)   # hex address without its low 12 bits
    for (u = 0; u < n; u++)
        if (u != t && ((pg, u) in last) && tm - last[pg, u] <= win) { A[t, u]++; A[u, t]++ }
    last[pg, t] = tm
}
END { for (i = 0; i < n; i++) { l = ""; for (j = 0; j < n; j++) l = l (j ? "," : "") (A[i, j] + 0); print l } }
