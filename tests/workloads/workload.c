/* Workloads with known sharing patterns for cmlb tests (see README.md in this directory).
 * One source, one binary per pattern: the Makefile compiles it with -DPATTERN=<n>.
 * Thread w (creation index w, main thread = 0) first-touches its own buffer, then, until the
 * time budget ends, reads its pattern partners' buffers and writes its own, so every sharing
 * pair exchanges data continuously over the whole run. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define P_RING 1
#define P_PAIRS 2
#define P_CLUSTERS 3
#define P_ALLTOALL 4
#define P_NONE 5
#define P_SKEWED 6
#define P_STENCIL 7          /* planes owned in creation order */
#define P_STENCIL_SHUFFLED 8 /* planes owned in a seeded shuffled order (WL_SEED) */
#define IS_STENCIL (PATTERN == P_STENCIL || PATTERN == P_STENCIL_SHUFFLED)

#ifndef PATTERN
#error "compile with -DPATTERN=<n>"
#endif

static const char *pattern_name(void) {
    switch (PATTERN) {
    case P_RING: return "ring";
    case P_PAIRS: return "pairs";
    case P_CLUSTERS: return "clusters";
    case P_ALLTOALL: return "alltoall";
    case P_NONE: return "nosharing";
    case P_STENCIL: return "stencil";
    case P_STENCIL_SHUFFLED: return "stencil-shuffled";
    default: return "skewed";
    }
}

static int nthreads = 8;
static double seconds = 1.5;
static int cluster_k = 4;
static size_t words_per_thread; /* 64-bit words in a light thread's buffer */
static uint64_t *volatile bufs[1024];
static size_t lens[1024];
static pthread_barrier_t start_barrier, step_barrier;
static double deadline;
static long passes_limit; /* WL_PASSES: fixed work (passes per thread) instead of a time budget */
static volatile int stop_flag;
static char cpus[1024][256];
static long tids[1024];
static uint64_t sums[1024];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Heavy threads of the skewed workload: one in four (w % 4 == 1) streams 4x more memory. */
static int is_heavy(int w) { return PATTERN == P_SKEWED && w % 4 == 1; }

static int is_partner(int w, int p) {
    if (p == w) return 0;
    switch (PATTERN) {
    case P_RING: return p == (w + 1) % nthreads || p == (w + nthreads - 1) % nthreads;
    case P_PAIRS: return (p ^ 1) == w;
    case P_CLUSTERS: return p / cluster_k == w / cluster_k;
    case P_ALLTOALL: return 1;
    default: return 0;
    }
}

static void read_cpus(int w) {
    char path[128], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tids[w]);
    FILE *f = fopen(path, "r");
    strcpy(cpus[w], "?");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            char *v = line + 18;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = 0;
            size_t len = strlen(v) < sizeof cpus[w] - 1 ? strlen(v) : sizeof cpus[w] - 1;
            memcpy(cpus[w], v, len);
            cpus[w][len] = 0;
        }
    }
    fclose(f);
}

static void *worker(void *arg) {
    int w = (int)(intptr_t)arg;
    tids[w] = syscall(SYS_gettid);
    size_t n = words_per_thread * (is_heavy(w) ? 4 : 1);
    uint64_t *mine = mmap(NULL, n * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mine == MAP_FAILED) { perror("mmap"); exit(2); }
    for (size_t i = 0; i < n; i++) mine[i] = i + (uint64_t)w; /* first touch by the owner */
    lens[w] = n;
    bufs[w] = mine;
    pthread_barrier_wait(&start_barrier);
    uint64_t acc = 0;
    long passes = 0;
    for (;;) {
        passes++;
        int any = 0;
        for (int p = 0; p < nthreads; p++) {
            if (!is_partner(w, p)) continue;
            any = 1;
            const uint64_t *theirs = bufs[p];
            size_t m = lens[p] < n ? lens[p] : n;
            for (size_t i = 0; i < m; i++) {
                acc += theirs[i];
                mine[i] += acc & 1;
            }
        }
        if (!any)
            for (size_t i = 0; i < n; i++) mine[i] += ++acc & 3;
        if (PATTERN == P_SKEWED) {
            /* Bulk-synchronous steps: per step a heavy thread streams 4x the bytes. */
            if (w == 0) stop_flag = passes_limit ? passes >= passes_limit : now() >= deadline;
            pthread_barrier_wait(&step_barrier);
            int s = stop_flag;
            pthread_barrier_wait(&step_barrier);
            if (s) break;
        } else if (passes_limit ? passes >= passes_limit : now() >= deadline) {
            break;
        }
    }
    sums[w] = acc;
    read_cpus(w);
    return NULL;
}


