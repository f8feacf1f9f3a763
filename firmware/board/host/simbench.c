/* Simulated bench: the firmware core, built for the host, closing the loop on a plant model
 * behind a pseudo-terminal, ticked at 1 kHz on the real-time clock.
 *
 * Prints the pty slave path as the first line of stdout, then serves until killed or until stdin
 * closes. Fault injection (command-line flags, or lines on stdin while running):
 *   drop P | corrupt P     drop / flip one bit of each byte with probability P (see --direction)
 *   delay MS               deliver received bytes to the firmware MS ms late
 *   stall MS               the firmware stops (no tick, no byte handled) for MS ms; from
 *                          HOST_HW_WATCHDOG_MS (120 ms) on, the board's watchdog resets it
 *   freeze MS              this process's tick loop sleeps MS ms (as when the OS deschedules
 *                          it): not a fault of the board, which catches up its ticks and
 *                          handles each received byte at the tick it arrived in
 *   reset                  the firmware restarts (state lost, torque zero)
 *   estop on|off           the emergency-stop input
 *   driver on|off          the motor driver's fault signal
 * Run with --help for the plant and controller flags. --trace FILE writes one line per tick:
 * CLOCK_MONOTONIC ns, state, fault, motor torque command (mN·m) — what a fault-matrix run reads
 * to see when the torque reached zero (flushed every 10 ms).
 *
 * The load (--load-file FILE, written by controller/simbench.py): what the gymnast's body and
 * the simulated athlete put on the axis along the gesture. One line per stream millisecond
 * `time_ms ff_mNm position_urad external_nm`: the planned setpoint of that time and the external
 * torque (athlete's torque − the torque the gesture needs) while that setpoint is in force. When
 * the setpoint in force leaves the plan (a controlled stop), the external torque ramps from its
 * last value to zero over --load-ramp-ms, as the athlete and the bench unload together.
 */
#define _DEFAULT_SOURCE
#define _XOPEN_SOURCE 700

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "hal_host.h"
#include "pty.h"

#define DELAY_CAPACITY 65536u
#define ARRIVAL_CAPACITY 65536u /* received bytes stamped, waiting for their tick */
#define RESTART_BEHIND_TICKS 100u /* further behind than this, the schedule restarts from now */
#define DIR_RX 1
#define DIR_TX 2

struct faults {
    double drop;
    double corrupt;
    int direction;
    uint32_t delay_ms;
    long stall_at_ms, stall_ms, reset_at_ms;
    long stall_remaining_ms; /* > 0 while the firmware is stalled */
};

struct stats {
    unsigned long rx_bytes, tx_bytes, dropped, corrupted, overruns, tx_lost;
    unsigned long late_ticks_1ms; /* ticks started more than 1 ms after their schedule */
    unsigned long hw_watchdog_resets;
    long long max_lag_ns;         /* the latest start of a tick, against its schedule */
};

static struct bm_core core;
static struct bm_gains gains;
static struct faults faults = {.direction = DIR_RX, .stall_at_ms = -1, .reset_at_ms = -1};
static struct stats stats;

struct load {
    uint32_t count;        /* entries, indexed by time_ms (0 beyond) */
    int32_t *ff_mNm;       /* planned torque feed-forward of that time */
    int32_t *position_urad;
    double *external_nm;   /* athlete's torque − the gesture's need, N·m */
    uint32_t ramp_ms;
    int off_plan;          /* latched once the setpoint in force left the plan */
    double off_value_nm;
    uint32_t off_ticks;
    double last_nm;
};
static struct load load = {.ramp_ms = 300};

