/*
 * stream-pacer RATE: writes zeros to stdout at RATE MB/s (10^6 bytes per
 * second), in 32 KiB writes checked against the clock every 256 KiB, until the
 * reader goes away. A ceiling, not an average: after a stall (a reader that did
 * not keep up) it starts counting again instead of catching up at full speed. The fairness benchmark runs it on the server instead of
 * `cat /dev/zero` (SSHKIT_BENCH_STREAM_MBPS) to compare echoes beside streams
 * of the same speed. A smooth rate: `pv -L` sends its bytes in bursts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double
seconds_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) +
           (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

int
main(int argc, char **argv)
{
    static char zeros[32768];
    double rate = argc == 2 ? atof(argv[1]) * 1e6 : 0;
    long long sent = 0;
    struct timespec t0;

    if (rate <= 0) {
        fprintf(stderr, "usage: stream-pacer MB_PER_SECOND\n");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        for (int i = 0; i < 8; i++) {
            if (write(STDOUT_FILENO, zeros, sizeof(zeros)) !=
                (ssize_t)sizeof(zeros)) {
                return 0; /* the reader went away */
            }
            sent += (long long)sizeof(zeros);
        }
        double ahead = (double)sent / rate - seconds_since(&t0);
        if (ahead < -0.01) {
            /* more than 10 ms behind: start over from now */
            clock_gettime(CLOCK_MONOTONIC, &t0);
            sent = 0;
            continue;
        }
        while (ahead > 0) {
            struct timespec d = {(time_t)ahead,
                                 (long)((ahead - (double)(time_t)ahead) * 1e9)};
            nanosleep(&d, NULL);
            ahead = (double)sent / rate - seconds_since(&t0);
        }
    }
}
