/* Unit tests of the core: state machine, limits, slew limiter, watchdog, telemetry, counters. */
#include <string.h>

#include "core.h"
#include "fake_hal.h"
#include "test_util.h"

void run_core_tests(void);

static struct bm_core core;
static uint8_t host_seq;

static void start(void)
{
    fake_reset();
    host_seq = 0;
    bm_core_init(&core, bm_default_gains());
}

static void send_raw(uint8_t seq, uint8_t id, const uint8_t *payload, uint8_t len)
{
    uint8_t wire[BM_MAX_WIRE];
    uint8_t n = bm_frame_encode(seq, id, payload, len, wire);
    for (uint8_t i = 0; i < n; i++) {
        bm_core_rx_byte(&core, wire[i]);
    }
}

static void send_msg(uint8_t id, const uint8_t *payload, uint8_t len)
{
    send_raw(host_seq++, id, payload, len);
}

/* Result of the last ACK the core sent for message `id`, or -1 if there is none. */
static int last_ack(uint8_t id)
{
    for (int i = fake.n_frames - 1; i >= 0; i--) {
        struct bm_msg_ack ack = {0};
        if (fake.frames[i].id == BM_MSG_ACK &&
            bm_unpack_ack(fake.frames[i].payload, fake.frames[i].len, &ack) && ack.acked_id == id) {
            return ack.result;
        }
    }
    return -1;
}

static int last_telemetry(struct bm_msg_telemetry *m)
{
    for (int i = fake.n_frames - 1; i >= 0; i--) {
        if (fake.frames[i].id == BM_MSG_TELEMETRY) {
            return bm_unpack_telemetry(fake.frames[i].payload, fake.frames[i].len, m);
        }
    }
    return 0;
}

static int hello(uint8_t version, uint16_t period_ms)
{
    struct bm_msg_hello m = {.protocol_version = version, .telemetry_period_ms = period_ms};
    uint8_t p[BM_LEN_HELLO];
    send_msg(BM_MSG_HELLO, p, bm_pack_hello(&m, p));
    return last_ack(BM_MSG_HELLO);
}

static int arm_lead(uint16_t watchdog_ms, uint16_t lead_ms)
{
    struct bm_msg_arm m = {.watchdog_ms = watchdog_ms, .lead_ms = lead_ms};
    uint8_t p[BM_LEN_ARM];
    send_msg(BM_MSG_ARM, p, bm_pack_arm(&m, p));
    return last_ack(BM_MSG_ARM);
}

/* Most tests arm with a 1 ms lead: a setpoint sent one tick after the previous one, with a
 * time_ms one more, is applied at the next tick (as before the queue existed). */
static int arm(uint16_t watchdog_ms)
{
    return arm_lead(watchdog_ms, 1);
}

static int command(uint8_t id)
{
    send_msg(id, NULL, 0);
    return last_ack(id);
}

static void setpoint(uint32_t time_ms, uint8_t mode, int32_t pos, int32_t vel, int32_t torque)
{
    struct bm_msg_setpoint m = {.time_ms = time_ms, .mode = mode, .position_urad = pos,
                                .velocity_urad_s = vel, .torque_mNm = torque};
    uint8_t p[BM_LEN_SETPOINT];
    send_msg(BM_MSG_SETPOINT, p, bm_pack_setpoint(&m, p));
}

static void run(int n)
{
    for (int i = 0; i < n; i++) {
        bm_core_tick(&core);
    }
}

static void start_armed(void)
{
    start();
    CHECK_EQ(hello(BM_PROTOCOL_VERSION, 1), BM_RESULT_OK);
    CHECK_EQ(arm(0), BM_RESULT_OK);
    CHECK_EQ(core.state, BM_STATE_ARMED);
}

static void test_handshake(void)
{
    start();
    CHECK_EQ(arm(0), BM_RESULT_NO_HANDSHAKE);
    fake.n_frames = 0;
    CHECK_EQ(hello(BM_PROTOCOL_VERSION + 1u, 1), BM_RESULT_VERSION_MISMATCH);
    /* The reply carries the firmware's own version and limits even on a mismatch. */
    struct bm_msg_hello_reply reply = {0};
    CHECK_EQ(fake.frames[0].id, BM_MSG_HELLO_REPLY);
    CHECK(bm_unpack_hello_reply(fake.frames[0].payload, fake.frames[0].len, &reply));
    CHECK_EQ(reply.protocol_version, BM_PROTOCOL_VERSION);
    CHECK_EQ(reply.protocol_hash, BM_PROTOCOL_HASH); /* the identity of its protocol.toml */
    CHECK_EQ(reply.torque_max_mNm, BM_LIMIT_TORQUE_MAX_MNM);
    CHECK_EQ(reply.watchdog_default_ms, 50);
    CHECK_EQ(arm(0), BM_RESULT_NO_HANDSHAKE);
    CHECK_EQ(hello(BM_PROTOCOL_VERSION, 1001), BM_RESULT_BAD_ARGUMENT);
    CHECK_EQ(hello(BM_PROTOCOL_VERSION, 0), BM_RESULT_OK);
    CHECK_EQ(core.telemetry_period, 10);
    CHECK_EQ(arm(0), BM_RESULT_OK);
}

