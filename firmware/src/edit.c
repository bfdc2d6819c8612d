/* The fast loop's edit step (see edgerl_edit.h). It mirrors, one sample at a time:
 *  - contract/timing.py   row_at: offset = floor((t - t0) / dt) (integer us here), usable while
 *                       offset < H + stale_steps, row = clip(offset, 0, H - 1);
 *  - contract/edit_obs.py select_chunk_rows (rows past the end hold the last row) and
 *                       build_edit_obs [fast obs | rows | age | committed | has_chunk |
 *                       intent] (the intent zeros without a usable chunk or an intent);
 *  - runtime EditLoop   normalisation (when not in the graph), compose_edit_action, the
 *                       SafetyFilter's clip and rate limit, the committed-action history.
 * tests/firmware/test_fw_edit.py checks it against the Python / onnxruntime path. */
#include "edgerl_edit.h"

#include <string.h>

static int finite_f(float v)
{
    return v == v && v <= 3.4e38f && v >= -3.4e38f;
}

void edgerl_edit_reset(edgerl_edit_t *e)
{
    int i;
    e->chunk.valid = 0;
    memset(e->committed, 0, sizeof e->committed);
    for (i = 0; i < EDGERL_EDIT_ACTION_DIM; ++i) { /* the SafetyFilter's safe action */
        e->cmd[i] = 0.0f < edgerl_edit_low[i] ? edgerl_edit_low[i]
                                             : (0.0f > edgerl_edit_high[i] ? edgerl_edit_high[i]
                                                                          : 0.0f);
    }
    e->ticked = 0;
    e->row = EDGERL_NO_ROW;
}

int edgerl_edit_set_chunk(edgerl_edit_t *e, const edgerl_chunk_t *m, uint32_t now_us)
{
    uint32_t offset = now_us - m->host_time_us; /* host clock -> firmware clock */
    uint32_t t0 = m->t0_us + offset;
    int i;
    int n = (int)m->horizon * EDGERL_EDIT_ACTION_DIM;
    if (m->n != EDGERL_EDIT_ACTION_DIM || m->horizon == 0 || n > EDGERL_MAX_CHUNK_FLOATS
        || m->dt_us == 0u || m->dt_us > 0x7FFFFFFFu
        || (m->intent_n != 0u && m->intent_n != EDGERL_EDIT_INTENT_DIM)
        || (e->chunk.valid && (int32_t)(m->step0 - e->chunk.step0) < 0)) {
        ++e->chunks_rejected;
        return 0;
    }
    for (i = 0; i < n + (int)m->intent_n; ++i) {
        if (!finite_f(i < n ? m->actions[i] : m->intent[i - n])) {
            ++e->chunks_rejected;
            return 0;
        }
    }
    memcpy(e->chunk.actions, m->actions, (size_t)n * sizeof(float));
    memcpy(e->chunk.intent, m->intent, sizeof e->chunk.intent);
    e->chunk.intent_n = m->intent_n;
    e->chunk.step0 = m->step0;
    e->chunk.t0_us = t0;
    e->chunk.dt_us = m->dt_us;
    e->chunk.obs_us = m->obs_time_us + offset;
    e->chunk.horizon = m->horizon;
    e->chunk.valid = 1;
    ++e->chunks_rx;
    return 1;
}

int edgerl_edit_row(const edgerl_edit_t *e, uint32_t now_us)
{
    int64_t d;
    int64_t dt;
    int64_t offset;
    if (!e->chunk.valid) {
        return -1;
    }
    /* 64-bit: -d + dt - 1 overflows 32 bits for a CRC-valid dt_us near 2^31 */
    d = (int64_t)(int32_t)(now_us - e->chunk.t0_us);
    dt = (int64_t)e->chunk.dt_us;
    offset = d >= 0 ? d / dt : -((-d + dt - 1) / dt); /* floor */
    if (offset >= (int64_t)e->chunk.horizon + EDGERL_EDIT_STALE_STEPS) {
        return -1;
    }
    if (offset < 0) {
        return 0;
    }
    return offset < (int64_t)e->chunk.horizon ? (int)offset : (int)e->chunk.horizon - 1;
}

