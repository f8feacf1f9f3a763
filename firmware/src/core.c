/* Portable firmware core (see core.h). */
#include "core.h"

#include <string.h>

#include "hal.h"

#define TELEMETRY_DEFAULT_MS 10u

_Static_assert(BM_LIMIT_SETPOINT_QUEUE >= 2 && BM_LIMIT_SETPOINT_QUEUE <= 255,
               "the queue index is a uint8_t");
_Static_assert(BM_LIMIT_LEAD_MAX_MS < BM_LIMIT_WATCHDOG_MAX_MS, "lead must fit the watchdog");

static int32_t clamp_i32(int32_t value, int32_t low, int32_t high, uint8_t *clamped)
{
    if (value < low) {
        *clamped = 1;
        return low;
    }
    if (value > high) {
        *clamped = 1;
        return high;
    }
    return value;
}

static int32_t abs_i32(int32_t value)
{
    return value < 0 ? -value : value;
}

struct bm_gains bm_default_gains(void)
{
    /* kp ≈ 0.987 mN·m/µrad (I·ω² with I = 1 kg·m², ω = 2π·5 Hz), kd ≈ 0.0628 (2·I·ω). */
    struct bm_gains gains = {.kp_q16 = 64700, .kd_q16 = 4116};
    return gains;
}

void bm_core_init(struct bm_core *core, struct bm_gains gains)
{
    memset(core, 0, sizeof *core);
    core->gains = gains;
    bm_rx_init(&core->rx);
    core->state = BM_STATE_DISARMED;
    core->fault = BM_FAULT_NONE;
    core->watchdog_ticks = (uint16_t)BM_LIMIT_WATCHDOG_DEFAULT_MS;
    core->telemetry_period = TELEMETRY_DEFAULT_MS;
    core->telemetry_countdown = TELEMETRY_DEFAULT_MS;
    hal_motor_torque_mNm(0);
}

uint8_t bm_setpoint_outside(int32_t position_urad, int32_t velocity_urad_s, int32_t torque_mNm)
{
    uint8_t flags = 0;
    if (position_urad < BM_LIMIT_POSITION_MIN_URAD || position_urad > BM_LIMIT_POSITION_MAX_URAD) {
        flags |= BM_FLAG_POSITION_REFUSED;
    }
    if (velocity_urad_s < -BM_LIMIT_VELOCITY_MAX_URAD_S ||
        velocity_urad_s > BM_LIMIT_VELOCITY_MAX_URAD_S) {
        flags |= BM_FLAG_VELOCITY_REFUSED;
    }
    if (torque_mNm < -BM_LIMIT_TORQUE_MAX_MNM || torque_mNm > BM_LIMIT_TORQUE_MAX_MNM) {
        flags |= BM_FLAG_TORQUE_REFUSED;
    }
    return flags;
}

int32_t bm_slew(int32_t previous, int32_t target, int32_t step)
{
    if (target > previous + step) {
        return previous + step;
    }
    if (target < previous - step) {
        return previous - step;
    }
    return target;
}

static void send(struct bm_core *core, uint8_t id, const uint8_t *payload, uint8_t len)
{
    uint8_t wire[BM_MAX_WIRE];
    uint8_t n = bm_frame_encode(core->tx_seq++, id, payload, len, wire);
    hal_uart_write(wire, n);
}

static void send_ack(struct bm_core *core, const struct bm_frame *frame, uint8_t result)
{
    struct bm_msg_ack ack = {.acked_seq = frame->seq, .acked_id = frame->id, .result = result};
    uint8_t payload[BM_LEN_ACK];
    send(core, BM_MSG_ACK, payload, bm_pack_ack(&ack, payload));
}