static void test_transitions(void)
{
    /* DISARMED → ARMED → DISARMED */
    start_armed();
    CHECK_EQ(core.watchdog_ticks, 50);
    CHECK_EQ(arm(0), BM_RESULT_BAD_STATE);
    setpoint(0, BM_MODE_TORQUE, 0, 0, 5000);
    run(3);
    CHECK_EQ(fake.torque_mNm, 5000);
    CHECK_EQ(command(BM_MSG_DISARM), BM_RESULT_OK);
    CHECK_EQ(core.state, BM_STATE_DISARMED);
    CHECK_EQ(fake.torque_mNm, 0); /* at once, before the next tick */
    /* disarmed means zero torque, whatever the host sends */
    setpoint(1, BM_MODE_TORQUE, 0, 0, 5000);
    run(5);
    CHECK_EQ(fake.torque_mNm, 0);
    CHECK_EQ(command(BM_MSG_DISARM), BM_RESULT_OK);

    /* ARMED → FAULT by ESTOP message: zero torque at once, latched */
    start_armed();
    setpoint(0, BM_MODE_TORQUE, 0, 0, 8000);
    run(4);
    CHECK_EQ(fake.torque_mNm, 8000);
    CHECK_EQ(command(BM_MSG_ESTOP), BM_RESULT_OK);
    CHECK_EQ(core.state, BM_STATE_FAULT);
    CHECK_EQ(core.fault, BM_FAULT_ESTOP_MESSAGE);
    CHECK_EQ(fake.torque_mNm, 0);
    run(2000);
    CHECK_EQ(core.state, BM_STATE_FAULT); /* nothing auto-clears */
    CHECK_EQ(arm(0), BM_RESULT_FAULT_LATCHED);
    CHECK_EQ(command(BM_MSG_DISARM), BM_RESULT_BAD_STATE);
    CHECK_EQ(core.state, BM_STATE_FAULT);
    CHECK_EQ(command(BM_MSG_CLEAR_FAULT), BM_RESULT_OK);
    CHECK_EQ(core.state, BM_STATE_DISARMED);
    CHECK_EQ(core.fault, BM_FAULT_NONE);
    CHECK_EQ(arm(0), BM_RESULT_OK);

    /* DISARMED → FAULT by ESTOP message */
    start();
    CHECK_EQ(command(BM_MSG_ESTOP), BM_RESULT_OK);
    CHECK_EQ(core.state, BM_STATE_FAULT);
    CHECK_EQ(command(BM_MSG_CLEAR_FAULT), BM_RESULT_OK);
    CHECK_EQ(core.state, BM_STATE_DISARMED);
    CHECK_EQ(command(BM_MSG_CLEAR_FAULT), BM_RESULT_OK); /* nothing to clear */

    /* HELLO while armed: refused, the session (and its telemetry) goes on */
    start_armed();
    CHECK_EQ(hello(BM_PROTOCOL_VERSION + 1u, 50), BM_RESULT_BAD_STATE);
    CHECK_EQ(core.state, BM_STATE_ARMED);
    CHECK_EQ(core.handshake, 1);
    CHECK_EQ(core.telemetry_period, 1);

    /* unknown message id: ACK UNKNOWN_MESSAGE, state unchanged */
    start_armed();
    CHECK_EQ(command(0x55), BM_RESULT_UNKNOWN_MESSAGE);
    CHECK_EQ(core.state, BM_STATE_ARMED);
}

static void test_estop_input(void)
{
    start_armed();
    setpoint(0, BM_MODE_TORQUE, 0, 0, 6000);
    run(3);
    CHECK_EQ(fake.torque_mNm, 6000);
    fake.estop = 1;
    run(1);
    CHECK_EQ(core.state, BM_STATE_FAULT);
    CHECK_EQ(core.fault, BM_FAULT_ESTOP_INPUT);
    CHECK_EQ(fake.torque_mNm, 0);
    CHECK_EQ(command(BM_MSG_CLEAR_FAULT), BM_RESULT_ESTOP_ACTIVE);
    CHECK_EQ(arm(0), BM_RESULT_FAULT_LATCHED);
    fake.estop = 0;
    run(10);
    CHECK_EQ(core.state, BM_STATE_FAULT);
    CHECK_EQ(command(BM_MSG_CLEAR_FAULT), BM_RESULT_OK);
    /* asserted while disarmed: latches too, and ARM is refused */
    fake.estop = 1;
    run(1);
    CHECK_EQ(core.fault, BM_FAULT_ESTOP_INPUT);
    CHECK_EQ(arm(0), BM_RESULT_FAULT_LATCHED);
}

