/* ATmega2560 hardware layer: the HAL of firmware/src/hal.h and the interrupt handlers.
 *
 * Interrupts do the minimum: move a UART byte, count an encoder edge, signal a tick, cut the
 * motor on an e-stop edge. Everything else runs in the main loop (main.c), so the portable core
 * is never re-entered. Pin map and constants: board.h.
 */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <util/atomic.h>

#include "board.h"
#include "board_avr.h"
#include "hal.h"

#define UBRR_VALUE ((BOARD_F_CPU_HZ / (8UL * BOARD_BAUD)) - 1UL) /* U2X: 8 samples per bit */
_Static_assert(BOARD_F_CPU_HZ % (8UL * BOARD_BAUD) == 0, "baud rate must be exact at 16 MHz");

/* Receive ring: 2048 bytes (≈ 85 setpoint frames, 40 ms of a saturated 500 kbaud line) so that
 * a burst from the host (USB latency, a host or emulator stall followed by catch-up at line rate)
 * is absorbed while the CPU, which decodes slightly fewer frames per second than the line can
 * carry when armed, catches up. Power-of-two size: the indices wrap with a mask. */
#define RX_RING_SIZE 2048u
#define RX_STOP_FILL (RX_RING_SIZE * 3u / 4u) /* ask the host side to pause (flow pin HIGH) */
#define RX_GO_FILL (RX_RING_SIZE / 4u)        /* and to resume (LOW) */
static volatile uint8_t rx_ring[RX_RING_SIZE];
static volatile uint16_t rx_head, rx_tail;
/* Transmit ring indexed by uint8_t: 256 entries, the index wraps by itself. */
static volatile uint8_t tx_ring[256];
static volatile uint8_t tx_head, tx_tail;

static volatile uint8_t ticks_pending;
static volatile int32_t encoder_count;
static volatile uint8_t encoder_state; /* (A << 1) | B at the last edge */
static volatile uint8_t estop_latched; /* set by the e-stop interrupt, cleared after a tick */

volatile uint16_t board_rx_dropped;
uint16_t board_tx_dropped_frames;
uint16_t board_tick_overruns;

/* Quadrature x4 decoding: index (previous << 2) | current, states AB = 00 → 10 → 11 → 01 → 00
 * count up. Impossible jumps (both pins changed) count 0. */
static const int8_t quadrature_step[16] = {0, -1, 1, 0, 1, 0, 0, -1, -1, 0, 0, 1, 0, 1, -1, 0};

static uint8_t encoder_pins(void)
{
    uint8_t pins = PINE;
    return (uint8_t)((((pins >> BOARD_PIN_ENC_A) & 1u) << 1) | ((pins >> BOARD_PIN_ENC_B) & 1u));
}

static uint8_t estop_pin_asserted(void)
{
    return (PIND >> BOARD_PIN_ESTOP) & 1u;
}

/* Cut the motor at once: disconnect OC4A from the pin and hold the pin low. */
static void pwm_off(void)
{
    TCCR4A &= (uint8_t)~((1u << COM4A1) | (1u << COM4A0));
    PORTH &= (uint8_t)~(1u << BOARD_PIN_PWM);
    OCR4A = 0;
}

