/* MPS2 AN386 board layer beyond hal.h: init, boot configuration, diagnostics. */
#ifndef EDGERL_BOARD_HAL_H
#define EDGERL_BOARD_HAL_H

#include <stdint.h>

#include "edgerl_fw.h"

#ifndef BOARD_BAUD
#define BOARD_BAUD 1000000u /* both UARTs, 8N1 (QEMU does not pace bytes) */
#endif

#define BOARD_BOOT_CONFIG_MAGIC 0xED6E4C01u

/* Written before reset at the start of RAM (QEMU: `-device loader,addr=0x20000000+4k,
 * data=...,data-len=4`; a real board: a bootloader or a flash page). Without the magic
 * the compiled-in defaults of board_config() apply. Word offsets are part of the
 * interface with hil/qemu.py. */
typedef struct {
    uint32_t magic;            /* +0  BOARD_BOOT_CONFIG_MAGIC */
    uint32_t watchdog_us;      /* +4  */
    uint32_t safe_action;      /* +8  EDGERL_SAFE_ZERO / EDGERL_SAFE_HOLD */
    uint32_t n_cmd;            /* +12 */
    uint32_t state_period_us;  /* +16 */
    uint32_t status_period_us; /* +20 */
    uint32_t fallback;         /* +24 EDGERL_FALLBACK_SAFE / EDGERL_FALLBACK_POLICY */
    uint32_t reserved;         /* +28 */
} board_boot_config_t;

void board_init(void);
void board_config(edgerl_fw_config_t *cfg);
/* Bytes lost to full ring buffers since boot (all four rings). */
uint32_t board_dropped_bytes(void);

#endif /* EDGERL_BOARD_HAL_H */
