/* First-touch checker for the multi-NUMA guest tests (tests/numa/README.md).
 *
 *   ftcheck [THREADS] [PRIVATE_KIB] [SHARED_KIB] [WORK_SECONDS]
 *
 * The main thread is worker 0 and creates workers 1..THREADS-1 in order (so the creation
 * index cmlb's preload pins by equals w). Worker w first touches
 *   - its private buffer (PRIVATE_KIB, its own mmap, a PROT_NONE guard page on each side so the
 *     kernel keeps it a separate VMA in /proc/PID/numa_maps), and
 *   - its slice of one shared array (SHARED_KIB per thread, page-aligned slices),
 * then all wait at a barrier and each worker asks move_pages(2) on which NUMA node every page
 * of its private buffer and of its shared slice is. That is the first-touch placement. Then,
 * for WORK_SECONDS, worker w reads the shared slice of w xor 1 (a "pairs" sharing pattern, so
 * a profile of this program has a structure that plans follow) and writes its own.
 *
 * Output (stdout, after all threads joined), key=value fields:
 *   ftcheck threads=N private_kib=K shared_kib=K pid=P
 *   ftcheck thread=W tid=T cpu=C cpus=LIST priv_pages=N priv_nodes=0:N,1:M shared_pages=N shared_nodes=...
 *   ftcheck numa_maps thread=W N0=.. N1=..      (the private buffer's line of /proc/self/numa_maps)
 *   ftcheck numa_maps shared N0=.. N1=..        (the shared array's line)
 * `cpu` is sched_getcpu() at the end of the first touch, `cpus` the thread's Cpus_allowed_list.
 * Exit 2 on bad arguments or a failing system call. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXT 256
#define MAXNODE 64

static int nthreads = 4;
static size_t priv_bytes, shared_slice;
static double work_s = 0.3;
static long page;
static char *shared;
static char *priv[MAXT];
static long tids[MAXT];
static int cpu_at[MAXT];
static char cpus[MAXT][512];
static long priv_nodes[MAXT][MAXNODE], shared_nodes[MAXT][MAXNODE];
static long priv_bad[MAXT], shared_bad[MAXT];
static pthread_barrier_t barrier;
static volatile uint64_t sink[MAXT * 8];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Count the pages of [p, p+len) per NUMA node with move_pages(pid 0, nodes NULL). */
static void where(char *p, size_t len, long *per_node, long *bad) {
    size_t n = len / page;
    void **pages = malloc(n * sizeof *pages);
    int *status = malloc(n * sizeof *status);
    for (size_t i = 0; i < n; i++) pages[i] = p + i * page;
    if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) != 0) {
        perror("move_pages");
        exit(2);
    }
    for (size_t i = 0; i < n; i++) {
        if (status[i] >= 0 && status[i] < MAXNODE) per_node[status[i]]++;
        else (*bad)++;
    }
    free(pages);
    free(status);
}

static void read_cpus(int w) {
    char path[96], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tids[w]);
    FILE *f = fopen(path, "r");
    strcpy(cpus[w], "?");
    if (!f) return;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            char *v = line + 18;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(cpus[w], sizeof cpus[w], "%s", v);
        }
    fclose(f);
}

static void *worker(void *arg) {
    int w = (int)(intptr_t)arg;
    tids[w] = syscall(SYS_gettid);
    char *mine = priv[w];
    for (size_t i = 0; i < priv_bytes; i += 64) mine[i] = (char)(i + w); /* first touch */
    char *slice = shared + (size_t)w * shared_slice;
    for (size_t i = 0; i < shared_slice; i += 64) slice[i] = (char)(i + w);
    cpu_at[w] = sched_getcpu();
    read_cpus(w);
    pthread_barrier_wait(&barrier);
    where(mine, priv_bytes, priv_nodes[w], &priv_bad[w]);
    where(slice, shared_slice, shared_nodes[w], &shared_bad[w]);
    pthread_barrier_wait(&barrier);
    int partner = (w ^ 1) < nthreads ? (w ^ 1) : w;
    const char *theirs = shared + (size_t)partner * shared_slice;
    double end = now() + work_s;
    uint64_t acc = 0;
    while (now() < end) {
        for (size_t i = 0; i < shared_slice; i += 64) {
            acc += (unsigned char)theirs[i];
            slice[i] += (char)(acc & 1);
        }
        for (size_t i = 0; i < priv_bytes; i += 64) mine[i] += (char)(acc & 3);
    }
    sink[w * 8] = acc;
    return NULL;
}

