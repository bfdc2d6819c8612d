/* hal.h for the MPS2 AN386 board (Cortex-M4F): interrupt-driven CMSDK UART ring buffers,
 * a SysTick microsecond time base, the FPGA button as the e-stop input. No malloc.
 *   UART0 = host link (the edgerl serial protocol; -serial pty #1 in QEMU)
 *   UART1 = plant link (SENSOR frames in, ACTUATOR frames out; in QEMU the HIL harness's
 *           socket; on a robot this is replaced by the ADC/encoder and PWM/CAN drivers). */
#include "board_hal.h"

#include <string.h>

#include "board.h"
#include "edgerl_msgs.h"
#include "edgerl_wire.h"
#include "hal.h"

#define TICKS_PER_US (BOARD_SYSCLK_HZ / 1000000u)
#define TICKS_PER_MS (BOARD_SYSCLK_HZ / 1000u)
#define RING_SIZE 1024u /* power of two */

typedef struct {
    volatile uint32_t head; /* written by the producer only */
    volatile uint32_t tail; /* written by the consumer only */
    uint32_t dropped;       /* bytes lost because the ring was full */
    uint8_t data[RING_SIZE];
} ring_t;

typedef struct {
    uint32_t base;
    ring_t rx;
    ring_t tx;
} uart_t;

static uart_t g_host;  /* base set by board_init: the rings stay in .bss, not in flash */
static uart_t g_plant;
static volatile uint32_t g_ms;
static volatile uint32_t g_tick_late_us; /* see hal_timer_late_us */
static uint32_t g_last_us;
static edgerl_parser_t g_sensor_parser;
static uint16_t g_plant_seq;

/* boot configuration (see board_hal.h): not zeroed by the startup code */
__attribute__((section(".bootcfg"), used)) volatile board_boot_config_t g_boot_config;

static uint32_t irq_save(void)
{
    uint32_t primask;
    __asm volatile("mrs %0, primask\n cpsid i" : "=r"(primask)::"memory");
    return primask;
}

static void irq_restore(uint32_t primask)
{
    __asm volatile("msr primask, %0" ::"r"(primask) : "memory");
}

static uint32_t ring_count(const ring_t *r)
{
    return r->head - r->tail;
}

static int ring_put(ring_t *r, uint8_t b)
{
    if (ring_count(r) >= RING_SIZE) {
        ++r->dropped;
        return 0;
    }
    r->data[r->head & (RING_SIZE - 1u)] = b;
    __asm volatile("dmb" ::: "memory");
    r->head = r->head + 1u;
    return 1;
}

static size_t ring_get(ring_t *r, uint8_t *out, size_t cap)
{
    size_t n = 0;
    while (n < cap && ring_count(r) > 0u) {
        out[n++] = r->data[r->tail & (RING_SIZE - 1u)];
        __asm volatile("dmb" ::: "memory");
        r->tail = r->tail + 1u;
    }
    return n;
}

/* Move bytes from the TX ring into the UART while its holding register is free. Runs with
 * interrupts masked (from the writer) or in the TX interrupt. */
static void uart_kick(uart_t *u)
{
    while (ring_count(&u->tx) > 0u && !(REG32(u->base + UART_STATE) & UART_STATE_TXFULL)) {
        REG32(u->base + UART_DATA) = u->tx.data[u->tx.tail & (RING_SIZE - 1u)];
        u->tx.tail = u->tx.tail + 1u;
    }
}

/* Queue a whole frame, or drop it whole when the ring lacks room (a stalled link): the
 * receiver then sees a missing frame (a sequence gap), never a torn one. */
static void uart_write(uart_t *u, const uint8_t *buf, size_t n)
{
    size_t i;
    uint32_t s;
    if (RING_SIZE - ring_count(&u->tx) < n) {
        u->tx.dropped += (uint32_t)n;
        return;
    }
    for (i = 0; i < n; ++i) {
        (void)ring_put(&u->tx, buf[i]);
    }
    s = irq_save();
    uart_kick(u);
    irq_restore(s);
}

static void uart_rx_isr(uart_t *u)
{
    REG32(u->base + UART_INTSTATUS) = UART_INT_RX;
    while (REG32(u->base + UART_STATE) & UART_STATE_RXFULL) {
        (void)ring_put(&u->rx, (uint8_t)REG32(u->base + UART_DATA));
    }
}

static void uart_tx_isr(uart_t *u)
{
    REG32(u->base + UART_INTSTATUS) = UART_INT_TX;
    uart_kick(u);
}

void UART0_RX_Handler(void);
void UART0_TX_Handler(void);
void UART1_RX_Handler(void);
void UART1_TX_Handler(void);
void SysTick_Handler(void);

void UART0_RX_Handler(void)
{
    uart_rx_isr(&g_host);
}

void UART0_TX_Handler(void)
{
    uart_tx_isr(&g_host);
}

void UART1_RX_Handler(void)
{
    uart_rx_isr(&g_plant);
}

void UART1_TX_Handler(void)
{
    uart_tx_isr(&g_plant);
}

void SysTick_Handler(void)
{
    /* the counter reloaded at the tick and counts down: what it has counted since is how
     * late this handler runs; it reads 0 once a whole period has passed (QEMU holds it
     * there when its timer is that late) */
    uint32_t cvr = REG32(SYST_CVR);
    g_tick_late_us = cvr == 0u ? 1000u : (TICKS_PER_MS - 1u - cvr) / TICKS_PER_US;
    g_ms = g_ms + 1u;
}

