/* Portable firmware core: command handling, state machine, 1 kHz control tick, limits, watchdog.
 *
 * Integer arithmetic only (fixed-point gains), no dynamic allocation: suits an 8-bit MCU.
 * States: DISARMED (zero torque) → ARMED → FAULT (torque ramps to zero, latched until
 * CLEAR_FAULT). See firmware/PROTOCOL.md for the message semantics.
 */
#ifndef BM_CORE_H
#define BM_CORE_H

#include <stdint.h>

#include "link.h"

_Static_assert(BM_TICK_HZ == 1000u, "the core counts one tick per millisecond");

/* Control gains in Q16 fixed point (value × 65536). */
struct bm_gains {
    int32_t kp_q16; /* position gain, mN·m per µrad */
    int32_t kd_q16; /* velocity gain, mN·m per µrad/s (position and velocity modes) */
};

/* One queued setpoint, within the limits (checked on arrival); due at origin + time_ms. */
struct bm_queued {
    uint32_t time_ms;
    int32_t position_urad;
    int32_t velocity_urad_s;
    int32_t torque_mNm;
    uint8_t mode;
};

struct bm_core {
    struct bm_gains gains;
    struct bm_rx rx;
    uint32_t ticks; /* mcu_ticks: control ticks since reset (1 ms each) */
    uint8_t state;
    uint8_t fault;
    uint8_t handshake;
    uint8_t tx_seq;
    uint8_t last_rx_seq;
    uint8_t have_rx_seq;
    uint8_t limit_flags; /* OR of BM_FLAG_* since the previous telemetry */
    uint16_t seq_gaps;
    uint16_t late_setpoints;
    uint16_t watchdog_ticks;
    uint16_t telemetry_period;
    uint16_t telemetry_countdown;
    uint32_t last_feed_tick;
    /* setpoint in force (within the limits) */
    uint8_t has_setpoint;
    uint16_t sp_period_ms; /* time_ms step to the setpoint in force (≤ watchdog): the period */
    uint8_t sp_mode;
    uint32_t sp_time_ms;
    int32_t sp_position_urad;
    int32_t sp_velocity_urad_s;
    int32_t sp_torque_mNm;
    /* the stream's schedule: setpoints wait in a ring buffer for their due tick */
    uint16_t lead_ticks;      /* ARM's lead: the first setpoint is due this long after arrival */
    uint8_t has_origin;       /* set by the first SETPOINT after ARM or FLUSH */
    uint32_t origin_tick;     /* due tick of a setpoint = origin_tick + time_ms (mod 2^32) */
    uint32_t last_queued_ms;  /* time_ms of the newest setpoint accepted (queued or in force) */
    uint32_t last_apply_tick; /* tick a setpoint last came in force (or the origin was set) */
    uint8_t queue_head;       /* index of the oldest queued setpoint */
    uint8_t queue_count;
    struct bm_queued queue[BM_LIMIT_SETPOINT_QUEUE];
    /* measurements and output */
    int32_t position_urad;
    int32_t prev_position_urad;
    int32_t velocity_urad_s; /* filtered finite difference */
    uint8_t have_position;
    int32_t torque_mNm; /* torque commanded to the HAL at the last tick */
};

/* Default gains, tuned for the simulated bench's plant (≈1 kg·m², ≈5 Hz bandwidth). */
struct bm_gains bm_default_gains(void);
void bm_core_init(struct bm_core *core, struct bm_gains gains);
/* Feed one byte received from the host (call from the main loop, not an interrupt). */
void bm_core_rx_byte(struct bm_core *core, uint8_t byte);
/* One control tick: measure, supervise, control, limit, output, telemetry. */
void bm_core_tick(struct bm_core *core);
/* The BM_FLAG_*_REFUSED bits of the values of a setpoint outside the limits (0: within). */
uint8_t bm_setpoint_outside(int32_t position_urad, int32_t velocity_urad_s, int32_t torque_mNm);
/* Move `previous` towards `target` by at most `step` (≥ 0); the torque slew limiter. */
int32_t bm_slew(int32_t previous, int32_t target, int32_t step);

#endif /* BM_CORE_H */