static void test_driver_overspeed_overtravel(void)
{
    start_armed();
    fake.driver_fault = 1;
    setpoint(0, BM_MODE_TORQUE, 0, 0, 1000);
    run(1);
    CHECK_EQ(core.fault, BM_FAULT_DRIVER);
    CHECK_EQ(fake.torque_mNm, 0);

    /* overspeed: 12 rad/s measured (12000 µrad per 1 ms tick) */
    start_armed();
    for (int i = 0; i < 20 && core.state == BM_STATE_ARMED; i++) {
        setpoint((uint32_t)i, BM_MODE_TORQUE, 0, 0, 0);
        fake.position_urad += 12000;
        run(1);
    }
    CHECK_EQ(core.fault, BM_FAULT_OVERSPEED);

    /* overtravel: beyond the range by more than the margin */
    start_armed();
    fake.position_urad = BM_LIMIT_POSITION_MAX_URAD + BM_LIMIT_OVERTRAVEL_MARGIN_URAD - 10;
    run(1);
    setpoint(0, BM_MODE_TORQUE, 0, 0, 0);
    run(1);
    CHECK_EQ(core.state, BM_STATE_ARMED);
    fake.position_urad += 20; /* 2 µrad/tick: no overspeed */
    run(1);
    CHECK_EQ(core.fault, BM_FAULT_OVERTRAVEL);
}

static void test_setpoint_limits(void)
{
    CHECK_EQ(bm_setpoint_outside(BM_LIMIT_POSITION_MAX_URAD, BM_LIMIT_VELOCITY_MAX_URAD_S,
                                 -BM_LIMIT_TORQUE_MAX_MNM), 0); /* the limits themselves */
    CHECK_EQ(bm_setpoint_outside(BM_LIMIT_POSITION_MIN_URAD, -BM_LIMIT_VELOCITY_MAX_URAD_S,
                                 BM_LIMIT_TORQUE_MAX_MNM), 0);
    CHECK_EQ(bm_setpoint_outside(BM_LIMIT_POSITION_MAX_URAD + 1, -BM_LIMIT_VELOCITY_MAX_URAD_S - 1,
                                 BM_LIMIT_TORQUE_MAX_MNM + 1),
             BM_FLAG_POSITION_REFUSED | BM_FLAG_VELOCITY_REFUSED | BM_FLAG_TORQUE_REFUSED);
    CHECK_EQ(bm_setpoint_outside(BM_LIMIT_POSITION_MIN_URAD - 1, 0, 0), BM_FLAG_POSITION_REFUSED);
    CHECK_EQ(bm_setpoint_outside(0, 0, -BM_LIMIT_TORQUE_MAX_MNM - 1), BM_FLAG_TORQUE_REFUSED);

    /* the audit's frame: valid CRC, position INT32_MIN, velocity INT32_MAX, torque INT32_MIN.
     * Refused, LIMIT latched, nothing applied: the axis never gets a torque from it */
    start_armed();
    setpoint(0, BM_MODE_POSITION, INT32_MIN, INT32_MAX, INT32_MIN);
    CHECK_EQ(core.state, BM_STATE_FAULT);
    CHECK_EQ(core.fault, BM_FAULT_LIMIT);
    CHECK_EQ(core.queue_count, 0);
    int32_t peak = 0;
    for (int i = 0; i < 100; i++) {
        run(1);
        int32_t size = fake.torque_mNm < 0 ? -fake.torque_mNm : fake.torque_mNm;
        peak = size > peak ? size : peak;
    }
    CHECK_EQ(peak, 0);
    CHECK_EQ(core.has_setpoint, 0);
    struct bm_msg_telemetry tm = {0};
    CHECK(last_telemetry(&tm));
    CHECK_EQ(tm.fault, BM_FAULT_LIMIT);
    CHECK_EQ(command(BM_MSG_CLEAR_FAULT), BM_RESULT_OK); /* latched until cleared */
    CHECK_EQ(core.state, BM_STATE_DISARMED);

    /* mid-stream: the setpoint in force stays as it was, the torque ramps to zero */
    start_armed();
    for (uint32_t k = 0; k < 10u; k++) {
        setpoint(k, BM_MODE_TORQUE, 0, 0, 6000);
        run(1);
    }
    CHECK_EQ(fake.torque_mNm, 6000);
    fake.n_frames = 0;
    setpoint(10, BM_MODE_TORQUE, 0, 0, BM_LIMIT_TORQUE_MAX_MNM + 1);
    run(1);
    CHECK_EQ(core.fault, BM_FAULT_LIMIT);
    CHECK_EQ(core.sp_torque_mNm, 6000);
    CHECK_EQ(fake.torque_mNm, 6000 - BM_LIMIT_FAULT_RAMP_MNM_PER_TICK);
    CHECK(last_telemetry(&tm));
    CHECK_EQ(tm.limit_flags, BM_FLAG_TORQUE_REFUSED);

    /* a position beyond the range, a velocity beyond the limit: refused likewise */
    start_armed();
    setpoint(0, BM_MODE_POSITION, 5000000, 0, 0);
    run(1);
    CHECK_EQ(core.fault, BM_FAULT_LIMIT);
    CHECK(last_telemetry(&tm));
    CHECK_EQ(tm.limit_flags, BM_FLAG_POSITION_REFUSED);
    start_armed();
    setpoint(0, BM_MODE_VELOCITY, 0, -9000000, 0);
    run(1);
    CHECK_EQ(core.fault, BM_FAULT_LIMIT);
    CHECK(last_telemetry(&tm));
    CHECK_EQ(tm.limit_flags, BM_FLAG_VELOCITY_REFUSED);

    /* while disarmed setpoints are ignored, whatever they hold: no fault */
    start();
    hello(BM_PROTOCOL_VERSION, 1);
    setpoint(0, BM_MODE_POSITION, INT32_MIN, INT32_MAX, INT32_MIN);
    run(5);
    CHECK_EQ(core.state, BM_STATE_DISARMED);
    CHECK_EQ(fake.torque_mNm, 0);

    /* torque mode is bounded by the same limits: up to ±torque_max, refused beyond */
    start_armed();
    for (uint32_t k = 0; k < 200u; k++) { /* the slew limit: 150 ticks to the limit */
        setpoint(k, BM_MODE_TORQUE, 0, 0, -BM_LIMIT_TORQUE_MAX_MNM);
        run(1);
    }
    CHECK_EQ(fake.torque_mNm, -BM_LIMIT_TORQUE_MAX_MNM);
    setpoint(200, BM_MODE_TORQUE, 0, 0, -BM_LIMIT_TORQUE_MAX_MNM - 1);
    CHECK_EQ(core.fault, BM_FAULT_LIMIT);

    /* the output clamp stays, as the output stage's last barrier: a within-limits setpoint
     * whose feedback would ask for more is clamped at ±torque_max and flagged */
    start_armed();
    fake.position_urad = -400000;
    run(1);
    for (uint32_t k = 0; k < 200u; k++) {
        setpoint(k, BM_MODE_POSITION, 3000000, 0, BM_LIMIT_TORQUE_MAX_MNM);
        run(1);
    }
    CHECK_EQ(fake.torque_mNm, BM_LIMIT_TORQUE_MAX_MNM);
    CHECK(last_telemetry(&tm));
    CHECK(tm.limit_flags & BM_FLAG_TORQUE_CLAMPED);
    CHECK_EQ(core.state, BM_STATE_ARMED);

    /* speed cut: measured velocity above the limit, torque pushing further → zero */
    start_armed();
    for (int i = 0; i < 30; i++) {
        setpoint((uint32_t)i, BM_MODE_TORQUE, 0, 0, 4000);
        fake.position_urad += 8500; /* 8.5 rad/s */
        run(1);
    }
    CHECK_EQ(core.state, BM_STATE_ARMED);
    CHECK_EQ(fake.torque_mNm, 0);
    CHECK(last_telemetry(&tm));
    CHECK(tm.limit_flags & BM_FLAG_SPEED_LIMITED);
    setpoint(30, BM_MODE_TORQUE, 0, 0, -4000); /* braking torque is allowed */
    fake.position_urad += 8500;
    run(1);
    CHECK_EQ(fake.torque_mNm, -2000); /* slew-limited from 0 */

    /* range cut: outside the range, torque pushing further out → zero */
    start_armed();
    fake.position_urad = BM_LIMIT_POSITION_MIN_URAD - 1000;
    run(1);
    for (int i = 0; i < 5; i++) {
        setpoint((uint32_t)i, BM_MODE_TORQUE, 0, 0, -3000);
        run(1);
    }
    CHECK_EQ(fake.torque_mNm, 0);
    CHECK(last_telemetry(&tm));
    CHECK(tm.limit_flags & BM_FLAG_RANGE_LIMITED);
}

