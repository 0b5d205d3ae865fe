/* An independent all-reduce timing, for comparison with parlab's harness (ci/bench.sh).
 * Same discipline as parlab: per iteration MPI_Barrier, then MPI_Wtime around one
 * MPI_Allreduce of float sums; prints the median over iterations of the slowest rank's time.
 * Usage: allreduce BYTES ITERATIONS WARMUP */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long bytes = argc > 1 ? atol(argv[1]) : 3072;
    int iterations = argc > 2 ? atoi(argv[2]) : 1000;
    int warmup = argc > 3 ? atoi(argv[3]) : 100;
    int count = (int)(bytes / 4);
    float *send = malloc(sizeof(float) * count), *recv = malloc(sizeof(float) * count);
    double *times = malloc(sizeof(double) * iterations), *slowest = malloc(sizeof(double) * iterations);
    for (int i = 0; i < count; i++) send[i] = (float)(rank + 1 + i % 251);
    for (int i = 0; i < warmup; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int i = 0; i < iterations; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        times[i] = MPI_Wtime() - t0;
    }
    MPI_Reduce(times, slowest, iterations, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(slowest, iterations, sizeof(double), cmp);
        double median = iterations % 2 ? slowest[iterations / 2]
                                       : (slowest[iterations / 2 - 1] + slowest[iterations / 2]) / 2;
        printf("%.9e\n", median);
    }
    MPI_Finalize();
    return 0;
}