/* ---- stencil: a 3-D grid of NX x NY x (PLANES * THREADS) points split in slabs of PLANES
 * planes along z. Slab s is owned (allocated, first-touched, computed) by thread owner[s]:
 * s itself (stencil) or a seeded shuffle (stencil-shuffled). Every iteration each thread
 * computes a 7-point Jacobi sweep of its slab from the current buffer into the next one,
 * reading the boundary plane of the slabs above and below (their owners' memory: the only
 * sharing), then all threads meet at a barrier. So owner[s] and owner[s+1] share, nobody else. */
#define NX 64
#define NY 64
#define PLANE (NX * NY)
static int planes;              /* planes per slab */
static int owner[1024];         /* slab -> thread */
static int slab_of[1024];       /* thread -> slab */
static double *volatile grid[1024][2]; /* slab -> its two buffers (iteration parity) */

static void shuffle_owners(unsigned long seed) {
    for (int s = 0; s < nthreads; s++) owner[s] = s;
    if (PATTERN == P_STENCIL_SHUFFLED) {
        uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
        for (int s = nthreads - 1; s > 0; s--) {
            x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
            int j = (int)((x * 0x2545f4914f6cdd1dULL) % (uint64_t)(s + 1));
            int t = owner[s]; owner[s] = owner[j]; owner[j] = t;
        }
    }
    for (int s = 0; s < nthreads; s++) slab_of[owner[s]] = s;
}

/* The true sharing matrix: 1 for the owners of adjacent slabs. */
static int write_truth(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); return -1; }
    for (int i = 0; i < nthreads; i++) {
        for (int j = 0; j < nthreads; j++) {
            int d = slab_of[i] - slab_of[j];
            fprintf(f, "%s%d", j ? "," : "", d == 1 || d == -1);
        }
        fputc('\n', f);
    }
    return fclose(f);
}

