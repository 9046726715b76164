// SPDX-License-Identifier: GPL-2.0
/*
 * uring-cmd [-c CTRL] [-i] [-f] [-p] [-r] [-u] [-m LEN] [-n N] DEV MODE [sum]: sends one NVMe
 * passthrough command and prints its completion, "res=<res> res2=<res2>". DEV may be "fd:N",
 * the file already open as descriptor N. By default through io_uring
 * (IORING_OP_URING_CMD) on the namespace generic device DEV, admin commands on CTRL (the
 * controller's device; DEV without -c).
 *   -i  through the ioctl instead (IO64_CMD, IO64_CMD_VEC, ADMIN64_CMD): res is its return
 *       value (-errno on failure), res2 the result field
 *   -f  a registered buffer (IORING_REGISTER_BUFFERS, IORING_URING_CMD_FIXED)
 *   -p  a polled ring (IORING_SETUP_IOPOLL)
 *   -r  DEV and CTRL opened read-only
 *   -u  without CAP_SYS_ADMIN (dropped from the effective set first)
 *   -m  a metadata buffer of LEN bytes (read: printed as " meta=<hex>" after the rest;
 *       write: a pattern of LEN bytes)
 *   -n  the command N times through io_uring, one after another (each completes before the
 *       next is sent; the last completion is printed): one CPU's submissions walk through
 *       the tags of its queue
 * Modes, I/O on DEV's namespace:
 *   read     a 4 KiB read of LBA 0 (res 0)
 *   small    the same on a ring without 128-byte SQEs and 32-byte CQEs
 *   nsid     the read for namespace 99
 *   op       an unknown cmd_op
 *   admin    NVME_URING_CMD_ADMIN (Identify) on the namespace's device
 *   vec      NVME_URING_CMD_IO_VEC with two 2 KiB vectors
 *   long     a read of 64 MiB
 *   badaddr  a read into an unmapped address
 *   badop    an I/O opcode the controller does not have (its status comes back)
 *   write    a 4 KiB write of a pattern to LBA 64
 *   flush    Flush
 *   wzeroes  Write Zeroes of LBA 64
 *   vendor   a vendor specific I/O command (80h) without data
 * admin commands on CTRL:
 *   idctrl   Identify Controller (CNS 01h), 4 KiB
 *   idns     Identify Namespace (CNS 00h) of DEV's namespace
 *   idlist   the active namespace list (CNS 02h)
 *   getlog   Get Log Page, SMART / Health (512 bytes)
 *   getfeat  Get Features, Arbitration
 *   setkato  Set Features, Keep Alive Timer (one the driver keeps to itself)
 *   setnq    Set Features, Number of Queues (likewise)
 *   admvec   Identify Controller into two 2 KiB vectors (NVME_URING_CMD_ADMIN_VEC)
 * With a last argument "sum", the line ends with " sum=<n>", a checksum of the buffer read.
 * Raw syscalls: no liburing needed. Exits 0 once a completion was printed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/io_uring.h>
#include <linux/nvme_ioctl.h>
#include <stddef.h>
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
#define IORING_URING_CMD_FIXED_ (1U << 0)
#ifndef NVME_URING_CMD_ADMIN_VEC
#define NVME_URING_CMD_ADMIN_VEC _IOWR('N', 0x83, struct nvme_uring_cmd)
#endif
#ifndef NVME_IOCTL_IO64_CMD_VEC
#define NVME_IOCTL_IO64_CMD_VEC _IOWR('N', 0x49, struct nvme_passthru_cmd64)
#endif

static char buf[4096] __attribute__((aligned(4096)));
static unsigned char meta[4096] __attribute__((aligned(64)));
static unsigned meta_len;

static void drop_sys_admin(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) != 0)
		goto fail;
	d[0].effective &= ~(1u << CAP_SYS_ADMIN);
	if (syscall(SYS_capset, &h, d) != 0)
		goto fail;
	return;
fail:
	perror("capset");
	exit(1);
}

static void print(long long res, unsigned long long res2, int sum)
{
	printf("res=%lld res2=%llu", res, res2);
	if (sum) {
		unsigned long long s = 0;
		for (size_t i = 0; i < sizeof(buf); i++)
			s = s * 31 + (unsigned char)buf[i];
		printf(" sum=%llu", s);
	}
	if (meta_len) {
		printf(" meta=");
		for (unsigned i = 0; i < meta_len; i++)
			printf("%02x", meta[i]);
	}
	printf("\n");
}

int main(int argc, char **argv)
{
	const char *ctrl = NULL;
	int use_ioctl = 0, fixed = 0, polled = 0, rdonly = 0, opt;
	long count = 1;

	while ((opt = getopt(argc, argv, "c:ifprum:n:")) != -1) {
		switch (opt) {
		case 'c': ctrl = optarg; break;
		case 'i': use_ioctl = 1; break;
		case 'f': fixed = 1; break;
		case 'p': polled = 1; break;
		case 'r': rdonly = 1; break;
		case 'u': drop_sys_admin(); break;
		case 'n':
			count = strtol(optarg, NULL, 0);
			if (count < 1)
				goto usage;
			break;
		case 'm':
			meta_len = strtoul(optarg, NULL, 0);
			if (meta_len > sizeof(meta))
				goto usage;
			break;
		default: goto usage;
		}
	}
	if (argc - optind != 2 && !(argc - optind == 3 && !strcmp(argv[optind + 2], "sum")))
		goto usage;
	const char *dev = argv[optind], *mode = argv[optind + 1];
	int sum = argc - optind == 3;
	int flags = rdonly ? O_RDONLY : O_RDWR;
	/* "fd:N": the file the shell opened as N (a device since removed cannot be opened). */
	int fd = !strncmp(dev, "fd:", 3) ? atoi(dev + 3) : open(dev, flags);
	if (fd < 0) {
		perror(dev);
		return 1;
	}
	int cfd = ctrl ? open(ctrl, flags) : fd;
	if (cfd < 0) {
		perror(ctrl);
		return 1;
	}
	int nsid = ioctl(fd, NVME_IOCTL_ID);
	struct iovec iov[2] = { { buf, 2048 }, { buf + 2048, 2048 } };
	struct nvme_uring_cmd c;
	memset(&c, 0, sizeof(c));
	unsigned op = NVME_URING_CMD_IO;
	int admin = 0, vec = 0, target = fd;
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
		vec = 1;
	} else if (!strcmp(mode, "long")) {
		static char big_buf[64 << 20];
		c.addr = (uintptr_t)big_buf;
		c.data_len = sizeof(big_buf);
		c.cdw12 = 0xffff;
	} else if (!strcmp(mode, "badaddr")) {
		c.addr = 0x1000;
	} else if (!strcmp(mode, "badop")) {
		c.opcode = 0x7e;
	} else if (!strcmp(mode, "write")) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (char)(i * 7 + 3);
		c.opcode = 0x01;
		c.cdw10 = 64;
	} else if (!strcmp(mode, "flush")) {
		c.opcode = 0x00;
		c.addr = 0;
		c.data_len = 0;
		c.cdw12 = 0;
	} else if (!strcmp(mode, "wzeroes")) {
		c.opcode = 0x08;
		c.addr = 0;
		c.data_len = 0;
		c.cdw10 = 64;
		c.cdw12 = 0;
	} else if (!strcmp(mode, "vendor")) {
		c.opcode = 0x80;
		c.addr = 0;
		c.data_len = 0;
		c.cdw12 = 0;
	} else if (!strcmp(mode, "idctrl") || !strcmp(mode, "admvec") || !strcmp(mode, "idns") ||
		   !strcmp(mode, "idlist")) {
		admin = 1;
		vec = !strcmp(mode, "admvec");
		c.opcode = 0x06;
		c.nsid = !strcmp(mode, "idns") ? nsid : 0;
		c.cdw10 = !strcmp(mode, "idns") ? 0 : !strcmp(mode, "idlist") ? 2 : 1;
		c.cdw12 = 0;
	} else if (!strcmp(mode, "getlog")) {
		admin = 1;
		c.opcode = 0x02;
		c.nsid = 0xffffffff;
		c.data_len = 512;
		c.cdw10 = 0x02 | ((512 / 4 - 1) << 16);
		c.cdw12 = 0;
	} else if (!strcmp(mode, "getfeat") || !strcmp(mode, "setkato") || !strcmp(mode, "setnq")) {
		admin = 1;
		c.opcode = !strcmp(mode, "getfeat") ? 0x0a : 0x09;
		c.nsid = 0;
		c.addr = 0;
		c.data_len = 0;
		c.cdw10 = !strcmp(mode, "getfeat") ? 0x01 : !strcmp(mode, "setkato") ? 0x0f : 0x07;
		c.cdw11 = !strcmp(mode, "setkato") ? 120000 : 0;
		c.cdw12 = 0;
	} else if (strcmp(mode, "read") && strcmp(mode, "small")) {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	if (vec) {
		c.addr = (uintptr_t)iov;
		c.data_len = 2;
	}
	if (meta_len) {
		c.metadata = (uintptr_t)meta;
		c.metadata_len = meta_len;
		if (c.opcode & 1)
			for (unsigned i = 0; i < meta_len; i++)
				meta[i] = (unsigned char)(0xa5 ^ i);
	}
	if (admin) {
		op = vec ? NVME_URING_CMD_ADMIN_VEC : NVME_URING_CMD_ADMIN;
		target = cfd;
	} else if (vec) {
		op = NVME_URING_CMD_IO_VEC;
	}

	if (use_ioctl) {
		struct nvme_passthru_cmd64 p;
		memset(&p, 0, sizeof(p));
		memcpy(&p, &c, offsetof(struct nvme_passthru_cmd64, result));
		unsigned long req = admin ? NVME_IOCTL_ADMIN64_CMD :
			      vec ? NVME_IOCTL_IO64_CMD_VEC : NVME_IOCTL_IO64_CMD;
		if (admin && vec) {
			fprintf(stderr, "no vectored admin ioctl\n");
			return 2;
		}
		long r = ioctl(target, req, &p);
		print(r < 0 ? -errno : r, p.result, sum);
		return 0;
	}

	int big = strcmp(mode, "small") != 0;
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	if (big)
		p.flags = IORING_SETUP_SQE128_ | IORING_SETUP_CQE32_;
	if (polled)
		p.flags |= IORING_SETUP_IOPOLL;
	int ring = syscall(__NR_io_uring_setup, 4, &p);
	if (ring < 0) {
		perror("io_uring_setup");
		return 1;
	}
	if (fixed) {
		/* One registered buffer: the whole 4 KiB (vectors point inside it). */
		struct iovec reg = { buf, sizeof(buf) };
		if (syscall(__NR_io_uring_register, ring, IORING_REGISTER_BUFFERS, &reg, 1) < 0) {
			perror("io_uring_register");
			return 1;
		}
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
	unsigned *sq_tail = (unsigned *)(sq + p.sq_off.tail);
	unsigned *sq_array = (unsigned *)(sq + p.sq_off.array);
	unsigned *cq_head = (unsigned *)(cq + p.cq_off.head);
	long long res = 0;
	unsigned long long res2 = 0;
	for (long k = 0; k < count; k++) {
		unsigned tail = *sq_tail, idx = tail & (p.sq_entries - 1);
		struct io_uring_sqe *s = (struct io_uring_sqe *)(sqes + idx * sqe_size);
		memset(s, 0, sqe_size);
		s->opcode = IORING_OP_URING_CMD_;
		s->fd = target;
		s->cmd_op = op;
		if (fixed) {
			s->uring_cmd_flags = IORING_URING_CMD_FIXED_;
			s->buf_index = 0;
		}
		/* The command: 80 bytes from sqe->cmd with 128-byte SQEs, 16 without. */
		memcpy((char *)s + 48, &c, big ? sizeof(c) : 16);
		sq_array[idx] = idx;
		__atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
		if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, 0, 0) < 0) {
			perror("io_uring_enter");
			return 1;
		}
		unsigned head = *cq_head;
		/* A polled ring may return before the completion was reaped: poll on. */
		for (int tries = 0; polled && tries < 100000 &&
		     head == __atomic_load_n((unsigned *)(cq + p.cq_off.tail), __ATOMIC_ACQUIRE);
		     tries++)
			syscall(__NR_io_uring_enter, ring, 0, 1, IORING_ENTER_GETEVENTS, 0, 0);
		if (head == __atomic_load_n((unsigned *)(cq + p.cq_off.tail), __ATOMIC_ACQUIRE)) {
			fprintf(stderr, "no completion\n");
			return 1;
		}
		struct io_uring_cqe *e = (struct io_uring_cqe *)(cq + p.cq_off.cqes +
								 (head & (p.cq_entries - 1)) * cqe_size);
		res = e->res;
		res2 = big ? *(unsigned long long *)((char *)e + 16) : 0;
		__atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
	}
	print(res, res2, sum);
	return 0;
usage:
	fprintf(stderr, "usage: %s [-c CTRL] [-i] [-f] [-p] [-r] [-u] [-m LEN] [-n N] DEV MODE [sum]\n",
		argv[0]);
	return 2;
}