uint32_t hal_timer_late_us(void)
{
    return g_tick_late_us;
}

static void uart_init(uart_t *u, uint32_t base, int rx_irq, int tx_irq)
{
    u->base = base;
    REG32(u->base + UART_BAUDDIV) = BOARD_SYSCLK_HZ / BOARD_BAUD;
    REG32(u->base + UART_INTSTATUS) = UART_INT_RX | UART_INT_TX;
    REG32(u->base + UART_CTRL) = UART_CTRL_TX_EN | UART_CTRL_RX_EN | UART_CTRL_TX_INTEN
        | UART_CTRL_RX_INTEN;
    REG32(NVIC_ISER0) = (1u << rx_irq) | (1u << tx_irq);
}

void board_init(void)
{
    edgerl_parser_init(&g_sensor_parser, 1);
    /* SysTick: 1 kHz interrupt from the core clock; hal_micros interpolates within it */
    REG32(SYST_RVR) = TICKS_PER_MS - 1u;
    REG32(SYST_CVR) = 0u;
    REG32(SYST_CSR) = 0x7u; /* CLKSOURCE=core | TICKINT | ENABLE */
    uart_init(&g_host, UART0_BASE, UART0_RX_IRQn, UART0_TX_IRQn);
    uart_init(&g_plant, UART1_BASE, UART1_RX_IRQn, UART1_TX_IRQn);
    __asm volatile("cpsie i" ::: "memory");
}

void board_config(edgerl_fw_config_t *cfg)
{
    cfg->watchdog_us = 100000u;
    cfg->safe_action = EDGERL_SAFE_ZERO;
    cfg->n_cmd = 1;
    cfg->state_period_us = 20000u;
    cfg->status_period_us = 100000u;
    cfg->fallback = EDGERL_FALLBACK_SAFE;
    cfg->cmd_limit = EDGERL_CMD_LIMIT;
    if (g_boot_config.magic != BOARD_BOOT_CONFIG_MAGIC) {
        return; /* no loader / bootloader config: the compiled-in defaults above */
    }
    if (g_boot_config.watchdog_us != 0u) {
        cfg->watchdog_us = g_boot_config.watchdog_us;
    }
    cfg->safe_action = (uint8_t)g_boot_config.safe_action;
    cfg->n_cmd = (uint8_t)g_boot_config.n_cmd;
    cfg->state_period_us = g_boot_config.state_period_us;
    cfg->status_period_us = g_boot_config.status_period_us;
    cfg->fallback = (uint8_t)g_boot_config.fallback;
}

uint32_t board_dropped_bytes(void)
{
    return g_host.rx.dropped + g_host.tx.dropped + g_plant.rx.dropped + g_plant.tx.dropped;
}

uint32_t hal_micros(void)
{
    uint32_t ms;
    uint32_t val;
    uint32_t us;
    do {
        ms = g_ms;
        val = REG32(SYST_CVR);
    } while (ms != g_ms);
    us = ms * 1000u + (TICKS_PER_MS - 1u - val) / TICKS_PER_US;
    /* never step back (a wrap seen in CVR before its interrupt ran) */
    if ((int32_t)(us - g_last_us) < 0) {
        us = g_last_us;
    }
    g_last_us = us;
    return us;
}

int hal_serial_read(uint8_t *buf, size_t cap)
{
    /* a UART cannot tell a pulled cable from a quiet host: never -1 (the watchdog and
     * the host's HELLO on re-plug cover it) */
    return (int)ring_get(&g_host.rx, buf, cap);
}

void hal_serial_write(const uint8_t *buf, size_t n)
{
    uart_write(&g_host, buf, n);
}

void hal_actuator_out(const float *cmd, uint8_t n, uint8_t mode)
{
    uint8_t out[EDGERL_FRAME_BUF];
    size_t len;
    len = edgerl_actuator_encode(cmd, n, mode, hal_micros(), g_plant_seq++, out);
    uart_write(&g_plant, out, len);
}

int hal_sensor_in(float *state, uint8_t cap, uint8_t *n)
{
    uint8_t buf[64];
    size_t got;
    size_t i;
    int fresh = 0;
    edgerl_frame_t f;
    edgerl_sensor_t s;
    while ((got = ring_get(&g_plant.rx, buf, sizeof buf)) > 0u) {
        for (i = 0; i < got; ++i) {
            if (edgerl_parser_push(&g_sensor_parser, buf[i], &f)
                && f.id == EDGERL_MSG_SENSOR_ID) {
                edgerl_sensor_unpack(&s, f.payload);
                fresh = 1;
            }
        }
    }
    if (!fresh) {
        return 0;
    }
    *n = s.n < cap ? s.n : cap;
    memcpy(state, s.state, sizeof(float) * *n);
    return 1;
}

int hal_estop_input(void)
{
    static uint32_t was_pressed;
    uint32_t pressed = REG32(FPGAIO_BUTTON) & 1u;
    int edge = pressed && !was_pressed;
    was_pressed = pressed;
    return edge;
}

void hal_wait(uint32_t max_us)
{
    /* the 1 kHz SysTick bounds the sleep to 1 ms; any UART byte ends it sooner */
    uint32_t s = irq_save();
    (void)max_us;
    if (ring_count(&g_host.rx) == 0u && ring_count(&g_plant.rx) == 0u) {
        __asm volatile("wfi" ::: "memory"); /* wakes on a pending interrupt despite PRIMASK */
    }
    irq_restore(s);
}
