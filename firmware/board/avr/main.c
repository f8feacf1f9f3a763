/* ATmega2560 firmware entry point: the portable core driven by the board's interrupts.
 *
 * Main loop: hand every received byte to the core, run one control tick per timer signal (the
 * tick has priority: bytes are handled one at a time between checks), feed the hardware
 * watchdog after each tick, and sleep (idle mode) when there is nothing to do. The watchdog is
 * the last resort: if ticks stop being run for BOARD_HW_WATCHDOG_MS, the MCU resets and every
 * output pin returns to high impedance (the motor driver's input pull-down means zero torque).
 */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/sleep.h>
#include <avr/wdt.h>

#include "board.h"
#include "board_avr.h"
#include "core.h"
#include "hal.h"

_Static_assert(BOARD_HW_WATCHDOG_MS == 120u, "WDTO_120MS below must match board.h");

static struct bm_core core;

/* A watchdog reset leaves the watchdog enabled with its shortest period: turn it off before
 * anything else (avr-libc's recommended .init3 hook), it is re-armed in main(). */
void board_early_init(void) __attribute__((naked, used, section(".init3")));
void board_early_init(void)
{
    MCUSR = 0;
    wdt_disable();
}

int main(void)
{
    board_init();
    bm_core_init(&core, bm_default_gains());
    /* A reset may have cut a frame mid-transmission: one delimiter first, so that the host's
     * decoder drops that fragment instead of the next frame (PROTOCOL.md §1). */
    static const uint8_t delimiter = 0u;
    hal_uart_write(&delimiter, 1u);
    wdt_enable(WDTO_120MS);
    set_sleep_mode(SLEEP_MODE_IDLE);
    sei();
    for (;;) {
        uint8_t ticks = board_take_ticks();
        while (ticks-- > 0u) {
            PORTB |= (uint8_t)(1u << BOARD_PIN_TICK);
            bm_core_tick(&core);
            PORTB &= (uint8_t)~(1u << BOARD_PIN_TICK);
            board_after_tick();
            wdt_reset();
        }
        uint8_t byte;
        if (board_uart_rx_pop(&byte)) {
            bm_core_rx_byte(&core, byte);
            continue;
        }
        /* Sleep only if no interrupt slipped in since the checks; sei; sleep is atomic on AVR. */
        cli();
        if (board_idle()) {
            sleep_enable();
            sei();
            sleep_cpu();
            sleep_disable();
        }
        sei();
    }
}