static void send_hello_reply(struct bm_core *core)
{
    struct bm_msg_hello_reply m = {
        .protocol_version = BM_PROTOCOL_VERSION,
        .fw_major = BM_FW_MAJOR,
        .fw_minor = BM_FW_MINOR,
        .fw_patch = BM_FW_PATCH,
        .tick_hz = BM_TICK_HZ,
        .max_payload = BM_MAX_PAYLOAD,
        .torque_max_mNm = BM_LIMIT_TORQUE_MAX_MNM,
        .velocity_max_urad_s = BM_LIMIT_VELOCITY_MAX_URAD_S,
        .position_min_urad = BM_LIMIT_POSITION_MIN_URAD,
        .position_max_urad = BM_LIMIT_POSITION_MAX_URAD,
        .slew_max_mNm_per_tick = BM_LIMIT_SLEW_MAX_MNM_PER_TICK,
        .watchdog_default_ms = (uint16_t)BM_LIMIT_WATCHDOG_DEFAULT_MS,
        .watchdog_min_ms = (uint16_t)BM_LIMIT_WATCHDOG_MIN_MS,
        .watchdog_max_ms = (uint16_t)BM_LIMIT_WATCHDOG_MAX_MS,
        .mcu_ticks = core->ticks,
        .protocol_hash = BM_PROTOCOL_HASH,
    };
    uint8_t payload[BM_LEN_HELLO_REPLY];
    send(core, BM_MSG_HELLO_REPLY, payload, bm_pack_hello_reply(&m, payload));
}

static void send_telemetry(struct bm_core *core)
{
    struct bm_msg_telemetry m = {
        .seq_echo = core->last_rx_seq,
        .mcu_ticks = core->ticks,
        .setpoint_time_ms = core->sp_time_ms,
        .position_urad = core->position_urad,
        .velocity_urad_s = core->velocity_urad_s,
        .torque_mNm = hal_torque_measured_mNm(),
        .state = core->state,
        .fault = core->fault,
        .limit_flags = core->limit_flags,
        .bad_frames = core->rx.bad_frames,
        .late_setpoints = core->late_setpoints,
        .seq_gaps = core->seq_gaps,
    };
    uint8_t payload[BM_LEN_TELEMETRY];
    send(core, BM_MSG_TELEMETRY, payload, bm_pack_telemetry(&m, payload));
    core->limit_flags = 0;
}

/* Forget the schedule: empty the queue; the next SETPOINT sets a new origin. */
static void flush_queue(struct bm_core *core)
{
    core->queue_count = 0;
    core->queue_head = 0;
    core->has_origin = 0;
}

/* Latch a fault. `immediate` zeroes the torque at once (e-stop) instead of ramping it down. */
static void latch_fault(struct bm_core *core, uint8_t fault, int immediate)
{
    core->state = BM_STATE_FAULT;
    core->fault = fault;
    core->has_setpoint = 0;
    flush_queue(core);
    if (immediate) {
        core->torque_mNm = 0;
        hal_motor_torque_mNm(0);
    }
}

static uint8_t handle_hello(struct bm_core *core, const struct bm_frame *frame)
{
    struct bm_msg_hello m;
    if (!bm_unpack_hello(frame->payload, frame->len, &m)) {
        return 0xFFu;
    }
    send_hello_reply(core);
    if (core->state == BM_STATE_ARMED) {
        return BM_RESULT_BAD_STATE; /* a session cannot be restarted under a moving axis */
    }
    if (m.protocol_version != BM_PROTOCOL_VERSION) {
        core->handshake = 0;
        return BM_RESULT_VERSION_MISMATCH;
    }
    uint16_t period = m.telemetry_period_ms == 0u ? TELEMETRY_DEFAULT_MS : m.telemetry_period_ms;
    if (period < BM_LIMIT_TELEMETRY_PERIOD_MIN_MS || period > BM_LIMIT_TELEMETRY_PERIOD_MAX_MS) {
        return BM_RESULT_BAD_ARGUMENT;
    }
    core->telemetry_period = period;
    core->telemetry_countdown = period;
    core->handshake = 1;
    return BM_RESULT_OK;
}

