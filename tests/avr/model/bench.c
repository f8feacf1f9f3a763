/* bench: time the exported model's functions on the ATmega2560 (run by cycles.c in simavr).
 * cases.h (written by the test) defines MODEL_H, PREFIX(name), N_CASES and the inputs; every
 * input is read through a volatile object so that nothing is computed at compile time.
 * Markers on GPIOR0: 1/2 around the inverse dynamics, 3/4 around the hybrid dynamics, 5/6 around
 * the driven efforts; results (tau, status, af, effort, driven effort per case) go out byte by
 * byte on GPIOR1. */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/sleep.h>
#include <string.h>

#include "cases.h"

static void send(const void *data, size_t size)
{
    const unsigned char *p = (const unsigned char *)data;
    size_t i;
    for (i = 0; i < size; ++i) {
        GPIOR1 = p[i];
    }
}

static void load(double *to, const volatile double *from, size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        to[i] = from[i];
    }
}

int main(void)
{
    PREFIX(parameters) p;
    double q[N], v[N], a[N], tau[N], af[N_FREE], effort[N_DRIVEN], driven[N_DRIVEN];
    int c;
    for (c = 0; c < N_CASES; ++c) {
        int status;
        load((double *)&p, case_parameters[c], sizeof p / sizeof(double));
        load(q, case_q[c], N);
        load(v, case_v[c], N);
        load(a, case_a[c], N);
        GPIOR0 = 1;
        PREFIX(inverse_dynamics)(&p, q, v, a, tau);
        GPIOR0 = 2;
        send(tau, sizeof tau);
        GPIOR0 = 3;
        status = PREFIX(hybrid_dynamics)(&p, q, v, q + N_FREE, v + N_FREE, a + N_FREE, af, effort);
        GPIOR0 = 4;
        send(&status, sizeof status);
        send(af, sizeof af);
        send(effort, sizeof effort);
        GPIOR0 = 5;
        PREFIX(driven_efforts)(&p, q, v, a, driven);
        GPIOR0 = 6;
        send(driven, sizeof driven);
    }
    cli();
    sleep_enable();
    sleep_cpu();
    return 0;
}
