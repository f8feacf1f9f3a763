/* Unit tests of the link layer: CRC, COBS, frames, streaming decoder, golden vectors. */
#include <string.h>

#include "link.h"
#include "test_util.h"
#include "vector_check.h"
#include "vectors_gen.h"

void run_link_tests(void);

void vector_check_encode(const char *name, uint8_t seq, uint8_t id, const uint8_t *payload,
                         uint8_t len, const uint8_t *frame, uint8_t frame_len)
{
    uint8_t wire[BM_MAX_WIRE];
    uint8_t n = bm_frame_encode(seq, id, payload, len, wire);
    if (n != frame_len || memcmp(wire, frame, n) != 0) {
        fprintf(stderr, "golden frame %s: encoding differs\n", name);
    }
    CHECK_EQ(n, frame_len);
    CHECK(memcmp(wire, frame, frame_len) == 0);
}

void vector_check_decode(const char *name, const uint8_t *frame, uint8_t frame_len, uint8_t seq,
                         uint8_t id, uint8_t *payload, uint8_t *len)
{
    struct bm_rx rx;
    struct bm_frame out;
    int good = 0;
    bm_rx_init(&rx);
    for (uint8_t i = 0; i < frame_len; i++) {
        good += bm_rx_byte(&rx, frame[i], &out);
    }
    if (good != 1) {
        fprintf(stderr, "golden frame %s: not decoded\n", name);
        *len = 0;
    }
    CHECK_EQ(good, 1);
    CHECK_EQ(rx.bad_frames, 0);
    CHECK_EQ(out.seq, seq);
    CHECK_EQ(out.id, id);
    memcpy(payload, out.payload, out.len);
    *len = out.len;
}

void vector_check_rejected(const char *name, const uint8_t *stream, uint16_t n,
                           uint16_t bad_frames, uint16_t good_frames)
{
    struct bm_rx rx;
    struct bm_frame out;
    uint16_t good = 0;
    bm_rx_init(&rx);
    for (uint16_t i = 0; i < n; i++) {
        good = (uint16_t)(good + bm_rx_byte(&rx, stream[i], &out));
    }
    if (good != good_frames || rx.bad_frames != bad_frames) {
        fprintf(stderr, "rejected stream %s: %u good, %u bad\n", name, good, rx.bad_frames);
    }
    CHECK_EQ(good, good_frames);
    CHECK_EQ(rx.bad_frames, bad_frames);
}

static void test_crc_check_value(void)
{
    /* The catalogued check value of CRC-16/CCITT-FALSE. */
    const uint8_t text[] = "123456789";
    CHECK_EQ(bm_crc16(text, 9), 0x29B1);
}

static uint32_t lcg(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return *state >> 24;
}

static void test_cobs_roundtrip(void)
{
    uint32_t seed = 12345u;
    for (int trial = 0; trial < 2000; trial++) {
        uint8_t in[BM_MAX_RAW], enc[BM_MAX_BLOCK], dec[BM_MAX_BLOCK];
        uint8_t n = (uint8_t)(lcg(&seed) % (BM_MAX_RAW + 1u));
        for (uint8_t i = 0; i < n; i++) {
            uint32_t r = lcg(&seed);
            in[i] = (uint8_t)(r < 64u ? 0u : r); /* plenty of zero bytes */
        }
        uint8_t m = bm_cobs_encode(in, n, enc);
        uint8_t back = 0;
        CHECK_EQ(m, n + 1u);
        CHECK(memchr(enc, 0, m) == NULL);
        CHECK(bm_cobs_decode(enc, m, dec, &back) == 1);
        CHECK_EQ(back, n);
        CHECK(memcmp(in, dec, n) == 0);
    }
}

static void test_every_bit_flip_rejected(void)
{
    /* Flip each bit of a setpoint frame in turn: no flip may yield an accepted frame. */
    const uint8_t payload[BM_LEN_SETPOINT] = {1, 2, 0, 0, 0, 7, 8, 9, 0, 11, 12, 13, 14, 15, 0, 0, 1};
    uint8_t wire[BM_MAX_WIRE];
    uint8_t n = bm_frame_encode(42, BM_MSG_SETPOINT, payload, sizeof payload, wire);
    int accepted = 0;
    for (uint8_t byte = 0; byte + 1u < n; byte++) {
        for (uint8_t bit = 0; bit < 8u; bit++) {
            struct bm_rx rx;
            struct bm_frame out;
            uint8_t copy[BM_MAX_WIRE];
            memcpy(copy, wire, n);
            copy[byte] ^= (uint8_t)(1u << bit);
            bm_rx_init(&rx);
            for (uint8_t i = 0; i < n; i++) {
                accepted += bm_rx_byte(&rx, copy[i], &out);
            }
            CHECK(rx.bad_frames >= 1u);
        }
    }
    CHECK_EQ(accepted, 0);
}

static void test_overflow_then_resync(void)
{
    struct bm_rx rx;
    struct bm_frame out;
    uint8_t wire[BM_MAX_WIRE];
    uint8_t n = bm_frame_encode(3, BM_MSG_HEARTBEAT, NULL, 0, wire);
    int good = 0;
    bm_rx_init(&rx);
    for (int i = 0; i < 1000; i++) {
        good += bm_rx_byte(&rx, 0xA5u, &out);
    }
    good += bm_rx_byte(&rx, 0u, &out);
    CHECK_EQ(rx.bad_frames, 1);
    for (uint8_t i = 0; i < n; i++) {
        good += bm_rx_byte(&rx, wire[i], &out);
    }
    CHECK_EQ(good, 1);
    CHECK_EQ(out.seq, 3);
    CHECK_EQ(out.id, BM_MSG_HEARTBEAT);
}

static void test_encode_refuses_oversized_payload(void)
{
    uint8_t payload[BM_MAX_PAYLOAD + 1u] = {0};
    uint8_t wire[BM_MAX_WIRE + 1u];
    CHECK_EQ(bm_frame_encode(0, 1, payload, BM_MAX_PAYLOAD + 1u, wire), 0);
    CHECK_EQ(bm_frame_encode(0, 1, payload, BM_MAX_PAYLOAD, wire), BM_MAX_WIRE);
}

void run_link_tests(void)
{
    test_crc_check_value();
    test_cobs_roundtrip();
    run_golden_vectors();
    test_every_bit_flip_rejected();
    test_overflow_then_resync();
    test_encode_refuses_oversized_payload();
}
