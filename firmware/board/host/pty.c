#define _DEFAULT_SOURCE
#define _XOPEN_SOURCE 700

#include "pty.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

int pty_open_raw(const char *who, char *path, size_t path_size)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
        fprintf(stderr, "%s: ", who);
        perror("posix_openpt");
        exit(2);
    }
    const char *name = ptsname(master);
    if (name == NULL) {
        fprintf(stderr, "%s: ", who);
        perror("ptsname");
        exit(2);
    }
    snprintf(path, path_size, "%s", name);
    /* Raw mode on the slave side, so no byte is translated before the host opens it. */
    int slave = open(path, O_RDWR | O_NOCTTY);
    if (slave >= 0) {
        struct termios tio;
        if (tcgetattr(slave, &tio) == 0) {
            cfmakeraw(&tio);
            tcsetattr(slave, TCSANOW, &tio);
        }
        close(slave);
    }
    fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
    return master;
}
