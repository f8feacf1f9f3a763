/* The emulated bench around the simavr ATmega2560: UART bytes in and out, the plant model on the
 * PWM/direction outputs, the quadrature encoder and e-stop/driver-fault inputs, and the
 * measurements (control tick cycles, e-stop reaction). Emulated time only: cycles at 16 MHz. */
#ifndef BM_AVRSIM_HARNESS_H
#define BM_AVRSIM_HARNESS_H

#include <stdint.h>

#include "plant.h"
#include "sim_avr.h"
#include "sim_irq.h"

#define HARNESS_QUEUE 65536u       /* host → MCU bytes waiting for the UART */
#define HARNESS_TX 65536u          /* MCU → host bytes waiting for the pty */
#define HARNESS_TICK_HISTOGRAM 20000u /* tick durations are histogrammed up to this, cycles */

struct harness {
    avr_t *avr;
    struct plant plant;
    uint64_t plant_cycle;          /* emulated cycle the plant has been advanced to */
    /* quadrature encoder */
    int64_t encoder_emitted, encoder_target;
    int encoder_busy;
    avr_irq_t *pin_enc_a, *pin_enc_b, *pin_estop, *pin_driver_fault;
    /* UART */
    avr_irq_t *uart_input;
    int uart_xoff;
    unsigned long uart_xoffs; /* times the UART's receive FIFO filled up */
    uint64_t wire_cycle; /* emulated time up to which the host → MCU wire has been used */
    uint8_t rx_queue[HARNESS_QUEUE];
    uint32_t rx_head, rx_tail;
    uint8_t tx[HARNESS_TX];
    uint32_t tx_len;
    unsigned long bytes_to_mcu, bytes_from_mcu, tx_lost;
    /* inputs */
    int estop, driver_fault;
    /* e-stop reaction measurement */
    int estop_watch;
    uint64_t estop_cycle;
    uint32_t estop_tick;
    double estop_torque_nm; /* motor torque when the pin was pulled */
    /* control tick measurement (tick-busy pin) */
    uint64_t tick_start, last_tick_start;
    uint32_t ticks, ticks_since_reset;
    uint32_t tick_histogram[HARNESS_TICK_HISTOGRAM + 1];
    uint32_t tick_min, tick_max, period_max;
    /* MCU resets (hardware watchdog) */
    unsigned resets;
    volatile int reset_pending;
    /* called every HARNESS_SERVICE_CYCLES of emulated time (pty, stdin, pacing) */
    void (*service)(struct harness *h);
};

#define HARNESS_PLANT_CYCLES 1000u    /* plant step: 62.5 µs */
#define HARNESS_SERVICE_CYCLES 4000u  /* pty and pacing: every 250 µs */

/* Wire the harness to a loaded MCU and start the plant at rest. */
void harness_init(struct harness *h, avr_t *avr, struct plant_params params,
                  void (*service)(struct harness *h));
/* Motor torque the output pins command now, N·m (0 when the PWM pin floats). */
double harness_motor_torque_nm(const struct harness *h);
/* Queue one host byte for the MCU's UART (0 when the queue is full). */
int harness_queue_byte(struct harness *h, uint8_t byte);
/* Push queued bytes into the UART while it accepts them. */
void harness_feed_uart(struct harness *h);
void harness_set_estop(struct harness *h, int on);
void harness_set_driver_fault(struct harness *h, int on);
/* Noise storm on encoder pin A for `ms` ms of emulated time: an edge every 40 cycles. */
void harness_encoder_noise(struct harness *h, uint32_t ms);
/* Call after every avr_run: notices an MCU reset and restores the harness's timers and pins. */
void harness_after_run(struct harness *h);
/* Tick statistics: minimum, median and maximum duration in cycles. */
void harness_tick_stats(const struct harness *h, uint32_t *min, uint32_t *median, uint32_t *max);

#endif /* BM_AVRSIM_HARNESS_H */