void edgerl_edit_build_obs(const float *obs, const float *rows, float age_s,
                           const float *committed, int has, const float *intent, float *x)
{
    const float hasf = has ? 1.0f : 0.0f;
    float age = age_s / EDGERL_EDIT_AGE_SCALE_S;
    int i;
    int k = 0;
    for (i = 0; i < EDGERL_EDIT_FAST_DIM; ++i) {
        x[k++] = obs[edgerl_edit_fast_idx[i]];
    }
    for (i = 0; i < EDGERL_EDIT_ROWS * EDGERL_EDIT_ACTION_DIM; ++i) {
        x[k++] = rows[i] * hasf;
    }
    age = age < 0.0f ? 0.0f : (age > EDGERL_EDIT_AGE_CLIP ? EDGERL_EDIT_AGE_CLIP : age);
    x[k++] = age * hasf;
    for (i = 0; i < EDGERL_EDIT_HIST; ++i) {
        x[k++] = committed[i];
    }
    x[k++] = hasf;
    for (i = 0; i < EDGERL_EDIT_INTENT_DIM; ++i) {
        x[k++] = has && intent ? intent[i] : 0.0f;
    }
    (void)intent; /* unread when INTENT_DIM is 0 */
}

void edgerl_edit_tick(edgerl_edit_t *e, const float *obs, uint32_t now_us, float *cmd)
{
    float rows[EDGERL_EDIT_ROWS * EDGERL_EDIT_ACTION_DIM];
    float in[EDGERL_EDIT_OBS_DIM];
    float res[EDGERL_EDIT_ACTION_DIM];
    float age_s = 0.0f;
    float dt_s;
    int row = edgerl_edit_row(e, now_us);
    int r;
    int i;
    if (row >= 0) {
        for (r = 0; r < EDGERL_EDIT_ROWS; ++r) {
            int src = row + r < e->chunk.horizon ? row + r : e->chunk.horizon - 1;
            for (i = 0; i < EDGERL_EDIT_ACTION_DIM; ++i) {
                rows[r * EDGERL_EDIT_ACTION_DIM + i]
                    = e->chunk.actions[src * EDGERL_EDIT_ACTION_DIM + i];
            }
        }
        /* exact for |age| < 2^24 us (16.7 s); older chunks clip at AGE_CLIP anyway */
        age_s = (float)(int32_t)(now_us - e->chunk.obs_us) / 1000000.0f;
    } else {
        memset(rows, 0, sizeof rows); /* no usable chunk: zero rows, has_chunk = 0 */
    }
    for (i = 0; i < EDGERL_EDIT_OBS_DIM; ++i) {
#if EDGERL_EDIT_NORMALIZE
        in[i] = (obs[i] - edgerl_edit_obs_mean[i]) / edgerl_edit_obs_std[i];
#else
        in[i] = obs[i];
#endif
    }
    edgerl_edit_build_obs(in, rows, age_s, e->committed, row >= 0,
                          e->chunk.intent_n ? e->chunk.intent : NULL, e->x);
    edgerl_edit_net_forward(e->x, res);
    dt_s = e->ticked ? (float)(now_us - e->last_tick_us) / 1000000.0f
                     : (float)EDGERL_EDIT_PERIOD_US / 1000000.0f;
    for (i = 0; i < EDGERL_EDIT_ACTION_DIM; ++i) {
        float c = res[i] < -1.0f ? -1.0f : (res[i] > 1.0f ? 1.0f : res[i]);
        float a = c * EDGERL_EDIT_RESIDUAL_BOUND + rows[i];
        if (!finite_f(a)) {
            a = e->cmd[i]; /* non-finite output: hold the last command */
        }
        a = a < edgerl_edit_low[i] ? edgerl_edit_low[i]
                                   : (a > edgerl_edit_high[i] ? edgerl_edit_high[i] : a);
        if (edgerl_edit_max_rate[i] > 0.0f) {
            float step = edgerl_edit_max_rate[i] * dt_s;
            float delta = a - e->cmd[i];
            if (delta > step) {
                a = e->cmd[i] + step;
            } else if (delta < -step) {
                a = e->cmd[i] - step;
            }
        }
        cmd[i] = a;
    }
    for (i = EDGERL_EDIT_HIST - 1; i >= EDGERL_EDIT_ACTION_DIM; --i) {
        e->committed[i] = e->committed[i - EDGERL_EDIT_ACTION_DIM];
    }
    for (i = 0; i < EDGERL_EDIT_ACTION_DIM && i < EDGERL_EDIT_HIST; ++i) {
        e->committed[i] = cmd[i];
    }
    memcpy(e->cmd, cmd, sizeof e->cmd);
    e->last_tick_us = now_us;
    e->ticked = 1;
    e->row = row >= 0 ? (uint8_t)row : (uint8_t)EDGERL_NO_ROW;
    ++e->ticks;
}
