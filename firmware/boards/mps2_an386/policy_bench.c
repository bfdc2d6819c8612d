/* policy.h alone on the Cortex-M4F: parity against onnxruntime and cost per inference.
 * Protocol on UART0 (polled, little-endian): the host sends u32 N, then N observations of
 * EDGERL_POLICY_IN_DIM float32; after each one the board answers EDGERL_POLICY_OUT_DIM
 * float32 and the u32 SysTick ticks (core clock) the forward pass took. After N answers it
 * ends the emulator through semihosting (exit 0). Run under `qemu-system-arm -icount
 * shift=0` one instruction is 1 ns of emulated time, so instructions = ticks * 1e9 /
 * BOARD_SYSCLK_HZ. */
#include <stdint.h>
#include <string.h>

#include "board.h"
#include "policy.h"

int main(void);

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

static uint32_t get_u32(void)
{
    uint32_t v = 0;
    int i;
    for (i = 0; i < 4; ++i) {
        v |= (uint32_t)get_byte() << (8 * i);
    }
    return v;
}

static void put_bytes(const void *p, size_t n)
{
    const uint8_t *b = (const uint8_t *)p;
    size_t i;
    for (i = 0; i < n; ++i) {
        put_byte(b[i]);
    }
}

static void semihosting_exit(void)
{
    /* SYS_EXIT (0x18) with ADP_Stopped_ApplicationExit: QEMU exits with status 0 */
    register uint32_t op __asm("r0") = 0x18u;
    register uint32_t arg __asm("r1") = 0x20026u;
    __asm volatile("bkpt 0xAB" : : "r"(op), "r"(arg) : "memory");
}

int main(void)
{
    float in[EDGERL_POLICY_IN_DIM];
    float out[EDGERL_POLICY_OUT_DIM];
    uint32_t n;
    uint32_t k;
    REG32(UART0_BASE + UART_BAUDDIV) = BOARD_SYSCLK_HZ / 1000000u;
    REG32(UART0_BASE + UART_CTRL) = UART_CTRL_TX_EN | UART_CTRL_RX_EN;
    REG32(SYST_RVR) = 0xFFFFFFu; /* free-running 24-bit down counter, no interrupt */
    REG32(SYST_CVR) = 0u;
    REG32(SYST_CSR) = 0x5u;
    n = get_u32();
    for (k = 0; k < n; ++k) {
        uint32_t t0;
        uint32_t t1;
        uint32_t ticks;
        size_t i;
        for (i = 0; i < sizeof in; ++i) {
            ((uint8_t *)in)[i] = get_byte();
        }
        t0 = REG32(SYST_CVR);
        edgerl_policy_forward(in, out);
        t1 = REG32(SYST_CVR);
        ticks = (t0 - t1) & 0xFFFFFFu;
        put_bytes(out, sizeof out);
        put_bytes(&ticks, sizeof ticks);
    }
    semihosting_exit();
    return 0;
}
