// SPDX-License-Identifier: GPL-2.0
/*
 * discard-batch DEV N LEN STRIDE: discards N ranges of LEN bytes, STRIDE bytes apart, with
 * one io_uring submission of N BLOCK_URING_CMD_DISCARD commands. io_uring plugs the batch,
 * so the block layer can merge the non-contiguous discards into one multi-range request
 * (a Dataset Management command with several ranges). Raw syscalls: no liburing needed.
 */
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef BLOCK_URING_CMD_DISCARD
#define BLOCK_URING_CMD_DISCARD _IO(0x12, 0)
#endif
#define IORING_OP_URING_CMD_ 46

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s DEV N LEN STRIDE\n", argv[0]);
		return 2;
	}
	unsigned n = atoi(argv[2]);
	uint64_t len = strtoull(argv[3], 0, 0), stride = strtoull(argv[4], 0, 0);
	int fd = open(argv[1], O_RDWR);
	if (fd < 0 || n == 0 || n > 256) {
		perror("open");
		return 1;
	}
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	int ring = syscall(__NR_io_uring_setup, 256, &p);
	if (ring < 0) {
		perror("io_uring_setup");
		return 1;
	}
	size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	char *sq = mmap(0, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_SQ_RING);
	char *cq = mmap(0, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_CQ_RING);
	struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof(*sqes), PROT_READ | PROT_WRITE,
					 MAP_SHARED, ring, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	unsigned *sq_tail = (unsigned *)(sq + p.sq_off.tail);
	unsigned *sq_array = (unsigned *)(sq + p.sq_off.array);
	unsigned tail = *sq_tail;
	for (unsigned i = 0; i < n; i++) {
		unsigned idx = (tail + i) & (p.sq_entries - 1);
		struct io_uring_sqe *s = &sqes[idx];
		memset(s, 0, sizeof(*s));
		s->opcode = IORING_OP_URING_CMD_;
		s->fd = fd;
		s->cmd_op = BLOCK_URING_CMD_DISCARD;
		s->addr = i * stride;
		s->addr3 = len;
		s->user_data = i;
		sq_array[idx] = idx;
	}
	__atomic_store_n(sq_tail, tail + n, __ATOMIC_RELEASE);
	int ret = syscall(__NR_io_uring_enter, ring, n, n, IORING_ENTER_GETEVENTS, 0, 0);
	if (ret < 0) {
		perror("io_uring_enter");
		return 1;
	}
	unsigned *cq_head = (unsigned *)(cq + p.cq_off.head);
	unsigned *cq_tail = (unsigned *)(cq + p.cq_off.tail);
	struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	unsigned done = 0, failed = 0;
	while (done < n) {
		unsigned head = *cq_head;
		while (head != __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE) && done < n) {
			struct io_uring_cqe *c = &cqes[head & (p.cq_entries - 1)];
			if (c->res < 0) {
				fprintf(stderr, "discard %llu: %s\n", (unsigned long long)c->user_data,
					strerror(-c->res));
				failed++;
			}
			head++;
			done++;
		}
		__atomic_store_n(cq_head, head, __ATOMIC_RELEASE);
		if (done < n && syscall(__NR_io_uring_enter, ring, 0, 1, IORING_ENTER_GETEVENTS, 0, 0) < 0) {
			perror("io_uring_enter");
			return 1;
		}
	}
	printf("discarded %u ranges of %llu bytes, %u failed\n", n, (unsigned long long)len, failed);
	return failed ? 1 : 0;
}
