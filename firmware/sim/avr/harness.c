/* The emulated bench around the simavr ATmega2560 (see harness.h). */
#include "harness.h"
#include "loadgen.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "avr_extint.h"
#include "avr_ioport.h"
#include "avr_uart.h"
#include "board.h"
#include "sim_cycle_timers.h"
#include "sim_io.h"

/* Data-space addresses of the ATmega2560 registers the output stage reads (datasheet). */
#define REG_TCCR4A 0xA0u
#define REG_ICR4L 0xA6u
#define REG_OCR4AL 0xA8u
#define REG_DDRH 0x101u
#define REG_PORTH 0x102u
#define REG_UCSR0A 0xC0u
#define REG_UCSR0B 0xC1u
#define REG_UBRR0L 0xC4u
#define NOISE_EDGE_CYCLES 40u
#define ENCODER_MIN_EDGE_CYCLES 64u

static struct harness *the_harness; /* for simavr callbacks without a parameter (reset) */
static void (*core_reset)(struct avr_t *avr);
static uint32_t noise_edges_left;

static uint64_t now(const struct harness *h) { return h->avr->cycle; }

double harness_motor_torque_nm(const struct harness *h)
{
    const uint8_t *data = h->avr->data;
    if (!(data[REG_DDRH] & (1u << BOARD_PIN_PWM))) {
        return 0.0; /* pin floating (reset): the driver's input pull-down means zero torque */
    }
    double duty;
    if (((data[REG_TCCR4A] >> 6) & 3u) == 2u) { /* COM4A = non-inverting PWM on OC4A */
        unsigned top = data[REG_ICR4L] | (unsigned)data[REG_ICR4L + 1] << 8;
        unsigned ocr = data[REG_OCR4AL] | (unsigned)data[REG_OCR4AL + 1] << 8;
        duty = top == 0u ? 0.0 : fmin(1.0, (double)ocr / top);
    } else {
        duty = (data[REG_PORTH] >> BOARD_PIN_PWM) & 1u ? 1.0 : 0.0;
    }
    int positive = (data[REG_DDRH] >> BOARD_PIN_DIR) & (data[REG_PORTH] >> BOARD_PIN_DIR) & 1u;
    return (positive ? 1.0 : -1.0) * duty * BOARD_TORQUE_FULL_SCALE_MNM / 1000.0;
}

/* Quadrature phase of a count: AB = 00, 10, 11, 01 for count mod 4 = 0, 1, 2, 3. */
static void encoder_pins_for(int64_t count, int *a, int *b)
{
    static const int phase_a[4] = {0, 1, 1, 0}, phase_b[4] = {0, 0, 1, 1};
    int phase = (int)(((count % 4) + 4) % 4);
    *a = phase_a[phase];
    *b = phase_b[phase];
}

static void encoder_output(struct harness *h)
{
    int a, b;
    encoder_pins_for(h->encoder_emitted, &a, &b);
    avr_raise_irq(h->pin_enc_a, (uint32_t)a);
    avr_raise_irq(h->pin_enc_b, (uint32_t)b);
}

/* One quadrature step towards the plant's count; spaced so that the steps pending spread over
 * one plant step, as a real encoder's edges would. */
static avr_cycle_count_t encoder_edge(struct avr_t *avr, avr_cycle_count_t when, void *param)
{
    (void)avr;
    struct harness *h = param;
    int64_t diff = h->encoder_target - h->encoder_emitted;
    if (diff == 0) {
        h->encoder_busy = 0;
        return 0;
    }
    h->encoder_emitted += diff > 0 ? 1 : -1;
    encoder_output(h);
    uint64_t left = (uint64_t)(diff > 0 ? diff : -diff) - 1u;
    if (left == 0u) {
        h->encoder_busy = 0;
        return 0;
    }
    uint64_t spacing = HARNESS_PLANT_CYCLES / (left + 1u);
    return when + (spacing < ENCODER_MIN_EDGE_CYCLES ? ENCODER_MIN_EDGE_CYCLES : spacing);
}

