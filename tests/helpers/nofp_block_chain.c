// Sleeps three calls deep in code built without frame pointers
// (-fomit-frame-pointer -O2): for SECS/2 seconds in 2 ms sleeps under
// storprof_nofp_long_wait, then for SECS/2 seconds in 50 µs sleeps under
// storprof_nofp_short_wait. A frame-pointer walk loses both chains; DWARF
// off-CPU stacks (copied at the syscall's exit) must show
// main;storprof_nofp_block_outer;storprof_nofp_block_middle;storprof_nofp_*_wait
// with about the same off-CPU time for each half, however it is sampled.
// Usage: nofp_block_chain SECS
#include <stdlib.h>
#include <time.h>

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ns(long ns) {
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

volatile unsigned long sink;

__attribute__((noinline)) unsigned long storprof_nofp_long_wait(double secs) {
    double end = wall_now() + secs;
    unsigned long n = 0;
    while (wall_now() < end) {
        sleep_ns(2000000);
        n++;
    }
    return n;
}

__attribute__((noinline)) unsigned long storprof_nofp_short_wait(double secs) {
    double end = wall_now() + secs;
    unsigned long n = 0;
    while (wall_now() < end) {
        sleep_ns(50000);
        n++;
    }
    return n;
}

// The additions after each call keep them real calls (no tail jumps) and
// use the stack so rbp-based walking has nothing to follow.
__attribute__((noinline)) unsigned long storprof_nofp_block_middle(double secs) {
    volatile unsigned long pad[8] = {0};
    unsigned long n = storprof_nofp_long_wait(secs / 2);
    n += storprof_nofp_short_wait(secs / 2);
    return n + pad[3];
}

__attribute__((noinline)) unsigned long storprof_nofp_block_outer(double secs) {
    volatile unsigned long pad[16] = {0};
    return storprof_nofp_block_middle(secs) + pad[5];
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    sink = storprof_nofp_block_outer(secs);
    return 0;
}
