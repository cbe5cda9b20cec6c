/* OpenMP check for bind=omp: every team member reports its thread number and the CPUs it may
 * run on after the team started (the runtime binds it from OMP_PLACES/GOMP_CPU_AFFINITY):
 *   thread K tid T cpus LIST */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
#pragma omp parallel
    {
        char line[512], cpus[256] = "?";
        FILE *f = fopen("/proc/thread-self/status", "r");
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
                sscanf(line + 18, "%255s", cpus);
                break;
            }
        if (f) fclose(f);
#pragma omp critical
        printf("thread %d tid %ld cpus %s\n", omp_get_thread_num(), (long)syscall(SYS_gettid), cpus);
    }
    return 0;
}
