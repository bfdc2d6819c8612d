/* policy.h alone on the Cortex-M4F: parity against onnxruntime and cost per inference.
 * Protocol on UART0 (polled, little-endian): the host sends u32 N, then N observations of
 * EDGERL_POLICY_IN_DIM float32; after each one the board answers EDGERL_POLICY_OUT_DIM
 * float32 and the u32 SysTick ticks (core clock) the forward pass took. After N answers it
 * ends the emulator through semihosting (exit 0). Run under `qemu-system-arm -icount
 * shift=0` one instruction is 1 ns of emulated time, so instructions = ticks * 1e9 /
 * BOARD_SYSCLK_HZ. */
#include <stdint.h>
#include <string.h>

#include "edgerl_bench_io.h"
#include "policy.h"

int main(void);

int main(void)
{
    float in[EDGERL_POLICY_IN_DIM];
    float out[EDGERL_POLICY_OUT_DIM];
    uint32_t n;
    uint32_t k;
    bench_init();
    n = get_u32();
    for (k = 0; k < n; ++k) {
        uint32_t t0;
        uint32_t t1;
        uint32_t ticks;
        get_bytes(in, sizeof in);
        t0 = bench_clock();
        edgerl_policy_forward(in, out);
        t1 = bench_clock();
        ticks = bench_elapsed(t0, t1);
        put_bytes(out, sizeof out);
        put_bytes(&ticks, sizeof ticks);
    }
    bench_exit();
    return 0;
}