static void print_nodes(const long *c) {
    int first = 1;
    for (int n = 0; n < MAXNODE; n++)
        if (c[n]) {
            printf("%s%d:%ld", first ? "" : ",", n, c[n]);
            first = 0;
        }
    if (first) printf("none");
}

/* The numa_maps line of the VMA starting at addr: print its N<k>=<pages> fields. */
static void numa_maps_line(const char *label, void *addr) {
    FILE *f = fopen("/proc/self/numa_maps", "r");
    char line[4096];
    char want[32];
    snprintf(want, sizeof want, "%lx ", (unsigned long)addr);
    int found = 0;
    if (f) {
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, want, strlen(want)) != 0) continue;
            found = 1;
            printf("ftcheck numa_maps %s", label);
            for (char *t = strtok(line, " \n"); t; t = strtok(NULL, " \n"))
                if (t[0] == 'N' && t[1] >= '0' && t[1] <= '9') printf(" %s", t);
            printf("\n");
            break;
        }
        fclose(f);
    }
    if (!found) printf("ftcheck numa_maps %s missing\n", label);
}

/* LEN bytes of anonymous memory between two PROT_NONE pages: its own VMA in numa_maps. */
static char *guarded(size_t len) {
    char *p = mmap(NULL, len + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mprotect(p, page, PROT_NONE) != 0 || mprotect(p + page + len, page, PROT_NONE) != 0) {
        perror("mmap");
        exit(2);
    }
    /* 4 KiB pages: a transparent huge page (THP "always", and a 2 MiB-aligned buffer, which
     * depends on where mmap put it) would place every slice it covers on the node of the first
     * thread to touch any of them: 2 MiB of shared slices on one node, by chance. */
    if (madvise(p + page, len, MADV_NOHUGEPAGE) != 0) {
        perror("madvise");
        exit(2);
    }
    return p + page;
}

int main(int argc, char **argv) {
    long pkib = 1024, skib = 256;
    if (argc > 1) nthreads = atoi(argv[1]);
    if (argc > 2) pkib = atol(argv[2]);
    if (argc > 3) skib = atol(argv[3]);
    if (argc > 4) work_s = atof(argv[4]);
    page = sysconf(_SC_PAGESIZE);
    if (nthreads < 1 || nthreads > MAXT || pkib < 4 || skib < 4 || work_s < 0 || pkib * 1024 % page ||
        skib * 1024 % page) {
        fprintf(stderr, "usage: %s [THREADS 1..%d] [PRIVATE_KIB] [SHARED_KIB] [WORK_SECONDS]\n"
                        "  (KiB values multiples of the page size)\n", argv[0], MAXT);
        return 2;
    }
    priv_bytes = (size_t)pkib * 1024;
    shared_slice = (size_t)skib * 1024;
    shared = guarded(shared_slice * nthreads);
    for (int w = 0; w < nthreads; w++) priv[w] = guarded(priv_bytes);
    pthread_barrier_init(&barrier, NULL, nthreads);
    pthread_t th[MAXT];
    for (int w = 1; w < nthreads; w++)
        if (pthread_create(&th[w], NULL, worker, (void *)(intptr_t)w) != 0) { perror("pthread_create"); return 2; }
    worker((void *)0);
    for (int w = 1; w < nthreads; w++) pthread_join(th[w], NULL);
    printf("ftcheck threads=%d private_kib=%ld shared_kib=%ld pid=%ld\n", nthreads, pkib, skib, (long)getpid());
    for (int w = 0; w < nthreads; w++) {
        printf("ftcheck thread=%d tid=%ld cpu=%d cpus=%s priv_pages=%zu priv_nodes=", w, tids[w], cpu_at[w], cpus[w],
               priv_bytes / page);
        print_nodes(priv_nodes[w]);
        printf(" shared_pages=%zu shared_nodes=", shared_slice / page);
        print_nodes(shared_nodes[w]);
        printf(" priv_unknown=%ld shared_unknown=%ld\n", priv_bad[w], shared_bad[w]);
    }
    for (int w = 0; w < nthreads; w++) {
        char label[32];
        snprintf(label, sizeof label, "thread=%d", w);
        numa_maps_line(label, priv[w]);
    }
    numa_maps_line("shared", shared);
    return 0;
}
