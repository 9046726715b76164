// SPDX-License-Identifier: GPL-2.0
/*
 * mmio-write BDF OFFSET VALUE: writes the 32-bit VALUE at byte OFFSET of BAR 0 of PCI
 * device BDF (through sysfs resource0), as a misbehaving host would: tests use it to write
 * a doorbell of a queue that does not exist, which an NVMe controller reports as an
 * asynchronous error event. Exits 0 once written.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s BDF OFFSET VALUE\n", argv[0]);
		return 2;
	}
	char path[256];
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource0", argv[1]);
	unsigned long off = strtoul(argv[2], NULL, 0);
	uint32_t value = (uint32_t)strtoul(argv[3], NULL, 0);
	if (off % 4) {
		fprintf(stderr, "offset %#lx is not dword aligned\n", off);
		return 2;
	}
	int fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	long page = sysconf(_SC_PAGESIZE);
	unsigned long base = off & ~(unsigned long)(page - 1);
	volatile uint32_t *map = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, base);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	map[(off - base) / 4] = value;
	munmap((void *)map, page);
	close(fd);
	return 0;
}
