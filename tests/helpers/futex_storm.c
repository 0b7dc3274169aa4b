// PAIRS pairs of threads pass a token back and forth through a mutex and a
// condition variable for SECONDS: a storm of futex waits and wake-ups, the
// probes' costliest path per event (scripts/bench-futex.sh). Prints the
// round trips done. Usage: futex_storm PAIRS SECONDS
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct pair {
    pthread_mutex_t lock;
    pthread_cond_t turn_changed;
    int turn;
    long round_trips;
};

static volatile int g_stop;

static void pass(struct pair *p, int me) {
    pthread_mutex_lock(&p->lock);
    while (p->turn != me && !g_stop) pthread_cond_wait(&p->turn_changed, &p->lock);
    p->turn = !me;
    if (me == 0) p->round_trips++;
    pthread_cond_signal(&p->turn_changed);
    pthread_mutex_unlock(&p->lock);
}

static void *side0(void *arg) {
    while (!g_stop) pass(arg, 0);
    return NULL;
}

static void *side1(void *arg) {
    while (!g_stop) pass(arg, 1);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: futex_storm PAIRS SECONDS\n");
        return 2;
    }
    int pairs = atoi(argv[1]);
    double seconds = atof(argv[2]);
    if (pairs < 1 || pairs > 64) {
        fprintf(stderr, "futex_storm: 1..64 pairs\n");
        return 2;
    }
    struct pair *p = calloc((size_t)pairs, sizeof *p);
    pthread_t *t = calloc((size_t)pairs * 2, sizeof *t);
    if (!p || !t) return 1;
    for (int i = 0; i < pairs; i++) {
        pthread_mutex_init(&p[i].lock, NULL);
        pthread_cond_init(&p[i].turn_changed, NULL);
        if (pthread_create(&t[2 * i], NULL, side0, &p[i]) ||
            pthread_create(&t[2 * i + 1], NULL, side1, &p[i])) {
            perror("pthread_create");
            return 1;
        }
    }
    struct timespec nap = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&nap, NULL);
    g_stop = 1;
    long total = 0;
    for (int i = 0; i < pairs; i++) {
        pthread_mutex_lock(&p[i].lock);
        pthread_cond_broadcast(&p[i].turn_changed);
        pthread_mutex_unlock(&p[i].lock);
    }
    for (int i = 0; i < 2 * pairs; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < pairs; i++) total += p[i].round_trips;
    printf("round_trips %ld\n", total);
    return 0;
}
