// Does exactly N pread64 calls of B bytes on FILE (static helper for the
// probe tests and the overhead benchmark). Usage: pread_n FILE N B
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: pread_n FILE N B\n");
        return 2;
    }
    long n = atol(argv[2]);
    long b = atol(argv[3]);
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    static char buf[1 << 20];
    if (b > (long)sizeof buf) {
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        if (pread(fd, buf, b, 0) != b) {
            perror("pread");
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const char *timing = getenv("STORPROF_BENCH_TIMING");
    if (timing && timing[0] == '1') {
        long long ns = (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
        fprintf(stderr, "loop_ns %lld\n", ns);
    }
    return 0;
}
