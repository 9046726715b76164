// SPDX-License-Identifier: GPL-2.0
/*
 * icount: a QEMU TCG plugin that counts guest instructions, for a cost-per-I/O figure
 * that wall-clock noise does not blur.
 *
 * Every translated block adds its instruction count to a kernel or a user counter (by
 * its address) each time it runs. A guest program marks the start and end of what it
 * measures by calling code at MARK_VA (qemu/helpers/iocost.c); each time the block there
 * runs, the plugin appends the counters to the file given as out=PATH. Counters are
 * plain, not atomic: run the guest with one vCPU.
 *
 * With profile=on, each mark also lists the instructions executed per kernel translation
 * block since the previous mark ("prof <vaddr> <instructions>"), which
 * scripts/icount_profile.py turns into instructions per kernel function.
 *
 * The few declarations of QEMU's plugin API (version 1, QEMU 7.2's include/qemu/qemu-plugin.h)
 * are restated here because Debian ships no header for it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;

typedef struct qemu_info_t {
	const char *target_name;
	struct {
		int min;
		int cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus;
			int max_vcpus;
		} system;
	};
} qemu_info_t;

struct qemu_plugin_tb;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
					      void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

/* Where the guest's marker function lives (qemu/helpers/iocost.c maps it there). */
#define MARK_VA 0x5ee000000000ULL
/* x86-64 kernel addresses are in the upper half. */
#define KERNEL_VA 0xffff800000000000ULL

static uint64_t kernel_insns, user_insns, marks;
static FILE *out;

/* Per translated kernel block, with profile=on: how often it ran. */
struct block {
	uint64_t vaddr;
	uint64_t insns;
	uint64_t runs;
	uint64_t runs_at_mark;
	struct block *next;
};
static struct block *blocks;
static bool profile;

static void on_mark(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	(void)udata;
	marks++;
	if (!out)
		return;
	fprintf(out, "mark %llu kernel %llu user %llu\n", (unsigned long long)marks,
		(unsigned long long)kernel_insns, (unsigned long long)user_insns);
	for (struct block *b = blocks; b; b = b->next) {
		uint64_t runs = b->runs - b->runs_at_mark;

		if (runs)
			fprintf(out, "prof %llx %llu\n", (unsigned long long)b->vaddr,
				(unsigned long long)(runs * b->insns));
		b->runs_at_mark = b->runs;
	}
	fflush(out);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb);

	(void)id;
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
						 va >= KERNEL_VA ? &kernel_insns : &user_insns,
						 qemu_plugin_tb_n_insns(tb));
	if (va == MARK_VA)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
	if (profile && va >= KERNEL_VA) {
		struct block *b = calloc(1, sizeof(*b));

		if (!b)
			return;
		b->vaddr = va;
		b->insns = qemu_plugin_tb_n_insns(tb);
		b->next = blocks;
		blocks = b;
		qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->runs, 1);
	}
}

static void on_exit_cb(qemu_plugin_id_t id, void *udata)
{
	(void)id;
	(void)udata;
	if (out) {
		fprintf(out, "exit kernel %llu user %llu\n", (unsigned long long)kernel_insns,
			(unsigned long long)user_insns);
		fclose(out);
		out = NULL;
	}
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
					   char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (strncmp(argv[i], "out=", 4) == 0)
			out = fopen(argv[i] + 4, "w");
		else if (strcmp(argv[i], "profile=on") == 0)
			profile = true;
	}
	if (!out) {
		fprintf(stderr, "icount: give out=PATH\n");
		return -1;
	}
	if (info->system_emulation && info->system.smp_vcpus > 1)
		fprintf(stderr, "icount: %d vCPUs: counts may be slightly low (not atomic)\n",
			info->system.smp_vcpus);
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
	return 0;
}
