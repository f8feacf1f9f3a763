/* Link layer of the bench protocol (see link.h). */
#include "link.h"

#include <string.h>

uint16_t bm_crc16(const uint8_t *data, uint8_t n)
{
    uint16_t crc = 0xFFFFu;
    for (uint8_t i = 0; i < n; i++) {
        crc ^= (uint16_t)((uint16_t)data[i] << 8);
        for (uint8_t bit = 0; bit < 8u; bit++) {
            crc = (crc & 0x8000u) ? (uint16_t)((crc << 1) ^ 0x1021u) : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

uint8_t bm_cobs_encode(const uint8_t *in, uint8_t n, uint8_t *out)
{
    /* Valid for n < 254 (one run at most), which BM_MAX_RAW guarantees. */
    uint8_t code_at = 0;
    uint8_t o = 1;
    uint8_t code = 1;
    for (uint8_t i = 0; i < n; i++) {
        if (in[i] == 0u) {
            out[code_at] = code;
            code_at = o++;
            code = 1;
        } else {
            out[o++] = in[i];
            code++;
        }
    }
    out[code_at] = code;
    return o;
}

int bm_cobs_decode(const uint8_t *in, uint8_t n, uint8_t *out, uint8_t *out_n)
{
    uint8_t i = 0;
    uint8_t o = 0;
    while (i < n) {
        uint8_t code = in[i];
        if (code == 0u || (uint16_t)i + code > n) {
            return 0;
        }
        for (uint8_t k = 1; k < code; k++) {
            if (in[i + k] == 0u) {
                return 0;
            }
            out[o++] = in[i + k];
        }
        i = (uint8_t)(i + code);
        if (code != 0xFFu && i < n) {
            out[o++] = 0u;
        }
    }
    *out_n = o;
    return 1;
}

uint8_t bm_frame_encode(uint8_t seq, uint8_t id, const uint8_t *payload, uint8_t len,
                        uint8_t *wire)
{
    uint8_t raw[BM_MAX_RAW];
    if (len > BM_MAX_PAYLOAD) {
        return 0;
    }
    raw[0] = seq;
    raw[1] = id;
    raw[2] = len;
    if (len > 0u) {
        memcpy(&raw[BM_HEADER_SIZE], payload, len);
    }
    uint8_t n = (uint8_t)(BM_HEADER_SIZE + len);
    uint16_t crc = bm_crc16(raw, n);
    raw[n++] = (uint8_t)(crc & 0xFFu);
    raw[n++] = (uint8_t)(crc >> 8);
    uint8_t w = bm_cobs_encode(raw, n, wire);
    wire[w++] = 0u;
    return w;
}

int bm_frame_decode(const uint8_t *block, uint8_t n, struct bm_frame *out)
{
    uint8_t raw[BM_MAX_BLOCK];
    uint8_t raw_n = 0;
    if (n > BM_MAX_BLOCK || !bm_cobs_decode(block, n, raw, &raw_n)) {
        return 0;
    }
    if (raw_n < BM_HEADER_SIZE + BM_CRC_SIZE || raw_n > BM_MAX_RAW) {
        return 0;
    }
    uint8_t len = raw[2];
    if ((uint16_t)len + BM_HEADER_SIZE + BM_CRC_SIZE != raw_n) {
        return 0;
    }
    uint8_t body = (uint8_t)(raw_n - BM_CRC_SIZE);
    uint16_t crc = (uint16_t)(raw[body] | ((uint16_t)raw[body + 1u] << 8));
    if (bm_crc16(raw, body) != crc) {
        return 0;
    }
    out->seq = raw[0];
    out->id = raw[1];
    out->len = len;
    memcpy(out->payload, &raw[BM_HEADER_SIZE], len);
    return 1;
}

void bm_rx_init(struct bm_rx *rx)
{
    memset(rx, 0, sizeof *rx);
}

int bm_rx_byte(struct bm_rx *rx, uint8_t byte, struct bm_frame *out)
{
    if (byte != 0u) {
        if (rx->n < BM_MAX_BLOCK) {
            rx->block[rx->n++] = byte;
        } else {
            rx->overflow = 1;
        }
        return 0;
    }
    int good = 0;
    if (rx->overflow) {
        rx->bad_frames++;
    } else if (rx->n > 0u) {
        good = bm_frame_decode(rx->block, rx->n, out);
        if (good) {
            rx->good_frames++;
        } else {
            rx->bad_frames++;
        }
    }
    rx->n = 0;
    rx->overflow = 0;
    return good;
}
