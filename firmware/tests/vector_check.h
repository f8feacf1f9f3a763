/* Checks used by the generated golden-vector tests (vectors_gen.h). */
#ifndef BM_VECTOR_CHECK_H
#define BM_VECTOR_CHECK_H

#include <stdint.h>

#include "test_util.h"

void vector_check_encode(const char *name, uint8_t seq, uint8_t id, const uint8_t *payload,
                         uint8_t len, const uint8_t *frame, uint8_t frame_len);
void vector_check_decode(const char *name, const uint8_t *frame, uint8_t frame_len, uint8_t seq,
                         uint8_t id, uint8_t *payload, uint8_t *len);
void vector_check_rejected(const char *name, const uint8_t *stream, uint16_t n,
                           uint16_t bad_frames, uint16_t good_frames);

#endif /* BM_VECTOR_CHECK_H */