static void test_slew_limiter(void)
{
    CHECK_EQ(bm_slew(0, 10000, 2000), 2000);
    CHECK_EQ(bm_slew(0, -10000, 2000), -2000);
    CHECK_EQ(bm_slew(5000, 5500, 2000), 5500);
    CHECK_EQ(bm_slew(-150000, 150000, 2000), -148000);

    start_armed();
    const int32_t want[] = {2000, 4000, 6000, 8000, 9000, 9000};
    for (int i = 0; i < 6; i++) {
        setpoint((uint32_t)i, BM_MODE_TORQUE, 0, 0, 9000);
        run(1);
        CHECK_EQ(fake.torque_mNm, want[i]);
    }
    struct bm_msg_telemetry tm = {0};
    CHECK(last_telemetry(&tm));
    CHECK_EQ(tm.limit_flags, 0); /* period 1: flags of the last tick only */
    setpoint(6, BM_MODE_TORQUE, 0, 0, -9000);
    run(1);
    CHECK_EQ(fake.torque_mNm, 7000);
    CHECK(last_telemetry(&tm));
    CHECK_EQ(tm.limit_flags, BM_FLAG_SLEW_LIMITED);
}

/* Watchdog: armed with `timeout` ms, fed at one tick; must trip after `timeout` and by
 * `timeout` + one tick, then ramp the torque to zero at the fault ramp rate. */
