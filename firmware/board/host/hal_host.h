/* Host board: the HAL of the simulated bench, backed by the plant model and a transmit buffer. */
#ifndef BM_HAL_HOST_H
#define BM_HAL_HOST_H

#include <stdint.h>

#include "plant.h"

#define HOST_TX_CAPACITY 8192
/* The board's hardware watchdog, as on the AVR board (board/avr/board.h BOARD_HW_WATCHDOG_MS):
 * a firmware that runs no tick for this long is reset (zero torque, disarmed). */
#define HOST_HW_WATCHDOG_MS 120u

struct host_board {
    struct plant plant;
    int estop;
    int driver_fault;
    int32_t torque_command_mNm;
    uint8_t tx[HOST_TX_CAPACITY];
    int tx_len;
    unsigned long tx_overflow_bytes; /* bytes dropped because the host did not read them */
};

extern struct host_board board;

#endif /* BM_HAL_HOST_H */
