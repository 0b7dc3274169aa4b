// Sleeps N times for MS milliseconds (nanosleep), with one pread64 of 512 B
// on FILE after each sleep (static helper for the syscall-timing tests:
// calls that block and calls that do not). Usage: sleep_n FILE N MS
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: sleep_n FILE N MS\n");
        return 2;
    }
    long n = atol(argv[2]);
    long ms = atol(argv[3]);
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    static char buf[512];
    struct timespec nap = {ms / 1000, (ms % 1000) * 1000000L};
    for (long i = 0; i < n; i++) {
        if (nanosleep(&nap, NULL) != 0) {
            perror("nanosleep");
            return 1;
        }
        if (pread(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) {
            perror("pread");
            return 1;
        }
    }
    return 0;
}