void board_init(void)
{
    /* USART0, 8N1, double speed. */
    UCSR0A = (uint8_t)(1u << U2X0);
    UBRR0 = (uint16_t)UBRR_VALUE;
    UCSR0C = (uint8_t)((1u << UCSZ01) | (1u << UCSZ00));
    UCSR0B = (uint8_t)((1u << RXEN0) | (1u << TXEN0) | (1u << RXCIE0));

    /* Timer1: CTC on OCR1A, prescaler 8 → compare match every 1 ms. */
    TCCR1A = 0;
    TCCR1B = (uint8_t)((1u << WGM12) | (1u << CS11));
    OCR1A = BOARD_TICK_COMPARE;
    TIMSK1 = (uint8_t)(1u << OCIE1A);

    /* Timer4: fast PWM, TOP = ICR4, prescaler 1 (20 kHz); output connected on the first command. */
    PORTH &= (uint8_t)~((1u << BOARD_PIN_PWM) | (1u << BOARD_PIN_DIR) | (1u << BOARD_PIN_FLOW));
    DDRH |= (uint8_t)((1u << BOARD_PIN_PWM) | (1u << BOARD_PIN_DIR) | (1u << BOARD_PIN_FLOW));
    ICR4 = BOARD_PWM_TOP;
    OCR4A = 0;
    TCCR4A = (uint8_t)(1u << WGM41);
    TCCR4B = (uint8_t)((1u << WGM43) | (1u << WGM42) | (1u << CS40));

    /* Encoder on INT4/INT5, any edge (push-pull encoder outputs: no pull-ups). */
    DDRE &= (uint8_t)~((1u << BOARD_PIN_ENC_A) | (1u << BOARD_PIN_ENC_B));
    PORTE &= (uint8_t)~((1u << BOARD_PIN_ENC_A) | (1u << BOARD_PIN_ENC_B));
    /* INT6/INT7 are unused and masked; edge mode rather than the reset's low-level mode (a
     * level-mode input held low keeps simavr polling it on every cycle). */
    EICRB = (uint8_t)((1u << ISC40) | (1u << ISC50) | (1u << ISC61) | (1u << ISC71));
    /* E-stop on INT2, any edge; driver fault input. Both have 4.7 kΩ external pull-ups (stiffer
     * than the internal ~35 kΩ against motor noise), so the internal ones stay off. */
    DDRD &= (uint8_t)~((1u << BOARD_PIN_ESTOP) | (1u << BOARD_PIN_DRV_FAULT));
    PORTD &= (uint8_t)~((1u << BOARD_PIN_ESTOP) | (1u << BOARD_PIN_DRV_FAULT));
    EICRA = (uint8_t)((1u << ISC01) | (1u << ISC11) | (1u << ISC20) | (1u << ISC31));
    EIFR = (uint8_t)((1u << INTF2) | (1u << INTF4) | (1u << INTF5));
    EIMSK |= (uint8_t)((1u << INT2) | (1u << INT4) | (1u << INT5));
    encoder_state = encoder_pins();
    encoder_count = 0;
    /* An e-stop already pressed at power-up counts as an edge. */
    estop_latched = estop_pin_asserted();

    DDRB |= (uint8_t)(1u << BOARD_PIN_TICK);
    PORTB &= (uint8_t)~(1u << BOARD_PIN_TICK);
}

ISR(USART0_RX_vect)
{
    uint8_t byte = UDR0;
    uint16_t next = (uint16_t)((rx_head + 1u) & (RX_RING_SIZE - 1u));
    if (next == rx_tail) {
        board_rx_dropped++;
        return;
    }
    rx_ring[rx_head] = byte;
    rx_head = next;
    if ((uint16_t)((next - rx_tail) & (RX_RING_SIZE - 1u)) >= RX_STOP_FILL) {
        PORTH |= (uint8_t)(1u << BOARD_PIN_FLOW);
    }
}

ISR(USART0_UDRE_vect)
{
    if (tx_tail == tx_head) {
        UCSR0B &= (uint8_t)~(1u << UDRIE0);
        return;
    }
    UDR0 = tx_ring[tx_tail];
    tx_tail = (uint8_t)(tx_tail + 1u);
}

ISR(TIMER1_COMPA_vect)
{
    if (ticks_pending != 0u) {
        board_tick_overruns++;
    }
    if (ticks_pending != 0xFFu) {
        ticks_pending++;
    }
}

ISR(INT4_vect)
{
    uint8_t now = encoder_pins();
    encoder_count += quadrature_step[(uint8_t)((encoder_state << 2) | now)];
    encoder_state = now;
}

ISR(INT5_vect, ISR_ALIASOF(INT4_vect));

/* The e-stop cuts the motor here, within microseconds; the core latches ESTOP_INPUT at the next
 * tick (hal_estop_input stays 1 until then even if the pin bounces back). */
ISR(INT2_vect)
{
    if (estop_pin_asserted()) {
        pwm_off();
        estop_latched = 1;
    }
}

/* rx_head is 16-bit and written by the interrupt: read it with interrupts off. */
static uint16_t rx_head_now(void)
{
    uint16_t head;
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE)
    {
        head = rx_head;
    }
    return head;
}

uint8_t board_uart_rx_pop(uint8_t *byte)
{
    uint16_t tail = rx_tail;
    if (tail == rx_head_now()) {
        return 0;
    }
    *byte = rx_ring[tail];
    tail = (uint16_t)((tail + 1u) & (RX_RING_SIZE - 1u));
    /* rx_tail is only written here; the interrupt reads it, so write it atomically. */
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE)
    {
        rx_tail = tail;
        if ((uint16_t)((rx_head - tail) & (RX_RING_SIZE - 1u)) <= RX_GO_FILL) {
            PORTH &= (uint8_t)~(1u << BOARD_PIN_FLOW);
        }
    }
    return 1;
}

