// SPDX-License-Identifier: GPL-2.0
// build: -I/usr/lib/x86_64-linux-gnu/openmpi/include -lmpi
/*
 * mpi-check: MPI point-to-point and collectives between ranks on two
 * hosts, every value checked (run by the ucx suite with Open MPI over
 * UCX, one rank per VM).
 *
 *   mpirun -np 2 ... mpi-check
 *
 *   p2p-SIZE     rank 0 sends a pattern of SIZE bytes (eager to
 *                rendezvous sizes) to rank 1, which checks it and sends
 *                another back, which rank 0 checks
 *   sendrecv     both ranks exchange 1 MiB at once (MPI_Sendrecv)
 *   bcast        rank 0 broadcasts 2 MiB
 *   allreduce    each rank contributes 2^18 doubles and 2^18 64-bit
 *                integers that depend on its rank and the index; the
 *                sums and the maximum are checked element by element
 *   reduce-scatter-block, allgather  likewise
 * Each rank prints "ok NAME-rankR" or "not ok NAME-rankR - why"; the
 * exit status is the number of failures (at most 100).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

static int rank, size, failures;

static void result(int ok, const char *name, const char *why)
{
	if (ok)
		printf("ok %s-rank%d\n", name, rank);
	else {
		printf("not ok %s-rank%d - %s\n", name, rank, why);
		failures++;
	}
	fflush(stdout);
}

static uint8_t pattern_byte(uint32_t seed, size_t i)
{
	return (uint8_t)(i * 29 + seed * 11 + (i >> 9));
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern_byte(seed, i);
}

static long first_bad(const uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern_byte(seed, i))
			return (long)i;
	return -1;
}

static void p2p(size_t n)
{
	uint8_t *buf = malloc(n ? n : 1);
	char name[32], why[96];
	MPI_Status st;
	int count = -1, rc;
	long bad;

	snprintf(name, sizeof(name), "p2p-%zu", n);
	if (rank == 0) {
		fill(buf, n, (uint32_t)n);
		MPI_Send(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
		memset(buf, 0, n);
		rc = MPI_Recv(buf, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		bad = first_bad(buf, n, (uint32_t)n + 1);
	} else {
		memset(buf, 0, n);
		rc = MPI_Recv(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		bad = first_bad(buf, n, (uint32_t)n);
		fill(buf, n, (uint32_t)n + 1);
		MPI_Send(buf, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
	}
	snprintf(why, sizeof(why), "rc %d, %d bytes, first bad byte %ld", rc, count, bad);
	result(rc == MPI_SUCCESS && count == (int)n && bad < 0, name, why);
	free(buf);
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 0, 1, 100, 8192, 65536, 1u << 20, 8u << 20 };
	const size_t n = 1u << 18, big = 2u << 20;
	uint8_t *a = malloc(big), *b = malloc(big);
	double *d = malloc(n * sizeof(*d)), *dsum = malloc(n * sizeof(*dsum));
	int64_t *v = malloc(n * sizeof(*v)), *vmax = malloc(n * sizeof(*vmax));
	int64_t *g = malloc(2 * n * sizeof(*g));
	char why[128];
	long bad;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	result(size == 2, "two-ranks", "the world is not two ranks");
	if (size != 2) {
		MPI_Finalize();
		return 100;
	}

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		p2p(sizes[i]);

	/* Both directions at once. */
	fill(a, 1u << 20, 40 + rank);
	memset(b, 0, 1u << 20);
	MPI_Sendrecv(a, 1 << 20, MPI_BYTE, 1 - rank, 3, b, 1 << 20, MPI_BYTE, 1 - rank, 3,
		     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	bad = first_bad(b, 1u << 20, 40 + (1 - rank));
	snprintf(why, sizeof(why), "first bad byte %ld", bad);
	result(bad < 0, "sendrecv", why);

	if (rank == 0)
		fill(a, big, 77);
	else
		memset(a, 0, big);
	MPI_Bcast(a, (int)big, MPI_BYTE, 0, MPI_COMM_WORLD);
	bad = first_bad(a, big, 77);
	snprintf(why, sizeof(why), "first bad byte %ld", bad);
	result(bad < 0, "bcast", why);

	/* Values exact in double: small integers and halves. */
	for (size_t i = 0; i < n; i++) {
		d[i] = (double)(i % 1000) * (rank + 1) + 0.5 * rank;
		v[i] = (int64_t)(i * 7 + 3) * (rank ? -1 : 1) + (int64_t)rank * 1000000;
	}
	MPI_Allreduce(d, dsum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(v, vmax, (int)n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
	bad = -1;
	for (size_t i = 0; i < n && bad < 0; i++) {
		double want = (double)(i % 1000) * 3 + 0.5;
		int64_t m0 = (int64_t)(i * 7 + 3), m1 = -(int64_t)(i * 7 + 3) + 1000000;

		if (dsum[i] != want || vmax[i] != (m0 > m1 ? m0 : m1))
			bad = (long)i;
	}
	snprintf(why, sizeof(why), "first bad element %ld", bad);
	result(bad < 0, "allreduce", why);

	/* Reduce-scatter: each rank gets the sums of its half. */
	MPI_Reduce_scatter_block(v, vmax, (int)(n / 2), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	bad = -1;
	for (size_t i = 0; i < n / 2 && bad < 0; i++) {
		size_t k = (size_t)rank * (n / 2) + i;

		if (vmax[i] != 1000000)
			bad = (long)k;
	}
	snprintf(why, sizeof(why), "first bad element %ld", bad);
	result(bad < 0, "reduce-scatter-block", why);

	MPI_Allgather(v, (int)n, MPI_INT64_T, g, (int)n, MPI_INT64_T, MPI_COMM_WORLD);
	bad = -1;
	for (size_t r = 0; r < 2 && bad < 0; r++)
		for (size_t i = 0; i < n && bad < 0; i++)
			if (g[r * n + i] != (int64_t)(i * 7 + 3) * (r ? -1 : 1) + (int64_t)r * 1000000)
				bad = (long)(r * n + i);
	snprintf(why, sizeof(why), "first bad element %ld", bad);
	result(bad < 0, "allgather", why);

	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	free(a);
	free(b);
	free(d);
	free(dsum);
	free(v);
	free(vmax);
	free(g);
	return failures > 100 ? 100 : failures;
}
