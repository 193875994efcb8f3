/* A QEMU TCG plugin (linux-user, plugin API version 1 as QEMU 7.2 speaks it) that counts the guest
 * instructions each guest thread executes, and writes every thread's count at each mark the guest
 * makes. A mark is lseek(-1, MARK_BASE + k, 0): a call on no file, which nobody else makes; it
 * fails with EBADF in the guest and costs nothing there.
 *
 *   qemu-aarch64 -plugin libcount.so,out=FILE ...
 *
 * FILE, one line per event (counts are per vCPU slot; in linux-user each guest thread is a vCPU,
 * and a slot is given to a new thread again once its thread has exited):
 *   I <slot>                       a thread started on the slot
 *   X <slot> <count>               a thread on the slot exited
 *   M <k> <slot> <c0> <c1> ...     slot marked k; every slot's count at that moment
 *   S <k> <s0> <s1> ...            after each M line: every slot's instructions in waiting
 *                                  loops (blocks holding a YIELD, WFE or ISB hint, the
 *                                  instructions spin-waits are built on), at that moment
 *   E <c0> <c1> ...                the guest exited; every slot's count
 *   F <s0> <s1> ...                the same for waiting loops
 *
 * No Debian package ships qemu-plugin.h, so the few declarations used are written out below,
 * from QEMU 7.2's documented plugin API (version 1). */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- QEMU plugin API, version 1 (declarations) --- */
typedef uint64_t qemu_plugin_id_t;
typedef struct {
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
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index,
                                              int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
                                              uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7,
                                              uint64_t a8);
void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_exit_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);

#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 1;

/* --- the counter --- */
#define MAX_SLOTS 1024
#define SYSCALL_LSEEK 62 /* aarch64's number */
#define MARK_BASE UINT64_C(0x594f4d0000000000) /* "YOM" in the top bytes */
#define MARK_SPAN UINT64_C(0x0000010000000000)

/* One counter per slot, each on its own cache line: the threads add to them concurrently. */
static struct {
    volatile uint64_t count;
    volatile uint64_t waiting; /* of count: in blocks that hold a waiting hint */
    char pad[48];
} counts[MAX_SLOTS];
/* A64 hint encodings: YIELD, WFE, ISB (SY). Spin-waits pause with one of them (onnxruntime's
 * and glibc's): what a thread does there depends on how long it waits, not on its work. */
#define A64_YIELD UINT32_C(0xd503203f)
#define A64_WFE UINT32_C(0xd503205f)
#define A64_ISB UINT32_C(0xd5033fdf)
static volatile unsigned int slots_seen;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static pid_t owner;

/* Written under the lock; a forked child (none is expected) writes nothing. */
static void write_counts(bool waiting) {
    unsigned int n = slots_seen;
    for (unsigned int i = 0; i < n; i++)
        fprintf(out, " %" PRIu64, waiting ? counts[i].waiting : counts[i].count);
    fputc('\n', out);
}

static void see_slot(unsigned int slot) {
    if (slot >= slots_seen) slots_seen = slot + 1;
}

/* A callback per executed block rather than an inline add: API version 1's inline add targets one
 * address for every thread, so it cannot count per thread (and its unlocked adds race). */
static void on_exec(unsigned int slot, void *insns) {
    if (slot < MAX_SLOTS) counts[slot].count += (uintptr_t)insns;
}

static void on_exec_waiting(unsigned int slot, void *insns) {
    if (slot < MAX_SLOTS) {
        counts[slot].count += (uintptr_t)insns;
        counts[slot].waiting += (uintptr_t)insns;
    }
}

static bool holds_waiting_hint(const struct qemu_plugin_tb *tb, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint32_t word;
        if (qemu_plugin_insn_size(insn) != sizeof word) continue;
        memcpy(&word, qemu_plugin_insn_data(insn), sizeof word);
        if (word == A64_YIELD || word == A64_WFE || word == A64_ISB) return true;
    }
    return false;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_cb(tb, holds_waiting_hint(tb, n) ? on_exec_waiting : on_exec,
                                         QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)n);
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int slot) {
    (void)id;
    if (slot >= MAX_SLOTS || getpid() != owner) return;
    pthread_mutex_lock(&lock);
    see_slot(slot);
    fprintf(out, "I %u\n", slot);
    pthread_mutex_unlock(&lock);
}

static void on_vcpu_exit(qemu_plugin_id_t id, unsigned int slot) {
    (void)id;
    if (slot >= MAX_SLOTS || getpid() != owner) return;
    pthread_mutex_lock(&lock);
    fprintf(out, "X %u %" PRIu64 "\n", slot, counts[slot].count);
    pthread_mutex_unlock(&lock);
}

static void on_syscall(qemu_plugin_id_t id, unsigned int slot, int64_t num, uint64_t fd,
                       uint64_t offset, uint64_t whence, uint64_t a4, uint64_t a5, uint64_t a6,
                       uint64_t a7, uint64_t a8) {
    (void)id, (void)whence, (void)a4, (void)a5, (void)a6, (void)a7, (void)a8;
    if (num != SYSCALL_LSEEK || fd != UINT64_MAX || offset < MARK_BASE ||
        offset >= MARK_BASE + MARK_SPAN || getpid() != owner)
        return;
    pthread_mutex_lock(&lock);
    see_slot(slot);
    fprintf(out, "M %" PRIu64 " %u", offset - MARK_BASE, slot);
    write_counts(false);
    fprintf(out, "S %" PRIu64, offset - MARK_BASE);
    write_counts(true);
    fflush(out);
    pthread_mutex_unlock(&lock);
}

static void on_exit_guest(qemu_plugin_id_t id, void *unused) {
    (void)id, (void)unused;
    if (getpid() != owner) return;
    pthread_mutex_lock(&lock);
    fputs("E", out);
    write_counts(false);
    fputs("F", out);
    write_counts(true);
    fclose(out);
    out = NULL;
    pthread_mutex_unlock(&lock);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                               char **argv) {
    const char *path = NULL;
    if (info->system_emulation) {
        fprintf(stderr, "count plugin: linux-user only\n");
        return -1;
    }
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], "out=", 4) == 0) path = argv[i] + 4;
    if (path == NULL) {
        fprintf(stderr, "count plugin: needs out=FILE\n");
        return -1;
    }
    out = fopen(path, "w");
    if (out == NULL) {
        perror(path);
        return -1;
    }
    owner = getpid();
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_exit_cb(id, on_vcpu_exit);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_atexit_cb(id, on_exit_guest, NULL);
    return 0;
}