static void load_read(const char *path)
{
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        fprintf(stderr, "simbench: --load-file %s: %s\n", path, strerror(errno));
        exit(2);
    }
    unsigned long t;
    long ff, position;
    double external;
    uint32_t capacity = 0;
    while (fscanf(file, "%lu %ld %ld %lf", &t, &ff, &position, &external) == 4) {
        if (t >= 10000000ul) {
            break; /* beyond ~3 h of stream: refuse silently the rest */
        }
        if (t >= capacity) {
            uint32_t grown = capacity ? capacity : 4096u;
            while (grown <= t) {
                grown *= 2u;
            }
            load.ff_mNm = realloc(load.ff_mNm, grown * sizeof *load.ff_mNm);
            load.position_urad = realloc(load.position_urad, grown * sizeof *load.position_urad);
            load.external_nm = realloc(load.external_nm, grown * sizeof *load.external_nm);
            if (!load.ff_mNm || !load.position_urad || !load.external_nm) {
                fprintf(stderr, "simbench: --load-file %s: out of memory\n", path);
                exit(2);
            }
            for (uint32_t i = capacity; i < grown; i++) {
                load.ff_mNm[i] = 0;
                load.position_urad[i] = 0;
                load.external_nm[i] = 0.0;
            }
            capacity = grown;
        }
        load.ff_mNm[t] = (int32_t)ff;
        load.position_urad[t] = (int32_t)position;
        load.external_nm[t] = external;
        if (t + 1u > load.count) {
            load.count = (uint32_t)t + 1u;
        }
    }
    fclose(file);
}

/* External torque on the axis this tick (N·m): zero unless armed with a setpoint in force. */
static double load_torque(void)
{
    if (load.count == 0u || core.state != BM_STATE_ARMED || !core.has_setpoint) {
        load.off_plan = 0;
        load.last_nm = 0.0;
        return 0.0;
    }
    uint32_t t = core.sp_time_ms;
    if (!load.off_plan &&
        (t >= load.count || labs((long)core.sp_torque_mNm - load.ff_mNm[t]) > 2 ||
         labs((long)core.sp_position_urad - load.position_urad[t]) > 2000)) {
        load.off_plan = 1;
        load.off_value_nm = load.last_nm;
        load.off_ticks = 0;
    }
    if (load.off_plan) {
        double left = load.ramp_ms ? 1.0 - (double)load.off_ticks / load.ramp_ms : 0.0;
        load.off_ticks++;
        load.last_nm = left > 0.0 ? load.off_value_nm * left : 0.0;
    } else {
        load.last_nm = load.external_nm[t];
    }
    return load.last_nm;
}
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static FILE *trace;
/* Received bytes waiting for their delivery tick (the --delay-ms fault). */
static uint8_t delay_bytes[DELAY_CAPACITY];
static uint32_t delay_due[DELAY_CAPACITY];
static uint32_t delay_head, delay_tail;
/* Received bytes with their arrival time (CLOCK_MONOTONIC ns), written by the receiver thread
 * and taken by the tick loop (one producer, one consumer). */
static uint8_t arrival_bytes[ARRIVAL_CAPACITY];
static long long arrival_ns[ARRIVAL_CAPACITY];
static _Atomic uint32_t arrival_head, arrival_tail;
static _Atomic unsigned long arrival_lost;

static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* Apply drop / corrupt to a byte; returns 0 when the byte is dropped. */
static int inject(uint8_t *byte, int direction)
{
    if (!(faults.direction & direction)) {
        return 1;
    }
    if (faults.drop > 0.0 && uniform() < faults.drop) {
        stats.dropped++;
        return 0;
    }
    if (faults.corrupt > 0.0 && uniform() < faults.corrupt) {
        *byte ^= (uint8_t)(1u << (unsigned)(uniform() * 8.0));
        stats.corrupted++;
    }
    return 1;
}

static void usage(FILE *out)
{
    fputs("usage: simbench [options]\n"
          "  plant:  --inertia KG_M2 (1.0) --viscous NM_S_PER_RAD (1.0) --coulomb NM (2.0)\n"
          "          --torque-limit NM (150) --gravity-moment NM (0) --encoder-counts N (131072)\n"
          "          --initial-position-rad RAD (0)\n"
          "  control: --kp NM_PER_RAD (987) --kd NM_S_PER_RAD (62.8)\n"
          "  faults: --drop P --corrupt P --direction rx|tx|both (rx) --delay-ms MS\n"
          "          --stall-at-ms T --stall-ms MS --reset-at-ms T --seed N\n"
          "  load:   --load-file FILE (time_ms ff_mNm position_urad external_nm per line)\n"
          "          --load-ramp-ms MS (300): unloading after the setpoint leaves the plan\n"
          "  --ignore-stdin   keep serving when stdin closes (then only a signal stops it)\n"
          "  --no-realtime    do not ask for SCHED_FIFO (by default tried, silently optional)\n"
          "  --trace FILE     one line per tick: monotonic ns, state, fault, torque mN·m\n",
          out);
}

