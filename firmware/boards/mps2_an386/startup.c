/* Cortex-M4 startup for the MPS2 AN386 board: vector table, reset handler (copy .data,
 * zero .bss, enable the FPU), default handlers. No libc start files (-nostartfiles). */
#include <stdint.h>

#include "board.h"

extern uint32_t _sidata;
extern uint32_t _sdata;
extern uint32_t _edata;
extern uint32_t _sbss;
extern uint32_t _ebss;
extern uint32_t _estack;

int main(void);
void Reset_Handler(void);
void Default_Handler(void);
void HardFault_Handler(void);

/* weak aliases: a board file defines the handlers it uses */
void NMI_Handler(void) __attribute__((weak, alias("Default_Handler")));
void MemManage_Handler(void) __attribute__((weak, alias("Default_Handler")));
void BusFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void UsageFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SVC_Handler(void) __attribute__((weak, alias("Default_Handler")));
void PendSV_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SysTick_Handler(void) __attribute__((weak, alias("Default_Handler")));
void UART0_RX_Handler(void) __attribute__((weak, alias("Default_Handler")));
void UART0_TX_Handler(void) __attribute__((weak, alias("Default_Handler")));
void UART1_RX_Handler(void) __attribute__((weak, alias("Default_Handler")));
void UART1_TX_Handler(void) __attribute__((weak, alias("Default_Handler")));

typedef void (*vector_t)(void);

/* 16 system exceptions + the first 4 external IRQs (UART0/1 RX/TX: mps2.c uartirq[]) */
__attribute__((section(".isr_vector"), used))
static const vector_t g_vectors[16 + 4] = {
    (vector_t)(uintptr_t)&_estack,
    Reset_Handler,
    NMI_Handler,
    HardFault_Handler,
    MemManage_Handler,
    BusFault_Handler,
    UsageFault_Handler,
    0, 0, 0, 0,
    SVC_Handler,
    0, 0,
    PendSV_Handler,
    SysTick_Handler,
    UART0_RX_Handler, /* IRQ 0 */
    UART0_TX_Handler, /* IRQ 1 */
    UART1_RX_Handler, /* IRQ 2 */
    UART1_TX_Handler, /* IRQ 3 */
};

void Reset_Handler(void)
{
    uint32_t *src = &_sidata;
    uint32_t *dst = &_sdata;
    while (dst < &_edata) {
        *dst++ = *src++;
    }
    for (dst = &_sbss; dst < &_ebss; ++dst) {
        *dst = 0u;
    }
    /* CP10/CP11 full access: the policy and the core use single-precision floats */
    REG32(SCB_CPACR) |= (0xFu << 20);
    __asm volatile("dsb\n isb" ::: "memory");
    (void)main();
    for (;;) {
        __asm volatile("wfi");
    }
}

void Default_Handler(void)
{
    for (;;) {
    }
}

/* A fault stops the firmware with every output at its last value; the board's hardware
 * watchdog (not emulated) would reset it. Spin so a debugger can inspect it. */
void HardFault_Handler(void)
{
    for (;;) {
    }
}
