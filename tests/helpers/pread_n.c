// Does exactly N pread64 calls of B bytes on FILE (static helper for the
// probe tests and the overhead benchmark). Usage: pread_n FILE N B
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
    for (long i = 0; i < n; i++) {
        if (pread(fd, buf, b, 0) != b) {
            perror("pread");
            return 1;
        }
    }
    return 0;
}