static uint8_t handle_arm(struct bm_core *core, const struct bm_frame *frame)
{
    struct bm_msg_arm m;
    if (!bm_unpack_arm(frame->payload, frame->len, &m)) {
        return 0xFFu;
    }
    uint16_t watchdog = m.watchdog_ms == 0u ? (uint16_t)BM_LIMIT_WATCHDOG_DEFAULT_MS
                                            : m.watchdog_ms;
    uint16_t lead = m.lead_ms == 0u ? (uint16_t)BM_LIMIT_LEAD_DEFAULT_MS : m.lead_ms;
    if (!core->handshake) {
        return BM_RESULT_NO_HANDSHAKE;
    }
    if (core->state == BM_STATE_FAULT) {
        return BM_RESULT_FAULT_LATCHED;
    }
    if (core->state != BM_STATE_DISARMED) {
        return BM_RESULT_BAD_STATE;
    }
    if (hal_estop_input()) {
        return BM_RESULT_ESTOP_ACTIVE;
    }
    if (watchdog < BM_LIMIT_WATCHDOG_MIN_MS || watchdog > BM_LIMIT_WATCHDOG_MAX_MS ||
        lead > BM_LIMIT_LEAD_MAX_MS || lead >= watchdog) {
        return BM_RESULT_BAD_ARGUMENT; /* a lead ≥ watchdog would starve it before the first due */
    }
    core->watchdog_ticks = watchdog;
    core->lead_ticks = lead;
    flush_queue(core);
    core->state = BM_STATE_ARMED;
    core->last_feed_tick = core->ticks;
    core->has_setpoint = 0;
    core->torque_mNm = 0;
    return BM_RESULT_OK;
}

static uint8_t handle_clear(struct bm_core *core)
{
    if (core->state != BM_STATE_FAULT) {
        return BM_RESULT_OK;
    }
    if (hal_estop_input()) {
        return BM_RESULT_ESTOP_ACTIVE;
    }
    if (core->torque_mNm != 0) {
        return BM_RESULT_BAD_STATE; /* still ramping down */
    }
    core->state = BM_STATE_DISARMED;
    core->fault = BM_FAULT_NONE;
    return BM_RESULT_OK;
}

/* Signed distance a − b of two wrapping 32-bit times (ms or ticks). */
static int32_t wrap_diff(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b);
}

/* Returns 1 when the setpoint was valid: queued (if armed), late or not; 0 when it was
 * malformed (bad length, unknown mode); 2 when it was a valid frame refused because its
 * time_ms is not after the newest accepted one (out of order or duplicate).
 * A setpoint outside the limits latches LIMIT (refused, never clipped and applied: a host that
 * sends one is not the host the limits were agreed with). A full queue latches QUEUE_OVERFLOW:
 * the host is sending further ahead than agreed. */
static int handle_setpoint(struct bm_core *core, const struct bm_frame *frame)
{
    struct bm_msg_setpoint m;
    if (!bm_unpack_setpoint(frame->payload, frame->len, &m) || m.mode > BM_MODE_TORQUE) {
        return 0;
    }
    if (core->state != BM_STATE_ARMED) {
        return 1;
    }
    uint8_t outside = bm_setpoint_outside(m.position_urad, m.velocity_urad_s, m.torque_mNm);
    if (outside) {
        core->limit_flags |= outside;
        latch_fault(core, BM_FAULT_LIMIT, 0);
        return 1;
    }
    if (!core->has_origin) {
        /* the first setpoint of a stream is due `lead` after it arrived */
        core->origin_tick = core->ticks + core->lead_ticks - m.time_ms;
        core->has_origin = 1;
        core->last_apply_tick = core->ticks;
        /* until a second one comes in force, the stream's period is unknown: no earlier drop
         * of the feed-forward than the watchdog itself */
        core->sp_period_ms = core->watchdog_ticks;
    } else if (wrap_diff(m.time_ms, core->last_queued_ms) <= 0) {
        return 2;
    }
    struct bm_queued entry = {.time_ms = m.time_ms, .position_urad = m.position_urad,
                              .velocity_urad_s = m.velocity_urad_s,
                              .torque_mNm = m.torque_mNm, .mode = m.mode};
    /* Applied at the first tick ≥ due; arriving while core->ticks ≥ due means after it. */
    int late = wrap_diff(core->origin_tick + m.time_ms, core->ticks) <= 0;
    core->last_queued_ms = m.time_ms;
    core->last_feed_tick = core->ticks;
    if (late) {
        core->late_setpoints++;
    }
    if (core->queue_count > 0u) {
        uint8_t tail = (uint8_t)((core->queue_head + core->queue_count - 1u) %
                                 BM_LIMIT_SETPOINT_QUEUE);
        const struct bm_queued *newest = &core->queue[tail];
        if (late && wrap_diff(core->origin_tick + newest->time_ms, core->ticks) <= 0) {
            /* the newest queued one is overdue too: a late burst replaces it (latest due wins),
             * so catching up after a host stall never fills the queue */
            core->queue[tail] = entry;
            return 1;
        }
    }
    if (core->queue_count >= BM_LIMIT_SETPOINT_QUEUE) {
        latch_fault(core, BM_FAULT_QUEUE_OVERFLOW, 0);
        return 1;
    }
    core->queue[(core->queue_head + core->queue_count) % BM_LIMIT_SETPOINT_QUEUE] = entry;
    core->queue_count++;
    return 1;
}

