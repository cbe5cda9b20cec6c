# Checks run inside the multi-NUMA guest (busybox sh), started by /init. See tests/numa/README.md.
# Parameters come on the kernel command line from tests/numa/run:
#   cmlb.shape=NAME  cmlb.expect=NODE:CPUS,...  cmlb.dist=ROW;ROW (values by ',')  cmlb.parts=a,b,...
# Output lines the host reads (everything else is log):
#   NUMA-RESULT PASS|FAIL|SKIP NAME DETAIL    one per check
#   NUMA-MEASURE NAME KEY=VALUE...            measured figures for the report
#   NUMA-TIME PART SECONDS                    guest time of each part
#   NUMA-CHECKS-END                           the script ran to its end

W=/opt/cmlb/wl
arg() { sed -n "s/.* cmlb\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
SHAPE=$(arg shape)
EXPECT=$(arg expect)
DIST=$(arg dist)
PARTS=$(arg parts)
NCPU=$(grep -c '^processor' /proc/cpuinfo)
CPUS=$(awk -v n="$NCPU" 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", i ? " " : "", i }')
export XDG_CACHE_HOME=/tmp/cache

pass() { echo "NUMA-RESULT PASS $1 $2"; }
fail() { echo "NUMA-RESULT FAIL $1 $2"; }
skip() { echo "NUMA-RESULT SKIP $1 $2"; }
measure() { echo "NUMA-MEASURE $*"; }
log() { sed "s/^/NUMA-LOG $1| /"; }
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
want() { case ",$PARTS," in *",$1,"*|*,all,*) return 0 ;; esac; return 1; }

# "cpu:node ..." for every CPU, from sysfs.
CPUNODE=""
for c in $CPUS; do
    n=$(ls -d /sys/devices/system/cpu/cpu$c/node* | sed 's/.*node//')
    CPUNODE="$CPUNODE $c:$n"
done
CPUNODE=${CPUNODE# }
NNODES=$(ls -d /sys/devices/system/node/node[0-9]* | wc -l)
echo "NUMA-LOG shape=$SHAPE cpus=$NCPU nodes=$NNODES cpu:node=$CPUNODE kernel=$(uname -r)"

# ---------------------------------------------------------------------------------------------
# 1. cmlb topology --topology live: nodes, their CPUs, the distance matrix
check_topology() {
    if ! cmlb topology --topology live >/tmp/topo.txt 2>/tmp/topo.err; then
        fail topology "cmlb topology --topology live failed: $(head -c 300 /tmp/topo.err)"
        return
    fi
    log topology </tmp/topo.txt
    numactl -H | log numactl
    lstopo-no-graphics --no-io | log lstopo
    why=""
    nexp=$(echo "$EXPECT" | tr ',' '\n' | grep -c .)
    nseen=$(grep -c '^ *numa P#' /tmp/topo.txt)
    [ "$nseen" = "$nexp" ] || why="$why cmlb sees $nseen NUMA nodes, expected $nexp;"
    [ "$NNODES" = "$nexp" ] || why="$why the kernel has $NNODES nodes, expected $nexp;"
    for e in $(echo "$EXPECT" | tr ',' ' '); do
        n=${e%%:*}
        cpus=${e#*:}
        seen=$(sed -n "s/^ *numa P#$n: capacity [0-9]* PUs* (\(.*\))\$/\1/p" /tmp/topo.txt)
        kern=$(cat /sys/devices/system/node/node$n/cpulist)
        [ "$seen" = "$cpus" ] && [ "$kern" = "$cpus" ] ||
            why="$why node $n: cmlb '$seen', kernel '$kern', expected '$cpus';"
    done
    # cmlb's matrix (rows after the header line), the kernel's, the one qemu was given.
    cm=$(awk '/^NUMA distances/ { f = 1; getline; next } f && /^ *P#/ { $1 = ""; sub(/^ /, ""); gsub(/ +/, ","); printf "%s;", $0 }' /tmp/topo.txt)
    km=""
    for d in $(ls -d /sys/devices/system/node/node[0-9]*); do
        km="$km$(tr -s ' ' ',' <"$d/distance" | sed 's/,$//');"
    done
    [ "$cm" = "$km" ] || why="$why distances: cmlb '$cm', kernel '$km';"
    [ "$km" = "$DIST;" ] || why="$why distances: kernel '$km', qemu was given '$DIST';"
    measure topology "nodes=$nseen cpus=$(grep '^ *numa P#' /tmp/topo.txt | sed 's/.*(\(.*\))/\1/' | tr '\n' '/' | sed 's,/$,,') distances=$cm"
    if [ -z "$why" ]; then
        pass topology "cmlb topology --topology live: $nseen nodes, CPUs $EXPECT, distances $cm (= kernel's = qemu's)"
    else
        fail topology "$why"
    fi
}

# ---------------------------------------------------------------------------------------------
# 2. cmlb run on ftcheck: each thread on its planned PU, its first-touched pages on the planned node
# eval_ft PLAN OUTFILE -> "pinned=K/N cpu_wrong=... mp=FRAC nm=FRAC sh=FRAC"
eval_ft() {
    awk -v plan="$1" -v cpunode="$CPUNODE" '
    function nodecount(s, want,   a, k, i, b) { k = split(s, a, ","); for (i = 1; i <= k; i++) { split(a[i], b, ":"); if (b[1] == want) return b[2] } return 0 }
    BEGIN { n = split(plan, a, " "); for (i = 1; i <= n; i++) { split(a[i], b, ":"); pu[b[1]] = b[2] }
            m = split(cpunode, c, " "); for (i = 1; i <= m; i++) { split(c[i], d, ":"); node[d[1]] = d[2] } }
    /^ftcheck thread=/ {
        delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        t = f["thread"]; threads++
        if (!(t in pu)) { wrong = wrong " t" t ":noplan"; next }
        want = node[pu[t]]
        if (f["cpus"] == pu[t] && f["cpu"] == pu[t]) pinned++; else wrong = wrong " t" t ":" f["cpus"] "/" f["cpu"] "!=" pu[t]
        pt += f["priv_pages"]; pon += nodecount(f["priv_nodes"], want)
        st += f["shared_pages"]; son += nodecount(f["shared_nodes"], want)
    }
    /^ftcheck numa_maps thread=/ {
        split($3, tt, "="); t = tt[2]; want = node[pu[t]]
        for (i = 4; i <= NF; i++) if ($i ~ /^N[0-9]+=/) { split(substr($i, 2), kv, "="); nt += kv[2]; if (kv[1] == want) non += kv[2] }
    }
    END { printf "pinned=%d/%d mp_priv=%.4f mp_shared=%.4f numa_maps=%.4f%s\n", pinned, threads,
            pt ? pon / pt : 0, st ? son / st : 0, nt ? non / nt : 0, wrong ? " wrong=" wrong : "" }' "$2"
}

# left_alone ERRFILE: the guard found no plan better than what the threads have and said so
# (the threads are then left as they are: docs/evidence.md).
left_alone() { grep -qF "threads left as they are" "$1"; }
# all_unpinned OUTFILE: every thread the workload reported ran on all of the guest's CPUs.
all_unpinned() {
    awk -v all="$(cat /sys/devices/system/cpu/online)" '
        { for (i = 1; i <= NF; i++) if ($i ~ /^cpus=/) { n++; if (substr($i, 6) != all) bad++ } }
        END { exit !(n > 0 && bad == 0) }' "$1"
}

# The plan `cmlb run` itself makes: thread:PU pairs from its --dry-run line.
run_plan() { # run_plan PROFILE STRATEGY CMD...
    p=$1
    s=$2
    shift 2
    cmlb run --dry-run --profile "$p" --strategy "$s" -- "$@" 2>&1 >/dev/null | sed -n 's/^cmlb: plan thread:PU //p'
}

plan_nodes() { # plan_nodes "t:pu ..." -> node of each thread in order
    awk -v plan="$1" -v cpunode="$CPUNODE" 'BEGIN { m = split(cpunode, c, " "); for (i = 1; i <= m; i++) { split(c[i], d, ":"); node[d[1]] = d[2] }
        n = split(plan, a, " "); for (i = 1; i <= n; i++) { split(a[i], b, ":"); printf "%s%s", (i > 1 ? "," : ""), node[b[2]] } }'
}

check_placement() {
    nt=$((2 * NCPU))
    ft="$W/ftcheck $nt 1024 256 0.5"
    # The default strategy through cmlb run's own profiling pre-run (backend auto).
    t0=$(now)
    if ! cmlb run --save-profile /tmp/prof-ft --time 20 -- $ft >/tmp/ft-default.out 2>/tmp/ft-default.err; then
        fail placement-default "cmlb run (pre-run + run) failed: $(tail -c 300 /tmp/ft-default.err)"
        return
    fi
    log ft-default </tmp/ft-default.err
    measure placement-prerun "seconds=$(since "$t0") backend=$(sed -n 's/^backend: *//p' /tmp/prof-ft/profile.yaml)"
    # random (seeded): a plan that differs from compact on every shape, whatever the default's
    # guard decides for this profile (it may keep creation order).
    for s in cmlb-refine compact scatter random; do
        if [ "$s" != cmlb-refine ]; then
            cmlb run --profile /tmp/prof-ft --strategy "$s" -- $ft >/tmp/ft-$s.out 2>/tmp/ft-$s.err ||
                { fail placement-$s "cmlb run --strategy $s failed: $(tail -c 300 /tmp/ft-$s.err)"; continue; }
        else
            cp /tmp/ft-default.out /tmp/ft-$s.out
            cp /tmp/ft-default.err /tmp/ft-$s.err
        fi
        if left_alone /tmp/ft-$s.err; then
            if all_unpinned /tmp/ft-$s.out; then
                pass placement-$s "the guard found no plan better than what the threads have: left as they are, every thread on all CPUs ($(grep -o 'profile [^:]*' /tmp/ft-$s.err | head -1))"
            else
                fail placement-$s "the guard left the threads as they are, but not every thread ran on all CPUs: $(grep -o 'cpus=[^ ]*' /tmp/ft-$s.out | sort | uniq -c | tr '\n' ' ')"
            fi
            continue
        fi
        plan=$(run_plan /tmp/prof-ft "$s" $ft)
        eval "plan_$(echo $s | tr - _)=\"\$plan\""
        [ -n "$plan" ] || { fail placement-$s "no plan from cmlb run --dry-run --strategy $s"; continue; }
        log ft-$s </tmp/ft-$s.out
        r=$(eval_ft "$plan" /tmp/ft-$s.out)
        measure placement-$s "plan=$(echo "$plan" | tr ' ' ',') nodes=$(plan_nodes "$plan") $r"
        set -- $(echo "$r" | tr '=/' '  ')
        # pinned K N mp_priv F mp_shared F numa_maps F
        if [ "$2" = "$3" ] && [ "$3" = "$nt" ] &&
            awk -v a="$5" -v b="$7" -v c="$9" 'BEGIN { exit !(a >= 0.95 && b >= 0.95 && c >= 0.95) }'; then
            pass placement-$s "$nt threads on their planned PUs, first-touched pages on the planned node: $r"
        else
            fail placement-$s "$r (bar: every thread on its PU, fractions >= 0.95)"
        fi
    done
    # Can the measurement tell plans apart? The first pair of strategies whose plans put the
    # threads on different nodes (compact and scatter coincide with one PU per node); the pages
    # of A's run judged against B's plan must miss.
    apart=""
    for pair in compact:scatter cmlb-refine:compact cmlb-refine:scatter compact:random; do
        x=${pair%:*}
        y=${pair#*:}
        eval "px=\$plan_$(echo $x | tr - _); py=\$plan_$(echo $y | tr - _)"
        [ -n "$px" ] && [ -n "$py" ] || continue
        nx=$(plan_nodes "$px")
        ny=$(plan_nodes "$py")
        [ "$nx" != "$ny" ] || continue
        cross=$(eval_ft "$py" /tmp/ft-$x.out | sed 's/.*mp_priv=\([0-9.]*\).*/\1/')
        apart=1
        measure placement-apart "$x=$nx $y=$ny pages_of_${x}_on_${y}_nodes=$cross"
        if awk -v c="$cross" 'BEGIN { exit !(c <= 0.75) }'; then
            pass placement-apart "$x ($nx) and $y ($ny) differ; $x's pages match $y's plan only $cross"
        else
            fail placement-apart "$x ($nx) and $y ($ny) differ but $x's pages match $y's plan $cross (bar <= 0.75)"
        fi
        break
    done
    [ -n "$apart" ] || fail placement-apart "no two of cmlb-refine, compact, scatter, random gave different node plans"
}

# ---------------------------------------------------------------------------------------------
# 3. numa-faults: the matrix of known-pattern workloads with threads across nodes
# score PATTERN COMM.CSV -> "hits=K/N true_mass=F"
score() {
    awk -F, -v pat="$1" '
    function partner(i, j, n) { if (i == j) return 0
        if (pat == "pairs") return (i == j + 1 && j % 2 == 0) || (j == i + 1 && i % 2 == 0)
        if (pat == "ring") return (j == (i + 1) % n) || (i == (j + 1) % n)
        return 0 }
    { for (j = 1; j <= NF; j++) a[NR - 1, j - 1] = $j; n = NR }
    END { hits = 0; tot = 0; tru = 0
        for (i = 0; i < n; i++) { best = -1; bv = 0
            for (j = 0; j < n; j++) if (j != i && a[i, j] > bv) { bv = a[i, j]; best = j }
            if (best >= 0 && partner(i, best, n)) hits++
            for (j = i + 1; j < n; j++) { tot += a[i, j]; if (partner(i, j, n)) tru += a[i, j] } }
        printf "hits=%d/%d true_mass=%.3f offdiag=%d\n", hits, n, tot ? tru / tot : 0, tot }' "$2"
}

vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }

check_numa_faults() {
    nt=$NCPU
    secs=${NF_SECONDS:-4}
    for wl in pairs ring; do
        # Any profile with nt threads serves scatter (it ignores the matrix): a short faults run.
        cmlb profile --backend faults --out /tmp/nf-$wl-seed -- $W/$wl $nt 0.3 >/dev/null 2>&1
        for b in numa-faults watch auto; do
            h0=$(vmstat numa_hint_faults)
            m0=$(vmstat numa_pages_migrated)
            t0=$(now)
            cmlb profile --backend $b --out /tmp/nf-$wl-$b -- \
                cmlb run --profile /tmp/nf-$wl-seed --strategy scatter -- $W/$wl $nt "$secs" \
                >/tmp/nf-$wl-$b.out 2>/tmp/nf-$wl-$b.err
            rc=$?
            el=$(since "$t0")
            h1=$(vmstat numa_hint_faults)
            m1=$(vmstat numa_pages_migrated)
            log nf-$wl-$b </tmp/nf-$wl-$b.err
            if [ $rc -ne 0 ] || [ ! -s /tmp/nf-$wl-$b/comm.csv ]; then
                fail nf-$wl-$b "cmlb profile --backend $b failed ($rc): $(tail -c 300 /tmp/nf-$wl-$b.err)"
                continue
            fi
            ran=$(sed -n 's/^backend: *//p' /tmp/nf-$wl-$b/profile.yaml)
            sc=$(score $wl /tmp/nf-$wl-$b/comm.csv)
            samples=$(sed -n 's/^samples: *//p' /tmp/nf-$wl-$b/profile.yaml)
            cpus=$(sed -n 's/^cmlb-wl thread=\([0-9]*\) .* cpus=\([^ ]*\) .*/\1:\2/p' /tmp/nf-$wl-$b.out | tr '\n' ' ')
            measure nf-$wl-$b "backend=$ran $sc samples=$samples hint_faults=$((h1 - h0)) migrated=$((m1 - m0)) seconds=$el cpus=$(echo $cpus | tr ' ' ',') matrix=$(tr '\n' ';' </tmp/nf-$wl-$b/comm.csv)"
            eval "score_${wl}_$(echo $b | tr - _)=\"\$sc\""
            eval "ran_${wl}_$(echo $b | tr - _)=\"\$ran\""
            if [ "$b" = numa-faults ] && [ -s /tmp/nf-$wl-$b/samples.csv ]; then
                # The same samples counted per page within 1.5 s (diagnostic, see pagecomm.awk).
                awk -v n=$nt -v win=1500000000 -f /opt/cmlb/tests/pagecomm.awk /tmp/nf-$wl-$b/samples.csv >/tmp/nf-$wl-pages.csv
                measure nf-$wl-pages "$(score $wl /tmp/nf-$wl-pages.csv) matrix=$(tr '\n' ';' </tmp/nf-$wl-pages.csv) (same samples, 4 KiB pages, 1.5 s window: not cmlb's analysis)"
            fi
            case " $cpus " in *[,-]*|"  ")
                fail nf-$wl-$b "threads not pinned one per CPU by the scatter plan: '$cpus'"
                continue ;;
            esac
            if [ "$b" = numa-faults ]; then
                hits=$(echo "$sc" | sed 's/hits=\([0-9]*\)\/.*/\1/')
                hf=$((h1 - h0))
                # bar: every thread's strongest partner a true one (7 of 8 allowed, as in
                # profiler/tests/bars.rs), and hinting faults did happen.
                if [ "$hf" -gt 0 ] && [ "$hits" -ge $((nt - nt / 8)) ]; then
                    pass nf-$wl "numa-faults on $wl ($nt threads, scatter-pinned): $sc, $hf hinting faults"
                else
                    fail nf-$wl "KNOWN BUG (numa-faults matrix counted per 64 B line, see nf-$wl-pages): numa-faults on $wl ($nt threads, scatter-pinned): $sc, $hf hinting faults (bar: hits >= $((nt - nt / 8))/$nt, faults > 0)"
                fi
            fi
        done
    done
    # auto: picks numa-faults here, and numa-faults is the better source (no worse than watch).
    for wl in pairs ring; do
        eval "a=\$ran_${wl}_auto; n=\$score_${wl}_numa_faults; w=\$score_${wl}_watch"
        hn=$(echo "$n" | sed 's/hits=\([0-9]*\)\/.*/\1/')
        hw=$(echo "$w" | sed 's/hits=\([0-9]*\)\/.*/\1/')
        mn=$(echo "$n" | sed 's/.*true_mass=\([0-9.]*\).*/\1/')
        mw=$(echo "$w" | sed 's/.*true_mass=\([0-9.]*\).*/\1/')
        if [ "$a" = numa-faults ] && [ -n "$hn" ] && [ "${hw:-0}" -le "$hn" ] &&
            awk -v n="$mn" -v w="${mw:-0}" 'BEGIN { exit !(n + 0.05 >= w) }'; then
            pass auto-$wl "auto ran $a; numa-faults $n vs watch $w"
        else
            fail auto-$wl "KNOWN BUG (follows nf-$wl): auto ran '$a'; numa-faults [$n] vs watch [$w] (bar: auto = numa-faults and numa-faults no worse than watch)"
        fi
    done
}

# Overhead of the numa-faults backend: fixed work (WL_PASSES), threads pinned by `cmlb run
# --strategy compact` in both, plain vs under `cmlb profile`, interleaved. Under TCG on a shared
# 2-core host the guest's 4 vCPUs are oversubscribed and the same work took 0.5-3.8 s from one
# run to the next (measured), always slower, never faster: the least disturbed run (the
# minimum) is compared; medians are reported too.
check_overhead() {
    nt=$NCPU
    reps=5
    # Enough work that the profiler's fixed start-up (~0.5 s under TCG) is not what is measured:
    # at 100 passes the plain run took 0.2 s and the ratio swung from 1.1 to 4 between runs; at
    # 400 passes (0.5 s plain, timed to 0.1 s) the fastest runs' ratio was 0.6-1.4 and a CI run
    # failed the bar. At 1600 the plain run takes about 2 s.
    passes=${OH_PASSES:-1600}
    seed=/tmp/oh-seed
    cmlb profile --backend faults --out $seed -- $W/pairs $nt 0.3 >/dev/null 2>&1
    plain=""
    prof=""
    for r in $(seq $reps); do
        t0=$(now)
        WL_PASSES=$passes cmlb run --profile $seed --strategy compact -- $W/pairs $nt >/dev/null 2>&1
        plain="$plain $(since "$t0")"
        t0=$(now)
        WL_PASSES=$passes cmlb profile --backend numa-faults --out /tmp/oh -- \
            cmlb run --profile $seed --strategy compact -- $W/pairs $nt >/dev/null 2>/tmp/oh.err ||
            { fail overhead-numa-faults "cmlb profile failed: $(tail -c 300 /tmp/oh.err)"; return; }
        prof="$prof $(since "$t0")"
    done
    log overhead </tmp/oh.err
    nth() { echo $2 | tr ' ' '\n' | sort -n | sed -n "$1p"; }
    ratio=$(awk -v a="$(nth 1 "$plain")" -v b="$(nth 1 "$prof")" 'BEGIN { printf "%.3f", (a > 0 ? b / a : 0) }')
    rmed=$(awk -v a="$(nth 3 "$plain")" -v b="$(nth 3 "$prof")" 'BEGIN { printf "%.3f", (a > 0 ? b / a : 0) }')
    measure overhead-numa-faults "passes=$passes plain_s=$(echo $plain | tr ' ' ',') profiled_s=$(echo $prof | tr ' ' ',') ratio_min=$ratio ratio_median=$rmed"
    d="fastest runs x$ratio (plain $(nth 1 "$plain") s, profiled $(nth 1 "$prof") s), medians x$rmed"
    # This bar only catches a pathological cost; the 1.15x target is checked on the host
    # (README, "Profiling overhead").
    if awk -v r="$ratio" 'BEGIN { exit !(r > 0 && r <= 2.0) }'; then
        pass overhead-numa-faults "$d; bar: fastest <= 2.0 under TCG"
    else
        fail overhead-numa-faults "$d; bar: fastest <= 2.0 under TCG"
    fi
}

# ---------------------------------------------------------------------------------------------
# 4. Memory per node after apply, from the kernel's per-node counters
node_pages() { # pages allocated on each node so far: numa_hit + numa_miss, "n:pages ..."
    for d in $(ls -d /sys/devices/system/node/node[0-9]*); do
        awk -v n="${d##*node}" '$1 == "numa_hit" || $1 == "numa_miss" { s += $2 } END { printf "%s:%d ", n, s }' "$d/numastat"
    done
}

THP=/sys/kernel/mm/transparent_hugepage/enabled
thp_mode() { sed 's/.*\[\(.*\)\].*/\1/' $THP; }

# heavy_top LOAD.CSV NT: are the skewed workload's heavy threads (w % 4 == 1) the top loads?
heavy_top() {
    awk -v nt="$2" '{ l[NR - 1] = $1 } END { h = 0; for (i = 0; i < nt; i++) if (i % 4 == 1) h++
        # the h largest loads must all belong to heavy threads
        for (k = 0; k < h; k++) { best = -1; for (i = 0; i < nt; i++) if (!(i in used) && (best < 0 || l[i] > l[best])) best = i; used[best] = 1; if (best % 4 != 1) bad = 1 }
        exit bad }' "$1"
}

