/* Firmware core (see edgerl_fw.h). Safety rules:
 *  - only CRC-checked frames of known size are executed; everything else is counted;
 *  - setpoints are absolute: applying one twice is harmless; a value beyond cfg.cmd_limit
 *    (the action limits, when set) rejects the whole SETPOINT;
 *  - watchdog: in ACTIVE / LOCAL_POLICY / FAST_LOOP, no valid command (SETPOINT, HEARTBEAT,
 *    CHUNK) for cfg.watchdog_us => SAFE
 *    (zero or hold); only a new valid SETPOINT leaves SAFE;
 *  - fallback (cfg.fallback == EDGERL_FALLBACK_POLICY, policy built in): a watchdog trip
 *    in ACTIVE enters LOCAL_POLICY instead, so the on-MCU policy holds the robot while
 *    the host link is down; it ends in SAFE when the plant state goes stale (no sensor
 *    update for cfg.watchdog_us), and a valid SETPOINT hands control back to the host;
 *  - ESTOP (host message or the hardware input, hal_estop_input) latches (zero output,
 *    setpoints rejected) through disconnects and HELLOs until a CLEAR_ESTOP with the right
 *    token, which leads to SAFE, not ACTIVE; the e-stop forgets the last setpoint, so SAFE
 *    after a clear outputs zero under HOLD too, until a fresh SETPOINT;
 *  - FAST_LOOP (src/fast_loop.c, built with EDGERL_WITH_EDIT): the on-MCU edit policy over
 *    host CHUNKs at its own rate; a SETPOINT hands control back to the host.
 * What goes to the host (framing, STATUS, STATE) is src/telemetry.c. */
#include "edgerl_fw.h"

#include "hal.h"

#ifdef EDGERL_WITH_POLICY
#include "policy.h"
#if !defined(EDGERL_POLICY_IN_DIM) || !defined(EDGERL_POLICY_OUT_DIM)
#error "policy.h must define EDGERL_POLICY_IN_DIM and EDGERL_POLICY_OUT_DIM"
#endif
#if EDGERL_POLICY_OUT_DIM > EDGERL_MAX_CMD || EDGERL_POLICY_IN_DIM > EDGERL_MAX_STATE
#error "policy.h dimensions exceed EDGERL_MAX_CMD / EDGERL_MAX_STATE"
#endif
#endif

int edgerl_fw_has_policy(void)
{
#ifdef EDGERL_WITH_POLICY
    return 1;
#else
    return 0;
#endif
}

static void output(edgerl_fw_t *fw)
{
    hal_actuator_out(fw->cmd, fw->cfg.n_cmd, fw->mode);
}

void edgerl_fw_output(edgerl_fw_t *fw)
{
    output(fw);
}

static void set_safe_output(edgerl_fw_t *fw)
{
    int i;
    for (i = 0; i < EDGERL_MAX_CMD; ++i) {
        int hold = fw->cfg.safe_action == EDGERL_SAFE_HOLD && fw->mode != EDGERL_MODE_ESTOP;
        fw->cmd[i] = hold ? fw->applied[i] : 0.0f;
    }
}

static void enter_mode(edgerl_fw_t *fw, uint8_t mode, uint32_t now)
{
    fw->mode = mode;
    if (mode == EDGERL_MODE_SAFE || mode == EDGERL_MODE_ESTOP || mode == EDGERL_MODE_IDLE) {
        set_safe_output(fw);
    }
    output(fw);
    if (fw->linked) {
        edgerl_fw_send_status(fw, now, 0u);
    }
}

void edgerl_fw_enter_mode(edgerl_fw_t *fw, uint8_t mode, uint32_t now)
{
    enter_mode(fw, mode, now);
}

void edgerl_fw_init(edgerl_fw_t *fw, const edgerl_fw_config_t *cfg, uint32_t now_us)
{
    memset(fw, 0, sizeof *fw);
    fw->cfg = *cfg;
    if (fw->cfg.n_cmd == 0 || fw->cfg.n_cmd > EDGERL_MAX_CMD) {
        fw->cfg.n_cmd = EDGERL_MAX_CMD;
    }
    edgerl_parser_init(&fw->parser, 1);
    fw->mode = EDGERL_MODE_IDLE;
    fw->last_cmd_us = now_us;
    fw->sensor_us = now_us;
    output(fw);
}

static int is_finite(float v)
{
    /* no libm: NaN fails v == v, +-inf fails the range check */
    return v == v && v <= 3.4e38f && v >= -3.4e38f;
}