/* Put in force the latest queued setpoint that is due at this tick (older due ones are
 * superseded: they were late, and only the freshest matters to the control law). */
static void apply_due(struct bm_core *core)
{
    const struct bm_queued *due = NULL;
    while (core->queue_count > 0u &&
           wrap_diff(core->origin_tick + core->queue[core->queue_head].time_ms, core->ticks) <= 0) {
        due = &core->queue[core->queue_head];
        core->queue_head = (uint8_t)((core->queue_head + 1u) % BM_LIMIT_SETPOINT_QUEUE);
        core->queue_count--;
    }
    if (due == NULL) {
        return;
    }
    if (core->has_setpoint) {
        uint32_t step = due->time_ms - core->sp_time_ms;
        core->sp_period_ms = step > core->watchdog_ticks ? core->watchdog_ticks : (uint16_t)step;
    }
    core->has_setpoint = 1;
    core->sp_mode = due->mode;
    core->sp_time_ms = due->time_ms;
    core->sp_position_urad = due->position_urad;
    core->sp_velocity_urad_s = due->velocity_urad_s;
    core->sp_torque_mNm = due->torque_mNm;
    core->last_apply_tick = core->ticks;
}

static void track_sequence(struct bm_core *core, uint8_t seq)
{
    if (core->have_rx_seq) {
        uint8_t missing = (uint8_t)(seq - core->last_rx_seq - 1u);
        core->seq_gaps = (uint16_t)(core->seq_gaps + missing);
    }
    core->last_rx_seq = seq;
    core->have_rx_seq = 1;
}

static void handle_frame(struct bm_core *core, const struct bm_frame *frame)
{
    uint8_t result = 0xFFu; /* 0xFF: malformed payload, counted as a bad frame */
    if (frame->id == BM_MSG_HELLO && core->state != BM_STATE_ARMED) {
        core->have_rx_seq = 0; /* a new session restarts the sequence count */
    }
    switch (frame->id) {
    case BM_MSG_HELLO:
        result = handle_hello(core, frame);
        break;
    case BM_MSG_ARM:
        result = handle_arm(core, frame);
        break;
    case BM_MSG_DISARM:
        if (frame->len == BM_LEN_DISARM) {
            result = core->state == BM_STATE_FAULT ? BM_RESULT_BAD_STATE : BM_RESULT_OK;
            if (core->state == BM_STATE_ARMED) {
                core->state = BM_STATE_DISARMED;
                core->torque_mNm = 0;
                core->has_setpoint = 0;
                flush_queue(core);
                hal_motor_torque_mNm(0);
            }
        }
        break;
    case BM_MSG_ESTOP:
        if (frame->len == BM_LEN_ESTOP) {
            latch_fault(core, BM_FAULT_ESTOP_MESSAGE, 1);
            result = BM_RESULT_OK;
        }
        break;
    case BM_MSG_FLUSH:
        if (frame->len == BM_LEN_FLUSH) {
            flush_queue(core); /* the setpoint in force stays: the axis holds it */
            result = BM_RESULT_OK;
        }
        break;
    case BM_MSG_CLEAR_FAULT:
        if (frame->len == BM_LEN_CLEAR_FAULT) {
            result = handle_clear(core);
        }
        break;
    case BM_MSG_SETPOINT: {
        int accepted = handle_setpoint(core, frame);
        if (accepted != 1) {
            core->rx.bad_frames++; /* malformed, or refused (out of order, duplicate time) */
        }
        if (accepted == 0) {
            return;
        }
        track_sequence(core, frame->seq);
        return; /* no ACK: telemetry echoes the sequence number */
    }
    case BM_MSG_HEARTBEAT:
        if (frame->len != BM_LEN_HEARTBEAT) {
            core->rx.bad_frames++;
            return;
        }
        if (core->state == BM_STATE_ARMED) {
            core->last_feed_tick = core->ticks;
        }
        track_sequence(core, frame->seq);
        return;
    default:
        result = BM_RESULT_UNKNOWN_MESSAGE;
        break;
    }
    if (result == 0xFFu) {
        core->rx.bad_frames++;
        return;
    }
    track_sequence(core, frame->seq);
    send_ack(core, frame, result);
}

