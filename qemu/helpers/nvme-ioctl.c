// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of rnvme's ioctl interface that nvme-cli cannot do: bad input, and a bounded fuzz.
 * Reports RNVME-TEST PASS|FAIL lines as qemu/guest/lib.sh does (on stdout, the results
 * channel $RNVME_RESULTS and the local copy $RNVME_LOCAL_RESULTS); exits 1 if a test
 * failed, 2 if it could not run to the end (a FAIL line says why).
 *
 *   nvme-ioctl check CHARDEV BLKDEV   bad pointers, lengths, flags; no kernel memory in user
 *                                     buffers; unaligned buffers; capabilities
 *   nvme-ioctl fuzz CHARDEV BLKDEV N SEED
 *                                     N random ioctls (numbers, structures, pointers,
 *                                     lengths); every one must return a documented result
 *   nvme-ioctl unbind PCI CHARDEV BLKDEV
 *                                     open both, unbind the controller: later ioctls fail
 *                                     with ENODEV, closing is clean
 *   nvme-ioctl timeout BLKDEV MS MAX  a read with a per-command timeout of MS on a slow
 *                                     namespace must come back failed within MAX seconds
 *
 * BLKDEV must be a scratch namespace: the fuzz writes to it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/nvme_ioctl.h>

static int failed;

/* One result line, written whole to each place results go. */
static void report(const char *line)
{
	const char *paths[] = { getenv("RNVME_RESULTS"), getenv("RNVME_LOCAL_RESULTS") };
	size_t i, len = strlen(line);

	fputs(line, stdout);
	for (i = 0; i < 2; i++) {
		int fd;

		if (!paths[i])
			continue;
		fd = open(paths[i], O_WRONLY | O_APPEND | O_NOCTTY);
		if (fd < 0 || write(fd, line, len) != (ssize_t)len)
			fprintf(stderr, "nvme-ioctl: cannot write results to %s\n", paths[i]);
		if (fd >= 0)
			close(fd);
	}
}

static void pass(const char *name)
{
	char line[256];

	snprintf(line, sizeof(line), "RNVME-TEST PASS %s\n", name);
	report(line);
}

static void fail(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fail(const char *name, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "RNVME-TEST FAIL %s: ", name);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	report(line);
	failed++;
}

/* ioctl returning -errno on failure, the (non-negative) result otherwise. */
static long xioctl(int fd, unsigned long cmd, void *arg)
{
	long r = ioctl(fd, cmd, arg);

	return r < 0 ? -errno : r;
}

static void expect(const char *name, long got, long want)
{
	if (got == want)
		pass(name);
	else
		fail(name, "returned %ld, want %ld", got, want);
}

/* Opens a device the tests need; without it they cannot run: say so and stop. */
static int xopen(const char *path)
{
	int fd = open(path, O_RDWR);

	if (fd < 0) {
		fail("nvme_ioctl_open", "open %s: %s (the tests after it cannot run)", path,
		     strerror(errno));
		exit(2);
	}
	return fd;
}

/* An address with nothing mapped. */
static void *unmapped(void)
{
	void *p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	munmap(p, 65536);
	return p;
}

static struct nvme_passthru_cmd identify(void *buf, uint32_t cns, uint32_t nsid)
{
	struct nvme_passthru_cmd c = {
		.opcode = 0x06, .nsid = nsid, .addr = (uintptr_t)buf,
		.data_len = 4096, .cdw10 = cns,
	};
	return c;
}