static int64_t plant_count(const struct harness *h)
{
    return (int64_t)floor(h->plant.position_rad / 6.283185307179586 * (double)BOARD_ENCODER_COUNTS);
}

static avr_cycle_count_t plant_timer(struct avr_t *avr, avr_cycle_count_t when, void *param)
{
    struct harness *h = param;
    double dt_s = (double)(when - h->plant_cycle) / (double)avr->frequency;
    if (dt_s > 0.0) {
        plant_step(&h->plant, harness_motor_torque_nm(h), dt_s);
    }
    h->plant_cycle = when;
    h->encoder_target = plant_count(h);
    if (h->encoder_target != h->encoder_emitted && !h->encoder_busy && noise_edges_left == 0u) {
        h->encoder_busy = 1;
        avr_cycle_timer_register(avr, 1, encoder_edge, h);
    }
    return when + HARNESS_PLANT_CYCLES;
}

static avr_cycle_count_t service_timer(struct avr_t *avr, avr_cycle_count_t when, void *param)
{
    (void)avr;
    struct harness *h = param;
    harness_feed_uart(h);
    if (h->service) {
        h->service(h);
    }
    return when + HARNESS_SERVICE_CYCLES;
}

/* After an e-stop pull: watch the output every 8 cycles until it carries no torque. */
static avr_cycle_count_t estop_watch(struct avr_t *avr, avr_cycle_count_t when, void *param)
{
    (void)avr;
    struct harness *h = param;
    if (!h->estop_watch) {
        return 0;
    }
    if (harness_motor_torque_nm(h) == 0.0) {
        uint64_t cycles = when - h->estop_cycle;
        printf("avrsim: estop pulled at mcu tick %u with %.2f N.m on the motor: motor output "
               "zero after %llu cycles (%.1f us)\n", h->estop_tick, h->estop_torque_nm,
               (unsigned long long)cycles, (double)cycles * 1e6 / (double)avr->frequency);
        fflush(stdout);
        h->estop_watch = 0;
        return 0;
    }
    return when + 8u;
}

static avr_cycle_count_t noise_edge(struct avr_t *avr, avr_cycle_count_t when, void *param)
{
    (void)avr;
    struct harness *h = param;
    if (noise_edges_left == 0u) {
        encoder_output(h); /* back to the true phase */
        return 0;
    }
    noise_edges_left--;
    avr_raise_irq(h->pin_enc_a, noise_edges_left & 1u);
    return when + NOISE_EDGE_CYCLES;
}

void harness_encoder_noise(struct harness *h, uint32_t ms)
{
    /* an even number of edges leaves pin A where it was */
    noise_edges_left = (uint32_t)((uint64_t)ms * 16000u / NOISE_EDGE_CYCLES) & ~1u;
    avr_cycle_timer_register(h->avr, 1, noise_edge, h);
}

static void uart_output(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    struct harness *h = param;
    h->bytes_from_mcu++;
    loadgen_on_tx_byte((uint8_t)value);
    if (h->tx_len < HARNESS_TX) {
        h->tx[h->tx_len++] = (uint8_t)value;
    } else {
        h->tx_lost++;
    }
}

static void uart_xon(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    (void)value;
    struct harness *h = param;
    h->uart_xoff = 0;
    harness_feed_uart(h);
}

static void uart_xoff(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    struct harness *h = param;
    h->uart_xoff = value != 0u;
    h->uart_xoffs += value != 0u;
}