# without_balancing CMD...: run CMD with NUMA balancing off (where the kernel has it), then put
# the setting back; CMD's status.
without_balancing() {
    local nb rc
    nb=$(cat /proc/sys/kernel/numa_balancing 2>/dev/null || true)
    [ -n "$nb" ] && echo 0 >/proc/sys/kernel/numa_balancing 2>/dev/null
    "$@"
    rc=$?
    [ -n "$nb" ] && echo "$nb" >/proc/sys/kernel/numa_balancing 2>/dev/null
    return $rc
}

check_balance() {
    nt=$((2 * NCPU))
    export WL_KIB=4096
    # The guest kernel (Debian's default) has transparent huge pages "always": a 4 MiB buffer is
    # then first-touched in two 2 MiB faults, and the fault-based load vector no longer follows
    # memory (checked separately below, balance-thp-load). The plan checks run with "madvise",
    # the setting of the development VMs, so that one fault is one 4 KiB page and numastat's
    # numa_hit counts pages.
    thp0=$(thp_mode)
    echo madvise >$THP
    measure balance-thp "guest_default=$thp0 used=$(thp_mode)"
    sk="$W/skewed $nt 1.5"
    # First-touch faults: each thread's memory, which is what the plan's promise is about. With
    # auto the guests pick numa-faults, whose load vector also counts hinting faults; those
    # follow the kernel's scan timing and made the promise miss by up to 0.05 in some runs
    # (its matrices are checked above, nf-*).
    # The software page-fault event counts NUMA hinting faults too (the kernel raises it for
    # every fault), so with balancing on a thread's count also follows how often the scanner
    # visited it: off for the pre-run only (numa-faults' own checks above run with it on).
    if ! without_balancing cmlb run --backend faults --save-profile /tmp/prof-sk --time 20 -- $sk >/dev/null 2>/tmp/sk-prerun.err; then
        fail balance "profiling pre-run of skewed failed: $(tail -c 300 /tmp/sk-prerun.err)"
        unset WL_KIB
        return
    fi
    log sk-prerun </tmp/sk-prerun.err
    # What the plan promises in pages: each thread's first-touch faults as the profile counted
    # them (profile.yaml's load_samples). load.csv is the method's load, which weights each
    # phase by its sample rate (a bandwidth figure, not a page count): a thread that faults in
    # a busier slice counts more there, so comparing it with numastat's pages mixed two units.
    sed -n 's/^ *load_samples: *//p' /tmp/prof-sk/profile.yaml >/tmp/prof-sk-pages.txt
    measure balance-profile "load=$(tr '\n' ',' </tmp/prof-sk/load.csv) load_samples=$(tr '\n' ',' </tmp/prof-sk-pages.txt)"
    for s in cmlb-refine cmlb compact scatter; do
        cmlb map --profile /tmp/prof-sk --topology live --cpuset self --strategy $s --format json >/tmp/sk-$s.json 2>/tmp/sk-$s.map.err ||
            { fail balance-$s "cmlb map failed: $(tail -c 300 /tmp/sk-$s.map.err)"; continue; }
        b=$(node_pages)
        cmlb run --profile /tmp/prof-sk --strategy $s -- $sk >/tmp/sk-$s.out 2>/tmp/sk-$s.err ||
            { fail balance-$s "cmlb run failed: $(tail -c 300 /tmp/sk-$s.err)"; continue; }
        a=$(node_pages)
        log sk-$s </tmp/sk-$s.err
        if left_alone /tmp/sk-$s.err; then
            eval "left_$(echo $s | tr - _)=1"
            if all_unpinned /tmp/sk-$s.out; then
                pass balance-$s "the guard found no plan better than what the threads have: left as they are, every thread on all CPUs"
            else
                fail balance-$s "the guard left the threads as they are, but not every thread ran on all CPUs: $(grep -o 'cpus=[^ ]*' /tmp/sk-$s.out | sort | uniq -c | tr '\n' ' ')"
            fi
            continue
        fi
        # promised per-node load (plan assignment + the profile's load vector) vs measured pages
        r=$(tr -d ' \n' </tmp/sk-$s.json | grep -o '"thread":[0-9]*,"pu":[0-9]*,"core":[0-9]*,"numa":[0-9]*' |
            sed 's/"thread":\([0-9]*\),"pu":\([0-9]*\),"core":[0-9]*,"numa":\([0-9]*\)/\1 \2 \3/' |
            awk -v before="$b" -v after="$a" -v loadf=/tmp/prof-sk-pages.txt -v out=/tmp/sk-$s.out \
                -v cpunode="$CPUNODE" -v kib="$WL_KIB" -f /opt/cmlb/tests/balance.awk)
        measure balance-$s "$r"
        case "$r" in promised=*) ;; *)
            fail balance-$s "no figures from the plan and numastat (plan $(head -c 200 /tmp/sk-$s.json))"
            continue ;;
        esac
        eval "bal_$(echo $s | tr - _)=\"\$r\""
        case "$r" in *wrong_pu=*)
            fail balance-$s "threads not on the planned PUs: $r"
            continue ;;
        esac
        field() { echo " $r" | sed "s/.* $1=\([0-9.,]*\).*/\1/"; }
        # The plan is carried out: memory lands on the nodes where the plan put its owners.
        if awk -v d="$(field dev_truth)" 'BEGIN { exit !(d <= 0.05) }'; then
            pass balance-$s-applied "per-node pages (numastat) = the plan's placement of the threads' memory: truth $(field truth), measured $(field measured)"
        else
            fail balance-$s-applied "per-node pages (numastat) $(field measured) vs $(field truth) from the plan's placement (bar: max difference 0.05)"
        fi
        # The balancing strategies promise a per-node load (the profile's loads summed per node).
        case $s in cmlb-refine|cmlb)
            if awk -v d="$(field dev_promise)" 'BEGIN { exit !(d <= 0.05) }'; then
                pass balance-$s-promise "measured per-node memory $(field measured) = promised load shares $(field promised)"
            else
                fail balance-$s-promise "measured per-node memory $(field measured) vs promised load shares $(field promised) (bar 0.05); the threads' real memory would give $(field truth): the profile's fault counts are off (heavy threads 1 and 5 own the same memory; their counts: $(sed -n '2p;6p' /tmp/prof-sk-pages.txt | tr '\n' ' '))"
            fi ;;
        esac
    done
    # Compared on the plan's placement of the threads' real memory (imb_truth): that is what a
    # strategy decides, and the kernel following it is checked above (balance-*-applied, 0.05).
    # On measured pages two plans with the same placement differed by up to 0.045 (numastat
    # counts the whole run's pages), which failed a CI run on 4x1 where all plans were equal.
    imb() { eval "echo \"\$bal_$1\"" | sed 's/.* imb_truth=\([0-9.]*\).*/\1/'; }
    ir=$(imb cmlb_refine)
    ic=$(imb compact)
    is=$(imb scatter)
    # A strategy the guard overruled pinned nothing: its claim is then that creation order is
    # already as balanced as the spread plan (compact no worse than scatter).
    if [ -n "${left_cmlb_refine:-}" ] && [ -n "$ic" ] && [ -n "$is" ]; then
        if awk -v s="$is" -v c="$ic" 'BEGIN { exit !(c <= s + 0.005) }'; then
            pass balance-vs-unbalanced "cmlb-refine left the threads as they are: creation order is balanced (distance compact $ic, scatter $is)"
        else
            fail balance-vs-unbalanced "cmlb-refine left the threads as they are though creation order is less balanced than scatter (compact $ic, scatter $is)"
        fi
    elif [ -n "$ir" ] && [ -n "$is" ] && [ -n "$ic" ] && awk -v r="$ir" -v s="$is" -v c="$ic" 'BEGIN { exit !(r <= s + 0.005 && r <= c + 0.005) }'; then
        pass balance-vs-unbalanced "distance of the planned per-node memory from the nodes' CPU shares: cmlb-refine $ir, compact $ic, scatter $is (bar: cmlb-refine lowest, 0.005 rounding)"
    else
        fail balance-vs-unbalanced "distance of the planned per-node memory from the nodes' CPU shares: cmlb-refine '$ir', compact '$ic', scatter '$is' (bar: cmlb-refine lowest, 0.005 rounding)"
    fi
    # The thesis's own strategy promises balance too.
    ib=$(imb cmlb)
    if [ -n "${left_cmlb:-}" ] && [ -n "$ic" ] && [ -n "$is" ]; then
        if awk -v s="$is" -v c="$ic" 'BEGIN { exit !(c <= s + 0.005) }'; then
            pass balance-cmlb-vs-unbalanced "cmlb left the threads as they are: creation order is balanced (distance compact $ic, scatter $is)"
        else
            fail balance-cmlb-vs-unbalanced "cmlb left the threads as they are though creation order is less balanced than scatter (compact $ic, scatter $is)"
        fi
    elif [ -n "$ib" ] && [ -n "$is" ] && [ -n "$ic" ] && awk -v r="$ib" -v s="$is" -v c="$ic" 'BEGIN { exit !(r <= s + 0.005 && r <= c + 0.005) }'; then
        pass balance-cmlb-vs-unbalanced "distance of the planned per-node memory from the nodes' CPU shares: cmlb $ib, compact $ic, scatter $is (bar: cmlb lowest, 0.005 rounding)"
    else
        fail balance-cmlb-vs-unbalanced "distance of the planned per-node memory from the nodes' CPU shares: cmlb '$ib', compact '$ic', scatter '$is' (bar: cmlb lowest, 0.005 rounding); loads $(tr '\n' ',' </tmp/prof-sk/load.csv)"
    fi
    if heavy_top /tmp/prof-sk/load.csv $nt; then
        pass balance-load "THP madvise: the skewed workload's heavy threads top the profile's load vector"
    else
        fail balance-load "THP madvise: heavy threads do not top load.csv: $(tr '\n' ',' </tmp/prof-sk/load.csv)"
    fi
    # The same profile (first-touch faults, balancing off, as the pre-run above) with
    # transparent huge pages "always" (the guest kernel's default): the program runs with
    # PR_SET_THP_DISABLE, so its faults are still 4 KiB pages. (Profiled with auto, that is
    # numa-faults, whose hinting faults follow the scanner: a CI run had one heavy thread at
    # the light ones' level.)
    echo always >$THP
    if without_balancing cmlb profile --backend faults --out /tmp/prof-sk-thp -- $sk >/dev/null 2>/tmp/sk-thp.err; then
        log sk-thp </tmp/sk-thp.err
        # Judged on each thread's fault count (load_samples), which is what THP changes: one
        # 2 MiB fault instead of 512. load.csv weights each phase by its sample rate, and a CI
        # run had a heavy thread whose faults fell in a quiet phase at the light ones' level.
        sed -n 's/^ *load_samples: *//p' /tmp/prof-sk-thp/profile.yaml >/tmp/prof-sk-thp-pages.txt
        measure balance-thp-load "load=$(tr '\n' ',' </tmp/prof-sk-thp/load.csv) load_samples=$(tr '\n' ',' </tmp/prof-sk-thp-pages.txt) samples=$(sed -n 's/^samples: *//p' /tmp/prof-sk-thp/profile.yaml)"
        if heavy_top /tmp/prof-sk-thp-pages.txt $nt; then
            pass balance-thp-load "THP always: heavy threads top the fault counts"
        else
            fail balance-thp-load "KNOWN BUG (page-fault load vector counts faults, not bytes): with THP always the heavy threads (4x memory) do not top the fault counts: $(tr '\n' ',' </tmp/prof-sk-thp-pages.txt)"
        fi
    else
        fail balance-thp-load "cmlb profile failed: $(tail -c 300 /tmp/sk-thp.err)"
    fi
    echo "$thp0" >$THP
    unset WL_KIB
}

