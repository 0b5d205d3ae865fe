/* The all-reduce comparator of `make bench` (ci/bench.sh bench_collectives), timed the way the
 * OSU micro-benchmarks' osu_allreduce times it (parlab's own code, written to that method):
 *   per size: warm-up calls, then a barrier; then ITERATIONS times: MPI_Wtime around one
 *   MPI_Allreduce (float sum), then MPI_Barrier (not timed); the per-rank latency is the timed
 *   total / ITERATIONS; the figure printed is that latency averaged over the ranks
 *   (osu_allreduce's "Avg Latency"), with the smallest and largest rank's beside it.
 * No buffer is poisoned between calls; the result of the last call is checked once.
 * Usage: allreduce ITERATIONS WARMUP BYTES...   Prints per size: bytes avg_s min_s max_s */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int check(const float *recv, int count, int world) {
    int wrong = 0;
    for (int i = 0; i < count; i++) {
        float want = 0;
        for (int r = 0; r < world; r++) want += (float)(r + 1 + i % 251);
        wrong += recv[i] != want;
    }
    return wrong;
}

static double latency(float *send, float *recv, int count, int iterations, int warmup) {
    for (int i = 0; i < warmup; i++)
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double total = 0;
    for (int i = 0; i < iterations; i++) {
        double t0 = MPI_Wtime();
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        total += MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return total / iterations;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: allreduce ITERATIONS WARMUP BYTES...\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int iterations = atoi(argv[1]), warmup = atoi(argv[2]), status = 0;
    for (int a = 3; a < argc; a++) {
        long bytes = atol(argv[a]);
        int count = bytes / 4 > 0 ? (int)(bytes / 4) : 1;
        float *send = malloc(sizeof(float) * count), *recv = malloc(sizeof(float) * count);
        for (int i = 0; i < count; i++) send[i] = (float)(rank + 1 + i % 251);
        double mine = latency(send, recv, count, iterations, warmup), sum, lo, hi;
        int wrong = check(recv, count, world), all_wrong;
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            if (all_wrong) {
                fprintf(stderr, "allreduce: %d wrong values at %ld B\n", all_wrong, (long)count * 4);
                status = 1;
            }
            printf("%ld %.9e %.9e %.9e\n", (long)count * 4, sum / world, lo, hi);
        }
        free(send);
        free(recv);
    }
    MPI_Finalize();
    return status;
}
