/* Hardware-abstraction layer: everything the portable core needs from a board.
 *
 * The core never includes board headers. A board (firmware/board/<name>/) implements these
 * functions and calls bm_core_rx_byte() for every received byte and bm_core_tick() once per
 * control tick (BM_TICK_HZ, 1 kHz). Units are the wire units: µrad and mN·m.
 */
#ifndef BM_HAL_H
#define BM_HAL_H

#include <stdint.h>

/* Absolute axis position from the encoder, µrad (already quantised by the encoder). */
int32_t hal_encoder_urad(void);
/* Torque the motor actually produces (current sensing, or the plant model), mN·m. */
int32_t hal_torque_measured_mNm(void);
/* Command the motor torque, mN·m; the core has applied every limit already. */
void hal_motor_torque_mNm(int32_t torque);
/* 1 while the emergency-stop input is asserted. */
int hal_estop_input(void);
/* 1 while the motor driver reports a fault. */
int hal_driver_fault(void);
/* Queue bytes for transmission to the host (must not block for longer than a tick). */
void hal_uart_write(const uint8_t *data, uint8_t len);

#endif /* BM_HAL_H */
