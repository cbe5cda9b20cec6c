/* MPI smoke test for the multi-node cluster (tests/multinode/run, docs/cluster.md).
 *
 *   mpi_smoke [BYTES]     (default 1 MiB)
 *
 * Each rank prints "rank R of N on HOST". Every rank then does a round trip with a rank on
 * another host: it sends BYTES to the first rank after it (cyclically) whose host differs and
 * waits for that rank's echo; every rank serves the requests aimed at it. Payloads carry a
 * pattern derived from the sender's rank, checked on arrival, so a message that arrives
 * corrupted or from the wrong rank is an error. Hosts are what each rank's gethostname()
 * says (on the namespaced cluster: the node's name), exchanged with MPI_Allgather.
 * Exit status 0 only if every exchange of every rank was verified; 1 if all ranks share one
 * host (nothing crosses a node) or anything failed.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST_LEN 64
#define TAG_REQ 1
#define TAG_ECHO 2

static unsigned char pattern(int sender, long i) { return (unsigned char)((sender * 31 + i * 7) & 0xff); }

static void fill(unsigned char *buf, long n, int sender) {
    for (long i = 0; i < n; i++) buf[i] = pattern(sender, i);
}

static int check(const unsigned char *buf, long n, int sender) {
    for (long i = 0; i < n; i++)
        if (buf[i] != pattern(sender, i)) return 0;
    return 1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = argc > 1 ? atol(argv[1]) : 1L << 20;
    if (bytes < 1 || bytes > (1L << 30)) {
        if (rank == 0) fprintf(stderr, "mpi_smoke: BYTES '%s' must be 1..1073741824\n", argv[1]);
        MPI_Finalize();
        return 2;
    }

    char host[HOST_LEN] = {0};
    gethostname(host, HOST_LEN - 1);
    char *hosts = calloc((size_t)size, HOST_LEN);
    MPI_Allgather(host, HOST_LEN, MPI_CHAR, hosts, HOST_LEN, MPI_CHAR, MPI_COMM_WORLD);
    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl) *nl = 0;
        printf("library: %s\n", lib);
    }
    printf("rank %d of %d on %s\n", rank, size, host);
    fflush(stdout);

    /* dest[r]: the first rank after r whose host differs from r's, or -1. */
    int *dest = malloc(sizeof(int) * (size_t)size);
    for (int r = 0; r < size; r++) {
        dest[r] = -1;
        for (int k = 1; k < size; k++) {
            int c = (r + k) % size;
            if (strcmp(hosts + (size_t)r * HOST_LEN, hosts + (size_t)c * HOST_LEN) != 0) { dest[r] = c; break; }
        }
    }
    int errors = 0;
    if (dest[rank] < 0) {
        fprintf(stderr, "mpi_smoke: rank %d: every rank is on %s, no other host to talk to\n", rank, host);
        errors = 1;
    } else {
        int d = dest[rank];
        unsigned char *out = malloc((size_t)bytes), *back = malloc((size_t)bytes), *in = malloc((size_t)bytes);
        fill(out, bytes, rank);
        MPI_Request req[2];
        MPI_Irecv(back, (int)bytes, MPI_BYTE, d, TAG_ECHO, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(out, (int)bytes, MPI_BYTE, d, TAG_REQ, MPI_COMM_WORLD, &req[1]);
        /* Serve every rank whose destination is this one: receive, check, echo it back. */
        for (int s = 0; s < size; s++) {
            if (dest[s] != rank) continue;
            MPI_Recv(in, (int)bytes, MPI_BYTE, s, TAG_REQ, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            int good = check(in, bytes, s);
            printf("rank %d (%s) served rank %d (%s): %ld bytes %s\n", rank, host, s,
                   hosts + (size_t)s * HOST_LEN, bytes, good ? "verified" : "CORRUPT");
            errors += !good;
            MPI_Send(in, (int)bytes, MPI_BYTE, s, TAG_ECHO, MPI_COMM_WORLD);
        }
        MPI_Status st[2]; /* not MPI_STATUSES_IGNORE: gcc 12 warns on MPICH's definition */
        MPI_Waitall(2, req, st);
        int good = check(back, bytes, rank);
        printf("rank %d (%s) <-> rank %d (%s): %ld bytes there and back %s\n", rank, host, d,
               hosts + (size_t)d * HOST_LEN, bytes, good ? "verified" : "CORRUPT");
        errors += !good;
        free(out); free(back); free(in);
    }
    fflush(stdout);
    int total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        int nhosts = 0;
        for (int r = 0; r < size; r++) {
            int seen = 0;
            for (int q = 0; q < r; q++) seen |= !strcmp(hosts + (size_t)r * HOST_LEN, hosts + (size_t)q * HOST_LEN);
            nhosts += !seen;
        }
        printf("mpi_smoke: %d ranks on %d hosts, %s\n", size, nhosts,
               total ? "FAILED" : "every exchange verified");
    }
    free(hosts); free(dest);
    MPI_Finalize();
    return total ? 1 : 0;
}
