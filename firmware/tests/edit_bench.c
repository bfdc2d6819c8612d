/* The edit step (src/edit.c + edit_policy.h) alone, for parity with the Python /
 * onnxruntime path and its cost per tick. Host build: stdin -> stdout. Cortex-M4 build
 * (-DEDGERL_BENCH_M4, boards/mps2_an386): UART0 polled, SysTick ticks, semihosting exit.
 * Protocol (little-endian): u32 N, then N records
 *   in:  u32 has_chunk, u32 now_us, u32 t0_us, u32 dt_us, u32 obs_us, u32 horizon,
 *        f32 obs[OBS_DIM], f32 chunk[HORIZON * ACTION_DIM], f32 committed[K * ACTION_DIM]
 *   out: f32 x[EDIT_DIM], f32 cmd[ACTION_DIM], u32 row (EDGERL_NO_ROW: none), u32 ticks
 * Each record is one edgerl_edit_tick on a fresh state holding that chunk and history;
 * ticks = core clock ticks of edgerl_edit_tick (M4; 0 on the host). */
#include <stdint.h>
#include <string.h>

#include "edgerl_edit.h"

int main(void);

#ifdef EDGERL_BENCH_M4
#include "board.h"

static uint8_t get_byte(void)
{
    while (!(REG32(UART0_BASE + UART_STATE) & UART_STATE_RXFULL)) {
    }
    return (uint8_t)REG32(UART0_BASE + UART_DATA);
}

static void put_byte(uint8_t b)
{
    while (REG32(UART0_BASE + UART_STATE) & UART_STATE_TXFULL) {
    }
    REG32(UART0_BASE + UART_DATA) = b;
}

static void bench_init(void)
{
    REG32(UART0_BASE + UART_BAUDDIV) = BOARD_SYSCLK_HZ / 1000000u;
    REG32(UART0_BASE + UART_CTRL) = UART_CTRL_TX_EN | UART_CTRL_RX_EN;
    REG32(SYST_RVR) = 0xFFFFFFu; /* free-running 24-bit down counter, no interrupt */
    REG32(SYST_CVR) = 0u;
    REG32(SYST_CSR) = 0x5u;
}

static uint32_t bench_clock(void)
{
    return REG32(SYST_CVR);
}

static uint32_t bench_elapsed(uint32_t t0, uint32_t t1)
{
    return (t0 - t1) & 0xFFFFFFu; /* down counter */
}

static void bench_exit(void)
{
    /* SYS_EXIT (0x18) with ADP_Stopped_ApplicationExit: QEMU exits with status 0 */
    register uint32_t op __asm("r0") = 0x18u;
    register uint32_t arg __asm("r1") = 0x20026u;
    __asm volatile("bkpt 0xAB" : : "r"(op), "r"(arg) : "memory");
}
#else
#include <stdio.h>

static uint8_t get_byte(void)
{
    int c = getchar();
    return (uint8_t)(c == EOF ? 0 : c);
}

static void put_byte(uint8_t b)
{
    putchar(b);
}

static void bench_init(void)
{
}

static uint32_t bench_clock(void)
{
    return 0u;
}

static uint32_t bench_elapsed(uint32_t t0, uint32_t t1)
{
    return t1 - t0;
}

static void bench_exit(void)
{
    fflush(stdout);
}
#endif

static uint32_t get_u32(void)
{
    uint32_t v = 0;
    int i;
    for (i = 0; i < 4; ++i) {
        v |= (uint32_t)get_byte() << (8 * i);
    }
    return v;
}

static void get_bytes(void *p, size_t n)
{
    uint8_t *b = (uint8_t *)p;
    size_t i;
    for (i = 0; i < n; ++i) {
        b[i] = get_byte();
    }
}

static void put_bytes(const void *p, size_t n)
{
    const uint8_t *b = (const uint8_t *)p;
    size_t i;
    for (i = 0; i < n; ++i) {
        put_byte(b[i]);
    }
}

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
        g_msg.host_time_us = now; /* times are already the firmware's */
        g_msg.n = EDGERL_EDIT_ACTION_DIM;
        g_msg.step0 = k;
        get_bytes(obs, sizeof obs);
        get_bytes(chunk, sizeof chunk);
        memcpy(g_msg.actions, chunk, sizeof chunk);
        edgerl_edit_reset(&g_edit);
        get_bytes(g_edit.committed, EDGERL_EDIT_HIST * sizeof(float));
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
