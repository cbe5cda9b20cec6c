/* A workload whose threads share a small part of their memory with partners unrelated to
 * creation order: the case a profiler without a PMU found hardest (issue 27). See README.md.
 *
 *   fraction PATTERN [THREADS] [SECONDS]      PATTERN: ring | pairs | grid
 *
 * Thread w (creation index w, main thread = 0) sits at position pos[w] of a seeded shuffle.
 * Partners by position: ring pos±1 (mod THREADS); pairs pos xor 1; grid the 4 neighbours on an
 * R x C grid (R the largest divisor of THREADS not above its square root, no wrap-around).
 * Each thread allocates and first-touches its buffer (WL_KIB KiB), in which a region of
 * 1/WL_SHARE of the buffer, at a seeded page-aligned offset, is its shared part. Every pass it
 * updates its whole buffer, then reads each partner's shared part. So the only sharing is that
 * 1/WL_SHARE of each buffer, touched by its owner and its partners over the whole run, and the
 * words a thread allocated first are not the ones it shares. */
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

#define MAXT 1024
enum { RING, PAIRS, GRID };
static int pattern, nthreads = 16, share = 16, rows = 1, cols = 1;
static double seconds = 4.0;
static long passes_limit;
static size_t words; /* 64-bit words per buffer */
static int pos[MAXT], at[MAXT];
static uint64_t *volatile bufs[MAXT];
static size_t shared_off[MAXT], shared_len;
static pthread_barrier_t start_barrier;
static double deadline;
static char cpus[MAXT][256];
static long tids[MAXT];
static uint64_t sums[MAXT];
static unsigned long seed = 1;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static unsigned long next_rand(unsigned long *s) {
    *s = *s * 6364136223846793005UL + 1442695040888963407UL;
    return *s >> 33;
}

/* The partners of thread w (creation index), at most 4; returns how many. */
static int partners(int w, int out[4]) {
    int p = pos[w], n = 0;
    switch (pattern) {
    case RING:
        if (nthreads > 1) out[n++] = at[(p + 1) % nthreads];
        if (nthreads > 2) out[n++] = at[(p + nthreads - 1) % nthreads];
        break;
    case PAIRS:
        if ((p ^ 1) < nthreads) out[n++] = at[p ^ 1];
        break;
    default: {
        int r = p / cols, c = p % cols;
        if (r > 0) out[n++] = at[p - cols];
        if (r < rows - 1) out[n++] = at[p + cols];
        if (c > 0) out[n++] = at[p - 1];
        if (c < cols - 1) out[n++] = at[p + 1];
    }
    }
    return n;
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
            snprintf(cpus[w], sizeof cpus[w], "%.255s", v);
        }
    }
    fclose(f);
}

static void *worker(void *arg) {
    int w = (int)(intptr_t)arg;
    tids[w] = syscall(SYS_gettid);
    uint64_t *mine = mmap(NULL, words * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mine == MAP_FAILED) { perror("mmap"); exit(2); }
    for (size_t i = 0; i < words; i++) mine[i] = i + (uint64_t)w; /* first touch by the owner */
    bufs[w] = mine;
    pthread_barrier_wait(&start_barrier);
    int ps[4], np = partners(w, ps);
    uint64_t acc = 0;
    for (long pass = 1;; pass++) {
        for (size_t i = 0; i < words; i++) mine[i] += ++acc & 3;
        for (int k = 0; k < np; k++) {
            const uint64_t *theirs = bufs[ps[k]] + shared_off[ps[k]];
            for (size_t i = 0; i < shared_len; i++) acc += theirs[i];
        }
        if (passes_limit ? pass >= passes_limit : now() >= deadline) break;
    }
    sums[w] = acc;
    read_cpus(w);
    return NULL;
}

static int write_truth(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); return -1; }
    for (int i = 0; i < nthreads; i++) {
        int ps[4], np = partners(i, ps);
        for (int j = 0; j < nthreads; j++) {
            int s = 0;
            for (int k = 0; k < np; k++) s |= ps[k] == j;
            fprintf(f, "%s%d", j ? "," : "", s);
        }
        fputc('\n', f);
    }
    return fclose(f);
}

static int usage(const char *me) {
    fprintf(stderr,
            "usage: %s ring|pairs|grid [THREADS 2..1024] [SECONDS > 0]\n"
            "  env WL_KIB (>= 16): KiB per thread (default 1024); WL_SHARE (2..256): 1/N of each\n"
            "  buffer is shared (default 16); WL_SEED: shuffle seed (default 1); WL_TRUTH=FILE:\n"
            "  write the true sharing matrix as CSV; WL_PASSES (>= 1): fixed passes per thread\n",
            me);
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage(argv[0]);
    if (strcmp(argv[1], "ring") == 0) pattern = RING;
    else if (strcmp(argv[1], "pairs") == 0) pattern = PAIRS;
    else if (strcmp(argv[1], "grid") == 0) pattern = GRID;
    else return usage(argv[0]);
    if (argc > 2) nthreads = atoi(argv[2]);
    if (argc > 3) seconds = atof(argv[3]);
    size_t kib = getenv("WL_KIB") ? strtoul(getenv("WL_KIB"), NULL, 10) : 1024;
    if (getenv("WL_SHARE")) share = atoi(getenv("WL_SHARE"));
    if (getenv("WL_SEED")) seed = strtoul(getenv("WL_SEED"), NULL, 10);
    passes_limit = getenv("WL_PASSES") ? strtol(getenv("WL_PASSES"), NULL, 10) : 0;
    if (nthreads < 2 || nthreads > MAXT || seconds <= 0 || kib < 16 || share < 2 || share > 256 ||
        passes_limit < 0)
        return usage(argv[0]);
    words = kib * 1024 / 8;
    /* The shared part: whole pages, at least one. */
    size_t page_words = 4096 / 8;
    shared_len = words / share / page_words * page_words;
    if (shared_len < page_words) shared_len = page_words;
    for (rows = 1; (rows + 1) * (rows + 1) <= nthreads; rows++) {}
    while (nthreads % rows) rows--;
    cols = nthreads / rows;
    unsigned long s = seed * 2654435761UL + 12345;
    for (int i = 0; i < nthreads; i++) at[i] = i;
    for (int i = nthreads - 1; i > 0; i--) {
        int j = (int)(next_rand(&s) % (unsigned long)(i + 1));
        int t = at[i]; at[i] = at[j]; at[j] = t;
    }
    for (int p = 0; p < nthreads; p++) pos[at[p]] = p;
    size_t slots = (words - shared_len) / page_words + 1;
    for (int w = 0; w < nthreads; w++) shared_off[w] = (next_rand(&s) % slots) * page_words;
    const char *truth = getenv("WL_TRUTH");
    if (truth && write_truth(truth) != 0) return 2;
    pthread_barrier_init(&start_barrier, NULL, nthreads);
    pthread_t th[MAXT];
    deadline = now() + seconds;
    for (int w = 1; w < nthreads; w++)
        if (pthread_create(&th[w], NULL, worker, (void *)(intptr_t)w) != 0) { perror("pthread_create"); return 2; }
    worker((void *)0);
    for (int w = 1; w < nthreads; w++) pthread_join(th[w], NULL);
    printf("cmlb-wl pattern=fraction-%s threads=%d seconds=%g pid=%ld share=%d\n", argv[1], nthreads, seconds,
           (long)getpid(), share);
    for (int w = 0; w < nthreads; w++)
        printf("cmlb-wl thread=%d tid=%ld heavy=0 cpus=%s sum=%llu\n", w, tids[w], cpus[w],
               (unsigned long long)sums[w]);
    return 0;
}
