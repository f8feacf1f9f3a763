/* HAL implementation of the host board (simulated bench). */
#include "hal_host.h"

#include <math.h>
#include <string.h>

#include "hal.h"

struct host_board board;

int32_t hal_encoder_urad(void) { return plant_encoder_urad(&board.plant); }

int32_t hal_torque_measured_mNm(void)
{
    return (int32_t)lround(board.plant.applied_torque_nm * 1000.0);
}

void hal_motor_torque_mNm(int32_t torque) { board.torque_command_mNm = torque; }
int hal_estop_input(void) { return board.estop; }
int hal_driver_fault(void) { return board.driver_fault; }

void hal_uart_write(const uint8_t *data, uint8_t len)
{
    if (board.tx_len + len > HOST_TX_CAPACITY) {
        board.tx_overflow_bytes += len;
        return;
    }
    memcpy(&board.tx[board.tx_len], data, len);
    board.tx_len += len;
}