static void check(const char *chr, const char *blk)
{
	int cfd = xopen(chr), bfd = xopen(blk);
	uint8_t *buf = aligned_alloc(4096, 1 << 20);
	struct nvme_passthru_cmd c;
	struct nvme_passthru_cmd64 c64;
	struct nvme_user_io io;
	long r;
	int i, leaked;

	expect("ioctl_unknown_number_chardev", xioctl(cfd, _IO('N', 0x7f), NULL), -ENOTTY);
	expect("ioctl_unknown_number_blkdev", xioctl(bfd, _IO('N', 0x7f), NULL), -ENOTTY);
	expect("ioctl_id_on_chardev_is_enotty", xioctl(cfd, NVME_IOCTL_ID, NULL), -ENOTTY);
	r = xioctl(bfd, NVME_IOCTL_ID, NULL);
	if (r > 0)
		pass("ioctl_id_on_blkdev");
	else
		fail("ioctl_id_on_blkdev", "returned %ld", r);

	expect("admin_null_struct_efault", xioctl(cfd, NVME_IOCTL_ADMIN_CMD, NULL), -EFAULT);
	expect("admin_unmapped_struct_efault",
	       xioctl(cfd, NVME_IOCTL_ADMIN_CMD, unmapped()), -EFAULT);
	expect("admin_kernel_struct_efault",
	       xioctl(cfd, NVME_IOCTL_ADMIN_CMD, (void *)0xffff888000000000ULL), -EFAULT);
	c = identify(unmapped(), 1, 0);
	expect("admin_unmapped_data_efault", xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), -EFAULT);
	c = identify((void *)0xffff888000001000ULL, 1, 0);
	expect("admin_kernel_data_efault", xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), -EFAULT);
	c = identify(buf, 1, 0);
	c.flags = 1;
	expect("admin_flags_einval", xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), -EINVAL);
	c = identify(buf, 1, 0);
	c.metadata_len = 8;
	c.metadata = (uintptr_t)buf;
	expect("admin_metadata_einval", xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), -EINVAL);
	c = identify(NULL, 1, 0);
	expect("admin_length_without_buffer_einval",
	       xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), -EINVAL);
	c = identify(buf, 1, 0);
	c.data_len = 64 << 20;
	expect("admin_too_long_einval", xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), -EINVAL);
	c = identify(buf, 1, 0);
	c.opcode = 0xc3; /* vendor specific, bidirectional */
	expect("admin_bidirectional_einval", xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), -EINVAL);

	/* An opcode the controller does not know: its status, positive, result written. */
	c = identify(buf, 1, 0);
	c.opcode = 0xc2;
	c.result = 0xdeadbeef;
	memset(buf, 0xa5, 4096);
	r = xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c);
	if (r > 0 && (r & 0xff) == 0x01)
		pass("admin_invalid_opcode_status");
	else
		fail("admin_invalid_opcode_status", "returned %#lx, want Invalid Opcode", r);
	for (i = 0, leaked = 0; i < 4096; i++)
		leaked |= buf[i] != 0xa5;
	if (!leaked)
		pass("failed_command_leaves_buffer_alone");
	else
		fail("failed_command_leaves_buffer_alone", "buffer changed");

	/* A 512-byte log read into a 64 KiB buffer: the rest must be zeroes, not kernel memory. */
	memset(buf, 0xa5, 65536);
	c = (struct nvme_passthru_cmd){
		.opcode = 0x02, .nsid = 0xffffffff, .addr = (uintptr_t)buf, .data_len = 65536,
		.cdw10 = 0x02 | ((512 / 4 - 1) << 16),
	};
	r = xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c);
	for (i = 512, leaked = 0; i < 65536; i++)
		leaked |= buf[i] != 0;
	if (r == 0 && !leaked)
		pass("no_kernel_memory_in_user_buffer");
	else
		fail("no_kernel_memory_in_user_buffer", "status %ld, stale bytes %d", r, leaked);

	/* A 512-byte log read with data_len 512: nothing past data_len may change (the
	 * driver's bounce buffer is a whole page; only data_len bytes are the user's). */
	memset(buf, 0xa5, 8192);
	c = (struct nvme_passthru_cmd){
		.opcode = 0x02, .nsid = 0xffffffff, .addr = (uintptr_t)buf, .data_len = 512,
		.cdw10 = 0x02 | ((512 / 4 - 1) << 16),
	};
	r = xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c);
	for (i = 512, leaked = 0; i < 8192; i++)
		leaked += buf[i] != 0xa5;
	if (r == 0 && !leaked)
		pass("admin_copy_stays_within_data_len");
	else
		fail("admin_copy_stays_within_data_len", "status %ld, %d bytes past data_len changed",
		     r, leaked);

	/* Every transfer size up to the limit (MDTS: 512 KiB here) works, across the one-page,
	 * two-page (PRP2 is the second page, no list) and list boundaries: Get Log Page
	 * (Error Information) of each size, as nvme-cli's get-log sends it. */
	{
		static const uint32_t sizes[] = { 4, 4096, 4100, 8188, 8192, 8196, 12288, 65536,
						  1 << 19 };
		char name[64];
		size_t k;

		for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			c = (struct nvme_passthru_cmd){
				.opcode = 0x02, .nsid = 0xffffffff, .addr = (uintptr_t)buf,
				.data_len = sizes[k], .cdw10 = 0x01 | ((sizes[k] / 4 - 1) << 16),
				.cdw11 = (sizes[k] / 4 - 1) >> 16,
			};
			snprintf(name, sizeof(name), "admin_get_log_%u_bytes", sizes[k]);
			expect(name, xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), 0);
		}
	}

	/* Identify through ADMIN64, on the block device, into an unaligned buffer. */
	memset(&c64, 0, sizeof(c64));
	c64.opcode = 0x06;
	c64.addr = (uintptr_t)(buf + 4096 + 3);
	c64.data_len = 4096;
	c64.cdw10 = 1;
	c64.result = ~0ULL;
	r = xioctl(bfd, NVME_IOCTL_ADMIN64_CMD, &c64);
	if (r == 0 && c64.result == 0 && memcmp(buf + 4096 + 3 + 24, "QEMU NVMe Ctrl", 14) == 0)
		pass("admin64_identify_unaligned_buffer");
	else
		fail("admin64_identify_unaligned_buffer", "status %ld result %#llx", r,
		     (unsigned long long)c64.result);

	/* I/O: write a pattern with IO_CMD from an unaligned buffer, read it back with
	 * SUBMIT_IO and with IO64_CMD, and through the block device. */
	for (i = 0; i < 65536; i++)
		buf[8192 + 1 + i] = (uint8_t)(i * 7 + 3);
	c = (struct nvme_passthru_cmd){
		.opcode = 0x01, .nsid = (uint32_t)xioctl(bfd, NVME_IOCTL_ID, NULL),
		.addr = (uintptr_t)(buf + 8192 + 1), .data_len = 65536,
		.cdw10 = 2048, .cdw12 = 65536 / 512 - 1,
	};
	r = xioctl(bfd, NVME_IOCTL_IO_CMD, &c);
	expect("io_cmd_write_unaligned", r, 0);
	memset(&io, 0, sizeof(io));
	io.opcode = 0x02;
	io.nblocks = 65536 / 512 - 1;
	io.slba = 2048;
	io.addr = (uintptr_t)(buf + 131072);
	memset(buf + 131072, 0, 65536);
	r = xioctl(bfd, NVME_IOCTL_SUBMIT_IO, &io);
	if (r == 0 && memcmp(buf + 131072, buf + 8192 + 1, 65536) == 0)
		pass("submit_io_reads_back");
	else
		fail("submit_io_reads_back", "returned %ld or data differs", r);
	if (pread(bfd, buf + 262144, 65536, 2048 * 512) == 65536 &&
	    memcmp(buf + 262144, buf + 8192 + 1, 65536) == 0)
		pass("passthrough_write_visible_to_block_reads");
	else
		fail("passthrough_write_visible_to_block_reads", "data differs");
	io.opcode = 0x00;
	expect("submit_io_flush_opcode_einval", xioctl(bfd, NVME_IOCTL_SUBMIT_IO, &io), -EINVAL);
	io.opcode = 0x02;
	io.addr = (uintptr_t)unmapped();
	expect("submit_io_unmapped_efault", xioctl(bfd, NVME_IOCTL_SUBMIT_IO, &io), -EFAULT);
	memset(&c64, 0, sizeof(c64));
	c64.opcode = 0x02;
	c64.nsid = c.nsid;
	c64.addr = (uintptr_t)(buf + 393216);
	c64.data_len = 4096;
	c64.cdw10 = 2048;
	c64.cdw12 = 7;
	r = xioctl(cfd, NVME_IOCTL_IO64_CMD, &c64);
	if (r == 0 && memcmp(buf + 393216, buf + 8192 + 1, 4096) == 0)
		pass("io64_cmd_on_chardev_by_nsid");
	else
		fail("io64_cmd_on_chardev_by_nsid", "returned %ld or data differs", r);
	c64.nsid = 0x7777;
	expect("io_cmd_unknown_nsid_einval", xioctl(cfd, NVME_IOCTL_IO64_CMD, &c64), -EINVAL);
	c64.nsid = c.nsid;
	c64.opcode = 0x7e; /* unknown I/O opcode, from the device: its status comes back */
	r = xioctl(cfd, NVME_IOCTL_IO64_CMD, &c64);
	if (r > 0 && (r & 0xff) == 0x01)
		pass("io_invalid_opcode_status");
	else
		fail("io_invalid_opcode_status", "returned %#lx", r);
	/* An LBA beyond the namespace: LBA Out of Range (0x80). */
	c64.opcode = 0x02;
	c64.cdw10 = 0xfffffff0;
	c64.cdw11 = 0xffff;
	r = xioctl(cfd, NVME_IOCTL_IO64_CMD, &c64);
	if (r > 0 && (r & 0xff) == 0x80)
		pass("io_lba_out_of_range_status");
	else
		fail("io_lba_out_of_range_status", "returned %#lx", r);

	/* Without CAP_SYS_ADMIN: privileged passthrough (an admin command other than the
	 * Identify data needed to build I/O commands, an I/O command the effects log does not
	 * list), reset and rescan are refused; Identify Controller and ID still work (C's
	 * nvme_cmd_allowed). */
	{
		struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct d[2];

		syscall(SYS_capget, &h, d);
		d[0].effective &= ~(1u << CAP_SYS_ADMIN);
		if (syscall(SYS_capset, &h, d) != 0) {
			fail("drop_cap_sys_admin", "capset: %s", strerror(errno));
		} else {
			c = identify(buf, 1, 0);
			expect("identify_needs_no_capability",
			       xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), 0);
			/* As an I/O command (06h: none the effects log lists), for the disk's
			 * namespace (another one is EINVAL first, as in C). */
			c.nsid = (uint32_t)xioctl(bfd, NVME_IOCTL_ID, NULL);
			expect("io_cmd_needs_cap_sys_admin",
			       xioctl(bfd, NVME_IOCTL_IO_CMD, &c), -EACCES);
			c = identify(buf, 2, 0); /* the active namespace list */
			expect("admin_needs_cap_sys_admin",
			       xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), -EACCES);
			expect("reset_needs_cap_sys_admin",
			       xioctl(cfd, NVME_IOCTL_RESET, NULL), -EACCES);
			expect("rescan_needs_cap_sys_admin",
			       xioctl(cfd, NVME_IOCTL_RESCAN, NULL), -EACCES);
			r = xioctl(bfd, NVME_IOCTL_ID, NULL);
			if (r > 0)
				pass("id_needs_no_capability");
			else
				fail("id_needs_no_capability", "returned %ld", r);
		}
	}
	close(cfd);
	close(bfd);
}

