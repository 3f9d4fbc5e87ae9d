/*
 * bench/pingpong.c: the smallest TCP request/response loop, as a reference for `virtperf rr
 * --wait block|spin` (bench/rr-wait.sh builds and runs it; nothing else uses it).
 *
 *   pingpong block|spin CLIENT_CPU SERVER_CPU SECONDS
 *
 * Two processes on loopback (fork, so two address spaces as with netperf/netserver), each
 * pinned to its CPU, TCP_NODELAY, 1-byte request and response. `block` sleeps in recv(2);
 * `spin` polls recv(MSG_DONTWAIT) so neither side ever sleeps. Prints transactions/s.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int spin;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        die("sched_setaffinity");
}

/* One byte, waiting as the mode says; returns 0 when the peer closed. */
static int get1(int fd, char *c) {
    for (;;) {
        ssize_t n = recv(fd, c, 1, spin ? MSG_DONTWAIT : 0);
        if (n == 1)
            return 1;
        if (n == 0)
            return 0;
        if (errno != EAGAIN && errno != EINTR)
            die("recv");
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5 || (strcmp(argv[1], "block") && strcmp(argv[1], "spin"))) {
        fprintf(stderr, "usage: pingpong block|spin CLIENT_CPU SERVER_CPU SECONDS\n");
        return 2;
    }
    spin = !strcmp(argv[1], "spin");
    int ccpu = atoi(argv[2]), scpu = atoi(argv[3]);
    double secs = atof(argv[4]);
    if (secs <= 0 || secs > 3600) {
        fprintf(stderr, "pingpong: SECONDS must be in (0, 3600]\n");
        return 2;
    }
    int one = 1;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&a, &alen))
        die("listen");
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) { /* server */
        pin(scpu);
        int s = accept(l, NULL, NULL);
        if (s < 0)
            die("accept");
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        char c;
        while (get1(s, &c))
            if (send(s, &c, 1, 0) != 1)
                die("send");
        _exit(0);
    }
    pin(ccpu);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a))
        die("connect");
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char b = 'x';
    long n = 0;
    double t0 = now(), end = t0 + secs, t = t0;
    while (t < end) {
        if (send(c, &b, 1, 0) != 1)
            die("send");
        if (!get1(c, &b))
            die("server closed");
        n++;
        /* The clock every 64 transactions: cheap, and at most ~1 ms late. */
        if ((n & 63) == 0)
            t = now();
    }
    t = now();
    close(c);
    waitpid(child, NULL, 0);
    printf("%.1f\n", n / (t - t0));
    return 0;
}