static void check_watchdog(uint16_t timeout)
{
    start();
    CHECK_EQ(hello(BM_PROTOCOL_VERSION, 1), BM_RESULT_OK);
    CHECK_EQ(arm(timeout), BM_RESULT_OK);
    for (int i = 0; i < 10; i++) {
        setpoint((uint32_t)i, BM_MODE_TORQUE, 0, 0, 10000);
        run(1);
    }
    CHECK_EQ(fake.torque_mNm, 10000);
    setpoint(10, BM_MODE_TORQUE, 0, 0, 10000); /* last feed, between two ticks */
    run(timeout);
    CHECK_EQ(core.state, BM_STATE_ARMED); /* `timeout` ms after the feed: not yet */
    run(1);
    CHECK_EQ(core.state, BM_STATE_FAULT); /* within one more tick: tripped */
    CHECK_EQ(core.fault, BM_FAULT_WATCHDOG);
    /* the torque-mode feed-forward went as soon as the next setpoint was overdue (slew-limited,
     * 5 ticks): nothing is left at the trip (the fault ramp: test_silent_host) */
    CHECK_EQ(fake.torque_mNm, 0);
    run(1000);
    CHECK_EQ(core.state, BM_STATE_FAULT);
    CHECK_EQ(command(BM_MSG_CLEAR_FAULT), BM_RESULT_OK);
}

static void test_watchdog(void)
{
    check_watchdog(50);
    check_watchdog(10);
    check_watchdog(500);
    /* heartbeats feed it too */
    start_armed();
    for (int i = 0; i < 20; i++) {
        run(40);
        command(BM_MSG_HEARTBEAT);
    }
    CHECK_EQ(core.state, BM_STATE_ARMED);
    run(51);
    CHECK_EQ(core.fault, BM_FAULT_WATCHDOG);
    /* garbled frames do not feed it */
    start_armed();
    for (int i = 0; i < 60; i++) {
        uint8_t junk[] = {0x04, 0x11, 0x22, 0x33, 0x00};
        for (unsigned k = 0; k < sizeof junk; k++) {
            bm_core_rx_byte(&core, junk[k]);
        }
        run(1);
    }
    CHECK_EQ(core.fault, BM_FAULT_WATCHDOG);
    CHECK_EQ(core.rx.bad_frames, 60);
    /* bounds of the configurable timeout */
    start();
    hello(BM_PROTOCOL_VERSION, 1);
    CHECK_EQ(arm(9), BM_RESULT_BAD_ARGUMENT);
    CHECK_EQ(arm(501), BM_RESULT_BAD_ARGUMENT);
    CHECK_EQ(core.state, BM_STATE_DISARMED);
}

static void test_telemetry_and_counters(void)
{
    start();
    fake.position_urad = 123456;
    run(5);
    CHECK_EQ(fake.n_frames, 0); /* no telemetry before the handshake */
    hello(BM_PROTOCOL_VERSION, 4);
    fake.n_frames = 0;
    run(12);
    CHECK_EQ(fake.n_frames, 3);
    arm(0);
    setpoint(1000, BM_MODE_POSITION, 100, 0, 0);
    setpoint(1001, BM_MODE_POSITION, 100, 0, 0);
    host_seq = (uint8_t)(host_seq + 3u); /* three frames lost */
    setpoint(1002, BM_MODE_POSITION, 100, 0, 0);
    run(20);
    setpoint(1003, BM_MODE_POSITION, 100, 0, 0); /* 20 ms late */
    uint8_t junk[] = {0x02, 0x99, 0x00};
    for (unsigned k = 0; k < sizeof junk; k++) {
        bm_core_rx_byte(&core, junk[k]);
    }
    run(4);
    struct bm_msg_telemetry tm = {0};
    CHECK(last_telemetry(&tm));
    CHECK_EQ(tm.seq_echo, (uint8_t)(host_seq - 1u));
    CHECK_EQ(tm.mcu_ticks, core.ticks);
    CHECK_EQ(tm.setpoint_time_ms, 1003);
    CHECK_EQ(tm.position_urad, 123456);
    CHECK_EQ(tm.state, BM_STATE_ARMED);
    CHECK_EQ(tm.fault, BM_FAULT_NONE);
    CHECK_EQ(tm.seq_gaps, 3);
    CHECK_EQ(tm.late_setpoints, 1);
    CHECK_EQ(tm.bad_frames, 1);
    CHECK_EQ(tm.torque_mNm, fake.torque_mNm);
    /* a setpoint with an unknown mode is a bad frame and is not applied */
    setpoint(1004, 7, 0, 0, 0);
    CHECK_EQ(core.rx.bad_frames, 2);
    CHECK_EQ(core.sp_time_ms, 1003);
}

static void start_armed_lead(uint16_t watchdog_ms, uint16_t lead_ms)
{
    start();
    CHECK_EQ(hello(BM_PROTOCOL_VERSION, 1), BM_RESULT_OK);
    CHECK_EQ(arm_lead(watchdog_ms, lead_ms), BM_RESULT_OK);
}

