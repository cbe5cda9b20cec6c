/* MPI workload with known rank patterns for cmlb's multi-node tests (see README.md).
 *
 *   mpi-wl PATTERN [STEPS] [KIB]      PATTERN: ring | grid | pairs | alltoall
 *
 * The pattern is defined on positions 0..n-1; position p is held by rank perm[p], a shuffle
 * seeded by WL_SEED (default 1; WL_SEED=0: position p = rank p). So with the default seed
 * Slurm's block placement (consecutive ranks on one node) splits neighbours, and only the rank
 * matrix can tell which ranks belong together. Every step each rank exchanges KIB KiB with
 * each neighbour (MPI_Isend/MPI_Irecv, MPI_BYTE), so the point-to-point bytes rank a sends
 * rank b are exactly STEPS * KIB * 1024 for neighbours and 0 otherwise. WL_TRUTH=FILE: rank 0
 * writes that truth as an edge list (SRC DST BYTES MESSAGES, directed) before the exchange.
 * At the end one MPI_Allreduce of 8 bytes (the checksum) exercises the collective path.
 *
 * WL_OMP=1: the WL_THREADS threads are an OpenMP team instead (thread 0 = main does the MPI
 * calls), as in hybrid MPI+OpenMP codes.
 * WL_P2P=isend|sendrecv|persistent picks the point-to-point primitive (default isend).
 * WL_THREADS=T (default 1): each rank runs T threads; thread 0 (main) does the MPI calls,
 * threads 1..T-1 read and write a buffer shared with their neighbour thread ((k+1) % T) while
 * the exchange runs, so every rank also has a thread profile with sharing to map.
 *
 * Output: one line per rank (stdout), e.g.
 *   cmlb-mpi-wl rank=3 pos=5 host=node2 threads=2 cpus=1;1 sent=1048576 sent_remote=524288
 * cpus: each thread's Cpus_allowed_list in creation order (main first); sent/sent_remote:
 * point-to-point bytes this rank sent in all / to ranks on another host (hosts compared by
 * name, gathered at start). Bad arguments: usage on stderr, exit 2. */
#define _GNU_SOURCE
#include <mpi.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAXT 64
#define HOSTLEN 64

static int n, me, npos;
static int *perm, *pos_of;
static int nthreads = 1;
static volatile int stop_flag;
static uint64_t *tbuf[MAXT];
static long ttid[MAXT];
static char tcpus[MAXT][512];
static pthread_barrier_t tbar;
static size_t twords = 1 << 15;
/* The exchange's inputs and results (main thread, or OpenMP thread 0). */
static const char *pat;
static long steps;
static size_t bytes;
static int mypos, *nb;
static char host[HOSTLEN], *hosts;
static uint64_t sent, sent_remote, sum;

static void usage(void) {
    fprintf(stderr, "usage: mpi-wl ring|grid|pairs|alltoall [STEPS>=1] [KIB>=1]\n"
                    "env: WL_SEED (0 = natural order), WL_THREADS (1..%d), WL_TRUTH=FILE\n",
            MAXT);
}

static uint64_t rng_state;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void read_cpus(int k) {
    char path[96], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", ttid[k]);
    FILE *f = fopen(path, "r");
    snprintf(tcpus[k], sizeof tcpus[k], "?");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            char *v = line + 18;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(tcpus[k], sizeof tcpus[k], "%s", v);
        }
    }
    fclose(f);
}

/* Thread k >= 1: read its neighbour thread's buffer, write its own, until the exchange ends. */
static void *worker(void *arg) {
    int k = (int)(intptr_t)arg;
    ttid[k] = syscall(SYS_gettid);
    tbuf[k] = calloc(twords, sizeof(uint64_t));
    pthread_barrier_wait(&tbar);
    uint64_t *mine = tbuf[k], *other = tbuf[(k + 1) % nthreads], s = 0;
    while (!stop_flag) {
        for (size_t i = 0; i < twords; i += 8) {
            s += other[i];
            mine[i] = s + i;
        }
    }
    read_cpus(k);
    return (void *)(uintptr_t)(s & 1);
}