void bm_core_rx_byte(struct bm_core *core, uint8_t byte)
{
    struct bm_frame frame;
    if (bm_rx_byte(&core->rx, byte, &frame)) {
        handle_frame(core, &frame);
    }
}

static void measure(struct bm_core *core)
{
    int32_t position = hal_encoder_urad();
    if (!core->have_position) {
        core->prev_position_urad = position;
        core->have_position = 1;
    }
    /* Finite difference over one tick (µrad/ms → µrad/s), first-order low-pass with gain 1/4. */
    int64_t raw = ((int64_t)position - core->prev_position_urad) * (int64_t)BM_TICK_HZ;
    int64_t filtered = core->velocity_urad_s + (raw - core->velocity_urad_s) / 4;
    /* An encoder jump of more than ~2 rad in one tick must not overflow the estimate. */
    if (filtered > INT32_MAX / 2) {
        filtered = INT32_MAX / 2;
    } else if (filtered < -(INT32_MAX / 2)) {
        filtered = -(INT32_MAX / 2);
    }
    core->velocity_urad_s = (int32_t)filtered;
    core->prev_position_urad = position;
    core->position_urad = position;
}

static void supervise(struct bm_core *core)
{
    if (hal_estop_input() && !(core->state == BM_STATE_FAULT &&
                               core->fault == BM_FAULT_ESTOP_INPUT)) {
        latch_fault(core, BM_FAULT_ESTOP_INPUT, 1);
        return;
    }
    if (core->state != BM_STATE_ARMED) {
        return;
    }
    if (hal_driver_fault()) {
        latch_fault(core, BM_FAULT_DRIVER, 1);
    } else if (core->ticks - core->last_feed_tick > core->watchdog_ticks ||
               (core->has_setpoint && core->ticks - core->last_apply_tick > core->watchdog_ticks)) {
        /* nothing received, or nothing new came in force (queue dry, or only far-future
         * setpoints queued), for longer than the timeout */
        latch_fault(core, BM_FAULT_WATCHDOG, 0);
    } else if (abs_i32(core->velocity_urad_s) > BM_LIMIT_OVERSPEED_URAD_S) {
        latch_fault(core, BM_FAULT_OVERSPEED, 0);
    } else if (core->position_urad < BM_LIMIT_POSITION_MIN_URAD - BM_LIMIT_OVERTRAVEL_MARGIN_URAD ||
               core->position_urad > BM_LIMIT_POSITION_MAX_URAD + BM_LIMIT_OVERTRAVEL_MARGIN_URAD) {
        latch_fault(core, BM_FAULT_OVERTRAVEL, 0);
    }
}

/* The host fell silent: the queue is empty and the setpoint in force has been in force longer
 * than the stream's period (the next one is overdue). */