static void test_setpoints_wait_for_their_due_tick(void)
{
    /* lead 20: ten setpoints sent at once are applied one per tick from 20 ticks on */
    start_armed_lead(50, 20);
    uint32_t sent_at = core.ticks;
    for (uint32_t k = 0; k < 10u; k++) {
        setpoint(500u + k, BM_MODE_TORQUE, 0, 0, 1000 * (int32_t)(k + 1u));
    }
    CHECK_EQ(core.queue_count, 10);
    run(19);
    CHECK_EQ(core.has_setpoint, 0); /* nothing due yet: zero torque */
    CHECK_EQ(fake.torque_mNm, 0);
    run(1);
    CHECK_EQ(core.ticks, sent_at + 20u);
    CHECK_EQ(core.sp_time_ms, 500);
    CHECK_EQ(fake.torque_mNm, 1000);
    run(1);
    CHECK_EQ(core.sp_time_ms, 501);
    CHECK_EQ(core.queue_count, 8);
    run(8);
    CHECK_EQ(core.sp_time_ms, 509);
    CHECK_EQ(core.queue_count, 0);
    CHECK_EQ(core.late_setpoints, 0);
    /* a 5 ms gap in time_ms is a 5-tick hold of the setpoint in force */
    setpoint(514, BM_MODE_TORQUE, 0, 0, 0);
    run(4);
    CHECK_EQ(core.sp_time_ms, 509);
    run(1);
    CHECK_EQ(core.sp_time_ms, 514);
    CHECK_EQ(core.late_setpoints, 0);
    /* lead 0 in ARM means the default; a lead ≥ the watchdog or above the maximum is refused */
    start();
    hello(BM_PROTOCOL_VERSION, 1);
    CHECK_EQ(arm_lead(50, 50), BM_RESULT_BAD_ARGUMENT);
    CHECK_EQ(arm_lead(200, 101), BM_RESULT_BAD_ARGUMENT);
    CHECK_EQ(core.state, BM_STATE_DISARMED);
    CHECK_EQ(arm_lead(0, 0), BM_RESULT_OK);
    CHECK_EQ(core.lead_ticks, 20);
}

static void test_late_setpoints(void)
{
    /* lead 5, one setpoint per tick, then the host stalls 8 ticks and sends the missed ones */
    start_armed_lead(50, 5);
    uint32_t c = core.ticks;
    for (uint32_t k = 0; k < 10u; k++) {
        setpoint(k, BM_MODE_TORQUE, 0, 0, 0);
        run(1);
    }
    run(8); /* stalled: setpoints 0..9 (due c+5..c+14) all applied, queue dry */
    CHECK_EQ(core.ticks, c + 18u);
    CHECK_EQ(core.sp_time_ms, 9);
    for (uint32_t k = 10; k <= 18u; k++) {
        setpoint(k, BM_MODE_TORQUE, 0, 0, 0);
    }
    /* due c+15..c+23: 10..13 arrived at or after their due tick → 4 late; the overdue ones
     * replace each other in the queue (the latest due wins) */
    CHECK_EQ(core.late_setpoints, 4);
    CHECK_EQ(core.queue_count, 6);
    run(1);
    CHECK_EQ(core.sp_time_ms, 14); /* the latest due at c+19, not the stale 13 */
    CHECK_EQ(core.queue_count, 4);
    run(4);
    CHECK_EQ(core.sp_time_ms, 18);
    CHECK_EQ(core.state, BM_STATE_ARMED);
    struct bm_msg_telemetry tm = {0};
    CHECK(last_telemetry(&tm));
    CHECK_EQ(tm.late_setpoints, 4);
    /* the first setpoint of a stream defines the origin: never late, however it is timed */
    start_armed_lead(50, 1);
    run(40); /* within the watchdog */
    setpoint(7, BM_MODE_TORQUE, 0, 0, 0);
    run(1);
    CHECK_EQ(core.sp_time_ms, 7);
    CHECK_EQ(core.late_setpoints, 0);
}

static void test_queue_full_is_a_fault(void)
{
    start_armed_lead(200, 100);
    for (uint32_t k = 0; k < (uint32_t)BM_LIMIT_SETPOINT_QUEUE; k++) {
        setpoint(k, BM_MODE_TORQUE, 0, 0, 4000);
    }
    CHECK_EQ(core.queue_count, BM_LIMIT_SETPOINT_QUEUE);
    CHECK_EQ(core.state, BM_STATE_ARMED);
    setpoint(BM_LIMIT_SETPOINT_QUEUE, BM_MODE_TORQUE, 0, 0, 4000);
    CHECK_EQ(core.state, BM_STATE_FAULT);
    CHECK_EQ(core.fault, BM_FAULT_QUEUE_OVERFLOW);
    CHECK_EQ(core.queue_count, 0);
    run(200);
    CHECK_EQ(core.has_setpoint, 0); /* the queued setpoints never come in force */
    CHECK_EQ(fake.torque_mNm, 0);
    CHECK_EQ(command(BM_MSG_CLEAR_FAULT), BM_RESULT_OK);
}