/* The point-to-point exchange of the pattern, STEPS times. */
static int neighbours(const char *pat, int p, int *out);
static void exchange(void) {
    int k = neighbours(pat, mypos, nb);
    char *sbuf = malloc(bytes), *rbuf = malloc(bytes * (k ? k : 1));
    memset(sbuf, me & 0xff, bytes);
    MPI_Request *req = malloc(2 * (k ? k : 1) * sizeof *req);
    MPI_Status *stat = malloc(2 * (k ? k : 1) * sizeof *stat);
    /* WL_P2P picks the primitive, so every send path of the tracer is exercised: isend
     * (default: MPI_Irecv + MPI_Isend + MPI_Waitall), sendrecv (MPI_Sendrecv in a ring over
     * the neighbour list), persistent (MPI_Send_init/MPI_Recv_init + MPI_Startall). */
    const char *prim = getenv("WL_P2P");
    if (!prim) prim = "isend";
    if (strcmp(prim, "isend") && strcmp(prim, "sendrecv") && strcmp(prim, "persistent")) {
        if (me == 0) fprintf(stderr, "mpi-wl: WL_P2P='%s' is not isend, sendrecv or persistent\n", prim);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (strcmp(prim, "persistent") == 0) {
        for (int i = 0; i < k; i++) {
            MPI_Recv_init(rbuf + (size_t)i * bytes, (int)bytes, MPI_BYTE, perm[nb[i]], 7, MPI_COMM_WORLD, &req[i]);
            MPI_Send_init(sbuf, (int)bytes, MPI_BYTE, perm[nb[i]], 7, MPI_COMM_WORLD, &req[k + i]);
        }
    }
    for (long s = 0; s < steps; s++) {
        if (strcmp(prim, "sendrecv") == 0) {
            /* Pairwise exchange: both ends of an edge call MPI_Sendrecv for each other in the
             * same global order (by position pair), so no cycle of waits can form. */
            for (int q = 0; q < npos; q++) {
                int kq = neighbours(pat, q, nb);
                for (int i = 0; i < kq; i++) {
                    int a = q, b = nb[i];
                    if (a > b || (a != mypos && b != mypos)) continue;
                    int peer = perm[a == mypos ? b : a];
                    MPI_Sendrecv(sbuf, (int)bytes, MPI_BYTE, peer, 7, rbuf, (int)bytes, MPI_BYTE, peer, 7,
                                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
            }
            k = neighbours(pat, mypos, nb);
        } else if (strcmp(prim, "persistent") == 0) {
            MPI_Startall(2 * k, req);
            MPI_Waitall(2 * k, req, stat);
        } else {
            for (int i = 0; i < k; i++)
                MPI_Irecv(rbuf + (size_t)i * bytes, (int)bytes, MPI_BYTE, perm[nb[i]], 7, MPI_COMM_WORLD, &req[i]);
            for (int i = 0; i < k; i++)
                MPI_Isend(sbuf, (int)bytes, MPI_BYTE, perm[nb[i]], 7, MPI_COMM_WORLD, &req[k + i]);
            MPI_Waitall(2 * k, req, stat);
        }
        for (int i = 0; i < k; i++) {
            sent += bytes;
            if (strncmp(hosts + (size_t)perm[nb[i]] * HOSTLEN, host, HOSTLEN) != 0) sent_remote += bytes;
            sum += (unsigned char)rbuf[(size_t)i * bytes];
        }
        for (size_t i = 0; i < twords; i += 8) tbuf[0][i] += s;
    }
    if (strcmp(prim, "persistent") == 0)
        for (int i = 0; i < 2 * k; i++) MPI_Request_free(&req[i]);
}

/* Neighbour positions of position p; returns how many were written to out. */
static int neighbours(const char *pat, int p, int *out) {
    int k = 0;
    if (strcmp(pat, "ring") == 0) {
        if (npos > 1) out[k++] = (p + 1) % npos;
        if (npos > 2) out[k++] = (p + npos - 1) % npos;
    } else if (strcmp(pat, "pairs") == 0) {
        if ((p ^ 1) < npos) out[k++] = p ^ 1;
    } else if (strcmp(pat, "grid") == 0) {
        int px = 1;
        for (int d = 1; d * d <= npos; d++)
            if (npos % d == 0) px = d;
        int x = p % px, y = p / px, py = npos / px;
        if (x > 0) out[k++] = p - 1;
        if (x + 1 < px) out[k++] = p + 1;
        if (y > 0) out[k++] = p - px;
        if (y + 1 < py) out[k++] = p + px;
    } else {
        for (int q = 0; q < npos; q++)
            if (q != p) out[k++] = q;
    }
    return k;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    pat = argc > 1 ? argv[1] : "";
    steps = argc > 2 ? atol(argv[2]) : 200;
    long kib = argc > 3 ? atol(argv[3]) : 64;
    const char *te = getenv("WL_THREADS");
    if (te) nthreads = atoi(te);
    if ((strcmp(pat, "ring") && strcmp(pat, "grid") && strcmp(pat, "pairs") &&
         strcmp(pat, "alltoall")) || argc > 4 || steps < 1 || kib < 1 || nthreads < 1 ||
        nthreads > MAXT) {
        if (me == 0) usage();
        MPI_Finalize();
        return 2;
    }
    npos = n;
    perm = malloc(n * sizeof *perm);
    pos_of = malloc(n * sizeof *pos_of);
    for (int i = 0; i < n; i++) perm[i] = i;
    const char *se = getenv("WL_SEED");
    long seed = se ? atol(se) : 1;
    if (seed != 0) {
        rng_state = 0x9e3779b97f4a7c15ULL ^ (uint64_t)seed;
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(rng() % (uint64_t)(i + 1));
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    }
    for (int p = 0; p < n; p++) pos_of[perm[p]] = p;
    mypos = pos_of[me];
    nb = malloc(n * sizeof *nb);
    bytes = (size_t)kib * 1024;

    const char *truth = getenv("WL_TRUTH");
    if (truth && me == 0) {
        FILE *f = fopen(truth, "w");
        if (!f) {
            perror(truth);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fprintf(f, "# true point-to-point bytes of mpi-wl %s, %ld steps of %ld KiB: SRC DST BYTES MESSAGES\n",
                pat, steps, kib);
        for (int p = 0; p < n; p++) {
            int k = neighbours(pat, p, nb);
            for (int i = 0; i < k; i++)
                fprintf(f, "%d %d %zu %ld\n", perm[p], perm[nb[i]], (size_t)steps * bytes, steps);
        }
        fclose(f);
    }

    gethostname(host, sizeof host - 1);
    hosts = malloc((size_t)n * HOSTLEN);
    MPI_Allgather(host, HOSTLEN, MPI_CHAR, hosts, HOSTLEN, MPI_CHAR, MPI_COMM_WORLD);

    ttid[0] = syscall(SYS_gettid);
    tbuf[0] = calloc(twords, sizeof(uint64_t));
    pthread_barrier_init(&tbar, NULL, nthreads);
    const char *omp = getenv("WL_OMP");
    if (omp && strcmp(omp, "1") == 0) {
#ifdef _OPENMP
        /* A hybrid code's shape: OpenMP thread 0 (the main thread) talks MPI, the team
         * threads compute; the team is created after MPI_Init's own threads. */
#pragma omp parallel num_threads(nthreads)
        {
            int t = omp_get_thread_num();
            if (t == 0) {
                pthread_barrier_wait(&tbar);
                exchange();
                stop_flag = 1;
            } else {
                worker((void *)(intptr_t)t);
            }
        }
#else
        if (me == 0) fprintf(stderr, "mpi-wl: WL_OMP=1 but built without OpenMP\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
#endif
    } else {
        pthread_t th[MAXT];
        for (int t = 1; t < nthreads; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
        pthread_barrier_wait(&tbar);
        exchange();
        stop_flag = 1;
        for (int t = 1; t < nthreads; t++) pthread_join(th[t], NULL);
    }
    read_cpus(0);

    double local = (double)sum, total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    static char cpus[MAXT * 514];
    for (int t = 0; t < nthreads; t++) {
        if (t) strcat(cpus, ";");
        strcat(cpus, tcpus[t]);
    }
    printf("cmlb-mpi-wl rank=%d pos=%d host=%s threads=%d cpus=%s sent=%llu sent_remote=%llu\n", me,
           mypos, host, nthreads, cpus, (unsigned long long)sent, (unsigned long long)sent_remote);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
