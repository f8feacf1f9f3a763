/* Link layer of the bench protocol: CRC-16/CCITT-FALSE, COBS, frames, streaming decoder.
 *
 * raw frame = seq:u8 | msg_id:u8 | len:u8 | payload[len] | crc16:u16le (CRC over seq..payload)
 * wire      = COBS(raw) | 0x00
 * Portable C11, no dynamic allocation, no floating point. See firmware/PROTOCOL.md.
 */
#ifndef BM_LINK_H
#define BM_LINK_H

#include <stdint.h>

#include "protocol_gen.h"

#define BM_HEADER_SIZE 3u
#define BM_CRC_SIZE 2u
#define BM_MAX_RAW (BM_HEADER_SIZE + BM_MAX_PAYLOAD + BM_CRC_SIZE)
/* COBS adds one code byte per started run of 254 bytes; a raw frame is shorter than 254. */
#define BM_MAX_BLOCK (BM_MAX_RAW + 1u)
#define BM_MAX_WIRE (BM_MAX_BLOCK + 1u)

_Static_assert(BM_MAX_RAW < 254u, "a raw frame must fit in one COBS run");

struct bm_frame {
    uint8_t seq;
    uint8_t id;
    uint8_t len;
    uint8_t payload[BM_MAX_PAYLOAD];
};

/* Streaming decoder state: feed it every received byte. */
struct bm_rx {
    uint8_t block[BM_MAX_BLOCK];
    uint8_t n;
    uint8_t overflow;
    uint16_t bad_frames;  /* wraps */
    uint16_t good_frames; /* wraps */
};

uint16_t bm_crc16(const uint8_t *data, uint8_t n);
uint8_t bm_cobs_encode(const uint8_t *in, uint8_t n, uint8_t *out);
/* Returns 1 and the decoded length in *out_n, or 0 when `in` is not valid COBS. */
int bm_cobs_decode(const uint8_t *in, uint8_t n, uint8_t *out, uint8_t *out_n);
/* Writes the wire bytes (with final 0x00) to `wire` (BM_MAX_WIRE bytes); returns their count,
 * or 0 when len > BM_MAX_PAYLOAD. */
uint8_t bm_frame_encode(uint8_t seq, uint8_t id, const uint8_t *payload, uint8_t len,
                        uint8_t *wire);
/* Checks COBS, length and CRC of one block (bytes between delimiters); 1 and *out if valid. */
int bm_frame_decode(const uint8_t *block, uint8_t n, struct bm_frame *out);

void bm_rx_init(struct bm_rx *rx);
/* Consumes one byte; returns 1 when it completes a valid frame (then written to *out). Invalid
 * frames are counted in rx->bad_frames and skipped; sync is regained at the next 0x00. */
int bm_rx_byte(struct bm_rx *rx, uint8_t byte, struct bm_frame *out);

#endif /* BM_LINK_H */
