/* A scriptable HAL for the C unit tests: set the inputs, read the outputs and sent frames. */
#ifndef BM_FAKE_HAL_H
#define BM_FAKE_HAL_H

#include <stdint.h>

#include "link.h"

#define FAKE_MAX_FRAMES 64

struct fake_hal {
    int32_t position_urad;
    int32_t torque_mNm; /* last torque commanded by the core */
    int estop;
    int driver_fault;
    struct bm_rx rx;    /* decodes what the core sends */
    struct bm_frame frames[FAKE_MAX_FRAMES];
    int n_frames;       /* frames captured since fake_reset (oldest dropped beyond the max) */
};

extern struct fake_hal fake;

void fake_reset(void);

#endif /* BM_FAKE_HAL_H */
