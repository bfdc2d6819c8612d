/* Host build of the firmware: the same core as an MCU build, on a pty.
 * usage: edgerl_fw_host [--device PATH] [--plant-stdio] [--watchdog-ms N] [--safe zero|hold]
 *                       [--n-cmd N] [--state-period-ms N] [--status-period-ms N]
 *                       [--fallback safe|policy] [--cmd-limit X] */
#define _XOPEN_SOURCE 700
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerl_fw.h"
#include "hal.h"
#include "hal_host.h"

static volatile sig_atomic_t g_stop = 0;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static int usage(const char *msg)
{
    fprintf(stderr, "edgerl_fw_host: %s\nusage: edgerl_fw_host [--device PATH] [--plant-stdio]"
            " [--watchdog-ms N] [--safe zero|hold] [--n-cmd N] [--state-period-ms N]"
            " [--status-period-ms N] [--fallback safe|policy] [--cmd-limit X]\n", msg);
    return 2;
}

/* A positive, finite float (the command limit). */
static int parse_limit(const char *s, float *out)
{
    char *end = NULL;
    float v = strtof(s, &end);
    if (end == s || *end != '\0' || !(v > 0.0f) || !(v <= 3.4e38f)) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_u32(const char *s, uint32_t max, uint32_t *out)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v > max) {
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    edgerl_fw_config_t cfg;
    static edgerl_fw_t fw;
    const char *device = NULL;
    int plant = 0;
    int i;
    uint32_t v;
    uint8_t buf[512];
    float state[EDGERL_MAX_STATE];
    uint8_t n_state = 0;
    int was_down = 0;
    struct sigaction sa;

    cfg.watchdog_us = 100000u;
    cfg.safe_action = EDGERL_SAFE_ZERO;
    cfg.n_cmd = 1;
    cfg.state_period_us = 20000u;
    cfg.status_period_us = 100000u;
    cfg.fallback = EDGERL_FALLBACK_SAFE;
    cfg.cmd_limit = EDGERL_CMD_LIMIT;
    for (i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--plant-stdio") == 0) {
            plant = 1;
            continue;
        }
        if (val == NULL) {
            return usage("missing value or unknown option");
        }
        ++i;
        if (strcmp(a, "--device") == 0) {
            device = val;
        } else if (strcmp(a, "--watchdog-ms") == 0 && parse_u32(val, 60000u, &v) == 0 && v) {
            cfg.watchdog_us = v * 1000u;
        } else if (strcmp(a, "--safe") == 0 && strcmp(val, "zero") == 0) {
            cfg.safe_action = EDGERL_SAFE_ZERO;
        } else if (strcmp(a, "--safe") == 0 && strcmp(val, "hold") == 0) {
            cfg.safe_action = EDGERL_SAFE_HOLD;
        } else if (strcmp(a, "--fallback") == 0 && strcmp(val, "safe") == 0) {
            cfg.fallback = EDGERL_FALLBACK_SAFE;
        } else if (strcmp(a, "--fallback") == 0 && strcmp(val, "policy") == 0) {
            cfg.fallback = EDGERL_FALLBACK_POLICY;
        } else if (strcmp(a, "--cmd-limit") == 0 && parse_limit(val, &cfg.cmd_limit) == 0) {
            /* set */
        } else if (strcmp(a, "--n-cmd") == 0 && parse_u32(val, EDGERL_MAX_CMD, &v) == 0 && v) {
            cfg.n_cmd = (uint8_t)v;
        } else if (strcmp(a, "--state-period-ms") == 0 && parse_u32(val, 60000u, &v) == 0) {
            cfg.state_period_us = v * 1000u;
        } else if (strcmp(a, "--status-period-ms") == 0 && parse_u32(val, 60000u, &v) == 0) {
            cfg.status_period_us = v * 1000u;
        } else {
            return usage("bad option or value");
        }
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);

    if (hal_host_open(device, plant) != 0) {
        return 1;
    }
    edgerl_fw_init(&fw, &cfg, hal_micros());
    while (!g_stop && !hal_host_plant_closed()) {
        int n = hal_serial_read(buf, sizeof buf);
        uint32_t now = hal_micros();
        if (n > 0) {
            edgerl_fw_on_serial(&fw, buf, (size_t)n, now);
        }
        if (n < 0 && !was_down) {
            edgerl_fw_on_disconnect(&fw);
        }
        was_down = n < 0;
        if (hal_sensor_in(state, EDGERL_MAX_STATE, &n_state)) {
            edgerl_fw_on_sensor(&fw, state, n_state, hal_micros());
        }
        edgerl_fw_poll(&fw, hal_micros());
        if (n <= 0) {
            hal_wait(1000u);
        }
    }
    hal_host_close();
    return 0;
}
