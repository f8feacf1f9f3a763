/* Internal interface of the ATmega2560 board layer between main.c and its drivers. */
#ifndef BM_BOARD_AVR_DRIVERS_H
#define BM_BOARD_AVR_DRIVERS_H

#include <stdint.h>

/* Configure every peripheral (UART, tick timer, PWM, encoder, e-stop); interrupts stay off. */
void board_init(void);
/* Pops one received byte into *byte; returns 0 when the receive ring is empty. */
uint8_t board_uart_rx_pop(uint8_t *byte);
/* Number of 1 kHz ticks signalled by the timer and not yet run (read and cleared atomically). */
uint8_t board_take_ticks(void);
/* 1 when there is nothing to do: no pending tick and no received byte (call with interrupts off). */
uint8_t board_idle(void);
/* After a control tick: forget an e-stop pulse the core has now seen, if the pin is released. */
void board_after_tick(void);

/* Diagnostics (wrap): bytes lost to a full receive ring, frames dropped by a full transmit ring,
 * ticks that found the previous one still pending. */
extern volatile uint16_t board_rx_dropped;
extern uint16_t board_tx_dropped_frames;
extern uint16_t board_tick_overruns;

#endif /* BM_BOARD_AVR_DRIVERS_H */
