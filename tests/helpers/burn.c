// Burns SECS seconds of CPU time (its own thread's CPU clock, so a loaded
// machine makes it take longer, not burn less) in a named, non-inlined
// function (built with frame pointers) so that it tops the on-CPU profile. With WORKERS > 0 it
// forks that many workers (named worker-I, pids printed as `worker PID`)
// that each burn, and waits for them.
// Usage: burn SECS [WORKERS]
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

volatile unsigned long sink;

__attribute__((noinline)) void storprof_test_burn_cpu(double secs) {
    double end = cpu_now() + secs;
    unsigned long x = 1;
    while (cpu_now() < end) {
        for (int i = 0; i < 100000; i++) {
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        }
        sink = x;
    }
}

__attribute__((noinline)) void storprof_test_worker_main(double secs) {
    storprof_test_burn_cpu(secs);
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    int workers = argc > 2 ? atoi(argv[2]) : 0;
    if (workers == 0) {
        storprof_test_burn_cpu(secs);
        return 0;
    }
    for (int i = 0; i < workers; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            char name[16];
            snprintf(name, sizeof name, "worker-%d", i);
            prctl(PR_SET_NAME, name);
            storprof_test_worker_main(secs);
            _exit(0);
        }
        if (pid < 0) {
            return 1;
        }
        printf("worker %d\n", (int)pid);
        fflush(stdout);
    }
    int status, failed = 0;
    while (wait(&status) > 0) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed = 1;
        }
    }
    return failed;
}
