/* The all-reduce comparators of `make bench` (ci/bench.sh bench_collectives): parlab's own
 * code, written to the methods of two established benchmarks, both run per size in one launch:
 *   OSU micro-benchmarks' osu_allreduce: warm-up calls, then a barrier; then ITERATIONS times:
 *     MPI_Wtime around one MPI_Allreduce (float sum), then MPI_Barrier (not timed); the per-rank
 *     latency is the timed total / ITERATIONS, averaged over the ranks ("Avg Latency"). Each
 *     call starts at a barrier's exit, so the figure holds the barrier's exit skew (about half
 *     of it at 2 ranks: the rank out first waits for the other inside its timed call).
 *   nccl-tests' BenchTime: one warm-up call, a barrier, then ITERATIONS calls back to back
 *     timed as one loop; per-rank time = loop time / ITERATIONS, averaged over the ranks. The
 *     exit skew of the one barrier is divided by ITERATIONS: the operation's own time.
 * Then osu_allreduce's method again with the receive buffer poisoned before each call (below).
 * The result of each method's last call is checked.
 * Usage: allreduce ITERATIONS WARMUP BYTES...
 * Prints per size: bytes osu_avg_s osu_min_s osu_max_s nccl_avg_s osu_poisoned_avg_s */
#include <math.h>
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

/* osu_allreduce's per-rank latency (seconds): warm-up, then per call a barrier and MPI_Wtime
 * around the call (osu_allreduce's barrier after each call is the next call's barrier here; the
 * first call's is the barrier after the warm-up). With `poison`, the receive buffer is written
 * (NaN) before each barrier, as parlab's per-iteration timing does so its check can catch a call
 * that writes nothing: the variant that measures what that write does to the call. */
static double osu_latency(float *send, float *recv, int count, int iterations, int warmup, int poison) {
    for (int i = 0; i < warmup; i++)
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double total = 0;
    for (int i = 0; i < iterations; i++) {
        if (poison)
            for (int j = 0; j < count; j++) recv[j] = NAN;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        total += MPI_Wtime() - t0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return total / iterations;
}

/* nccl-tests' per-rank time (seconds): ITERATIONS calls back to back after one barrier. */
static double nccl_tests_time(float *send, float *recv, int count, int iterations) {
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iterations; i++)
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return (MPI_Wtime() - t0) / iterations;
}

/* The mean over ranks of one rank's figure, on rank 0. */
static double mean_over_ranks(double mine, int world) {
    double sum = 0;
    MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum / world;
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
        double mine = osu_latency(send, recv, count, iterations, warmup, 0), lo, hi;
        int wrong = check(recv, count, world), all_wrong;
        double own = nccl_tests_time(send, recv, count, iterations);
        wrong += check(recv, count, world);
        double poisoned = osu_latency(send, recv, count, iterations, warmup, 1);
        wrong += check(recv, count, world);
        double osu = mean_over_ranks(mine, world), nccl = mean_over_ranks(own, world);
        double osu_poisoned = mean_over_ranks(poisoned, world);
        MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            if (all_wrong) {
                fprintf(stderr, "allreduce: %d wrong values at %ld B\n", all_wrong, (long)count * 4);
                status = 1;
            }
            printf("%ld %.9e %.9e %.9e %.9e %.9e\n", (long)count * 4, osu, lo, hi, nccl, osu_poisoned);
        }
        free(send);
        free(recv);
    }
    MPI_Finalize();
    return status;
}