static void firmware_reset(void)
{
    bm_core_init(&core, gains);
    delay_head = delay_tail = 0;
}

/* Tells the host on stdout that a command is in force ("applied WORD ARG") or unknown
   ("unknown WORD"): SimulatedBench.command returns only then. */
static void answer(const char *verdict, const char *word, const char *arg)
{
    printf("%s %s %s\n", verdict, word, arg);
    fflush(stdout);
}

static void handle_command(char *line)
{
    char word[32] = "", arg[32] = "";
    if (sscanf(line, "%31s %31s", word, arg) < 1) {
        answer("unknown", "(empty)", "");
        return;
    }
    if (strcmp(word, "freeze") == 0) {
        long pause_ms = atol(arg);
        struct timespec pause = {.tv_sec = pause_ms / 1000,
                                 .tv_nsec = (pause_ms % 1000) * 1000000L};
        answer("applied", word, arg); /* in force from now: the host need not wait it out */
        nanosleep(&pause, NULL); /* the tick loop descheduled: the receiver thread goes on */
        return;
    }
    if (strcmp(word, "drop") == 0) {
        faults.drop = atof(arg);
    } else if (strcmp(word, "corrupt") == 0) {
        faults.corrupt = atof(arg);
    } else if (strcmp(word, "delay") == 0) {
        faults.delay_ms = (uint32_t)atol(arg);
    } else if (strcmp(word, "stall") == 0) {
        faults.stall_remaining_ms = atol(arg);
    } else if (strcmp(word, "reset") == 0) {
        firmware_reset();
    } else if (strcmp(word, "estop") == 0) {
        board.estop = strcmp(arg, "on") == 0;
    } else if (strcmp(word, "driver") == 0) {
        board.driver_fault = strcmp(arg, "on") == 0;
    } else {
        fprintf(stderr, "simbench: unknown command '%s'\n", word);
        answer("unknown", word, arg);
        return;
    }
    answer("applied", word, arg);
}

/* Reads stdin commands; returns 0 when stdin has closed. */
static int poll_stdin(void)
{
    static char line[256];
    static size_t used;
    struct pollfd pfd = {.fd = 0, .events = POLLIN};
    while (poll(&pfd, 1, 0) > 0) {
        if (!(pfd.revents & (POLLIN | POLLHUP))) {
            return 1;
        }
        ssize_t n = read(0, &line[used], sizeof line - 1 - used);
        if (n <= 0) {
            return 0;
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
    return 1;
}

/* Nanoseconds from `scheduled` to now (negative when early). */
static long long lag_since(const struct timespec *scheduled)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)(now.tv_sec - scheduled->tv_sec) * 1000000000LL +
           (now.tv_nsec - scheduled->tv_nsec);
}

static long long monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

/* The receiver thread: the UART's receive interrupt of a real board. It waits for the host's
 * bytes and stamps each with its arrival time, so that the firmware handles it at the tick it
 * arrived in even when the tick loop ran late (the OS or the hypervisor took its CPU away) and
 * catches up tick after tick: a real board is never descheduled, and a byte registered at the
 * late moment it was read would move the firmware's stream origin and starve or overfill its
 * setpoint queue although the host was on time. Runs at a real-time priority above the tick
 * loop's when granted. A freeze of the whole process still delays the bytes to when it runs
 * again: never earlier than they arrived. */