static void tick_pin(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    struct harness *h = param;
    uint64_t t = now(h);
    if (value) {
        if (h->ticks_since_reset > 0u && t - h->last_tick_start > h->period_max) {
            h->period_max = (uint32_t)(t - h->last_tick_start);
        }
        h->tick_start = h->last_tick_start = t;
        h->ticks++;
        h->ticks_since_reset++;
        return;
    }
    if (h->ticks_since_reset == 0u) {
        return;
    }
    uint64_t duration = t - h->tick_start;
    h->tick_histogram[duration < HARNESS_TICK_HISTOGRAM ? duration : HARNESS_TICK_HISTOGRAM]++;
    if (h->tick_min == 0u || duration < h->tick_min) {
        h->tick_min = (uint32_t)duration;
    }
    if (duration > h->tick_max) {
        h->tick_max = (uint32_t)duration;
    }
}

int harness_queue_byte(struct harness *h, uint8_t byte)
{
    if (h->rx_head - h->rx_tail >= HARNESS_QUEUE) {
        return 0;
    }
    h->rx_queue[h->rx_head++ % HARNESS_QUEUE] = byte;
    return 1;
}

/* Cycles one byte takes on the wire at the baud rate the firmware set (8N1: 10 bits). */
static uint64_t cycles_per_byte(const struct harness *h)
{
    const uint8_t *data = h->avr->data;
    unsigned ubrr = (data[REG_UBRR0L] | (unsigned)(data[REG_UBRR0L + 1] & 0x0Fu) << 8) + 1u;
    unsigned samples = (data[REG_UCSR0A] & 0x02u) ? 8u : 16u; /* U2X0 */
    return 10u * samples * ubrr;
}

/* The firmware's flow-control output (PH5 HIGH = stop), as the adapter's CTS input sees it. */
static int flow_stopped(const struct harness *h)
{
    const uint8_t *data = h->avr->data;
    int stopped = (data[REG_DDRH] >> BOARD_PIN_FLOW) & (data[REG_PORTH] >> BOARD_PIN_FLOW) & 1u;
    /* Until the firmware has enabled its receiver (boot, or after a reset) the bytes wait: simavr
     * would drop them, and a host that opened the port early would lose its HELLO. */
    int receiver_off = !(data[REG_UCSR0B] & 0x10u); /* RXEN0 */
    return stopped || receiver_off;
}

void harness_feed_uart(struct harness *h)
{
    /* Bytes enter the UART no faster than the wire carries them (simavr's receive FIFO would
     * otherwise overflow during a burst), and not while the firmware's flow-control pin says
     * stop (an adapter honours CTS within a byte or two); XOFF is a last guard. */
    uint64_t t = now(h);
    uint64_t per_byte = cycles_per_byte(h);
    if (t > h->wire_cycle + 4u * per_byte) {
        h->wire_cycle = t - 4u * per_byte; /* at most a 4-byte backlog on an idle line */
    }
    while (!h->uart_xoff && h->rx_tail != h->rx_head && h->wire_cycle + per_byte <= t &&
           !flow_stopped(h)) {
        h->wire_cycle += per_byte;
        uint8_t byte = h->rx_queue[h->rx_tail++ % HARNESS_QUEUE];
        h->bytes_to_mcu++;
        avr_raise_irq(h->uart_input, byte); /* may call uart_xoff re-entrantly */
    }
}

void harness_set_estop(struct harness *h, int on)
{
    h->estop = on;
    if (on && !h->estop_watch) {
        h->estop_watch = 1;
        h->estop_cycle = now(h);
        h->estop_tick = h->ticks_since_reset;
        h->estop_torque_nm = harness_motor_torque_nm(h);
        avr_cycle_timer_register(h->avr, 1, estop_watch, h);
    }
    avr_raise_irq(h->pin_estop, on ? 1u : 0u); /* HIGH = asserted (fail-safe contact) */
}

void harness_set_driver_fault(struct harness *h, int on)
{
    h->driver_fault = on;
    avr_raise_irq(h->pin_driver_fault, on ? 0u : 1u); /* LOW = fault */
}

static void drive_pin(avr_irq_t *pin, int level)
{
    if (level && pin->value) {
        avr_raise_irq(pin, 0u);
    }
    avr_raise_irq(pin, level ? 1u : 0u);
}

