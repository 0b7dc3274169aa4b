// Burns SECS seconds of CPU time three calls deep, in code built without
// frame pointers (-fomit-frame-pointer -O2): a frame-pointer walk loses the
// chain, a DWARF (.eh_frame) unwind must show
// main;storprof_nofp_outer;storprof_nofp_middle;storprof_nofp_inner.
// Usage: nofp_chain SECS
#include <stdlib.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

volatile unsigned long sink;

__attribute__((noinline)) unsigned long storprof_nofp_inner(double secs) {
    double end = cpu_now() + secs;
    unsigned long x = 1;
    while (cpu_now() < end) {
        for (int i = 0; i < 100000; i++) {
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        }
        sink = x;
    }
    return x;
}

// The additions after each call keep them real calls (no tail jumps) and
// use the stack so rbp-based walking has nothing to follow.
__attribute__((noinline)) unsigned long storprof_nofp_middle(double secs) {
    volatile unsigned long pad[8] = {0};
    return storprof_nofp_inner(secs) + pad[3];
}

__attribute__((noinline)) unsigned long storprof_nofp_outer(double secs) {
    volatile unsigned long pad[16] = {0};
    return storprof_nofp_middle(secs) + pad[5];
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    sink = storprof_nofp_outer(secs);
    return 0;
}