static void *receiver(void *arg)
{
    int master = *(const int *)arg;
    uint8_t buf[4096];
    for (;;) {
        struct pollfd pfd = {.fd = master, .events = POLLIN};
        int ready = poll(&pfd, 1, 100);
        if (ready > 0 && (pfd.revents & POLLIN)) {
            ssize_t n = read(master, buf, sizeof buf);
            long long stamp = monotonic_ns();
            for (ssize_t i = 0; i < n; i++) {
                uint32_t head = atomic_load_explicit(&arrival_head, memory_order_relaxed);
                if (head - atomic_load_explicit(&arrival_tail, memory_order_acquire) >=
                    ARRIVAL_CAPACITY) {
                    atomic_fetch_add(&arrival_lost, 1);
                    continue;
                }
                arrival_bytes[head % ARRIVAL_CAPACITY] = buf[i];
                arrival_ns[head % ARRIVAL_CAPACITY] = stamp;
                atomic_store_explicit(&arrival_head, head + 1, memory_order_release);
            }
        } else if (ready > 0) {
            /* no host on the pty yet (hang-up): look again in a millisecond */
            struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000L};
            nanosleep(&pause, NULL);
        }
    }
    return NULL;
}

static void start_receiver(int *master, int realtime)
{
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (realtime) {
        struct sched_param priority = {.sched_priority = 12}; /* above the tick loop */
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
        pthread_attr_setschedparam(&attr, &priority);
    }
    if (pthread_create(&thread, &attr, receiver, master) != 0 &&
        pthread_create(&thread, NULL, receiver, master) != 0) { /* without the priority */
        fprintf(stderr, "simbench: cannot start the receiver thread\n");
        exit(2);
    }
    pthread_detach(thread);
    pthread_attr_destroy(&attr);
}

/* Take the bytes that arrived by the scheduled start of tick `ms` (`scheduled`, CLOCK_MONOTONIC)
 * for the firmware: each reaches it at this tick (plus the --delay-ms fault), as the byte a
 * board's UART received during the previous tick period. */
static void receive(uint32_t ms, const struct timespec *scheduled)
{
    long long due_ns = (long long)scheduled->tv_sec * 1000000000LL + scheduled->tv_nsec;
    uint32_t tail = atomic_load_explicit(&arrival_tail, memory_order_relaxed);
    uint32_t head = atomic_load_explicit(&arrival_head, memory_order_acquire);
    for (; tail != head && arrival_ns[tail % ARRIVAL_CAPACITY] <= due_ns; tail++) {
        uint8_t byte = arrival_bytes[tail % ARRIVAL_CAPACITY];
        stats.rx_bytes++;
        if (!inject(&byte, DIR_RX) || delay_head - delay_tail >= DELAY_CAPACITY) {
            continue;
        }
        delay_bytes[delay_head % DELAY_CAPACITY] = byte;
        delay_due[delay_head % DELAY_CAPACITY] = ms + faults.delay_ms;
        delay_head++;
    }
    atomic_store_explicit(&arrival_tail, tail, memory_order_release);
}

static void deliver(uint32_t now_ms)
{
    while (delay_tail != delay_head && (int32_t)(now_ms - delay_due[delay_tail % DELAY_CAPACITY]) >= 0) {
        bm_core_rx_byte(&core, delay_bytes[delay_tail % DELAY_CAPACITY]);
        delay_tail++;
    }
}

static void transmit(int master)
{
    int kept = 0;
    for (int i = 0; i < board.tx_len; i++) {
        uint8_t byte = board.tx[i];
        if (inject(&byte, DIR_TX)) {
            board.tx[kept++] = byte;
        }
    }
    if (kept > 0) {
        ssize_t n = write(master, board.tx, (size_t)kept);
        if (n < 0) {
            stats.tx_lost += (unsigned long)kept; /* nobody reading: the bytes are lost */
        } else {
            stats.tx_bytes += (unsigned long)n;
            stats.tx_lost += (unsigned long)(kept - n);
        }
    }
    board.tx_len = 0;
}