static void *stencil_worker(void *arg) {
    int w = (int)(intptr_t)arg;
    int s = slab_of[w];
    tids[w] = syscall(SYS_gettid);
    size_t n = (size_t)planes * PLANE;
    for (int b = 0; b < 2; b++) {
        double *g = mmap(NULL, n * sizeof(double), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (g == MAP_FAILED) { perror("mmap"); exit(2); }
        for (size_t i = 0; i < n; i++) g[i] = (double)((i + (size_t)w) % 17); /* owner's first touch */
        grid[s][b] = g;
    }
    pthread_barrier_wait(&start_barrier);
    double acc = 0;
    long it = 0;
    for (;;) {
        const double *cur = grid[s][it & 1];
        double *next = grid[s][(it + 1) & 1];
        /* Halo planes: the neighbours' boundary planes, read in place (shared memory). */
        const double *below = s > 0 ? grid[s - 1][it & 1] + (size_t)(planes - 1) * PLANE : NULL;
        const double *above = s < nthreads - 1 ? grid[s + 1][it & 1] : NULL;
        for (int z = 0; z < planes; z++) {
            const double *c = cur + (size_t)z * PLANE;
            const double *zm = z > 0 ? c - PLANE : below;
            const double *zp = z < planes - 1 ? c + PLANE : above;
            double *o = next + (size_t)z * PLANE;
            for (int y = 0; y < NY; y++)
                for (int x = 0; x < NX; x++) {
                    int i = y * NX + x;
                    double v = c[i];
                    v += x > 0 ? c[i - 1] : 0;
                    v += x < NX - 1 ? c[i + 1] : 0;
                    v += y > 0 ? c[i - NX] : 0;
                    v += y < NY - 1 ? c[i + NX] : 0;
                    v += zm ? zm[i] : 0;
                    v += zp ? zp[i] : 0;
                    o[i] = v * (1.0 / 7.0);
                }
        }
        acc += next[(size_t)(it % planes) * PLANE + (size_t)(it % PLANE)];
        it++;
        /* Bulk-synchronous: nobody reads a neighbour's next buffer before it is complete. */
        if (w == 0) stop_flag = passes_limit ? it >= passes_limit : now() >= deadline;
        pthread_barrier_wait(&step_barrier);
        int stop = stop_flag;
        pthread_barrier_wait(&step_barrier);
        if (stop) break;
    }
    sums[w] = (uint64_t)(acc * 1000);
    read_cpus(w);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) nthreads = atoi(argv[1]);
    if (argc > 2) seconds = atof(argv[2]);
    if (argc > 3) cluster_k = atoi(argv[3]);
    size_t kib = getenv("WL_KIB") ? strtoul(getenv("WL_KIB"), NULL, 10) : 1024;
    passes_limit = getenv("WL_PASSES") ? strtol(getenv("WL_PASSES"), NULL, 10) : 0;
    if (nthreads < 1 || nthreads > 1024 || seconds <= 0 || cluster_k < 1 || kib < 4 || passes_limit < 0) {
        fprintf(stderr,
                "usage: %s [THREADS 1..1024] [SECONDS > 0] [CLUSTER_K >= 1]\n"
                "  env WL_KIB (>= 4): KiB of data per thread (default 1024)\n"
                "  env WL_PASSES (>= 1): fixed number of passes per thread instead of SECONDS\n"
                "  stencil: env WL_SEED (shuffle seed, default 1), WL_TRUTH=FILE (write the true\n"
                "  sharing matrix as CSV)\n",
                argv[0]);
        return 2;
    }
    words_per_thread = kib * 1024 / 8;
    void *(*fn)(void *) = worker;
    if (IS_STENCIL) {
        /* WL_KIB is each of the slab's two buffers; at least 2 planes so a slab has an inside. */
        planes = (int)(kib * 1024 / (PLANE * sizeof(double)));
        if (planes < 2) planes = 2;
        char *end = NULL;
        const char *sv = getenv("WL_SEED");
        unsigned long seed = sv ? strtoul(sv, &end, 10) : 1;
        if (sv && (*sv == 0 || *end != 0)) {
            fprintf(stderr, "%s: WL_SEED must be a non-negative integer, got '%s'\n", argv[0], sv);
            return 2;
        }
        shuffle_owners(seed);
        const char *truth = getenv("WL_TRUTH");
        if (truth && write_truth(truth) != 0) return 2;
        fn = stencil_worker;
    }
    pthread_barrier_init(&start_barrier, NULL, nthreads);
    pthread_barrier_init(&step_barrier, NULL, nthreads);
    pthread_t th[1024];
    deadline = now() + seconds;
    for (int w = 1; w < nthreads; w++)
        if (pthread_create(&th[w], NULL, fn, (void *)(intptr_t)w) != 0) { perror("pthread_create"); return 2; }
    fn((void *)0);
    for (int w = 1; w < nthreads; w++) pthread_join(th[w], NULL);
    printf("cmlb-wl pattern=%s threads=%d seconds=%g pid=%ld\n", pattern_name(), nthreads, seconds, (long)getpid());
    for (int w = 0; w < nthreads; w++)
        printf("cmlb-wl thread=%d tid=%ld heavy=%d cpus=%s sum=%llu\n", w, tids[w], is_heavy(w), cpus[w],
               (unsigned long long)sums[w]);
    return 0;
}
