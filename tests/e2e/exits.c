/* Threads that end early: one by pthread_exit, one cancelled right after it is created (its
 * first cancellation point may be inside the preload's trampoline). Pinned by
 * libcmlb_preload.so, both must end as they would without it. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void *exits(void *a) {
    (void)a;
    pthread_exit((void *)42);
    return NULL;
}

static void *waits(void *a) {
    (void)a;
    for (;;) {
        sleep(1);
    }
    return NULL;
}

int main(void) {
    pthread_t t;
    void *r = NULL;
    if (pthread_create(&t, NULL, exits, NULL) != 0 || pthread_join(t, &r) != 0) return 2;
    printf("pthread_exit value %ld\n", (long)r);
    if (pthread_create(&t, NULL, waits, NULL) != 0) return 2;
    pthread_cancel(t);
    if (pthread_join(t, &r) != 0) return 2;
    printf("cancelled %s\n", r == PTHREAD_CANCELED ? "yes" : "no");
    return 0;
}
