/* A raw pseudo-terminal for the host-side benches (simulated bench, simavr harness). */
#ifndef BEMORE_PTY_H
#define BEMORE_PTY_H

#include <stddef.h>

/* Open a pty master in non-blocking mode, set its slave side raw and write the slave's path to
 * `path`. On failure prints `who: ...` and exits with status 2 (nothing to serve without it). */
int pty_open_raw(const char *who, char *path, size_t path_size);

#endif
