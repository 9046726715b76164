// SPDX-License-Identifier: GPL-2.0
/*
 * uring-cmd DEV MODE: sends one NVMe io_uring passthrough command (IORING_OP_URING_CMD) to
 * the namespace generic device DEV and prints its completion, "res=<res> res2=<res2>":
 *   read     a 4 KiB read of LBA 0 (res 0)
 *   small    the same on a ring without 128-byte SQEs and 32-byte CQEs
 *   nsid     the read for namespace 99
 *   op       an unknown cmd_op
 *   admin    NVME_URING_CMD_ADMIN (Identify) on the namespace's device
 *   vec      NVME_URING_CMD_IO_VEC with one 4 KiB vector
 *   long     a read of 64 MiB
 *   badaddr  a read into an unmapped address
 *   badop    an I/O opcode the controller does not have (its status comes back)
 * With a third argument "sum", the line ends with " sum=<n>", a checksum of the 4 KiB
 * buffer read. Raw syscalls: no liburing needed. Exits 0 once a completion was printed.
 */
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/nvme_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define IORING_OP_URING_CMD_ 46
#define IORING_SETUP_SQE128_ (1U << 10)
#define IORING_SETUP_CQE32_ (1U << 11)

int main(int argc, char **argv)
{
	if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "sum"))) {
		fprintf(stderr, "usage: %s DEV MODE [sum]\n", argv[0]);
		return 2;
	}
	const char *mode = argv[2];
	int fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	int nsid = ioctl(fd, NVME_IOCTL_ID);
	int big = strcmp(mode, "small") != 0;
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	if (big)
		p.flags = IORING_SETUP_SQE128_ | IORING_SETUP_CQE32_;
	int ring = syscall(__NR_io_uring_setup, 4, &p);
	if (ring < 0) {
		perror("io_uring_setup");
		return 1;
	}
	size_t sqe_size = big ? 128 : 64, cqe_size = big ? 32 : 16;
	char *sq = mmap(0, p.sq_off.array + p.sq_entries * sizeof(unsigned), PROT_READ | PROT_WRITE,
			MAP_SHARED, ring, IORING_OFF_SQ_RING);
	char *cq = mmap(0, p.cq_off.cqes + p.cq_entries * cqe_size, PROT_READ | PROT_WRITE,
			MAP_SHARED, ring, IORING_OFF_CQ_RING);
	char *sqes = mmap(0, p.sq_entries * sqe_size, PROT_READ | PROT_WRITE, MAP_SHARED, ring,
			  IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	static char buf[4096] __attribute__((aligned(4096)));
	struct iovec iov = { buf, sizeof(buf) };
	struct nvme_uring_cmd c;
	memset(&c, 0, sizeof(c));
	unsigned op = NVME_URING_CMD_IO;
	c.opcode = 0x02; /* Read */
	c.nsid = nsid;
	c.addr = (uintptr_t)buf;
	c.data_len = sizeof(buf);
	c.cdw12 = sizeof(buf) / 512 - 1; /* 512-byte blocks */
	if (!strcmp(mode, "nsid")) {
		c.nsid = 99;
	} else if (!strcmp(mode, "op")) {
		op = 0x1234;
	} else if (!strcmp(mode, "admin")) {
		op = NVME_URING_CMD_ADMIN;
		c.opcode = 0x06;
		c.nsid = 0;
		c.cdw10 = 1;
		c.cdw12 = 0;
	} else if (!strcmp(mode, "vec")) {
		op = NVME_URING_CMD_IO_VEC;
		c.addr = (uintptr_t)&iov;
		c.data_len = 1;
	} else if (!strcmp(mode, "long")) {
		static char big_buf[64 << 20];
		c.addr = (uintptr_t)big_buf;
		c.data_len = sizeof(big_buf);
		c.cdw12 = 0xffff;
	} else if (!strcmp(mode, "badaddr")) {
		c.addr = 0x1000;
	} else if (!strcmp(mode, "badop")) {
		c.opcode = 0x7e;
	} else if (strcmp(mode, "read") && strcmp(mode, "small")) {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	unsigned *sq_tail = (unsigned *)(sq + p.sq_off.tail);
	unsigned *sq_array = (unsigned *)(sq + p.sq_off.array);
	unsigned tail = *sq_tail, idx = tail & (p.sq_entries - 1);
	struct io_uring_sqe *s = (struct io_uring_sqe *)(sqes + idx * sqe_size);
	memset(s, 0, sqe_size);
	s->opcode = IORING_OP_URING_CMD_;
	s->fd = fd;
	s->cmd_op = op;
	/* The command: 80 bytes from sqe->cmd with 128-byte SQEs, 16 without. */
	memcpy((char *)s + 48, &c, big ? sizeof(c) : 16);
	sq_array[idx] = idx;
	__atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, 0, 0) < 0) {
		perror("io_uring_enter");
		return 1;
	}
	unsigned *cq_head = (unsigned *)(cq + p.cq_off.head);
	unsigned head = *cq_head;
	if (head == __atomic_load_n((unsigned *)(cq + p.cq_off.tail), __ATOMIC_ACQUIRE)) {
		fprintf(stderr, "no completion\n");
		return 1;
	}
	struct io_uring_cqe *e =
		(struct io_uring_cqe *)(cq + p.cq_off.cqes + (head & (p.cq_entries - 1)) * cqe_size);
	unsigned long long res2 = big ? *(unsigned long long *)((char *)e + 16) : 0;
	printf("res=%d res2=%llu", e->res, res2);
	if (argc == 4) {
		unsigned long long sum = 0;
		for (size_t i = 0; i < sizeof(buf); i++)
			sum = sum * 31 + (unsigned char)buf[i];
		printf(" sum=%llu", sum);
	}
	printf("\n");
	__atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
	return 0;
}