static void parse_args(int argc, char **argv, struct plant_params *p, int *ignore_stdin,
                       int *realtime)
{
    enum { O_INERTIA = 256, O_VISCOUS, O_COULOMB, O_TLIM, O_GRAV, O_CPR, O_INIT, O_KP, O_KD,
           O_DROP, O_CORRUPT, O_DIR, O_DELAY, O_STALL_AT, O_STALL, O_RESET_AT, O_SEED, O_IGN,
           O_NORT, O_LOAD, O_LOAD_RAMP, O_TRACE };
    static const struct option options[] = {
        {"inertia", 1, 0, O_INERTIA}, {"viscous", 1, 0, O_VISCOUS}, {"coulomb", 1, 0, O_COULOMB},
        {"torque-limit", 1, 0, O_TLIM}, {"gravity-moment", 1, 0, O_GRAV},
        {"encoder-counts", 1, 0, O_CPR}, {"initial-position-rad", 1, 0, O_INIT},
        {"kp", 1, 0, O_KP}, {"kd", 1, 0, O_KD}, {"drop", 1, 0, O_DROP},
        {"corrupt", 1, 0, O_CORRUPT}, {"direction", 1, 0, O_DIR}, {"delay-ms", 1, 0, O_DELAY},
        {"stall-at-ms", 1, 0, O_STALL_AT}, {"stall-ms", 1, 0, O_STALL},
        {"reset-at-ms", 1, 0, O_RESET_AT}, {"seed", 1, 0, O_SEED},
        {"ignore-stdin", 0, 0, O_IGN}, {"no-realtime", 0, 0, O_NORT},
        {"load-file", 1, 0, O_LOAD}, {"load-ramp-ms", 1, 0, O_LOAD_RAMP},
        {"trace", 1, 0, O_TRACE}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case O_INERTIA: p->inertia_kg_m2 = atof(optarg); break;
        case O_VISCOUS: p->viscous_nm_s_per_rad = atof(optarg); break;
        case O_COULOMB: p->coulomb_nm = atof(optarg); break;
        case O_TLIM: p->torque_limit_nm = atof(optarg); break;
        case O_GRAV: p->gravity_moment_nm = atof(optarg); break;
        case O_CPR: p->encoder_counts = (int32_t)atol(optarg); break;
        case O_INIT: p->initial_position_rad = atof(optarg); break;
        /* N·m/rad → mN·m/µrad (×1e-3) in Q16 (×65536) */
        case O_KP: gains.kp_q16 = (int32_t)lround(atof(optarg) * 65.536); break;
        case O_KD: gains.kd_q16 = (int32_t)lround(atof(optarg) * 65.536); break;
        case O_DROP: faults.drop = atof(optarg); break;
        case O_CORRUPT: faults.corrupt = atof(optarg); break;
        case O_DIR:
            faults.direction = strcmp(optarg, "tx") == 0 ? DIR_TX
                               : strcmp(optarg, "both") == 0 ? DIR_RX | DIR_TX : DIR_RX;
            break;
        case O_DELAY: faults.delay_ms = (uint32_t)atol(optarg); break;
        case O_STALL_AT: faults.stall_at_ms = atol(optarg); break;
        case O_STALL: faults.stall_ms = atol(optarg); break;
        case O_RESET_AT: faults.reset_at_ms = atol(optarg); break;
        case O_SEED: rng_state ^= (uint64_t)strtoull(optarg, NULL, 10) * 0x2545F4914F6CDD1Dull; break;
        case O_IGN: *ignore_stdin = 1; break;
        case O_NORT: *realtime = 0; break;
        case O_LOAD: load_read(optarg); break;
        case O_LOAD_RAMP: load.ramp_ms = (uint32_t)atol(optarg); break;
        case O_TRACE:
            trace = fopen(optarg, "w");
            if (trace == NULL) {
                perror(optarg);
                exit(2);
            }
            break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (p->inertia_kg_m2 <= 0.0 || p->viscous_nm_s_per_rad < 0.0 || p->coulomb_nm < 0.0 ||
        p->torque_limit_nm <= 0.0 || p->encoder_counts < 16 || faults.drop < 0.0 ||
        faults.drop > 1.0 || faults.corrupt < 0.0 || faults.corrupt > 1.0) {
        fprintf(stderr, "simbench: a plant or fault parameter is out of range (see --help)\n");
        exit(2);
    }
}

/* Whole ticks between the scheduled start of the current tick and now (0 when on time); also
 * the statistics of this lag: what the OS and the hypervisor let a real-time process achieve. */
static uint32_t ticks_behind(const struct timespec *scheduled)
{
    long long lag_ns = lag_since(scheduled);
    if (lag_ns > stats.max_lag_ns) {
        stats.max_lag_ns = lag_ns;
    }
    if (lag_ns > 1000000LL) {
        stats.late_ticks_1ms++;
    }
    return lag_ns > 0 ? (uint32_t)(lag_ns / 1000000LL) : 0u;
}

static void add_ms(struct timespec *t, long ms)
{
    t->tv_nsec += ms * 1000000L;
    while (t->tv_nsec >= 1000000000L) {
        t->tv_nsec -= 1000000000L;
        t->tv_sec++;
    }
}

int main(int argc, char **argv)
{
    struct plant_params params = plant_default_params();
    int ignore_stdin = 0;
    int realtime = 1;
    gains = bm_default_gains();
    parse_args(argc, argv, &params, &ignore_stdin, &realtime);
    if (realtime) {
        /* A real-time priority keeps the 1 kHz tick on time on a busy machine; the loop sleeps
         * between ticks, so it takes little CPU. Without the privilege it runs as it is. */
        struct sched_param priority = {.sched_priority = 10};
        realtime = sched_setscheduler(0, SCHED_FIFO, &priority) == 0;
    }
    plant_init(&board.plant, params);
    firmware_reset();
    char path[256];
    int master = pty_open_raw("simbench", path, sizeof path);
    start_receiver(&master, realtime);
    printf("%s\n", path);
    fflush(stdout);

    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    uint32_t stalled_ms = 0; /* ticks the firmware has missed in a row (stall fault) */
    for (uint32_t ms = 0;; ms++) {
        if (!ignore_stdin && (ms % 10u) == 0u && !poll_stdin()) {
            break;
        }
        if ((long)ms == faults.reset_at_ms) {
            firmware_reset();
        }
        if ((long)ms == faults.stall_at_ms) {
            faults.stall_remaining_ms = faults.stall_ms;
        }
        if (ticks_behind(&next) > RESTART_BEHIND_TICKS) { /* far behind (suspended?): restart */
            clock_gettime(CLOCK_MONOTONIC, &next);
        }
        receive(ms, &next);
        /* A stalled firmware neither ticks nor reads; the last torque stays on the motor until
         * the board's hardware watchdog resets it. */
        if (faults.stall_remaining_ms > 0) {
            faults.stall_remaining_ms--;
            if (++stalled_ms >= HOST_HW_WATCHDOG_MS) {
                firmware_reset();
                stats.hw_watchdog_resets++;
                faults.stall_remaining_ms = 0;
            }
        } else {
            stalled_ms = 0;
            deliver(ms);
            bm_core_tick(&core);
        }
        board.plant.external_torque_nm = load_torque();
        plant_step(&board.plant, board.torque_command_mNm / 1000.0, 1e-3);
        transmit(master);
        if (trace != NULL) {
            struct timespec stamp;
            clock_gettime(CLOCK_MONOTONIC, &stamp);
            fprintf(trace, "%lld %u %u %ld\n",
                    (long long)stamp.tv_sec * 1000000000LL + stamp.tv_nsec, (unsigned)core.state,
                    (unsigned)core.fault, (long)board.torque_command_mNm);
            if ((ms % 10u) == 9u) {
                fflush(trace);
            }
        }

        add_ms(&next, 1);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double late = (double)(now.tv_sec - next.tv_sec) + (now.tv_nsec - next.tv_nsec) * 1e-9;
        if (late > 0.0) {
            stats.overruns++;
        } else {
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        }
    }
    fprintf(stderr,
            "simbench: %lu ticks, %lu overruns, rx %lu bytes, tx %lu bytes, %lu dropped, "
            "%lu corrupted, %lu tx lost, %u bad frames, %lu hardware watchdog resets, %s "
            "scheduling, %lu ticks > 1 ms late, max tick lag %.3f ms, %lu rx bytes lost\n",
            (unsigned long)core.ticks, stats.overruns, stats.rx_bytes, stats.tx_bytes,
            stats.dropped, stats.corrupted, stats.tx_lost, (unsigned)core.rx.bad_frames,
            stats.hw_watchdog_resets, realtime ? "real-time" : "normal", stats.late_ticks_1ms,
            stats.max_lag_ns * 1e-6, (unsigned long)atomic_load(&arrival_lost));
    if (trace != NULL) {
        fclose(trace);
    }
    return 0;
}
