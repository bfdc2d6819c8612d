/* MPS2 AN386 (Cortex-M4F, CMSDK peripherals) register map: only what hal_mps2.c uses.
 * Sources: Arm AN386 application note; QEMU hw/arm/mps2.c (UART i: RX IRQ 2i, TX 2i+1). */
#ifndef EDGERL_BOARD_MPS2_AN386_H
#define EDGERL_BOARD_MPS2_AN386_H

#include <stdint.h>

#define REG32(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

#define BOARD_SYSCLK_HZ 25000000u /* core, SysTick and APB clock */

/* CMSDK APB UART */
#define UART0_BASE 0x40004000u /* host link (USB-serial on a real board) */
#define UART1_BASE 0x40005000u /* plant link: sensors in, actuators out (HIL) */
#define UART_DATA 0x00u
#define UART_STATE 0x04u
#define UART_CTRL 0x08u
#define UART_INTSTATUS 0x0Cu /* write 1 to clear */
#define UART_BAUDDIV 0x10u
#define UART_STATE_TXFULL 0x1u
#define UART_STATE_RXFULL 0x2u
#define UART_CTRL_TX_EN 0x1u
#define UART_CTRL_RX_EN 0x2u
#define UART_CTRL_TX_INTEN 0x4u
#define UART_CTRL_RX_INTEN 0x8u
#define UART_INT_TX 0x1u
#define UART_INT_RX 0x2u
#define UART0_RX_IRQn 0
#define UART0_TX_IRQn 1
#define UART1_RX_IRQn 2
#define UART1_TX_IRQn 3

/* FPGA IO: push buttons (BUTTON[0] is the e-stop input) */
#define FPGAIO_BUTTON 0x40028008u

/* System control space */
#define SYST_CSR 0xE000E010u
#define SYST_RVR 0xE000E014u
#define SYST_CVR 0xE000E018u
#define NVIC_ISER0 0xE000E100u
#define NVIC_IPR0 0xE000E400u
#define SCB_CPACR 0xE000ED88u

#endif /* EDGERL_BOARD_MPS2_AN386_H */