static void on_setpoint(edgerl_fw_t *fw, const uint8_t *payload, uint32_t now)
{
    edgerl_setpoint_t sp;
    int i;
    edgerl_setpoint_unpack(&sp, payload);
    if (fw->estop || !fw->linked || sp.n == 0 || sp.n > fw->cfg.n_cmd) {
        ++fw->setpoints_rejected;
        return;
    }
    for (i = 0; i < sp.n; ++i) {
        float lim = fw->cfg.cmd_limit;
        if (!is_finite(sp.q[i]) || (lim > 0.0f && (sp.q[i] > lim || sp.q[i] < -lim))) {
            ++fw->setpoints_rejected;
            return;
        }
    }
    for (i = 0; i < EDGERL_MAX_CMD; ++i) {
        fw->applied[i] = i < sp.n ? sp.q[i] : 0.0f;
        fw->cmd[i] = fw->applied[i];
    }
    fw->last_setpoint_seq = sp.seq;
    fw->last_setpoint_host_us = sp.host_time_us;
    fw->last_cmd_us = now;
    fw->in_fallback = 0;
    ++fw->setpoints_applied;
    if (fw->mode != EDGERL_MODE_ACTIVE) {
        enter_mode(fw, EDGERL_MODE_ACTIVE, now);
    } else {
        output(fw);
    }
    edgerl_fw_send_state(fw, now);
}

static void on_hello(edgerl_fw_t *fw, const uint8_t *payload, uint32_t now)
{
    edgerl_hello_t h;
    edgerl_hello_ack_t a;
    uint8_t buf[EDGERL_MSG_HELLO_ACK_SIZE];
    edgerl_hello_unpack(&h, payload);
    fw->linked = h.schema_hash == EDGERL_SCHEMA_HASH
        && h.proto_version == EDGERL_PROTOCOL_VERSION;
    a.schema_hash = EDGERL_SCHEMA_HASH;
    a.proto_version = EDGERL_PROTOCOL_VERSION;
    a.accepted = fw->linked;
    a.mode = fw->mode;
    a.n_cmd = fw->cfg.n_cmd;
    a.has_policy = (uint8_t)edgerl_fw_has_policy();
    a.watchdog_ms = (uint16_t)(fw->cfg.watchdog_us / 1000u);
    a.fw_time_us = now;
    edgerl_hello_ack_pack(&a, buf);
    edgerl_fw_send(fw, EDGERL_MSG_HELLO_ACK_ID, buf, sizeof buf);
    if (fw->linked) {
        edgerl_fw_send_status(fw, now, 0u);
    }
}

static void run_policy(edgerl_fw_t *fw)
{
#ifdef EDGERL_WITH_POLICY
    float in[EDGERL_POLICY_IN_DIM];
    float out[EDGERL_POLICY_OUT_DIM];
    int i;
    for (i = 0; i < EDGERL_POLICY_IN_DIM; ++i) {
        in[i] = i < fw->n_state ? fw->state[i] : 0.0f;
    }
    edgerl_policy_forward(in, out);
    ++fw->policy_runs;
    for (i = 0; i < EDGERL_MAX_CMD; ++i) {
        fw->cmd[i] = i < EDGERL_POLICY_OUT_DIM && is_finite(out[i]) ? out[i] : 0.0f;
    }
    output(fw);
#else
    (void)fw;
#endif
}

static void on_set_mode(edgerl_fw_t *fw, const uint8_t *payload, uint32_t now)
{
    edgerl_set_mode_t m;
    edgerl_set_mode_unpack(&m, payload);
    if (fw->estop || !fw->linked) {
        ++fw->setpoints_rejected;
    } else if (m.mode == EDGERL_MODE_LOCAL_POLICY && edgerl_fw_has_policy()) {
        fw->last_cmd_us = now;
        fw->in_fallback = 0;
        fw->mode = EDGERL_MODE_LOCAL_POLICY;
        run_policy(fw);
        edgerl_fw_send_status(fw, now, 0u);
    } else if (m.mode == EDGERL_MODE_FAST_LOOP && edgerl_fast_enter(fw, now)) {
        edgerl_fw_send_status(fw, now, 0u);
    } else if (m.mode == EDGERL_MODE_ACTIVE) {
        /* back to host control: safe until the next SETPOINT */
        enter_mode(fw, EDGERL_MODE_SAFE, now);
    } else {
        ++fw->setpoints_rejected;
    }
}

static void latch_estop(edgerl_fw_t *fw, uint32_t now)
{
    int i;
    if (!fw->estop) {
        ++fw->estops;
    }
    fw->estop = 1;
    /* forget the setpoint from before the e-stop: after a clear, SAFE (zero or hold) outputs
     * the safe action until a fresh SETPOINT arrives, never the stale command */
    for (i = 0; i < EDGERL_MAX_CMD; ++i) {
        fw->applied[i] = 0.0f;
    }
    fw->in_fallback = 0;
    enter_mode(fw, EDGERL_MODE_ESTOP, now);
}

