// SPDX-License-Identifier: GPL-2.0
/*
 * iocost DEV COUNT: COUNT 4 KiB O_DIRECT reads at pseudo-random offsets, one at a time,
 * bracketed by two calls of a marker function mapped at a fixed address, which the
 * icount QEMU plugin (qemu/plugins/icount.c) watches: the instructions between the two
 * marks are the cost of COUNT reads (syscall, block layer, driver, interrupt, wake-up).
 * Prints the elapsed time too. The offsets are the same on every run (fixed seed).
 *
 * iocost mark: just one call of the marker, to bracket another program (fio) with two.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

#define MARK_VA 0x5ee000000000ULL

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void (*map_marker(void))(void)
{
	unsigned char *mark = mmap((void *)MARK_VA, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (mark != (void *)MARK_VA) {
		perror("mmap marker");
		exit(1);
	}
	mark[0] = 0xc3; /* ret */
	return (void (*)(void))mark;
}

int main(int argc, char **argv)
{
	if (argc == 2 && argv[1][0] == 'm') {
		map_marker()();
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: iocost DEV COUNT | iocost mark\n");
		return 2;
	}
	long count = atol(argv[2]);
	int fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || count <= 0) {
		perror(argv[1]);
		return 1;
	}
	uint64_t size = 0;
	if (ioctl(fd, BLKGETSIZE64, &size) || size < (1 << 20)) {
		fprintf(stderr, "%s: cannot read its size\n", argv[1]);
		return 1;
	}
	uint64_t blocks = size / 4096;
	void *buf;
	if (posix_memalign(&buf, 4096, 4096))
		return 1;
	void (*marker)(void) = map_marker();

	uint64_t x = 0x9e3779b97f4a7c15ULL;
	/* Warm up: page tables, caches, the first I/Os' one-time work. */
	for (int i = 0; i < 200; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		if (pread(fd, buf, 4096, (off_t)((x >> 17) % blocks) * 4096) != 4096) {
			perror("pread");
			return 1;
		}
	}
	double t0 = now();
	marker();
	for (long i = 0; i < count; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		if (pread(fd, buf, 4096, (off_t)((x >> 17) % blocks) * 4096) != 4096) {
			perror("pread");
			return 1;
		}
	}
	marker();
	double t1 = now();
	printf("iocost %s %ld reads %.3f s %.1f us/read\n", argv[1], count, t1 - t0,
	       (t1 - t0) * 1e6 / count);
	return 0;
}