static void test_out_of_order_and_duplicate_times(void)
{
    start_armed_lead(50, 5);
    setpoint(10, BM_MODE_TORQUE, 0, 0, 100);
    setpoint(10, BM_MODE_TORQUE, 0, 0, 999); /* duplicate time: refused */
    setpoint(9, BM_MODE_TORQUE, 0, 0, 999);  /* older: refused */
    setpoint(11, BM_MODE_TORQUE, 0, 0, 200);
    CHECK_EQ(core.rx.bad_frames, 2);
    CHECK_EQ(core.seq_gaps, 0); /* refused, yet received: no gap in the sequence */
    CHECK_EQ(core.queue_count, 2);
    run(5);
    CHECK_EQ(core.sp_time_ms, 10);
    CHECK_EQ(core.sp_torque_mNm, 100);
    run(1);
    CHECK_EQ(core.sp_time_ms, 11);
    CHECK_EQ(core.sp_torque_mNm, 200);
    /* "older" across half the 32-bit range: 0x80000000 then 0x7FFFFFFF, 0 are refused */
    start_armed_lead(50, 1);
    setpoint(0x80000000u, BM_MODE_TORQUE, 0, 0, 0);
    setpoint(0x7FFFFFFFu, BM_MODE_TORQUE, 0, 0, 0);
    setpoint(0u, BM_MODE_TORQUE, 0, 0, 0);
    run(1);
    CHECK_EQ(core.sp_time_ms, 0x80000000u);
    CHECK_EQ(core.rx.bad_frames, 2);
    CHECK_EQ(core.late_setpoints, 0);
    CHECK_EQ(core.state, BM_STATE_ARMED);
}

static void test_time_wraps(void)
{
    /* time_ms and the due tick wrap at 2^32 without a hiccup */
    start_armed_lead(50, 2);
    const uint32_t times[] = {0xFFFFFFFDu, 0xFFFFFFFEu, 0xFFFFFFFFu, 0u, 1u, 2u};
    for (unsigned k = 0; k < 6u; k++) {
        setpoint(times[k], BM_MODE_TORQUE, 0, 0, (int32_t)k);
        run(1);
        if (k >= 1u) {
            CHECK_EQ(core.sp_time_ms, times[k - 1u]);
        }
    }
    CHECK_EQ(core.late_setpoints, 0);
    CHECK_EQ(core.rx.bad_frames, 0);
    /* and so does mcu_ticks */
    start();
    core.ticks = 0xFFFFFFF0u;
    hello(BM_PROTOCOL_VERSION, 1);
    arm_lead(50, 3);
    for (uint32_t k = 0; k < 40u; k++) {
        setpoint(k, BM_MODE_TORQUE, 0, 0, 0);
        run(1);
    }
    CHECK_EQ(core.sp_time_ms, 37);
    CHECK_EQ(core.late_setpoints, 0);
    CHECK_EQ(core.state, BM_STATE_ARMED);
}

static void test_dry_queue_trips_the_watchdog(void)
{
    /* heartbeats keep arriving, but nothing new comes in force: the watchdog trips */
    start_armed_lead(20, 5);
    uint32_t c = core.ticks;
    setpoint(0, BM_MODE_TORQUE, 0, 0, 3000);
    setpoint(100, BM_MODE_TORQUE, 0, 0, 3000); /* far ahead: 95 ms of nothing in force */
    run(5);
    CHECK_EQ(core.sp_time_ms, 0); /* in force at c+5 */
    while (core.ticks < c + 25u) {
        run(1);
        command(BM_MSG_HEARTBEAT);
    }
    CHECK_EQ(core.state, BM_STATE_ARMED); /* 20 ticks after the last one came in force */
    run(1);
    CHECK_EQ(core.state, BM_STATE_FAULT);
    CHECK_EQ(core.fault, BM_FAULT_WATCHDOG);
    CHECK_EQ(core.queue_count, 0);
}

static void test_stops_flush_the_queue(void)
{
    /* DISARM acts at once, and the queued setpoints do not come back after a new ARM */
    start_armed_lead(50, 10);
    for (uint32_t k = 0; k < 20u; k++) {
        setpoint(k, BM_MODE_TORQUE, 0, 0, 5000);
    }
    run(13);
    CHECK_EQ(fake.torque_mNm, 5000);
    CHECK_EQ(command(BM_MSG_DISARM), BM_RESULT_OK);
    CHECK_EQ(fake.torque_mNm, 0);
    CHECK_EQ(core.queue_count, 0);
    CHECK_EQ(arm_lead(50, 10), BM_RESULT_OK);
    for (int i = 0; i < 40; i++) {
        run(1);
        command(BM_MSG_HEARTBEAT);
    }
    CHECK_EQ(core.has_setpoint, 0);
    CHECK_EQ(fake.torque_mNm, 0);
    /* ESTOP likewise */
    start_armed_lead(50, 10);
    for (uint32_t k = 0; k < 20u; k++) {
        setpoint(k, BM_MODE_TORQUE, 0, 0, 5000);
    }
    run(12);
    CHECK_EQ(command(BM_MSG_ESTOP), BM_RESULT_OK);
    CHECK_EQ(fake.torque_mNm, 0);
    CHECK_EQ(core.queue_count, 0);
    /* FLUSH: the setpoint in force is held, the queue emptied, the next setpoint re-origins */
    start_armed_lead(50, 10);
    for (uint32_t k = 0; k < 20u; k++) {
        setpoint(k, BM_MODE_TORQUE, 0, 0, 1000 + (int32_t)k);
    }
    run(12); /* 0, 1, 2 applied */
    CHECK_EQ(core.sp_time_ms, 2);
    CHECK_EQ(command(BM_MSG_FLUSH), BM_RESULT_OK);
    CHECK_EQ(core.queue_count, 0);
    CHECK_EQ(core.state, BM_STATE_ARMED);
    setpoint(3, BM_MODE_TORQUE, 0, 0, 0); /* an earlier time than the flushed ones: accepted */
    run(9);
    CHECK_EQ(core.sp_time_ms, 2); /* held for the lead */
    CHECK_EQ(core.sp_torque_mNm, 1002);
    run(1);
    CHECK_EQ(core.sp_time_ms, 3);
    CHECK_EQ(core.late_setpoints, 0);
}