static void start_timers_and_pins(struct harness *h)
{
    h->plant_cycle = now(h);
    avr_cycle_timer_register(h->avr, HARNESS_PLANT_CYCLES, plant_timer, h);
    avr_cycle_timer_register(h->avr, HARNESS_SERVICE_CYCLES, service_timer, h);
    /* simavr only propagates a level that changes, and a reset clears the pin registers: bring
     * each input to 0, then to its true level. (A falling edge while INTn is still in its reset
     * low-level mode makes simavr poll that pin every cycle, so inputs start low, not high.) */
    for (uint8_t i = 0; i < 8u; i++) {
        avr_extint_set_strict_lvl_trig(h->avr, i, 0); /* no per-cycle polling of level mode */
    }
    int a, b;
    encoder_pins_for(h->encoder_emitted, &a, &b);
    drive_pin(h->pin_enc_a, a);
    drive_pin(h->pin_enc_b, b);
    drive_pin(h->pin_estop, h->estop);
    drive_pin(h->pin_driver_fault, !h->driver_fault);
}

static void reset_hook(struct avr_t *avr)
{
    if (core_reset) {
        core_reset(avr);
    }
    if (the_harness) {
        the_harness->reset_pending = 1;
    }
}

void harness_after_run(struct harness *h)
{
    if (!h->reset_pending) {
        return;
    }
    h->reset_pending = 0;
    h->resets++;
    h->ticks_since_reset = 0;
    h->encoder_busy = 0;
    h->uart_xoff = 0;
    noise_edges_left = 0;
    /* The reset cleared the cycle timers; an incremental encoder restarts from where it is. */
    avr_cycle_timer_cancel(h->avr, plant_timer, h);
    avr_cycle_timer_cancel(h->avr, service_timer, h);
    avr_cycle_timer_cancel(h->avr, encoder_edge, h);
    start_timers_and_pins(h);
    printf("avrsim: MCU reset (hardware watchdog) at emulated %.3f s\n",
           (double)now(h) / (double)h->avr->frequency);
    fflush(stdout);
}

void harness_init(struct harness *h, avr_t *avr, struct plant_params params,
                  void (*service)(struct harness *h))
{
    memset(h, 0, sizeof *h);
    h->avr = avr;
    h->service = service;
    the_harness = h;
    plant_init(&h->plant, params);
    h->encoder_emitted = h->encoder_target = plant_count(h);

    uint32_t flags = 0; /* no console echo of UART bytes, no poll-sleep */
    avr_ioctl(avr, AVR_IOCTL_UART_SET_FLAGS('0'), &flags);
    h->uart_input = avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_INPUT);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_OUTPUT),
                            uart_output, h);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_OUT_XON),
                            uart_xon, h);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_OUT_XOFF),
                            uart_xoff, h);
    h->pin_enc_a = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('E'), BOARD_PIN_ENC_A);
    h->pin_enc_b = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('E'), BOARD_PIN_ENC_B);
    h->pin_estop = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('D'), BOARD_PIN_ESTOP);
    h->pin_driver_fault = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('D'), BOARD_PIN_DRV_FAULT);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('B'), BOARD_PIN_TICK),
                            tick_pin, h);
    core_reset = avr->reset;
    avr->reset = reset_hook;
    start_timers_and_pins(h);
}

void harness_tick_stats(const struct harness *h, uint32_t *min, uint32_t *median, uint32_t *max)
{
    uint64_t total = 0, seen = 0;
    for (uint32_t i = 0; i <= HARNESS_TICK_HISTOGRAM; i++) {
        total += h->tick_histogram[i];
    }
    *median = 0;
    for (uint32_t i = 0; i <= HARNESS_TICK_HISTOGRAM && total > 0u; i++) {
        seen += h->tick_histogram[i];
        if (2u * seen >= total) {
            *median = i;
            break;
        }
    }
    *min = h->tick_min;
    *max = h->tick_max;
}
