/* The edit step (src/edit.c + edit_policy.h) alone, for parity with the Python /
 * onnxruntime path and its cost per tick. Host build: stdin -> stdout. Cortex-M4 build
 * (-DEDGERL_BENCH_M4, boards/mps2_an386): UART0 polled, SysTick ticks, semihosting exit.
 * Protocol (little-endian): u32 N, then N records
 *   in:  u32 has_chunk, u32 now_us, u32 t0_us, u32 dt_us, u32 obs_us, u32 horizon,
 *        u32 intent_n, f32 obs[OBS_DIM], f32 chunk[HORIZON * ACTION_DIM],
 *        f32 committed[K * ACTION_DIM], f32 intent[EDGERL_MAX_INTENT] (intent_n used)
 *   out: f32 x[EDIT_DIM], f32 cmd[ACTION_DIM], u32 row (EDGERL_NO_ROW: none), u32 ticks
 * Each record is one edgerl_edit_tick on a fresh state holding that chunk and history;
 * ticks = core clock ticks of edgerl_edit_tick (M4; 0 on the host). */
#include <stdint.h>
#include <string.h>

#include "edgerl_bench_io.h"
#include "edgerl_edit.h"

int main(void);

static edgerl_edit_t g_edit;
static edgerl_chunk_t g_msg;

int main(void)
{
    float obs[EDGERL_EDIT_OBS_DIM];
    float cmd[EDGERL_EDIT_ACTION_DIM];
    float chunk[EDGERL_EDIT_HORIZON * EDGERL_EDIT_ACTION_DIM];
    uint32_t n;
    uint32_t k;
    bench_init();
    n = get_u32();
    for (k = 0; k < n; ++k) {
        uint32_t has = get_u32();
        uint32_t now = get_u32();
        uint32_t t0, t1, ticks, row;
        memset(&g_msg, 0, sizeof g_msg);
        g_msg.t0_us = get_u32();
        g_msg.dt_us = get_u32();
        g_msg.obs_time_us = get_u32();
        g_msg.horizon = (uint8_t)get_u32();
        g_msg.intent_n = (uint8_t)get_u32();
        g_msg.host_time_us = now; /* times are already the firmware's */
        g_msg.n = EDGERL_EDIT_ACTION_DIM;
        g_msg.step0 = k;
        get_bytes(obs, sizeof obs);
        get_bytes(chunk, sizeof chunk);
        memcpy(g_msg.actions, chunk, sizeof chunk);
        edgerl_edit_reset(&g_edit);
        get_bytes(g_edit.committed, EDGERL_EDIT_HIST * sizeof(float));
        get_bytes(g_msg.intent, sizeof g_msg.intent);
        if (has) {
            edgerl_edit_set_chunk(&g_edit, &g_msg, now);
        }
        t0 = bench_clock();
        edgerl_edit_tick(&g_edit, obs, now, cmd);
        t1 = bench_clock();
        ticks = bench_elapsed(t0, t1);
        row = g_edit.row;
        put_bytes(g_edit.x, sizeof g_edit.x);
        put_bytes(cmd, sizeof cmd);
        put_bytes(&row, sizeof row);
        put_bytes(&ticks, sizeof ticks);
    }
    bench_exit();
    return 0;
}