static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Admin opcodes the fuzz may send: they read, or are unknown to the controller. Commands
 * that destroy state by design (queue deletion, format, sanitize, firmware, namespace
 * management, features) are valid requests, not bad input, and are left out. */
static const uint8_t admin_ops[] = { 0x02, 0x06, 0x0a, 0x03, 0x07, 0x0b, 0x0e, 0x13,
				     0x7e, 0xc0, 0xc2, 0xd6, 0xff };
/* I/O opcodes: flush, write, read, compare, write zeroes, and unknown ones. */
static const uint8_t io_ops[] = { 0x00, 0x01, 0x02, 0x05, 0x08, 0x03, 0x06, 0x7f, 0x80, 0xfe };

static void *pick_ptr(uint8_t *buf, size_t size)
{
	switch (rnd() % 8) {
	case 0:
		return NULL;
	case 1:
		return unmapped();
	case 2:
		return (void *)0xffff888000000000ULL;
	case 3:
		return buf + size - 16; /* runs off the end of the mapping */
	case 4:
		return buf + (rnd() % 4096);
	default:
		return buf;
	}
}

static uint32_t pick_len(void)
{
	switch (rnd() % 8) {
	case 0:
		return 0;
	case 1:
		return (uint32_t)rnd();
	case 2:
		return 512;
	case 3:
		return (rnd() % 65536) + 1;
	case 4:
		return 4 << 20;
	default:
		return 4096 * (1 + rnd() % 16);
	}
}

