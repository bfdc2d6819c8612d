/* What the firmware tells the host: every frame it sends goes out through edgerl_fw_send
 * (a leading 0x00 delimiter, then the COBS frame with the next tx sequence number, on the
 * serial HAL), and the two reports the core sends on events and periodically: STATUS (mode,
 * frame and command counters, the last watchdog trip) and STATE (the newest plant state,
 * the command applied, the last setpoint it answers). The message handlers, the watchdog
 * and the modes are in src/app.c, the fast loop's EDIT_TICK in src/fast_loop.c. */
#include "edgerl_fw.h"

#include "hal.h"

void edgerl_fw_send(edgerl_fw_t *fw, uint8_t id, const uint8_t *payload, size_t len)
{
    uint8_t out[EDGERL_FRAME_BUF + 1];
    size_t n;
    out[0] = 0; /* leading delimiter: ends line noise before the frame */
    n = edgerl_msg_encode(id, fw->tx_seq++, payload, len, out + 1);
    hal_serial_write(out, n + 1);
}

void edgerl_fw_send_status(edgerl_fw_t *fw, uint32_t now, uint32_t request_us)
{
    edgerl_status_t s;
    uint8_t buf[EDGERL_MSG_STATUS_SIZE];
    s.fw_time_us = now;
    s.mode = fw->mode;
    s.safe_action = fw->cfg.safe_action;
    s.estop_latched = fw->estop;
    s.rx_frames = fw->parser.stats.frames_ok;
    s.bad_frames = fw->parser.stats.bad_frames;
    s.lost_frames = fw->parser.stats.lost_frames;
    s.watchdog_trips = fw->watchdog_trips;
    s.setpoints_applied = fw->setpoints_applied;
    s.setpoints_rejected = fw->setpoints_rejected;
    s.estops = fw->estops;
    s.last_setpoint_seq = fw->last_setpoint_seq;
    s.safe_entry_us = fw->safe_entry_us;
    s.request_us = request_us;
    s.safe_entry_late_us = fw->safe_entry_late_us;
    edgerl_status_pack(&s, buf);
    edgerl_fw_send(fw, EDGERL_MSG_STATUS_ID, buf, sizeof buf);
    fw->last_status_tx_us = now;
}

void edgerl_fw_send_state(edgerl_fw_t *fw, uint32_t now)
{
    edgerl_state_t s;
    uint8_t buf[EDGERL_MSG_STATE_SIZE];
    int i;
    s.fw_time_us = now;
    s.setpoint_seq = fw->last_setpoint_seq;
    s.host_time_us = fw->last_setpoint_host_us;
    s.sensor_age_us = now - fw->sensor_us;
    s.mode = fw->mode;
    s.n_state = fw->n_state;
    for (i = 0; i < EDGERL_MAX_STATE; ++i) {
        s.state[i] = fw->state[i];
    }
    s.n_cmd = fw->cfg.n_cmd;
    for (i = 0; i < EDGERL_MAX_CMD; ++i) {
        s.cmd[i] = fw->cmd[i];
    }
    edgerl_state_pack(&s, buf);
    edgerl_fw_send(fw, EDGERL_MSG_STATE_ID, buf, sizeof buf);
    fw->last_state_tx_us = now;
}
