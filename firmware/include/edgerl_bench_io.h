/* I/O of the benchmark drivers (tests/edit_bench.c, boards/mps2_an386/policy_bench.c):
 * bytes in and out, little-endian u32, a tick counter around the measured call, and the
 * exit. Cortex-M4 build (-DEDGERL_BENCH_M4, -Iboards/mps2_an386): UART0 polled, SysTick core
 * clock ticks (24-bit down counter), semihosting exit (QEMU status 0). Host build: stdin ->
 * stdout, ticks 0. */
#ifndef EDGERL_BENCH_IO_H
#define EDGERL_BENCH_IO_H

#include <stddef.h>
#include <stdint.h>

#ifdef EDGERL_BENCH_M4
#include "board.h"

static inline uint8_t get_byte(void)
{
    while (!(REG32(UART0_BASE + UART_STATE) & UART_STATE_RXFULL)) {
    }
    return (uint8_t)REG32(UART0_BASE + UART_DATA);
}

static inline void put_byte(uint8_t b)
{
    while (REG32(UART0_BASE + UART_STATE) & UART_STATE_TXFULL) {
    }
    REG32(UART0_BASE + UART_DATA) = b;
}

static inline void bench_init(void)
{
    REG32(UART0_BASE + UART_BAUDDIV) = BOARD_SYSCLK_HZ / 1000000u;
    REG32(UART0_BASE + UART_CTRL) = UART_CTRL_TX_EN | UART_CTRL_RX_EN;
    REG32(SYST_RVR) = 0xFFFFFFu; /* free-running 24-bit down counter, no interrupt */
    REG32(SYST_CVR) = 0u;
    REG32(SYST_CSR) = 0x5u;
}

static inline uint32_t bench_clock(void)
{
    return REG32(SYST_CVR);
}

static inline uint32_t bench_elapsed(uint32_t t0, uint32_t t1)
{
    return (t0 - t1) & 0xFFFFFFu; /* down counter */
}

static inline void bench_exit(void)
{
    /* SYS_EXIT (0x18) with ADP_Stopped_ApplicationExit: QEMU exits with status 0 */
    register uint32_t op __asm("r0") = 0x18u;
    register uint32_t arg __asm("r1") = 0x20026u;
    __asm volatile("bkpt 0xAB" : : "r"(op), "r"(arg) : "memory");
}
#else
#include <stdio.h>

static inline uint8_t get_byte(void)
{
    int c = getchar();
    return (uint8_t)(c == EOF ? 0 : c);
}

static inline void put_byte(uint8_t b)
{
    putchar(b);
}

static inline void bench_init(void)
{
}

static inline uint32_t bench_clock(void)
{
    return 0u;
}

static inline uint32_t bench_elapsed(uint32_t t0, uint32_t t1)
{
    return t1 - t0;
}

static inline void bench_exit(void)
{
    fflush(stdout);
}
#endif

static inline uint32_t get_u32(void)
{
    uint32_t v = 0;
    int i;
    for (i = 0; i < 4; ++i) {
        v |= (uint32_t)get_byte() << (8 * i);
    }
    return v;
}

static inline void get_bytes(void *p, size_t n)
{
    uint8_t *b = (uint8_t *)p;
    size_t i;
    for (i = 0; i < n; ++i) {
        b[i] = get_byte();
    }
}

static inline void put_bytes(const void *p, size_t n)
{
    const uint8_t *b = (const uint8_t *)p;
    size_t i;
    for (i = 0; i < n; ++i) {
        put_byte(b[i]);
    }
}

#endif /* EDGERL_BENCH_IO_H */
