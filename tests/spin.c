/* The spike the cause tests inject: a SCHED_FIFO 99 busy loop pinned to one CPU.
 *
 *   spin CPU MS DELAY_S [TIMES [PAUSE_S]]
 *
 * After DELAY_S it spins MS milliseconds, TIMES times with PAUSE_S between, and prints
 * "@inject t=START ms=MS cpu=CPU pid=PID" (START: CLOCK_MONOTONIC seconds) after each. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void nap(double s)
{
	struct timespec t = { (time_t)s, (long)((s - (time_t)s) * 1e9) };
	nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: spin CPU MS DELAY_S [TIMES [PAUSE_S]]\n");
		return 2;
	}
	int cpu = atoi(argv[1]), times = argc > 4 ? atoi(argv[4]) : 1;
	double ms = atof(argv[2]), pause = argc > 5 ? atof(argv[5]) : 1;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	struct sched_param p = { .sched_priority = 99 };
	if (sched_setaffinity(0, sizeof set, &set) || sched_setscheduler(0, SCHED_FIFO, &p)) {
		perror("spin");
		return 1;
	}
	nap(atof(argv[3]));
	for (int i = 0; i < times; i++) {
		double start = now();
		while (now() - start < ms / 1000)
			;
		printf("@inject t=%.6f ms=%.0f cpu=%d pid=%d\n", start, ms, cpu, getpid());
		fflush(stdout);
		if (i + 1 < times)
			nap(pause);
	}
	return 0;
}
