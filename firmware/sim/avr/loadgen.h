/* A built-in host for measurements (--stream-hz): HELLO, ARM, then SETPOINT frames at a fixed
 * rate in EMULATED time, through the same wire model as pty bytes; it decodes the firmware's
 * telemetry to report late setpoints, bad frames and sequence gaps. Independent of how fast the
 * emulation runs on this machine, so its figures are reproducible. */
#ifndef BM_AVRSIM_LOADGEN_H
#define BM_AVRSIM_LOADGEN_H

#include <stdio.h>

#include "harness.h"

/* Start streaming at rate_hz (setpoints per emulated second) once the firmware has booted. */
void loadgen_start(struct harness *h, double rate_hz);
/* Hand every byte the firmware transmits to the load generator's decoder. */
void loadgen_on_tx_byte(uint8_t byte);
/* Print the load generator's result line ("loadgen: ..."). */
void loadgen_report(FILE *out);

#endif /* BM_AVRSIM_LOADGEN_H */
