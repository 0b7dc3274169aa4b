/* A checkpoint writer whose data generation is the slow part: each 1 MiB
 * block is computed (many rounds of a xorshift mix per word, like
 * serializing/compressing tensors) before it is written; one fsync at the
 * end. Usage: slow_writer FILE MIB ROUNDS */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void make_block(uint64_t *block, size_t words, uint64_t seed, int rounds) {
    uint64_t x = seed | 1;
    for (size_t i = 0; i < words; i++) {
        for (int r = 0; r < rounds; r++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        block[i] = x;
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s FILE MIB ROUNDS\n", argv[0]);
        return 2;
    }
    long mib = atol(argv[2]);
    int rounds = atoi(argv[3]);
    size_t words = (1 << 20) / sizeof(uint64_t);
    uint64_t *block = malloc(1 << 20);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!block || fd < 0) {
        perror("slow_writer");
        return 1;
    }
    for (long b = 0; b < mib; b++) {
        make_block(block, words, (uint64_t)b * 2654435761u, rounds);
        if (write(fd, block, 1 << 20) != 1 << 20) {
            perror("write");
            return 1;
        }
    }
    if (fsync(fd) != 0) {
        perror("fsync");
        return 1;
    }
    close(fd);
    return 0;
}
