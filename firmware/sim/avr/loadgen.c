/* Built-in host streaming setpoints in emulated time (see loadgen.h). */
#include "loadgen.h"

#include <math.h>

#define PI 3.141592653589793

#include "link.h"
#include "sim_cycle_timers.h"

#define START_CYCLES 160000u  /* 10 ms after reset: HELLO */
#define ARM_DELAY_CYCLES 160000u

static struct {
    double rate_hz;
    uint64_t period_cycles_q16; /* period in cycles, Q16 (rates need not divide 16 MHz) */
    uint64_t origin;            /* cycle of the first setpoint */
    uint32_t sent;
    uint8_t seq;
    int active;
    struct bm_rx rx;
    int have_telemetry;
    struct bm_msg_telemetry last;
    uint32_t armed_ack;
} gen;

static void send(struct harness *h, uint8_t id, const uint8_t *payload, uint8_t len)
{
    uint8_t wire[BM_MAX_WIRE];
    uint8_t n = bm_frame_encode(gen.seq++, id, payload, len, wire);
    for (uint8_t i = 0; i < n; i++) {
        harness_queue_byte(h, wire[i]);
    }
    harness_feed_uart(h);
}

static avr_cycle_count_t setpoint_timer(struct avr_t *avr, avr_cycle_count_t when, void *param)
{
    (void)avr;
    (void)when;
    struct harness *h = param;
    double t_s = (double)gen.sent / gen.rate_hz;
    /* a slow 0.2 rad sine in position mode, so that the control law really runs */
    struct bm_msg_setpoint m = {
        /* rounded, not truncated: t_s·1000 may fall just below an integer and repeat a time,
         * which the firmware refuses (above 1 kHz times repeat anyway: see test_avr_stream) */
        .time_ms = (uint32_t)lround((double)gen.sent * 1000.0 / gen.rate_hz),
        .mode = BM_MODE_POSITION,
        .position_urad = (int32_t)lround(2e5 * sin(2.0 * PI * 0.5 * t_s)),
        .velocity_urad_s = (int32_t)lround(2e5 * PI * cos(2.0 * PI * 0.5 * t_s)),
        .torque_mNm = 0,
    };
    uint8_t payload[BM_LEN_SETPOINT];
    send(h, BM_MSG_SETPOINT, payload, bm_pack_setpoint(&m, payload));
    gen.sent++;
    return gen.origin + (((uint64_t)gen.sent * gen.period_cycles_q16) >> 16);
}

static avr_cycle_count_t arm_timer(struct avr_t *avr, avr_cycle_count_t when, void *param)
{
    struct harness *h = param;
    struct bm_msg_arm arm = {.watchdog_ms = 100, .lead_ms = 20};
    uint8_t payload[BM_LEN_ARM];
    send(h, BM_MSG_ARM, payload, bm_pack_arm(&arm, payload));
    gen.origin = when + 16000u;
    avr_cycle_timer_register(avr, 16000u, setpoint_timer, h);
    return 0;
}

static avr_cycle_count_t hello_timer(struct avr_t *avr, avr_cycle_count_t when, void *param)
{
    (void)when;
    struct harness *h = param;
    harness_queue_byte(h, 0u); /* flush any partial frame, as the protocol asks */
    struct bm_msg_hello hello = {.protocol_version = BM_PROTOCOL_VERSION, .telemetry_period_ms = 10};
    uint8_t payload[BM_LEN_HELLO];
    send(h, BM_MSG_HELLO, payload, bm_pack_hello(&hello, payload));
    avr_cycle_timer_register(avr, ARM_DELAY_CYCLES, arm_timer, h);
    return 0;
}

void loadgen_start(struct harness *h, double rate_hz)
{
    gen.rate_hz = rate_hz;
    gen.period_cycles_q16 = (uint64_t)llround(16e6 / rate_hz * 65536.0);
    gen.active = 1;
    bm_rx_init(&gen.rx);
    avr_cycle_timer_register(h->avr, START_CYCLES, hello_timer, h);
}

void loadgen_on_tx_byte(uint8_t byte)
{
    struct bm_frame frame;
    if (!gen.active || !bm_rx_byte(&gen.rx, byte, &frame)) {
        return;
    }
    if (frame.id == BM_MSG_TELEMETRY &&
        bm_unpack_telemetry(frame.payload, frame.len, &gen.last)) {
        gen.have_telemetry = 1;
    }
}

void loadgen_report(FILE *out)
{
    if (!gen.active) {
        return;
    }
    if (!gen.have_telemetry) {
        fprintf(out, "loadgen: %.1f Hz, %u setpoints sent, no telemetry received\n",
                gen.rate_hz, gen.sent);
        return;
    }
    fprintf(out,
            "loadgen: %.1f Hz, %u setpoints sent; last telemetry at tick %u: state %u fault %u, "
            "setpoint time %u ms, late_setpoints %u, bad_frames %u, seq_gaps %u, "
            "bad frames seen by the host %u\n",
            gen.rate_hz, gen.sent, gen.last.mcu_ticks, gen.last.state, gen.last.fault,
            gen.last.setpoint_time_ms, gen.last.late_setpoints, gen.last.bad_frames,
            gen.last.seq_gaps, gen.rx.bad_frames);
}
