/* Small, real workloads for the scenario suite (tests/scenarios.rs). Each mode
 * produces one bottleneck the verdict must name. Built static by the test.
 *
 *   workload odirect-read FILE SECONDS     O_DIRECT 1 MiB sequential reads (storage-bound when throttled)
 *   workload cached-read FILE SECONDS      1 MiB preads of a page-cached file (page-cache-served)
 *   workload spin THREADS SECONDS          busy threads (cpu-starved when THREADS > cores)
 *   workload lock THREADS SECONDS          threads fighting over one mutex (lock-contention)
 *   workload make-file FILE MIB            write a file of MIB MiB and fsync it
 *   workload fork-deadlock FILE SECONDS    read FILE for SECONDS, then fork while a thread holds
 *                                          a lock: the child waits for it forever (its owner did
 *                                          not survive the fork), the parent waits for the child
 *   workload read-then-spin FILE SECONDS   read FILE for SECONDS, then loop on a CPU forever
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (1 << 20)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "workload: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int read_loop(const char *path, double seconds, int direct) {
    int fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
    if (fd < 0) die(path);
    void *buf;
    if (posix_memalign(&buf, 4096, CHUNK)) die("posix_memalign");
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < CHUNK) { fprintf(stderr, "workload: %s smaller than 1 MiB\n", path); return 1; }
    double end = now_s() + seconds;
    uint64_t total = 0;
    off_t off = 0;
    while (now_s() < end) {
        if (off + CHUNK > size) off = 0;
        ssize_t n = pread(fd, buf, CHUNK, off);
        if (n < 0) die("pread");
        total += (uint64_t)n;
        off += CHUNK;
    }
    printf("read %llu MiB in %.1f s\n", (unsigned long long)(total >> 20), seconds);
    return 0;
}

static double g_end;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t g_sink;

__attribute__((noinline)) static uint64_t burn_cpu(uint64_t iters) {
    uint64_t x = 88172645463325252ull;
    for (uint64_t i = 0; i < iters; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; }
    return x;
}

static void *spin_thread(void *arg) {
    (void)arg;
    while (now_s() < g_end) g_sink += burn_cpu(200000);
    return NULL;
}

__attribute__((noinline)) static void critical_section(void) {
    /* ~1 ms of work while holding the lock: waiters sleep in futex_wait. */
    double until = now_s() + 0.001;
    while (now_s() < until) g_sink += burn_cpu(1000);
}

static void *lock_thread(void *arg) {
    (void)arg;
    while (now_s() < g_end) {
        pthread_mutex_lock(&g_lock);
        critical_section();
        pthread_mutex_unlock(&g_lock);
    }
    return NULL;
}

static int run_threads(void *(*fn)(void *), int n, double seconds) {
    pthread_t t[256];
    if (n < 1 || n > 256) { fprintf(stderr, "workload: 1..256 threads\n"); return 2; }
    g_end = now_s() + seconds;
    for (int i = 0; i < n; i++) if (pthread_create(&t[i], NULL, fn, NULL)) die("pthread_create");
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    return 0;
}

static int make_file(const char *path, long mib) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die(path);
    char *buf = malloc(CHUNK);
    if (!buf) die("malloc");
    for (int i = 0; i < CHUNK; i++) buf[i] = (char)(i * 31 + 7);
    for (long i = 0; i < mib; i++) if (write(fd, buf, CHUNK) != CHUNK) die("write");
    if (fsync(fd)) die("fsync");
    close(fd);
    return 0;
}

static pthread_mutex_t g_forked_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int g_lock_taken;

static void *hold_lock_thread(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g_forked_lock);
    g_lock_taken = 1;
    for (;;) sleep(3600);
    return NULL;
}

static int fork_deadlock(const char *path, double seconds) {
    if (read_loop(path, seconds, 0)) return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, hold_lock_thread, NULL)) die("pthread_create");
    while (!g_lock_taken) usleep(1000);
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        /* The lock's owner exists only in the parent: this never returns. */
        pthread_mutex_lock(&g_forked_lock);
        _exit(0);
    }
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    return 0;
}

static int read_then_spin(const char *path, double seconds) {
    if (read_loop(path, seconds, 0)) return 1;
    g_end = now_s() + 1e9;
    spin_thread(NULL);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: workload odirect-read|cached-read FILE SECONDS | spin|lock THREADS SECONDS | make-file FILE MIB | fork-deadlock|read-then-spin FILE SECONDS\n");
        return 2;
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "odirect-read")) return read_loop(argv[2], atof(argv[3]), 1);
    if (!strcmp(mode, "cached-read")) return read_loop(argv[2], atof(argv[3]), 0);
    if (!strcmp(mode, "spin")) return run_threads(spin_thread, atoi(argv[2]), atof(argv[3]));
    if (!strcmp(mode, "lock")) return run_threads(lock_thread, atoi(argv[2]), atof(argv[3]));
    if (!strcmp(mode, "make-file")) return make_file(argv[2], atol(argv[3]));
    if (!strcmp(mode, "fork-deadlock")) return fork_deadlock(argv[2], atof(argv[3]));
    if (!strcmp(mode, "read-then-spin")) return read_then_spin(argv[2], atof(argv[3]));
    fprintf(stderr, "workload: unknown mode %s\n", mode);
    return 2;
}
