/* cycles: run an ATmega2560 ELF in simavr (the library firmware/sim/avr/avrsim uses, loaded the
 * same way) and report, in emulated CPU cycles at 16 MHz, the time between markers the program
 * writes to GPIOR0, and the bytes it writes to GPIOR1 (its results), until it sleeps with
 * interrupts off (cli + sleep: simavr's cpu_Done).
 * Output on stdout: "marker <value> <cycle>" per GPIOR0 write, then "bytes <hex>".
 * Usage: cycles PROGRAM.elf */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_avr.h"
#include "sim_elf.h"

#define GPIOR0_ADDRESS 0x3E /* I/O 0x1E in data space */
#define GPIOR1_ADDRESS 0x4A /* I/O 0x2A in data space */
#define MAX_BYTES 4096
#define CYCLE_LIMIT 400000000ULL /* 25 s emulated: a runaway program is an error */

static unsigned char bytes[MAX_BYTES];
static size_t n_bytes;

static void on_marker(avr_t *avr, avr_io_addr_t addr, uint8_t value, void *param)
{
    (void)addr;
    (void)param;
    printf("marker %u %llu\n", (unsigned)value, (unsigned long long)avr->cycle);
}

static void on_byte(avr_t *avr, avr_io_addr_t addr, uint8_t value, void *param)
{
    (void)avr;
    (void)addr;
    (void)param;
    if (n_bytes < MAX_BYTES) {
        bytes[n_bytes++] = value;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cycles PROGRAM.elf\n");
        return 2;
    }
    elf_firmware_t firmware;
    memset(&firmware, 0, sizeof firmware);
    fflush(stdout);
    int saved_stdout = dup(1);
    dup2(2, 1); /* simavr's loader prints to stdout */
    if (elf_read_firmware(argv[1], &firmware) != 0) {
        fprintf(stderr, "cycles: %s: cannot read the ELF\n", argv[1]);
        return 2;
    }
    snprintf(firmware.mmcu, sizeof firmware.mmcu, "atmega2560");
    firmware.frequency = 16000000;
    avr_t *avr = avr_make_mcu_by_name(firmware.mmcu);
    if (avr == NULL || avr_init(avr) != 0) {
        fprintf(stderr, "cycles: simavr has no atmega2560 core\n");
        return 2;
    }
    avr->log = 0;
    avr_load_firmware(avr, &firmware);
    avr->frequency = 16000000;
    fflush(stdout);
    dup2(saved_stdout, 1);
    close(saved_stdout);
    avr_register_io_write(avr, GPIOR0_ADDRESS, on_marker, NULL);
    avr_register_io_write(avr, GPIOR1_ADDRESS, on_byte, NULL);
    for (;;) {
        int state = avr_run(avr);
        if (state == cpu_Done) {
            break;
        }
        if (state == cpu_Crashed || avr->cycle > CYCLE_LIMIT) {
            fprintf(stderr, "cycles: the program crashed or ran away (state %d, cycle %llu)\n",
                    state, (unsigned long long)avr->cycle);
            return 1;
        }
    }
    printf("bytes ");
    for (size_t i = 0; i < n_bytes; ++i) {
        printf("%02x", bytes[i]);
    }
    printf("\n");
    return 0;
}
