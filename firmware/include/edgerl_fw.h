/* The firmware core: protocol, command handling, watchdog, latching e-stop, optional
 * on-MCU policy. Board independent: it talks to the world only through hal.h. */
#ifndef EDGERL_FW_H
#define EDGERL_FW_H

#include <stddef.h>
#include <stdint.h>

#include "edgerl_msgs.h"
#include "edgerl_wire.h"
#ifdef EDGERL_WITH_EDIT
#include "edgerl_edit.h"
#endif

typedef struct {
    uint32_t watchdog_us;     /* no valid command for this long => safe state */
    uint8_t safe_action;      /* EDGERL_SAFE_ZERO or EDGERL_SAFE_HOLD */
    uint8_t n_cmd;            /* joints driven (1..EDGERL_MAX_CMD) */
    uint32_t state_period_us; /* STATE at least this often while linked (0: only on SETPOINT) */
    uint32_t status_period_us; /* STATUS this often while linked (0: only on events) */
    uint8_t fallback;         /* on a watchdog trip: EDGERL_FALLBACK_SAFE (safe_action) or
                                 EDGERL_FALLBACK_POLICY (run the on-MCU policy, if built in) */
    float cmd_limit;          /* a SETPOINT value with |q| > cmd_limit is rejected (the action
                                 limits; 0: unchecked, finiteness only) */
} edgerl_fw_config_t;

/* The compiled-in command limit of a board build (|setpoint| above it is rejected; 0: only
 * finiteness is checked). Build with -DEDGERL_CMD_LIMIT=1.0f for normalized actions. */
#ifndef EDGERL_CMD_LIMIT
#define EDGERL_CMD_LIMIT 0.0f
#endif

#define EDGERL_FALLBACK_SAFE 0
#define EDGERL_FALLBACK_POLICY 1

typedef struct {
    edgerl_fw_config_t cfg;
    edgerl_parser_t parser;
    uint8_t mode;
    uint8_t estop;
    uint8_t linked;        /* a HELLO with matching hash since the last disconnect */
    uint8_t link_down;     /* the HAL reported the cable pulled */
    uint16_t tx_seq;
    uint32_t last_cmd_us;  /* last valid command (watchdog feed) */
    uint32_t last_state_tx_us;
    uint32_t last_status_tx_us;
    uint32_t last_setpoint_seq;
    uint32_t last_setpoint_host_us;
    uint32_t sensor_us;    /* when the plant state arrived */
    uint8_t n_state;
    float state[EDGERL_MAX_STATE];
    float cmd[EDGERL_MAX_CMD];     /* output now applied */
    float applied[EDGERL_MAX_CMD]; /* last host setpoint (HOLD uses it) */
    uint32_t watchdog_trips;
    uint32_t setpoints_applied;
    uint32_t setpoints_rejected;
    uint32_t estops;
    uint32_t safe_entry_us;
    uint32_t safe_entry_late_us; /* hal_timer_late_us() at the trip */
    uint8_t in_fallback;   /* LOCAL_POLICY entered by the watchdog (not by SET_MODE) */
    uint32_t policy_runs;
#ifdef EDGERL_WITH_EDIT
    edgerl_edit_t edit;    /* FAST_LOOP: the on-MCU edit policy over host CHUNKs */
    uint32_t next_edit_us; /* the next edit tick (firmware clock) */
    uint32_t edit_skipped; /* edit ticks skipped (the loop ran late by > a period) */
#endif
} edgerl_fw_t;

void edgerl_fw_init(edgerl_fw_t *fw, const edgerl_fw_config_t *cfg, uint32_t now_us);
/* Bytes from the host link (may hold partial frames, garbage, several frames). */
void edgerl_fw_on_serial(edgerl_fw_t *fw, const uint8_t *data, size_t n, uint32_t now_us);
/* The host link went down (cable pulled); state, e-stop and counters are kept. */
void edgerl_fw_on_disconnect(edgerl_fw_t *fw);
/* A new plant state (sensor HAL). */
void edgerl_fw_on_sensor(edgerl_fw_t *fw, const float *state, uint8_t n, uint32_t now_us);
/* Timers: watchdog, periodic STATE / STATUS. Call at least every millisecond. */
void edgerl_fw_poll(edgerl_fw_t *fw, uint32_t now_us);
/* 1 if built with an on-MCU policy (EDGERL_WITH_POLICY). */
int edgerl_fw_has_policy(void);
/* 1 if built with the on-MCU edit policy for FAST_LOOP (EDGERL_WITH_EDIT). */
int edgerl_fw_has_edit(void);

/* Between the core's source files: the messages to the host (src/telemetry.c) and the
 * mode changes and outputs of src/app.c, used by src/app.c and src/fast_loop.c. */
/* One message to the host (framed, with the next tx sequence number). */
void edgerl_fw_send(edgerl_fw_t *fw, uint8_t id, const uint8_t *payload, size_t len);
/* STATUS now (request_us: the GET_STATUS's host_time_us it answers, 0 for none). */
void edgerl_fw_send_status(edgerl_fw_t *fw, uint32_t now, uint32_t request_us);
/* STATE now: the newest plant state and the command applied. */
void edgerl_fw_send_state(edgerl_fw_t *fw, uint32_t now);
void edgerl_fw_enter_mode(edgerl_fw_t *fw, uint8_t mode, uint32_t now);
void edgerl_fw_output(edgerl_fw_t *fw);
/* FAST_LOOP (src/fast_loop.c; stubs without EDGERL_WITH_EDIT): a CHUNK frame, entering the
 * mode (0: refused), and the timer that runs the edit ticks (called from edgerl_fw_poll). */
void edgerl_fast_on_chunk(edgerl_fw_t *fw, const uint8_t *payload, uint32_t now);
int edgerl_fast_enter(edgerl_fw_t *fw, uint32_t now);
void edgerl_fast_poll(edgerl_fw_t *fw, uint32_t now);

#endif /* EDGERL_FW_H */
