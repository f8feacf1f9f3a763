/* libFuzzer harness of the frame parser and the core.
 *
 * Properties checked on every input (abort = finding):
 *  1. every frame the streaming decoder accepts is, byte for byte, a well-formed frame present in
 *     the input between two delimiters (so a garbled stream never yields an accepted setpoint);
 *  2. fed to the core with control ticks interleaved, the output torque never exceeds the
 *     absolute limit, is zero whenever the axis is not armed (except during a fault ramp, which
 *     only decreases), is zero at once on the e-stop input or a driver fault, and the setpoint in
 *     force and every queued one are always within the limits.
 * ASan and UBSan catch out-of-bounds accesses and undefined behaviour.
 *
 * The input chooses when the core ticks, so that several frames can arrive within one tick
 * (the late-replacement path) or many without one (a full queue):
 *  - raw mode (every input): the input is a wire byte stream; after each frame delimiter the core
 *    ticks 0–3 times, the count taken two bits at a time from the input's second byte;
 *  - structured mode (inputs whose first byte is odd): the rest is a list of operations
 *    [op][len][bytes...]: op < 0xF0 is a message (id = op, len mod 49 payload bytes) that the
 *    harness frames with a valid CRC; 0xF0 ticks `len` times; 0xF1 sets the e-stop input to
 *    `len & 1`; 0xF2 sets the driver fault to `len & 1`; 0xF3 moves the encoder by (int8)`len`
 *    mrad. This reaches deep into the command handling and the schedule.
 * The first byte's top two bits set assert the e-stop input from the start.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "fake_hal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { OP_TICK = 0xF0, OP_ESTOP = 0xF1, OP_DRIVER = 0xF2, OP_MOVE = 0xF3 };

static void check_link(const uint8_t *data, size_t size)
{
    struct bm_rx rx;
    struct bm_frame frame;
    size_t start = 0;
    bm_rx_init(&rx);
    for (size_t i = 0; i < size; i++) {
        if (bm_rx_byte(&rx, data[i], &frame)) {
            uint8_t wire[BM_MAX_WIRE];
            uint8_t n = bm_frame_encode(frame.seq, frame.id, frame.payload, frame.len, wire);
            if (n == 0u || (size_t)(n - 1u) != i - start || memcmp(wire, &data[start], n) != 0) {
                abort();
            }
        }
        if (data[i] == 0u) {
            start = i + 1u;
        }
    }
}

static struct bm_core core;
static int32_t previous_torque;

static int within_limits(int32_t position, int32_t velocity, int32_t torque)
{
    return position >= BM_LIMIT_POSITION_MIN_URAD && position <= BM_LIMIT_POSITION_MAX_URAD &&
           velocity >= -BM_LIMIT_VELOCITY_MAX_URAD_S && velocity <= BM_LIMIT_VELOCITY_MAX_URAD_S &&
           torque >= -BM_LIMIT_TORQUE_MAX_MNM && torque <= BM_LIMIT_TORQUE_MAX_MNM;
}

static int32_t magnitude(int32_t value)
{
    return value < 0 ? -value : value;
}

static void start_core(int estop)
{
    fake_reset();
    bm_core_init(&core, bm_default_gains());
    fake.estop = estop;
    previous_torque = 0;
}

/* One control tick, then the properties of the output and of the schedule. */
static void tick_and_check(void)
{
    bm_core_tick(&core);
    int32_t torque = fake.torque_mNm;
    if (torque > BM_LIMIT_TORQUE_MAX_MNM || torque < -BM_LIMIT_TORQUE_MAX_MNM) {
        abort();
    }
    if (core.state == BM_STATE_DISARMED && torque != 0) {
        abort();
    }
    if (core.state == BM_STATE_FAULT && magnitude(torque) > magnitude(previous_torque)) {
        abort();
    }
    if ((fake.estop || core.fault == BM_FAULT_DRIVER) && torque != 0) {
        abort(); /* the e-stop input and a driver fault cut the torque at once */
    }
    if (core.state > BM_STATE_FAULT || core.queue_count > BM_LIMIT_SETPOINT_QUEUE ||
        !within_limits(core.sp_position_urad, core.sp_velocity_urad_s, core.sp_torque_mNm)) {
        abort();
    }
    for (uint8_t i = 0; i < core.queue_count; i++) {
        const struct bm_queued *q = &core.queue[(core.queue_head + i) % BM_LIMIT_SETPOINT_QUEUE];
        if (!within_limits(q->position_urad, q->velocity_urad_s, q->torque_mNm)) {
            abort();
        }
    }
    previous_torque = torque;
}

/* Raw mode: the input as wire bytes; after each delimiter, 0–3 ticks chosen by data[1]. */
static void check_core_raw(const uint8_t *data, size_t size, int estop)
{
    start_core(estop);
    uint8_t pattern = size > 1u ? data[1] : 0x55u;
    unsigned frames = 0;
    for (size_t i = 0; i < size; i++) {
        bm_core_rx_byte(&core, data[i]);
        if (data[i] == 0u) {
            unsigned ticks = (pattern >> (2u * (frames++ % 4u))) & 3u;
            for (unsigned t = 0; t < ticks; t++) {
                tick_and_check();
            }
        }
    }
    tick_and_check();
}

/* Structured mode: operations [op][len][bytes...] (see the file comment). */
static void check_core_structured(const uint8_t *data, size_t size, int estop)
{
    start_core(estop);
    uint8_t seq = 0;
    size_t i = 1;
    while (i + 2u <= size) {
        uint8_t op = data[i];
        uint8_t arg = data[i + 1u];
        i += 2u;
        if (op == OP_TICK) {
            for (unsigned t = 0; t < arg; t++) {
                tick_and_check();
            }
        } else if (op == OP_ESTOP) {
            fake.estop = arg & 1u;
        } else if (op == OP_DRIVER) {
            fake.driver_fault = arg & 1u;
        } else if (op == OP_MOVE) {
            fake.position_urad += (int32_t)(int8_t)arg * 1000;
        } else if (op < 0xF0u) {
            uint8_t len = (uint8_t)(arg % (BM_MAX_PAYLOAD + 1u));
            if (i + len > size) {
                len = (uint8_t)(size - i);
            }
            uint8_t wire[BM_MAX_WIRE];
            uint8_t n = bm_frame_encode(seq++, op, &data[i], len, wire);
            for (uint8_t k = 0; k < n; k++) {
                bm_core_rx_byte(&core, wire[k]);
            }
            i += len;
        }
    }
    tick_and_check();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int estop = size > 0u && (data[0] & 0xC0u) == 0xC0u;
    check_link(data, size);
    check_core_raw(data, size, estop);
    if (size > 0u && (data[0] & 1u)) {
        check_core_structured(data, size, estop);
    }
    return 0;
}