static void fuzz(const char *chr, const char *blk, long n, uint64_t seed)
{
	int cfd = xopen(chr), bfd = xopen(blk);
	size_t size = 8 << 20;
	uint8_t *buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	uint32_t scratch = (uint32_t)xioctl(bfd, NVME_IOCTL_ID, NULL);
	long counts[8] = { 0 }, i, bad = 0;
	static const unsigned long cmds[] = {
		NVME_IOCTL_ADMIN_CMD, NVME_IOCTL_ADMIN64_CMD, NVME_IOCTL_IO_CMD,
		NVME_IOCTL_IO64_CMD, NVME_IOCTL_SUBMIT_IO, NVME_IOCTL_ID, NVME_IOCTL_RESCAN,
	};
	char name[64];

	rng ^= seed * 0x9e3779b97f4a7c15ULL;
	for (i = 0; i < n; i++) {
		struct nvme_passthru_cmd64 c;
		struct nvme_user_io *io = (void *)&c;
		unsigned long cmd;
		int fd = rnd() % 2 ? cfd : bfd;
		void *arg = &c;
		long r;
		int k;

		for (k = 0; k < (int)sizeof(c); k++)
			((uint8_t *)&c)[k] = (uint8_t)rnd();
		switch (rnd() % 10) {
		case 0:
			cmd = _IOC(rnd() % 4, 'N', rnd() % 256, rnd() % 128);
			break;
		case 1:
			cmd = (unsigned long)(uint32_t)rnd();
			break;
		default:
			cmd = cmds[rnd() % (sizeof(cmds) / sizeof(cmds[0]))];
		}
		/* Mostly plausible structures, so the checks deep inside are reached. */
		if (rnd() % 4) {
			c.flags = rnd() % 8 ? 0 : c.flags;
			c.metadata = 0;
			c.metadata_len = rnd() % 8 ? 0 : c.metadata_len;
			c.timeout_ms = rnd() % 2 ? 0 : 1000 + rnd() % 4000;
			c.data_len = pick_len();
			c.addr = (uintptr_t)pick_ptr(buf, size);
		}
		if (cmd == NVME_IOCTL_ADMIN_CMD || cmd == NVME_IOCTL_ADMIN64_CMD) {
			c.opcode = admin_ops[rnd() % sizeof(admin_ops)];
		} else if (cmd == NVME_IOCTL_IO_CMD || cmd == NVME_IOCTL_IO64_CMD) {
			c.opcode = io_ops[rnd() % sizeof(io_ops)];
			/* Only the scratch namespace is written. */
			c.nsid = rnd() % 4 ? scratch : (uint32_t)rnd() | 0x1000;
		} else if (cmd == NVME_IOCTL_SUBMIT_IO) {
			fd = bfd;
			io->opcode = rnd() % 4 ? 0x01 + rnd() % 2 : (uint8_t)rnd();
			io->nblocks = rnd() % 4 ? rnd() % 64 : (uint16_t)rnd();
			io->slba = rnd() % 4 ? rnd() % 65536 : rnd();
			io->metadata = 0;
			io->addr = (uintptr_t)pick_ptr(buf, size);
		} else if ((cmd & 0xff00) == ('N' << 8) && (cmd & 0xff) >= 0x44 && (cmd & 0xff) <= 0x45) {
			/* RESET and SUBSYS_RESET are valid requests: tested on their own. */
			continue;
		}
		if (rnd() % 16 == 0)
			arg = pick_ptr(buf, size);
		r = xioctl(fd, cmd, arg);
		if (r >= 0)
			counts[r == 0 ? 0 : 1]++;
		else if (r == -EINVAL)
			counts[2]++;
		else if (r == -EFAULT)
			counts[3]++;
		else if (r == -ENOTTY)
			counts[4]++;
		else if (r == -EIO || r == -ETIMEDOUT || r == -EINTR || r == -ENOMEM ||
			 r == -EBADF || r == -EPERM || r == -ENOSPC || r == -EOPNOTSUPP)
			counts[5]++;
		else {
			if (bad++ < 5)
				fprintf(stderr, "ioctl %#lx: unexpected %ld (%s)\n", cmd, r,
					strerror((int)-r));
		}
	}
	printf("fuzz: %ld ioctls: %ld ok, %ld NVMe status, %ld EINVAL, %ld EFAULT, %ld ENOTTY, "
	       "%ld other documented errors, %ld unexpected\n", n, counts[0], counts[1],
	       counts[2], counts[3], counts[4], counts[5], bad);
	snprintf(name, sizeof(name), "fuzz_%ld_ioctls_documented_results", n);
	if (bad == 0)
		pass(name);
	else
		fail(name, "%ld unexpected results", bad);
	/* The controller still serves admin commands and I/O afterwards. */
	{
		struct nvme_passthru_cmd id = identify(buf, 1, 0);

		expect("fuzz_then_identify_works", xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &id), 0);
		if (pread(bfd, buf, 4096, 0) == 4096)
			pass("fuzz_then_block_read_works");
		else
			fail("fuzz_then_block_read_works", "%s", strerror(errno));
	}
	close(cfd);
	close(bfd);
}