# ---------------------------------------------------------------------------------------------
probe_auto() {
    cmlb profile --probe >/tmp/probe.txt 2>&1
    log probe </tmp/probe.txt
    auto=$(sed -n 's/^auto backend: *//p' /tmp/probe.txt)
    measure probe "auto=$auto numa_balancing=$(cat /proc/sys/kernel/numa_balancing) pmus=$(ls /sys/bus/event_source/devices | tr '\n' ',')"
    if [ "$auto" = numa-faults ]; then
        pass probe-auto "cmlb profile --probe: auto backend numa-faults (balancing on, $NNODES nodes)"
    else
        fail probe-auto "cmlb profile --probe: auto backend '$auto', expected numa-faults (balancing $(cat /proc/sys/kernel/numa_balancing), $NNODES nodes)"
    fi
}

# ---------------------------------------------------------------------------------------------
# 5. Slurm on a two-socket, two-NUMA-node machine: the host's Slurm 22.05 and cmlb build, from
#    the host's root file system over 9p (read-only; tmpfs on /tmp and /run), chrooted into.
check_slurm() {
    repo=$(arg repo)
    wl=$(arg wl)
    for m in netfs 9pnet 9pnet_virtio 9p; do
        insmod /lib/cmlb-modules/$m.ko 2>/tmp/insmod.err ||
            { fail slurm-setup "insmod $m: $(cat /tmp/insmod.err)"; return; }
    done
    mkdir -p /host
    if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=524288 hostroot /host 2>/tmp/9p.err; then
        fail slurm-setup "mounting the host's root over 9p: $(cat /tmp/9p.err)"
        return
    fi
    mount -t proc proc /host/proc
    mount -t sysfs sysfs /host/sys
    # slurmd 22.05 refuses to start without a cgroup file system, even with proctrack/linuxproc
    mount -t cgroup2 cgroup2 /host/sys/fs/cgroup 2>/dev/null
    # ...and, without systemd (IgnoreSystemd=yes in slurm.sh's cgroup.conf), wants the slice
    # systemd would have made, with the controllers delegated
    echo "+cpuset +cpu +memory +pids" >/host/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
    mkdir -p /host/sys/fs/cgroup/system.slice
    echo "+cpuset +cpu +memory +pids" >/host/sys/fs/cgroup/system.slice/cgroup.subtree_control 2>/dev/null
    mount -t devtmpfs devtmpfs /host/dev
    # what udev would add: bash's process substitution needs /dev/fd
    ln -sf /proc/self/fd /host/dev/fd
    ln -sf /proc/self/fd/0 /host/dev/stdin
    ln -sf /proc/self/fd/1 /host/dev/stdout
    ln -sf /proc/self/fd/2 /host/dev/stderr
    mkdir -p /host/dev/pts /host/dev/shm
    mount -t devpts -o newinstance,ptmxmode=0666 devpts /host/dev/pts
    mount -t tmpfs tmpfs /host/dev/shm
    # A checkout under the host's /tmp (a fresh clone there) would vanish under the guest's
    # tmpfs /tmp: it is bound aside first and moved back on top of the tmpfs.
    case "$repo" in
    /tmp/*) mkdir -p /repo-aside && mount -o bind "/host$repo" /repo-aside ;;
    esac
    mount -t tmpfs tmpfs /host/tmp
    case "$repo" in
    /tmp/*) mkdir -p "/host$repo" && mount -o move /repo-aside "/host$repo" ;;
    esac
    mount -t tmpfs tmpfs /host/run
    ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
    # Slurm resolves with AI_ADDRCONFIG, which glibc answers only when an IPv4 address other
    # than 127.0.0.1 exists: a second loopback address (the guest has no network).
    ip addr add 127.0.0.2/8 dev lo 2>/dev/null
    hostname localhost
    # Debian's kernel defaults to perf_event_paranoid 3 (no perf_event_open for unprivileged
    # users at all); the development VMs run with 2, where the e2e suite profiles as nobody.
    echo 2 >/proc/sys/kernel/perf_event_paranoid
    if [ ! -x "/host$repo/tests/numa/guest/slurm.sh" ]; then
        fail slurm-setup "no $repo/tests/numa/guest/slurm.sh in the host's root"
    else
        NUMA_E2E=$(arg e2e) chroot /host /bin/bash "$repo/tests/numa/guest/slurm.sh" "$repo" "$wl" "$CPUNODE" 2>&1
    fi
    case "$repo" in /tmp/*) umount "/host$repo" 2>/dev/null ;; esac
    umount /host/run /host/tmp /host/dev/shm /host/dev/pts /host/dev /host/sys/fs/cgroup /host/sys /host/proc /host 2>/dev/null
}

# ---------------------------------------------------------------------------------------------
# cmlb bench on a multi-NUMA kernel (opt-in part `bench`: a measurement for docs/benchmarks.md,
# not a CI check of speed). Under TCG the emulated time follows instruction counts, not the
# memory's node, so run time says little here; the kernel's own sampled locality (the `local`
# column: numa_hint_faults_local / numa_hint_faults from /proc/vmstat, NUMA balancing on) is what
# moves with the placement. Checked: the bench runs every placement of both programs to the end
# and reads that figure.
check_bench() {
    nt=$NCPU
    # Fixed work (WL_PASSES), a few seconds a run under emulation.
    for prog in "stencil-shuffled:100:$W/stencil-shuffled $nt 1.5" "skewed:400:$W/skewed $((2 * nt)) 1.5"; do
        name=${prog%%:*}
        rest=${prog#*:}
        passes=${rest%%:*}
        cmd=${rest#*:}
        out=/tmp/bench-$name
        t0=$(now)
        if ! WL_PASSES=$passes WL_KIB=2048 cmlb bench --runs 4 --max-runs 4 \
            --out "$out" -- $cmd >/tmp/bench-$name.txt 2>/tmp/bench-$name.err; then
            fail bench-$name "cmlb bench failed: $(tail -c 300 /tmp/bench-$name.err)"
            continue
        fi
        log bench-$name </tmp/bench-$name.txt
        log bench-$name-err </tmp/bench-$name.err
        grep -E '^(unpinned|compact|scatter|cmlb) ' /tmp/bench-$name.txt |
            while read -r row; do measure bench-$name-row "$(echo "$row" | tr -s ' ' | tr ' ' '|')"; done
        rows=$(grep -cE '^(unpinned|compact|scatter|cmlb) ' /tmp/bench-$name.txt)
        # The local column ("77 %", the first "N %" of a row; node pages read "52/48 %") is a
        # percentage for every placement where the kernel sampled.
        fracs=$(awk '$1 ~ /^(unpinned|compact|scatter|cmlb)$/ { for (i = 2; i < NF; i++) if ($(i + 1) == "%" && $i ~ /^[0-9]+$/) { n++; break } } END { print n + 0 }' /tmp/bench-$name.txt)
        measure bench-$name "seconds=$(since "$t0") rows=$rows local_fractions=$fracs"
        if [ "$rows" = 4 ] && [ "$fracs" = 4 ]; then
            pass bench-$name "4 placements x 4 runs, the kernel's locality read for each: $(grep '^verdict' /tmp/bench-$name.txt | head -c 200)"
        else
            fail bench-$name "$rows placement rows, $fracs with a locality fraction (want 4 and 4)"
        fi
    done
}

for part in topology probe placement numa_faults overhead balance slurm bench; do
    want $part || continue
    T_PART=$(now)
    case $part in
    topology) check_topology ;;
    probe) probe_auto ;;
    placement) check_placement ;;
    numa_faults) check_numa_faults ;;
    overhead) check_overhead ;;
    balance) check_balance ;;
    slurm) check_slurm ;;
    bench) check_bench ;;
    esac
    echo "NUMA-TIME $part $(since "$T_PART")"
done
echo "NUMA-CHECKS-END"
