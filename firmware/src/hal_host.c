/* POSIX implementation of hal.h: serial = pty master (or a device), plant = stdin/stdout. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "edgerl_msgs.h"
#include "edgerl_wire.h"
#include "hal.h"
#include "hal_host.h"

static int g_link = -1;
static int g_link_down = 0;
static int g_plant = 0;
static int g_plant_eof = 0;
static uint16_t g_plant_seq = 0;
static edgerl_parser_t g_sensor_parser;
static float g_state[EDGERL_MAX_STATE];
static uint8_t g_n_state = 0;
static int g_state_new = 0;
static uint32_t g_wait_late_us = 0; /* see hal_timer_late_us */
static volatile sig_atomic_t g_estop_input = 0;

static void on_sigusr1(int sig)
{
    (void)sig;
    g_estop_input = 1;
}

static int set_nonblock(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static int set_raw(int fd)
{
    struct termios t;
    if (tcgetattr(fd, &t) != 0) {
        return -1;
    }
    t.c_iflag &= ~(tcflag_t)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON
                             | IXOFF);
    t.c_oflag &= ~(tcflag_t)OPOST;
    t.c_lflag &= ~(tcflag_t)(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
    t.c_cflag &= ~(tcflag_t)(CSIZE | PARENB);
    t.c_cflag |= CS8;
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    return tcsetattr(fd, TCSANOW, &t);
}

int hal_host_open(const char *device, int plant_stdio)
{
    const char *path = device;
    g_plant = plant_stdio;
    edgerl_parser_init(&g_sensor_parser, 1);
    if (device) {
        g_link = open(device, O_RDWR | O_NOCTTY | O_NONBLOCK);
        if (g_link < 0 || set_raw(g_link) != 0) {
            fprintf(stderr, "edgerl_fw: cannot open %s: %s\n", device, strerror(errno));
            return -1;
        }
    } else {
        int slave;
        g_link = posix_openpt(O_RDWR | O_NOCTTY);
        if (g_link < 0 || grantpt(g_link) != 0 || unlockpt(g_link) != 0
            || (path = ptsname(g_link)) == NULL) {
            fprintf(stderr, "edgerl_fw: cannot create a pty: %s\n", strerror(errno));
            return -1;
        }
        slave = open(path, O_RDWR | O_NOCTTY);
        if (slave < 0 || set_raw(slave) != 0) {
            fprintf(stderr, "edgerl_fw: cannot configure %s: %s\n", path, strerror(errno));
            return -1;
        }
        close(slave);
        set_nonblock(g_link);
    }
    if (g_plant) {
        set_nonblock(STDIN_FILENO);
    }
    {
        /* SIGUSR1 plays the hardware e-stop button */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigusr1;
        sigaction(SIGUSR1, &sa, NULL);
    }
    printf("EDGERL_FW_PTY %s\n", path);
    fflush(stdout);
    return 0;
}

int hal_host_plant_closed(void)
{
    return g_plant && g_plant_eof;
}

void hal_host_close(void)
{
    if (g_link >= 0) {
        close(g_link);
        g_link = -1;
    }
}

int hal_estop_input(void)
{
    if (g_estop_input) {
        g_estop_input = 0;
        return 1;
    }
    return 0;
}

uint32_t hal_micros(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
}

int hal_serial_read(uint8_t *buf, size_t cap)
{
    ssize_t n = read(g_link, buf, cap);
    if (n > 0) {
        g_link_down = 0;
        return (int)n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        g_link_down = 0;
        return 0;
    }
    g_link_down = 1; /* EIO: no process holds the pty slave (cable pulled) */
    return -1;
}

static void write_all(int fd, const uint8_t *buf, size_t n, int drop_when_full)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !drop_when_full) {
            struct pollfd p;
            p.fd = fd;
            p.events = POLLOUT;
            p.revents = 0;
            poll(&p, 1, 10);
        } else {
            return; /* link down or buffer full: the frame is lost, the receiver counts it */
        }
    }
}

void hal_serial_write(const uint8_t *buf, size_t n)
{
    if (g_link >= 0 && !g_link_down) {
        write_all(g_link, buf, n, 1);
    }
}

void hal_actuator_out(const float *cmd, uint8_t n, uint8_t mode)
{
    uint8_t out[EDGERL_FRAME_BUF];
    size_t len;
    if (!g_plant || g_plant_eof) {
        return;
    }
    len = edgerl_actuator_encode(cmd, n, mode, hal_micros(), g_plant_seq++, out);
    write_all(STDOUT_FILENO, out, len, 0);
}

int hal_sensor_in(float *state, uint8_t cap, uint8_t *n)
{
    uint8_t buf[512];
    ssize_t r;
    int i;
    edgerl_frame_t f;
    while (g_plant && !g_plant_eof) {
        r = read(STDIN_FILENO, buf, sizeof buf);
        if (r == 0) {
            g_plant_eof = 1;
        }
        if (r <= 0) {
            break;
        }
        for (i = 0; i < r; ++i) {
            if (edgerl_parser_push(&g_sensor_parser, buf[i], &f)
                && f.id == EDGERL_MSG_SENSOR_ID) {
                edgerl_sensor_t s;
                edgerl_sensor_unpack(&s, f.payload);
                g_n_state = s.n > EDGERL_MAX_STATE ? EDGERL_MAX_STATE : s.n;
                memcpy(g_state, s.state, sizeof g_state);
                g_state_new = 1;
            }
        }
    }
    if (!g_state_new) {
        return 0;
    }
    g_state_new = 0;
    *n = g_n_state < cap ? g_n_state : cap;
    memcpy(state, g_state, sizeof(float) * *n);
    return 1;
}

void hal_wait(uint32_t max_us)
{
    struct pollfd p[2];
    nfds_t k = 0;
    if (g_link >= 0 && !g_link_down) {
        p[k].fd = g_link;
        p[k].events = POLLIN;
        p[k].revents = 0;
        ++k;
    }
    if (g_plant && !g_plant_eof) {
        p[k].fd = STDIN_FILENO;
        p[k].events = POLLIN;
        p[k].revents = 0;
        ++k;
    }
    int timeout_ms = (int)((max_us + 999u) / 1000u);
    uint32_t t0 = hal_micros();
    g_wait_late_us = 0; /* woken by I/O: not a timer wake */
    if (poll(p, k, timeout_ms) == 0) { /* timed out: how late past the timeout it woke */
        int32_t late_us = (int32_t)(hal_micros() - t0 - (uint32_t)timeout_ms * 1000u);
        g_wait_late_us = late_us > 0 ? (uint32_t)late_us : 0u;
    }
}

uint32_t hal_timer_late_us(void)
{
    return g_wait_late_us;
}
