/* FAST_LOOP: the host streams action chunks (CHUNK), the MCU runs the edit policy at its
 * own rate (EDGERL_EDIT_PERIOD_US of edit_policy.h, on the firmware clock) on its newest
 * plant state, and reports every tick in EDIT_TICK.
 *  - Entered by SET_MODE FAST_LOOP (linked, no e-stop, built with EDGERL_WITH_EDIT, n_cmd =
 *    the policy's actions, a fresh plant state of the policy's width); left by
 *    SET_MODE ACTIVE (-> SAFE), a SETPOINT (-> ACTIVE), an e-stop, or the watchdog.
 *  - Valid CHUNKs and HEARTBEATs feed the watchdog; no valid one for watchdog_us -> SAFE.
 *  - A chunk past its horizon + stale steps, or none yet, runs the policy on zero rows with
 *    has_chunk = 0 (what training did); a plant state older than watchdog_us (or narrower
 *    than the policy's observation) -> SAFE. */
#include "edgerl_fw.h"

#include "hal.h"

#ifdef EDGERL_WITH_EDIT

int edgerl_fw_has_edit(void)
{
    return 1;
}

void edgerl_fast_on_chunk(edgerl_fw_t *fw, const uint8_t *payload, uint32_t now)
{
    edgerl_chunk_t m;
    edgerl_chunk_unpack(&m, payload);
    if (fw->estop || !fw->linked) {
        ++fw->edit.chunks_rejected;
        return;
    }
    if (edgerl_edit_set_chunk(&fw->edit, &m, now) && fw->mode == EDGERL_MODE_FAST_LOOP) {
        fw->last_cmd_us = now;
    }
}

int edgerl_fast_enter(edgerl_fw_t *fw, uint32_t now)
{
    edgerl_edit_chunk_t keep;
    uint32_t rx;
    uint32_t rejected;
    if (fw->estop || !fw->linked || fw->cfg.n_cmd != EDGERL_EDIT_ACTION_DIM
        || fw->n_state < EDGERL_EDIT_OBS_DIM || now - fw->sensor_us > fw->cfg.watchdog_us) {
        return 0; /* refused (counted as rejected): no fresh plant state to edit on */
    }
    keep = fw->edit.chunk; /* a chunk sent before the switch stays usable */
    rx = fw->edit.chunks_rx;
    rejected = fw->edit.chunks_rejected;
    edgerl_edit_reset(&fw->edit);
    fw->edit.chunk = keep;
    fw->edit.chunks_rx = rx;
    fw->edit.chunks_rejected = rejected;
    fw->edit.ticks = 0;
    fw->last_cmd_us = now;
    fw->in_fallback = 0;
    fw->next_edit_us = now;
    fw->mode = EDGERL_MODE_FAST_LOOP;
    return 1;
}

static void send_edit_tick(edgerl_fw_t *fw, uint32_t now, uint32_t compute_us)
{
    edgerl_edit_tick_t t;
    uint8_t buf[EDGERL_MSG_EDIT_TICK_SIZE];
    int i;
    t.fw_time_us = now;
    t.tick = fw->edit.ticks;
    t.chunk_step0 = fw->edit.chunk.step0;
    t.row = fw->edit.row;
    t.has_chunk = fw->edit.row != EDGERL_NO_ROW;
    t.compute_us = compute_us;
    t.chunks_rx = fw->edit.chunks_rx;
    t.chunks_rejected = fw->edit.chunks_rejected;
    t.n_cmd = fw->cfg.n_cmd;
    for (i = 0; i < EDGERL_MAX_CMD; ++i) {
        t.cmd[i] = fw->cmd[i];
    }
    edgerl_edit_tick_pack(&t, buf);
    edgerl_fw_send(fw, EDGERL_MSG_EDIT_TICK_ID, buf, sizeof buf);
}

void edgerl_fast_poll(edgerl_fw_t *fw, uint32_t now)
{
    float cmd[EDGERL_EDIT_ACTION_DIM];
    uint32_t start;
    int i;
    if ((int32_t)(now - fw->next_edit_us) < 0) {
        return;
    }
    if (now - fw->sensor_us > fw->cfg.watchdog_us || fw->n_state < EDGERL_EDIT_OBS_DIM) {
        edgerl_fw_enter_mode(fw, EDGERL_MODE_SAFE, now); /* no usable plant state */
        return;
    }
    start = hal_micros();
    edgerl_edit_tick(&fw->edit, fw->state, fw->next_edit_us, cmd);
    for (i = 0; i < EDGERL_MAX_CMD; ++i) {
        fw->cmd[i] = i < EDGERL_EDIT_ACTION_DIM ? cmd[i] : 0.0f;
        fw->applied[i] = fw->cmd[i]; /* a later HOLD holds the fast loop's last command */
    }
    edgerl_fw_output(fw);
    if (fw->linked) {
        send_edit_tick(fw, now, hal_micros() - start);
    }
    fw->next_edit_us += EDGERL_EDIT_PERIOD_US;
    if ((int32_t)(now - fw->next_edit_us) >= 0) { /* late by more than a period: skip */
        uint32_t behind = (now - fw->next_edit_us) / EDGERL_EDIT_PERIOD_US + 1u;
        fw->edit_skipped += behind;
        fw->next_edit_us += behind * EDGERL_EDIT_PERIOD_US;
    }
}

#else /* no edit policy: FAST_LOOP is refused, CHUNKs are ignored */

int edgerl_fw_has_edit(void)
{
    return 0;
}

void edgerl_fast_on_chunk(edgerl_fw_t *fw, const uint8_t *payload, uint32_t now)
{
    (void)payload;
    (void)now;
    ++fw->setpoints_rejected;
}

int edgerl_fast_enter(edgerl_fw_t *fw, uint32_t now)
{
    (void)fw;
    (void)now;
    return 0;
}

void edgerl_fast_poll(edgerl_fw_t *fw, uint32_t now)
{
    (void)fw;
    (void)now;
}

#endif