static int host_silent(const struct bm_core *core)
{
    return core->queue_count == 0u && core->ticks - core->last_apply_tick > core->sp_period_ms;
}

/* The control law of the setpoint in force, before the output limits, mN·m. A silent host
 * leaves only the held setpoint's tracking (its position and velocity, as PROTOCOL.md §6
 * holds a setpoint): the torque feed-forward is dropped until a setpoint comes in force again
 * or the watchdog trips. (Not a brake to zero velocity: at 2–3 rad/s that would ask for more
 * than the motor's limit after a 10 ms hiccup of the link.) */
static int32_t control_law(struct bm_core *core)
{
    int64_t torque = core->sp_torque_mNm;
    int64_t velocity_error = (int64_t)core->sp_velocity_urad_s - core->velocity_urad_s;
    if (host_silent(core) && torque != 0) {
        core->limit_flags |= BM_FLAG_FEEDFORWARD_DROPPED; /* flagged only when there was one */
        torque = 0;
    }
    if (core->sp_mode == BM_MODE_POSITION) {
        int64_t position_error = (int64_t)core->sp_position_urad - core->position_urad;
        torque += (core->gains.kp_q16 * position_error + core->gains.kd_q16 * velocity_error) /
                  65536;
    } else if (core->sp_mode == BM_MODE_VELOCITY) {
        torque += core->gains.kd_q16 * velocity_error / 65536;
    }
    if (torque > BM_LIMIT_TORQUE_MAX_MNM * 2) {
        torque = BM_LIMIT_TORQUE_MAX_MNM * 2; /* keep within int32 before the real clamp */
    } else if (torque < -BM_LIMIT_TORQUE_MAX_MNM * 2) {
        torque = -BM_LIMIT_TORQUE_MAX_MNM * 2;
    }
    return (int32_t)torque;
}

/* Output limits of an armed axis: absolute torque, speed and range cut-offs, slew rate. */
static int32_t limit_output(struct bm_core *core, int32_t torque)
{
    uint8_t clamped = 0;
    torque = clamp_i32(torque, -BM_LIMIT_TORQUE_MAX_MNM, BM_LIMIT_TORQUE_MAX_MNM, &clamped);
    if (clamped) {
        core->limit_flags |= BM_FLAG_TORQUE_CLAMPED;
    }
    if ((core->velocity_urad_s > BM_LIMIT_VELOCITY_MAX_URAD_S && torque > 0) ||
        (core->velocity_urad_s < -BM_LIMIT_VELOCITY_MAX_URAD_S && torque < 0)) {
        torque = 0;
        core->limit_flags |= BM_FLAG_SPEED_LIMITED;
    }
    if ((core->position_urad > BM_LIMIT_POSITION_MAX_URAD && torque > 0) ||
        (core->position_urad < BM_LIMIT_POSITION_MIN_URAD && torque < 0)) {
        torque = 0;
        core->limit_flags |= BM_FLAG_RANGE_LIMITED;
    }
    int32_t slewed = bm_slew(core->torque_mNm, torque, BM_LIMIT_SLEW_MAX_MNM_PER_TICK);
    if (slewed != torque) {
        core->limit_flags |= BM_FLAG_SLEW_LIMITED;
    }
    return slewed;
}

void bm_core_tick(struct bm_core *core)
{
    core->ticks++;
    measure(core);
    if (core->state == BM_STATE_ARMED) {
        apply_due(core);
    }
    supervise(core);
    int32_t torque = 0;
    if (core->state == BM_STATE_ARMED) {
        torque = limit_output(core, core->has_setpoint ? control_law(core) : 0);
    } else if (core->state == BM_STATE_FAULT) {
        torque = bm_slew(core->torque_mNm, 0, BM_LIMIT_FAULT_RAMP_MNM_PER_TICK);
    }
    core->torque_mNm = torque;
    hal_motor_torque_mNm(torque);
    if (core->handshake && --core->telemetry_countdown == 0u) {
        core->telemetry_countdown = core->telemetry_period;
        send_telemetry(core);
    }
}
