/* Scriptable HAL for the unit tests (see fake_hal.h). */
#include "fake_hal.h"

#include <string.h>

#include "hal.h"

struct fake_hal fake;

void fake_reset(void)
{
    memset(&fake, 0, sizeof fake);
    bm_rx_init(&fake.rx);
}

int32_t hal_encoder_urad(void) { return fake.position_urad; }
int32_t hal_torque_measured_mNm(void) { return fake.torque_mNm; }
void hal_motor_torque_mNm(int32_t torque) { fake.torque_mNm = torque; }
int hal_estop_input(void) { return fake.estop; }
int hal_driver_fault(void) { return fake.driver_fault; }

void hal_uart_write(const uint8_t *data, uint8_t len)
{
    for (uint8_t i = 0; i < len; i++) {
        struct bm_frame frame;
        if (bm_rx_byte(&fake.rx, data[i], &frame)) {
            if (fake.n_frames == FAKE_MAX_FRAMES) {
                memmove(&fake.frames[0], &fake.frames[1], sizeof frame * (FAKE_MAX_FRAMES - 1));
                fake.n_frames--;
            }
            fake.frames[fake.n_frames++] = frame;
        }
    }
}
