/* Test workload with known sharing: N threads (main = thread 0, then threads 1..N-1 in creation
 * order); threads 2k and 2k+1 share one array and hammer it, pairs share nothing with each
 * other. Each thread prints its index, tid and Cpus_allowed_list once its work is done:
 *   pairs [THREADS=4] [SECONDS=0.3]
 *   thread 1 tid 1234 cpus 1
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#define WORDS (1 << 16)
static double seconds = 0.3;
static volatile long *shared[64];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void report(int k) {
    char line[512], cpus[256] = "?";
    FILE *f = fopen("/proc/thread-self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            sscanf(line + 18, "%255s", cpus);
            break;
        }
    if (f) fclose(f);
    printf("thread %d tid %ld cpus %s\n", k, (long)syscall(SYS_gettid), cpus);
    fflush(stdout);
}

static void *work(void *arg) {
    int k = (int)(long)arg;
    volatile long *a = shared[k / 2];
    double end = now() + seconds;
    unsigned x = 12345 + k;
    while (now() < end)
        for (int i = 0; i < 4096; i++) {
            x = x * 1103515245u + 12345u;
            a[(x >> 8) % WORDS] += k;
        }
    report(k);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2) seconds = atof(argv[2]);
    if (n < 1 || n > 64) { fprintf(stderr, "pairs: THREADS must be 1..64\n"); return 2; }
    for (int p = 0; p < (n + 1) / 2; p++)
        shared[p] = calloc(WORDS, sizeof(long));
    pthread_t t[64];
    for (int k = 1; k < n; k++)
        if (pthread_create(&t[k], NULL, work, (void *)(long)k) != 0) { perror("pthread_create"); return 1; }
    work((void *)0L);
    for (int k = 1; k < n; k++) pthread_join(t[k], NULL);
    return 0;
}
