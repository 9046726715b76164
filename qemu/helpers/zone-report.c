// SPDX-License-Identifier: GPL-2.0
/*
 * A zone report that stalls while it hands zones to user space, so a test can remove the
 * disk under it (qemu/guest/core.sh).
 *
 *   zone-report DISK SLOWDEV READY NR
 *
 * Reports NR zones of the zoned block device DISK (BLKREPORTZONE) into a buffer that is a
 * private mapping of the block device SLOWDEV, read without readahead: each page of the
 * buffer the kernel first writes a zone to is read from SLOWDEV then, so with a slow SLOWDEV
 * the report waits there, inside the driver's report, between two zones. The header page is
 * read before the report starts; then READY is created. Prints "ret R errno E zones N" and
 * exits 0 if the ioctl returned (whatever it returned).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/blkzoned.h>

int main(int argc, char **argv)
{
	struct blk_zone_report *rep;
	unsigned int nr;
	size_t len;
	int disk, slow, ready, ret;

	if (argc != 5) {
		fprintf(stderr, "usage: zone-report DISK SLOWDEV READY NR\n");
		return 2;
	}
	nr = strtoul(argv[4], NULL, 0);
	len = sizeof(*rep) + (size_t)nr * sizeof(struct blk_zone);
	len = (len + 4095) & ~(size_t)4095;
	disk = open(argv[1], O_RDONLY);
	slow = open(argv[2], O_RDONLY);
	if (disk < 0 || slow < 0) {
		perror("open");
		return 2;
	}
	rep = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, slow, 0);
	if (rep == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	if (madvise(rep, len, MADV_RANDOM)) {
		perror("madvise");
		return 2;
	}
	/* The header page: read from SLOWDEV now, then written (a private copy). */
	memset(rep, 0, sizeof(*rep));
	rep->sector = 0;
	rep->nr_zones = nr;
	ready = open(argv[3], O_WRONLY | O_CREAT, 0644);
	if (ready < 0) {
		perror("open READY");
		return 2;
	}
	close(ready);
	ret = ioctl(disk, BLKREPORTZONE, rep);
	printf("ret %d errno %d zones %u\n", ret, ret ? errno : 0, ret ? 0 : rep->nr_zones);
	return 0;
}