static void unbind(const char *pci, const char *chr, const char *blk)
{
	int cfd = xopen(chr), bfd = xopen(blk);
	/* Direct reads: a buffered one could be served from the page cache. */
	int dfd = open(blk, O_RDONLY | O_DIRECT);
	uint8_t *buf = aligned_alloc(4096, 8192);
	struct nvme_passthru_cmd c = identify(buf, 1, 0);
	int fd = open("/sys/bus/pci/drivers/rnvme/unbind", O_WRONLY);

	expect("before_unbind_identify", xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), 0);
	if (fd < 0 || write(fd, pci, strlen(pci)) != (ssize_t)strlen(pci))
		fail("unbind_with_open_files", "unbind: %s", strerror(errno));
	else
		pass("unbind_with_open_files");
	close(fd);
	expect("after_unbind_chardev_enodev", xioctl(cfd, NVME_IOCTL_ADMIN_CMD, &c), -ENODEV);
	expect("after_unbind_blkdev_enodev", xioctl(bfd, NVME_IOCTL_ID, NULL), -ENODEV);
	expect("after_unbind_reset_enodev", xioctl(cfd, NVME_IOCTL_RESET, NULL), -ENODEV);
	/* The removed disk has no capacity left, or fails the read (on a file opened before
	 * the unbind: an open that failed proves nothing). */
	if (dfd < 0)
		fail("after_unbind_block_read_fails", "open O_DIRECT before unbind: %s",
		     strerror(errno));
	else if (pread(dfd, buf + 4096, 4096, 0) != 4096)
		pass("after_unbind_block_read_fails");
	else
		fail("after_unbind_block_read_fails", "read succeeded");
	close(dfd);
	close(cfd);
	close(bfd);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void timeout(const char *blk, long ms, double max)
{
	int bfd = xopen(blk);
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct nvme_passthru_cmd c = {
		.opcode = 0x02, .nsid = (uint32_t)xioctl(bfd, NVME_IOCTL_ID, NULL),
		.addr = (uintptr_t)buf, .data_len = 4096, .cdw12 = 7, .timeout_ms = (uint32_t)ms,
	};
	double t0 = now(), dt;
	long r = xioctl(bfd, NVME_IOCTL_IO_CMD, &c);

	dt = now() - t0;
	printf("passthrough read with timeout %ld ms: returned %#lx after %.1f s\n", ms, r, dt);
	/* First timeout: abort; second: controller reset, which takes the command back: it
	 * fails with EINTR (as the C driver's cancelled commands), not before its own timeout,
	 * and before MAX (the queue's timeout). */
	if (r == -EINTR && dt >= ms / 1000.0 && dt < max)
		pass("passthrough_timeout_honoured");
	else
		fail("passthrough_timeout_honoured",
		     "returned %#lx after %.1f s, want -EINTR between %.1f and %.1f s", r, dt,
		     ms / 1000.0, max);
	close(bfd);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "check"))
		check(argv[2], argv[3]);
	else if (argc == 6 && !strcmp(argv[1], "fuzz"))
		fuzz(argv[2], argv[3], atol(argv[4]), strtoull(argv[5], NULL, 0));
	else if (argc == 5 && !strcmp(argv[1], "unbind"))
		unbind(argv[2], argv[3], argv[4]);
	else if (argc == 5 && !strcmp(argv[1], "timeout"))
		timeout(argv[2], atol(argv[3]), atof(argv[4]));
	else {
		fprintf(stderr, "usage: see the comment at the top of nvme-ioctl.c\n");
		return 2;
	}
	return failed ? 1 : 0;
}
