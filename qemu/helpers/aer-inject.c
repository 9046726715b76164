// SPDX-License-Identifier: GPL-2.0
/*
 * aer-inject BDF cor|uncor STATUS: asks the kernel's AER software injector (aer_inject.ko,
 * /dev/aer_inject) to report STATUS, a mask of the AER Correctable or Uncorrectable Error
 * Status bits, as logged by PCI device BDF (DOMAIN:BUS:DEV.FN; the device needs an AER
 * capability): the injector fakes the status registers of the device and of its root port
 * and raises the port's AER interrupt, so the kernel's AER driver handles the error as one
 * the hardware reported. Exits 0 once the kernel took it, 1 with its error otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* drivers/pci/pcie/aer_inject.c's struct aer_error_inj, in the kernel's layout. */
struct aer_error_inj {
	uint8_t bus;
	uint8_t dev;
	uint8_t fn;
	uint32_t uncor_status;
	uint32_t cor_status;
	uint32_t header_log0;
	uint32_t header_log1;
	uint32_t header_log2;
	uint32_t header_log3;
	uint32_t domain;
};

int main(int argc, char **argv)
{
	struct aer_error_inj e;
	unsigned int domain, bus, dev, fn;
	char *end;

	if (argc != 4 || (strcmp(argv[2], "cor") && strcmp(argv[2], "uncor"))) {
		fprintf(stderr, "usage: %s DOMAIN:BUS:DEV.FN cor|uncor STATUS\n", argv[0]);
		return 2;
	}
	if (sscanf(argv[1], "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4 || bus > 0xff ||
	    dev > 0x1f || fn > 7) {
		fprintf(stderr, "bad PCI address %s\n", argv[1]);
		return 2;
	}
	errno = 0;
	unsigned long status = strtoul(argv[3], &end, 0);
	if (errno || *end || !status || status > UINT32_MAX) {
		fprintf(stderr, "bad status %s\n", argv[3]);
		return 2;
	}
	memset(&e, 0, sizeof(e));
	e.domain = domain;
	e.bus = bus;
	e.dev = dev;
	e.fn = fn;
	if (!strcmp(argv[2], "cor"))
		e.cor_status = status;
	else
		e.uncor_status = status;

	int fd = open("/dev/aer_inject", O_WRONLY);
	if (fd < 0) {
		perror("/dev/aer_inject");
		return 1;
	}
	ssize_t n = write(fd, &e, sizeof(e));
	if (n != (ssize_t)sizeof(e)) {
		fprintf(stderr, "aer_inject: %s\n", n < 0 ? strerror(errno) : "short write");
		return 1;
	}
	close(fd);
	return 0;
}
