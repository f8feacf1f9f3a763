/* libFuzzer harness of the frame parser and the core.
 *
 * Properties checked on every input (abort = finding):
 *  1. every frame the streaming decoder accepts is, byte for byte, a well-formed frame present in
 *     the input between two delimiters (so a garbled stream never yields an accepted setpoint);
 *  2. fed to the core with control ticks interleaved, the output torque never exceeds the
 *     absolute limit, is zero whenever the axis is not armed (except during a fault ramp, which
 *     only decreases), and the setpoint in force is always within the limits.
 * ASan and UBSan catch out-of-bounds accesses and undefined behaviour.
 * Inputs whose first byte is odd are also read as a list of messages ([id][len][payload]) that the
 * harness frames with valid CRCs, so the fuzzer reaches deep into the command handling too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "fake_hal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

static void check_core(const uint8_t *data, size_t size, int estop)
{
    static struct bm_core core;
    fake_reset();
    bm_core_init(&core, bm_default_gains());
    fake.estop = estop;
    int32_t previous = 0;
    for (size_t i = 0; i < size; i++) {
        bm_core_rx_byte(&core, data[i]);
        if ((i & 7u) == 7u) {
            /* Let the measured position wander with the input so the limits get exercised. */
            fake.position_urad += (int32_t)(int8_t)data[i] * 1000;
            bm_core_tick(&core);
            int32_t torque = fake.torque_mNm;
            if (torque > BM_LIMIT_TORQUE_MAX_MNM || torque < -BM_LIMIT_TORQUE_MAX_MNM) {
                abort();
            }
            if (core.state == BM_STATE_DISARMED && torque != 0) {
                abort();
            }
            if (core.state == BM_STATE_FAULT &&
                (torque > 0 ? torque : -torque) > (previous > 0 ? previous : -previous)) {
                abort();
            }
            if (core.state > BM_STATE_FAULT || core.sp_torque_mNm > BM_LIMIT_TORQUE_MAX_MNM ||
                core.sp_torque_mNm < -BM_LIMIT_TORQUE_MAX_MNM ||
                core.sp_position_urad > BM_LIMIT_POSITION_MAX_URAD ||
                core.sp_position_urad < BM_LIMIT_POSITION_MIN_URAD ||
                core.sp_velocity_urad_s > BM_LIMIT_VELOCITY_MAX_URAD_S ||
                core.sp_velocity_urad_s < -BM_LIMIT_VELOCITY_MAX_URAD_S) {
                abort();
            }
            previous = torque;
        }
    }
}

/* Frames [id][len][payload...] chunks of the input with valid CRCs; returns the wire length. */
static size_t frame_messages(const uint8_t *data, size_t size, uint8_t *wire, size_t capacity)
{
    size_t used = 0;
    uint8_t seq = 0;
    size_t i = 1;
    while (i + 2u <= size && used + BM_MAX_WIRE <= capacity) {
        uint8_t id = data[i];
        uint8_t len = (uint8_t)(data[i + 1u] % (BM_MAX_PAYLOAD + 1u));
        i += 2u;
        if (i + len > size) {
            len = (uint8_t)(size - i);
        }
        used += bm_frame_encode(seq++, id, &data[i], len, &wire[used]);
        i += len;
    }
    return used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t wire[8192];
    int estop = size > 0u && (data[0] & 0xC0u) == 0xC0u;
    check_link(data, size);
    check_core(data, size, estop);
    if (size > 0u && (data[0] & 1u)) {
        check_core(wire, frame_messages(data, size, wire, sizeof wire), estop);
    }
    return 0;
}
