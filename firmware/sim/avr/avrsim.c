/* avrsim: the ATmega2560 firmware (build/avr/bemore-avr.elf) run by simavr as a bench.
 *
 * USART0 is connected to a pseudo-terminal (its path is the first line of stdout), and the plant
 * model of the simulated bench (board/host/plant.c) closes the loop on the PWM/direction output
 * pins and drives the quadrature encoder pins; the e-stop and driver-fault input pins are set by
 * options or by lines on stdin:
 *   estop on|off       pull / release the emergency-stop pin
 *   driver on|off      the motor driver's fault signal
 *   noise MS           a noise storm on encoder pin A for MS ms (starves the main loop)
 *   stats              print the statistics line now
 * Emulated time is the MCU's cycle count at 16 MHz; the plant, the encoder and the UART's byte
 * timing follow it. The emulation is paced so that it never runs ahead of the wall clock
 * (--speed 0 removes the pacing); when the host is faster than the emulation, bytes simply
 * queue. Event lines on stdout start with "avrsim: "; the statistics line goes to stderr at exit.
 */
#define _DEFAULT_SOURCE
#define _XOPEN_SOURCE 700

#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "board.h"
#include "harness.h"
#include "pty.h"
#include "loadgen.h"
#include "sim_elf.h"

static struct harness harness;
static int pty_master = -1;
static int use_stdin = 1;
static int stdin_open = 1;
static double speed = 1.0; /* emulated seconds per wall second at most (0: unpaced) */
static double estop_at_s = -1.0;
static double duration_s = 0.0;
static double stream_hz = 0.0; /* --stream-hz: built-in host (0: none) */
static int realtime_priority;  /* --realtime P: SCHED_FIFO priority (0: normal scheduling) */
static struct timespec wall_start;
static double wall_behind_max_s; /* how far the emulation lagged the wall clock */
static unsigned long service_count;
static uint64_t cycles_awake; /* cycles the CPU ran instructions (not asleep) */

static double wall_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - wall_start.tv_sec) + (t.tv_nsec - wall_start.tv_nsec) * 1e-9;
}

static double emulated_seconds(void)
{
    return (double)harness.avr->cycle / (double)harness.avr->frequency;
}

/* Data-space addresses of the board's diagnostic counters (uint16_t), from the ELF symbols;
 * 0 when the firmware does not have them. */
static uint32_t addr_rx_dropped, addr_tx_dropped, addr_overruns;

static void find_counters(const elf_firmware_t *firmware)
{
    for (uint32_t i = 0; i < firmware->symbolcount; i++) {
        const avr_symbol_t *sym = firmware->symbol[i];
        uint32_t addr = sym->addr & 0xFFFFu; /* the linker puts RAM at 0x800000 */
        if (strcmp(sym->symbol, "board_rx_dropped") == 0) {
            addr_rx_dropped = addr;
        } else if (strcmp(sym->symbol, "board_tx_dropped_frames") == 0) {
            addr_tx_dropped = addr;
        } else if (strcmp(sym->symbol, "board_tick_overruns") == 0) {
            addr_overruns = addr;
        }
    }
}

static unsigned read_u16(uint32_t addr)
{
    return addr ? harness.avr->data[addr] | (unsigned)harness.avr->data[addr + 1] << 8 : 0u;
}

static void print_stats(FILE *out)
{
    uint32_t min, median, max;
    harness_tick_stats(&harness, &min, &median, &max);
    double wall = wall_seconds(), emulated = emulated_seconds();
    fprintf(out,
            "avrsim: emulated %.3f s in %.3f s wall (%.2fx real time), %u ticks, tick cycles "
            "min %u median %u max %u, tick period max %u cycles, %u resets, rx %lu bytes, "
            "tx %lu bytes, %lu tx lost, %lu rx FIFO full, CPU busy %.1f%%\n",
            emulated, wall, wall > 0.0 ? emulated / wall : 0.0, harness.ticks, min, median, max,
            harness.period_max, harness.resets, harness.bytes_to_mcu, harness.bytes_from_mcu,
            harness.tx_lost, harness.uart_xoffs,
            harness.avr->cycle ? 100.0 * (double)cycles_awake / (double)harness.avr->cycle : 0.0);
    fprintf(out, "avrsim: firmware counters: %u bytes dropped by the receive ring, %u frames "
            "dropped by the transmit ring, %u tick overruns\n", read_u16(addr_rx_dropped),
            read_u16(addr_tx_dropped), read_u16(addr_overruns));
    fflush(out);
}

static void handle_command(char *line)
{
    char word[32] = "", arg[32] = "";
    if (sscanf(line, "%31s %31s", word, arg) < 1) {
        return;
    }
    if (strcmp(word, "estop") == 0) {
        harness_set_estop(&harness, strcmp(arg, "on") == 0);
    } else if (strcmp(word, "driver") == 0) {
        harness_set_driver_fault(&harness, strcmp(arg, "on") == 0);
    } else if (strcmp(word, "noise") == 0) {
        harness_encoder_noise(&harness, (uint32_t)atol(arg));
    } else if (strcmp(word, "stats") == 0) {
        print_stats(stdout);
    } else {
        fprintf(stderr, "avrsim: unknown command '%s'\n", word);
    }
}