static void on_frame(edgerl_fw_t *fw, const edgerl_frame_t *f, uint32_t now)
{
    switch (f->id) {
    case EDGERL_MSG_HELLO_ID:
        on_hello(fw, f->payload, now);
        break;
    case EDGERL_MSG_SETPOINT_ID:
        on_setpoint(fw, f->payload, now);
        break;
    case EDGERL_MSG_HEARTBEAT_ID:
        if (fw->linked) {
            edgerl_heartbeat_t hb;
            uint8_t buf[EDGERL_MSG_HEARTBEAT_SIZE];
            fw->last_cmd_us = now;
            hb.time_us = now;
            edgerl_heartbeat_pack(&hb, buf);
            edgerl_fw_send(fw, EDGERL_MSG_HEARTBEAT_ID, buf, sizeof buf);
        }
        break;
    case EDGERL_MSG_ESTOP_ID: /* honoured even before a HELLO */
        latch_estop(fw, now);
        break;
    case EDGERL_MSG_CLEAR_ESTOP_ID: {
        edgerl_clear_estop_t c;
        edgerl_clear_estop_unpack(&c, f->payload);
        if (fw->linked && fw->estop && c.token == EDGERL_CLEAR_ESTOP_TOKEN) {
            fw->estop = 0;
            enter_mode(fw, EDGERL_MODE_SAFE, now);
        } else {
            ++fw->setpoints_rejected;
        }
        break;
    }
    case EDGERL_MSG_GET_STATUS_ID: {
        edgerl_get_status_t g;
        edgerl_get_status_unpack(&g, f->payload);
        edgerl_fw_send_status(fw, now, g.host_time_us);
        break;
    }
    case EDGERL_MSG_SET_MODE_ID:
        on_set_mode(fw, f->payload, now);
        break;
    case EDGERL_MSG_CHUNK_ID:
        edgerl_fast_on_chunk(fw, f->payload, now);
        break;
    default: /* fw->host / plant messages are not commands */
        break;
    }
}

void edgerl_fw_on_serial(edgerl_fw_t *fw, const uint8_t *data, size_t n, uint32_t now_us)
{
    size_t i;
    edgerl_frame_t f;
    fw->link_down = 0;
    for (i = 0; i < n; ++i) {
        if (edgerl_parser_push(&fw->parser, data[i], &f)) {
            on_frame(fw, &f, now_us);
        }
    }
}

void edgerl_fw_on_disconnect(edgerl_fw_t *fw)
{
    fw->linked = 0;
    fw->link_down = 1;
    fw->parser.len = 0;
    fw->parser.overflowed = 0;
    edgerl_parser_reset_sequence(&fw->parser);
}

void edgerl_fw_on_sensor(edgerl_fw_t *fw, const float *state, uint8_t n, uint32_t now_us)
{
    int i;
    if (n > EDGERL_MAX_STATE) {
        n = EDGERL_MAX_STATE;
    }
    for (i = 0; i < EDGERL_MAX_STATE; ++i) {
        fw->state[i] = i < n ? state[i] : 0.0f;
    }
    fw->n_state = n;
    fw->sensor_us = now_us;
    if (fw->mode == EDGERL_MODE_LOCAL_POLICY) {
        run_policy(fw);
    }
    if (fw->linked) {
        /* each new plant state goes out once, when sensed: a host that computes one command
         * per plant state (state-triggered) sees it now, not at the next echo or period */
        edgerl_fw_send_state(fw, now_us);
    }
}

void edgerl_fw_poll(edgerl_fw_t *fw, uint32_t now_us)
{
    uint32_t since = now_us - fw->last_cmd_us;
    if (hal_estop_input()) {
        latch_estop(fw, now_us);
    }
    if (fw->in_fallback && fw->mode == EDGERL_MODE_LOCAL_POLICY) {
        if (now_us - fw->sensor_us > fw->cfg.watchdog_us) {
            fw->in_fallback = 0; /* the policy would act on a stale plant state */
            enter_mode(fw, EDGERL_MODE_SAFE, now_us);
        }
    } else if ((fw->mode == EDGERL_MODE_ACTIVE || fw->mode == EDGERL_MODE_LOCAL_POLICY
                || fw->mode == EDGERL_MODE_FAST_LOOP)
               && since > fw->cfg.watchdog_us) {
        ++fw->watchdog_trips;
        fw->safe_entry_us = since;
        fw->safe_entry_late_us = hal_timer_late_us();
        if (fw->mode == EDGERL_MODE_ACTIVE && fw->cfg.fallback == EDGERL_FALLBACK_POLICY
            && edgerl_fw_has_policy() && now_us - fw->sensor_us <= fw->cfg.watchdog_us) {
            fw->in_fallback = 1;
            fw->mode = EDGERL_MODE_LOCAL_POLICY;
            run_policy(fw);
            if (fw->linked) {
                edgerl_fw_send_status(fw, now_us, 0u);
            }
        } else {
            enter_mode(fw, EDGERL_MODE_SAFE, now_us);
        }
    }
    if (fw->mode == EDGERL_MODE_FAST_LOOP) {
        edgerl_fast_poll(fw, now_us);
    }
    if (!fw->linked) {
        return;
    }
    if (fw->cfg.state_period_us && now_us - fw->last_state_tx_us >= fw->cfg.state_period_us) {
        edgerl_fw_send_state(fw, now_us);
    }
    if (fw->cfg.status_period_us
        && now_us - fw->last_status_tx_us >= fw->cfg.status_period_us) {
        edgerl_fw_send_status(fw, now_us, 0u);
    }
}