static void test_silent_host(void)
{
    /* lead 5, telemetry every tick; position mode, 10 mrad ahead of the axis, 40 N·m feed-forward:
     * τ = 40000 + kp·10000 = 40000 + 9872 mN·m */
    start_armed_lead(50, 5);
    for (uint32_t k = 0; k < 50u; k++) {
        setpoint(k, BM_MODE_POSITION, 10000, 0, 40000);
        run(1);
    }
    /* the host falls silent: the 5 queued ahead still play; the last is in force 4 ticks on */
    run(5);
    CHECK_EQ(core.sp_time_ms, 49);
    CHECK_EQ(fake.torque_mNm, 49872); /* in force for one period: still the setpoint */
    run(1);
    /* overdue: the feed-forward is dropped at once (the slew limit shapes the step) */
    CHECK_EQ(fake.torque_mNm, 49872 - BM_LIMIT_SLEW_MAX_MNM_PER_TICK);
    struct bm_msg_telemetry tm = {0};
    CHECK(last_telemetry(&tm));
    CHECK(tm.limit_flags & BM_FLAG_FEEDFORWARD_DROPPED);
    run(19);
    CHECK_EQ(fake.torque_mNm, 9872); /* only the position hold remains */
    run(24);
    CHECK_EQ(core.state, BM_STATE_ARMED);
    CHECK_EQ(fake.torque_mNm, 9872);
    run(1); /* 51 ticks after the last feed */
    CHECK_EQ(core.fault, BM_FAULT_WATCHDOG);
    CHECK_EQ(fake.torque_mNm, 9872 - BM_LIMIT_FAULT_RAMP_MNM_PER_TICK);
    CHECK_EQ(command(BM_MSG_CLEAR_FAULT), BM_RESULT_BAD_STATE); /* still ramping */
    run(9);
    CHECK_EQ(fake.torque_mNm, 0);
    CHECK_EQ(command(BM_MSG_CLEAR_FAULT), BM_RESULT_OK);

    /* a slower stream (one setpoint every 4 ms, lead 1) keeps its feed-forward between two */
    start_armed_lead(50, 1);
    for (uint32_t k = 0; k < 30u; k++) {
        setpoint(4u * k, BM_MODE_TORQUE, 0, 0, 8000);
        run(4);
        CHECK(fake.torque_mNm >= 6000 || k < 2u);
    }
    CHECK_EQ(fake.torque_mNm, 8000);
    CHECK(last_telemetry(&tm));
    CHECK_EQ(tm.limit_flags & BM_FLAG_FEEDFORWARD_DROPPED, 0);
    /* and a setpoint coming in force again restores it */
    run(3);
    CHECK(fake.torque_mNm < 8000);
    setpoint(4u * 30u, BM_MODE_TORQUE, 0, 0, 8000); /* late: in force at the next tick */
    run(2);
    CHECK_EQ(fake.torque_mNm, 8000);
    CHECK_EQ(core.state, BM_STATE_ARMED);
}

static void test_position_mode_direction(void)
{
    /* Position error and velocity error produce torque of the right sign and size. */
    start_armed();
    setpoint(0, BM_MODE_POSITION, 1000, 0, 0);
    run(1);
    /* kp·1000 µrad = 64700·1000/65536 = 987 mN·m (within the slew step) */
    CHECK_EQ(fake.torque_mNm, 987);
    setpoint(1, BM_MODE_VELOCITY, 0, 100000, 500);
    run(1);
    /* 500 + kd·100000 = 500 + 4116·100000/65536 = 500 + 6280, slew-limited to 987 + 2000 */
    CHECK_EQ(fake.torque_mNm, 2987);
    for (uint32_t k = 2; k < 5u; k++) {
        setpoint(k, BM_MODE_VELOCITY, 0, 100000, 500);
        run(1);
    }
    CHECK_EQ(fake.torque_mNm, 6780);
}

void run_core_tests(void)
{
    test_handshake();
    test_transitions();
    test_estop_input();
    test_driver_overspeed_overtravel();
    test_setpoint_limits();
    test_slew_limiter();
    test_watchdog();
    test_telemetry_and_counters();
    test_setpoints_wait_for_their_due_tick();
    test_late_setpoints();
    test_queue_full_is_a_fault();
    test_out_of_order_and_duplicate_times();
    test_time_wraps();
    test_dry_queue_trips_the_watchdog();
    test_stops_flush_the_queue();
    test_position_mode_direction();
    test_silent_host();
}