static void poll_stdin(void)
{
    static char line[256];
    static size_t used;
    struct pollfd pfd = {.fd = 0, .events = POLLIN};
    while (stdin_open && poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLIN | POLLHUP))) {
        ssize_t n = read(0, &line[used], sizeof line - 1 - used);
        if (n <= 0) {
            stdin_open = 0;
            return;
        }
        used += (size_t)n;
        line[used] = '\0';
        char *newline;
        while ((newline = strchr(line, '\n')) != NULL) {
            *newline = '\0';
            handle_command(line);
            used -= (size_t)(newline + 1 - line);
            memmove(line, newline + 1, used + 1);
        }
        if (used == sizeof line - 1) {
            used = 0; /* an over-long line is discarded */
        }
    }
}

/* Every 250 µs of emulated time: move pty bytes both ways, commands, pacing. */
static void service(struct harness *h)
{
    uint8_t buf[512];
    ssize_t n;
    service_count++;
    while (h->rx_head - h->rx_tail < HARNESS_QUEUE - sizeof buf &&
           (n = read(pty_master, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            harness_queue_byte(h, buf[i]);
        }
    }
    harness_feed_uart(h);
    if (h->tx_len > 0u) {
        /* What the pty does not take now waits in the harness (the adapter's and its driver's
         * buffers); bytes are lost only when that 64 kB queue is full (harness.c). */
        n = write(pty_master, h->tx, h->tx_len);
        if (n > 0) {
            memmove(h->tx, h->tx + n, h->tx_len - (uint32_t)n);
            h->tx_len -= (uint32_t)n;
        }
    }
    if (use_stdin && service_count % 40u == 0u) {
        poll_stdin();
    }
    if (estop_at_s >= 0.0 && emulated_seconds() >= estop_at_s) {
        estop_at_s = -1.0;
        harness_set_estop(h, 1);
    }
    if (speed > 0.0) {
        double ahead = emulated_seconds() / speed - wall_seconds();
        if (ahead > 0.0005) {
            struct timespec pause = {0, (long)(ahead * 1e9)};
            nanosleep(&pause, NULL);
        } else if (-ahead > wall_behind_max_s) {
            wall_behind_max_s = -ahead;
        }
    }
}

/* --profile: where the CPU spends its cycles, sampled every 97 cycles (prime, so that it does
 * not lock onto the 16000-cycle tick); written as "byte-address count" lines for avr-nm. */
static const char *profile_path;
static uint32_t pc_histogram[131072]; /* one bin per flash word of the 256 kB */

static avr_cycle_count_t pc_sample(avr_t *avr, avr_cycle_count_t when, void *param)
{
    (void)param;
    if (avr->state == cpu_Running) {
        pc_histogram[(avr->pc >> 1) & 131071u]++;
    }
    return when + 97u;
}

static void write_profile(void)
{
    FILE *f = fopen(profile_path, "w");
    if (f == NULL) {
        perror("avrsim: --profile");
        return;
    }
    for (uint32_t i = 0; i < 131072u; i++) {
        if (pc_histogram[i]) {
            fprintf(f, "%x %u\n", i * 2u, pc_histogram[i]);
        }
    }
    fclose(f);
}

static void sleep_none(avr_t *avr, avr_cycle_count_t how_long)
{
    (void)avr;
    (void)how_long;
}

static void usage(FILE *out)
{
    fputs("usage: avrsim [options] [FIRMWARE.elf]   (default: bemore-avr.elf beside avrsim)\n"
          "  plant:  --inertia KG_M2 (1.0) --viscous NM_S_PER_RAD (1.0) --coulomb NM (2.0)\n"
          "          --torque-limit NM (150) --gravity-moment NM (0)\n"
          "  inputs: --estop-at-ms T (pull the e-stop pin at emulated time T)\n"
          "  run:    --speed X (1: never faster than real time; 0: as fast as possible)\n"
          "          --duration-s S (stop after S emulated seconds; 0: until stdin closes)\n"
          "          --ignore-stdin (no commands; only a signal or --duration-s stops it)\n"
          "          --realtime P (SCHED_FIFO priority P when the OS allows: a starved\n"
          "                        emulation lags the wall clock, then delivers the host's\n"
          "                        stream in bursts; the kernel still keeps 5% for others)\n"
          "          --profile FILE (sampled program-counter histogram, for avr-nm)\n"
          "          --stream-hz R (built-in host: HELLO, ARM, setpoints at R Hz of emulated\n"
          "                         time; its result line goes to stderr at exit)\n",
          out);
}

int main(int argc, char **argv)
{
    enum { O_INERTIA = 256, O_VISCOUS, O_COULOMB, O_TLIM, O_GRAV, O_ESTOP_AT, O_SPEED, O_DUR,
           O_IGN, O_PROFILE, O_STREAM, O_RT };
    static const struct option options[] = {
        {"inertia", 1, 0, O_INERTIA}, {"viscous", 1, 0, O_VISCOUS}, {"coulomb", 1, 0, O_COULOMB},
        {"torque-limit", 1, 0, O_TLIM}, {"gravity-moment", 1, 0, O_GRAV},
        {"estop-at-ms", 1, 0, O_ESTOP_AT}, {"speed", 1, 0, O_SPEED},
        {"duration-s", 1, 0, O_DUR}, {"ignore-stdin", 0, 0, O_IGN}, {"profile", 1, 0, O_PROFILE}, {"stream-hz", 1, 0, O_STREAM},
        {"realtime", 1, 0, O_RT}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    struct plant_params params = plant_default_params();
    params.substeps = 1; /* the harness steps the plant every 62.5 µs already */
    int c;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case O_INERTIA: params.inertia_kg_m2 = atof(optarg); break;
        case O_VISCOUS: params.viscous_nm_s_per_rad = atof(optarg); break;
        case O_COULOMB: params.coulomb_nm = atof(optarg); break;
        case O_TLIM: params.torque_limit_nm = atof(optarg); break;
        case O_GRAV: params.gravity_moment_nm = atof(optarg); break;
        case O_ESTOP_AT: estop_at_s = atof(optarg) * 1e-3; break;
        case O_SPEED: speed = atof(optarg); break;
        case O_DUR: duration_s = atof(optarg); break;
        case O_IGN: use_stdin = 0; break;
        case O_PROFILE: profile_path = optarg; break;
        case O_STREAM: stream_hz = atof(optarg); break;
        case O_RT: realtime_priority = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (params.inertia_kg_m2 <= 0.0 || params.viscous_nm_s_per_rad < 0.0 ||
        params.coulomb_nm < 0.0 || params.torque_limit_nm <= 0.0 || speed < 0.0 || stream_hz < 0.0 ||
        stream_hz > 20000.0) {
        fprintf(stderr, "avrsim: a plant or run parameter is out of range (see --help)\n");
        return 2;
    }
    /* Default: the firmware built next to this program (make puts both in build/avr/). */
    char default_elf[4096];
    const char *slash = strrchr(argv[0], '/');
    snprintf(default_elf, sizeof default_elf, "%.*sbemore-avr.elf",
             slash ? (int)(slash - argv[0] + 1) : 0, argv[0]);
    const char *elf = optind < argc ? argv[optind] : default_elf;
    elf_firmware_t firmware;
    memset(&firmware, 0, sizeof firmware);
    /* simavr's loader prints to stdout, whose first line must be the pty path: divert it. */
    fflush(stdout);
    int saved_stdout = dup(1);
    dup2(2, 1);
    int loaded = access(elf, R_OK) == 0 && elf_read_firmware(elf, &firmware) == 0;
    if (!loaded) {
        fprintf(stderr, "avrsim: %s: cannot read the firmware ELF (run `make -C firmware avr`)\n",
                elf);
        return 2;
    }
    find_counters(&firmware);
    snprintf(firmware.mmcu, sizeof firmware.mmcu, "atmega2560");
    firmware.frequency = BOARD_F_CPU_HZ;
    avr_t *avr = avr_make_mcu_by_name(firmware.mmcu);
    if (avr == NULL || avr_init(avr) != 0) {
        fprintf(stderr, "avrsim: simavr has no atmega2560 core\n");
        return 2;
    }
    avr->log = 0; /* simavr's own messages would mix with ours */
    avr_load_firmware(avr, &firmware);
    avr->frequency = BOARD_F_CPU_HZ;
    avr->sleep = sleep_none; /* simavr would usleep through MCU sleep; service() paces instead */
    fflush(stdout);
    dup2(saved_stdout, 1);
    close(saved_stdout);

    if (realtime_priority > 0) {
        struct sched_param param = {.sched_priority = realtime_priority};
        if (sched_setscheduler(0, SCHED_FIFO, &param) != 0) {
            perror("avrsim: --realtime (continuing with normal scheduling)");
        }
    }
    char path[256];
    pty_master = pty_open_raw("avrsim", path, sizeof path);
    harness_init(&harness, avr, params, service);
    printf("%s\n", path);
    fflush(stdout);
    clock_gettime(CLOCK_MONOTONIC, &wall_start);
    if (profile_path) {
        avr_cycle_timer_register(avr, 97u, pc_sample, NULL);
    }
    if (stream_hz > 0.0) {
        loadgen_start(&harness, stream_hz);
    }

    for (;;) {
        uint64_t before = avr->cycle;
        int was_running = avr->state == cpu_Running;
        int state = avr_run(avr);
        if (was_running) {
            cycles_awake += avr->cycle - before;
        }
        harness_after_run(&harness);
        if (state == cpu_Done || state == cpu_Crashed) {
            fprintf(stderr, "avrsim: the MCU stopped (state %d)\n", state);
            break;
        }
        if ((use_stdin && !stdin_open) ||
            (duration_s > 0.0 && emulated_seconds() >= duration_s)) {
            break;
        }
    }
    if (profile_path) {
        write_profile();
    }
    print_stats(stderr);
    loadgen_report(stderr);
    fprintf(stderr, "avrsim: the emulation lagged the wall clock by at most %.1f ms\n",
            wall_behind_max_s * 1e3);
    return 0;
}
