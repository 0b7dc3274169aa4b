/* A workload that churns processes and threads, for scripts/soak.sh:
 *
 *   churn SECONDS FORKS_PER_S FILE
 *
 * For SECONDS: forks FORKS_PER_S children a second (each preads 64 KiB of
 * FILE and exits; the parent reaps them), starts and joins 4 reader threads
 * ten times a second, and preads FILE in the main thread in between. Prints
 * what it did. FILE must be at least 1 MiB.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READ_BYTES (64 * 1024)
#define THREADS_PER_ROUND 4

static int g_fd;
static off_t g_size;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "churn: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void read_at(uint64_t n) {
    static __thread char buf[READ_BYTES];
    off_t off = (off_t)((n * READ_BYTES) % (uint64_t)(g_size - READ_BYTES));
    if (pread(g_fd, buf, READ_BYTES, off) < 0) die("pread");
}

static void *reader_thread(void *arg) {
    uintptr_t seed = (uintptr_t)arg;
    for (int i = 0; i < 16; i++) read_at(seed * 16 + (uintptr_t)i);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: churn SECONDS FORKS_PER_S FILE\n");
        return 2;
    }
    double seconds = atof(argv[1]);
    int forks_per_s = atoi(argv[2]);
    if (seconds <= 0 || forks_per_s < 0 || forks_per_s > 10000) {
        fprintf(stderr, "churn: SECONDS > 0, 0 <= FORKS_PER_S <= 10000\n");
        return 2;
    }
    g_fd = open(argv[3], O_RDONLY);
    if (g_fd < 0) die(argv[3]);
    struct stat st;
    if (fstat(g_fd, &st)) die("fstat");
    g_size = st.st_size;
    if (g_size < (1 << 20)) {
        fprintf(stderr, "churn: %s is smaller than 1 MiB\n", argv[3]);
        return 2;
    }
    double start = now_s(), end = start + seconds;
    uint64_t forked = 0, threads = 0, reads = 0;
    double next_thread_round = start;
    while (now_s() < end) {
        double elapsed = now_s() - start;
        /* Forks due by now, at FORKS_PER_S a second. */
        while ((double)forked < elapsed * forks_per_s) {
            pid_t child = fork();
            if (child < 0) die("fork");
            if (child == 0) {
                read_at(forked);
                _exit(0);
            }
            forked++;
        }
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
        if (now_s() >= next_thread_round) {
            pthread_t t[THREADS_PER_ROUND];
            for (int i = 0; i < THREADS_PER_ROUND; i++)
                if (pthread_create(&t[i], NULL, reader_thread, (void *)(uintptr_t)(threads + i)))
                    die("pthread_create");
            for (int i = 0; i < THREADS_PER_ROUND; i++) pthread_join(t[i], NULL);
            threads += THREADS_PER_ROUND;
            next_thread_round += 0.1;
        }
        read_at(reads++);
        usleep(1000);
    }
    while (wait(NULL) > 0) {}
    printf("churn: %.0f s, %llu processes forked, %llu threads started, %llu reads in the main thread\n",
           seconds, (unsigned long long)forked, (unsigned long long)threads, (unsigned long long)reads);
    return 0;
}
