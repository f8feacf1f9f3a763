/* ATmega2560 board (Arduino Mega 2560 class): pin map and hardware constants.
 *
 * Shared, as plain numbers, by the firmware (firmware/board/avr/) and by the simavr harness
 * (firmware/sim/avr/), so that both sides of every wire agree. No avr-libc include here.
 *
 *   signal            pin   Arduino  direction  meaning
 *   motor PWM (OC4A)  PH3   D6       out        duty = |torque| / BOARD_TORQUE_FULL_SCALE_MNM
 *   motor direction   PH4   D7       out        1 = positive torque
 *   encoder A (INT4)  PE4   D2       in         quadrature, any-edge interrupt, x4 decoding
 *   encoder B (INT5)  PE5   D3       in
 *   e-stop   (INT2)   PD2   D19      in         HIGH = asserted (NC contact to GND opened or
 *                                                 wire cut: fail-safe), any-edge interrupt
 *   driver fault      PD3   D18      in         LOW = the motor driver reports a fault
 *   tick busy         PB7   D13/LED  out        HIGH while the control tick runs (scope/harness)
 *   flow control      PH5   D8       out        HIGH = "stop sending" to the USB-serial adapter's
 *                                                 CTS input (receive ring 3/4 full; LOW again
 *                                                 below 1/4): a burst never overflows the ring
 *   host link         USART0 (D0/D1, the USB serial of the board), 8N1, BOARD_BAUD
 * E-stop and driver-fault lines have 4.7 kΩ external pull-ups to 5 V; internal pull-ups are off.
 */
#ifndef BM_BOARD_AVR_H
#define BM_BOARD_AVR_H

#define BOARD_F_CPU_HZ 16000000UL
#ifndef BOARD_BAUD
/* 16 MHz / (8 × 4): exact with U2X. 50 kB/s: 2083 setpoint frames/s, twice the 1 kHz stream, and
 * the CPU keeps up with back-to-back frames (at 1 Mbaud a burst would outrun its frame decoding). */
#define BOARD_BAUD 500000UL
#endif

/* Control tick: Timer1 in CTC mode, prescaler 8, compare at 1999 → 16 MHz / 8 / 2000 = 1 kHz. */
#define BOARD_TICK_PRESCALER 8u
#define BOARD_TICK_COMPARE 1999u
#define BOARD_CYCLES_PER_TICK 16000u

/* Motor PWM: Timer4 fast PWM with TOP = ICR4 = 799 (20 kHz, prescaler 1), non-inverting. */
#define BOARD_PWM_TOP 799u
#define BOARD_TORQUE_FULL_SCALE_MNM 300000L /* torque of the driver at 100 % duty, mN·m */

/* Incremental quadrature encoder: 4096 lines, x4 decoding. Zero = position at power-up. */
#define BOARD_ENCODER_COUNTS 16384L
#define BOARD_ENCODER_COUNTS_LOG2 14u

/* Hardware watchdog (last resort when the main loop stops): WDTO_120MS. */
#define BOARD_HW_WATCHDOG_MS 120u

/* Pin numbers inside their ports (ports named in the table above). */
#define BOARD_PIN_PWM 3       /* PH3 */
#define BOARD_PIN_DIR 4       /* PH4 */
#define BOARD_PIN_ENC_A 4     /* PE4 */
#define BOARD_PIN_ENC_B 5     /* PE5 */
#define BOARD_PIN_ESTOP 2     /* PD2 */
#define BOARD_PIN_DRV_FAULT 3 /* PD3 */
#define BOARD_PIN_TICK 7      /* PB7 */
#define BOARD_PIN_FLOW 5      /* PH5 */

#endif /* BM_BOARD_AVR_H */