uint8_t board_take_ticks(void)
{
    uint8_t n;
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE)
    {
        n = ticks_pending;
        ticks_pending = 0;
    }
    return n;
}

uint8_t board_idle(void)
{
    return ticks_pending == 0u && rx_tail == rx_head; /* called with interrupts off */
}

void board_after_tick(void)
{
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE)
    {
        if (!estop_pin_asserted()) {
            estop_latched = 0;
        }
    }
}

int32_t hal_encoder_urad(void)
{
    int32_t count;
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE)
    {
        count = encoder_count;
    }
    /* 2π·10⁶ / 2^14 = 383.495178 µrad per count = 383 + 32452/65536, in 32-bit arithmetic (a
     * 64-bit multiply costs hundreds of cycles here); the arithmetic shift floors like the
     * plant's encoder. Exact to 1 µrad within ±4 turns; beyond, the 64-bit path. */
    if (count > 65535L || count < -65535L) {
        return (int32_t)(((int64_t)count * 6283185) >> BOARD_ENCODER_COUNTS_LOG2);
    }
    return count * 383L + ((count * 32452L) >> 16);
}

/* Duty steps ↔ mN·m without a 32-bit division (~600 cycles each on the AVR):
 * 799 / 300000 ≈ 349 / 131072 and 300000 / 799 ≈ 96120 / 256 (both within 0.03 %). */
_Static_assert(BOARD_PWM_TOP == 799u && BOARD_TORQUE_FULL_SCALE_MNM == 300000L,
               "recompute the duty scale factors");
#define DUTY_PER_MNM_Q17 349UL
#define MNM_PER_DUTY_Q8 96120UL

/* Torque the output stage is commanding now (duty × direction × full scale); the board has no
 * current sensing, so this is also what it reports as measured. */
int32_t hal_torque_measured_mNm(void)
{
    uint16_t duty = 0;
    uint8_t positive = 0;
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE)
    {
        if (TCCR4A & (1u << COM4A1)) {
            duty = OCR4A;
            positive = (PORTH >> BOARD_PIN_DIR) & 1u;
        }
    }
    int32_t magnitude = (int32_t)(((uint32_t)duty * MNM_PER_DUTY_Q8 + 128UL) >> 8);
    return positive ? magnitude : -magnitude;
}

void hal_motor_torque_mNm(int32_t torque)
{
    int32_t magnitude = torque < 0 ? -torque : torque;
    if (magnitude > BOARD_TORQUE_FULL_SCALE_MNM) {
        magnitude = BOARD_TORQUE_FULL_SCALE_MNM;
    }
    /* Round to the nearest duty step: 300 N·m / 799 ≈ 0.38 N·m per step. */
    uint16_t duty = (uint16_t)(((uint32_t)magnitude * DUTY_PER_MNM_Q17 + 65536UL) >> 17);
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE)
    {
        if (duty == 0u || estop_latched || estop_pin_asserted()) {
            pwm_off();
        } else {
            if (torque > 0) {
                PORTH |= (uint8_t)(1u << BOARD_PIN_DIR);
            } else {
                PORTH &= (uint8_t)~(1u << BOARD_PIN_DIR);
            }
            OCR4A = duty;
            TCCR4A |= (uint8_t)(1u << COM4A1);
        }
    }
}

int hal_estop_input(void)
{
    return estop_latched || estop_pin_asserted();
}

int hal_driver_fault(void)
{
    return !((PIND >> BOARD_PIN_DRV_FAULT) & 1u);
}

/* Queue a whole frame or drop it whole (never block the loop, never send half a frame). */
void hal_uart_write(const uint8_t *data, uint8_t len)
{
    uint8_t used = (uint8_t)(tx_head - tx_tail);
    if ((uint16_t)used + len > 255u) {
        board_tx_dropped_frames++;
        return;
    }
    for (uint8_t i = 0; i < len; i++) {
        tx_ring[tx_head] = data[i];
        tx_head = (uint8_t)(tx_head + 1u);
    }
    UCSR0B |= (uint8_t)(1u << UDRIE0);
}
