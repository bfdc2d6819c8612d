/* MPS2 AN386 firmware: the unchanged core (src/app.c, src/telemetry.c, src/wire.c) in a
 * bare-metal loop.
 * Interrupts fill the UART rings; this loop drains them, runs the 1 ms timers and sleeps
 * (WFI) until the next byte or SysTick. */
#include "board_hal.h"
#include "edgerl_fw.h"
#include "hal.h"

#define LINK_PROBE_US 10000u

static edgerl_fw_t g_fw;

int main(void)
{
    edgerl_fw_config_t cfg;
    uint8_t buf[128];
    float state[EDGERL_MAX_STATE];
    uint8_t n_state = 0;
    uint32_t last_probe;
    static const uint8_t probe = 0;

    board_init();
    board_config(&cfg);
    edgerl_fw_init(&g_fw, &cfg, hal_micros());
    last_probe = hal_micros();
    for (;;) {
        int n = hal_serial_read(buf, sizeof buf);
        uint32_t now = hal_micros();
        if (n > 0) {
            edgerl_fw_on_serial(&g_fw, buf, (size_t)n, now);
        }
        if (hal_sensor_in(state, EDGERL_MAX_STATE, &n_state)) {
            edgerl_fw_on_sensor(&g_fw, state, n_state, hal_micros());
        }
        edgerl_fw_poll(&g_fw, hal_micros());
        /* until a host says HELLO, a lone frame delimiter every 10 ms: harmless on the
         * wire (an empty frame), and it lets a pty-backed emulator notice the host */
        if (!g_fw.linked && now - last_probe >= LINK_PROBE_US) {
            hal_serial_write(&probe, 1);
            last_probe = now;
        }
        if (n <= 0) {
            hal_wait(1000u);
        }
    }
}
