/* The on-MCU fast loop's edit step (src/edit.c): chunk store, chunk-row selection, the edit
 * observation (contract/edit_obs.py's layout, built from the generated edit_policy.h, the
 * planner intent included), the edit network (edit_net.h), compose and the command filter.
 * Board independent, no malloc; the firmware core calls it from FAST_LOOP (src/fast_loop.c).
 * Times are the firmware clock (us); a CHUNK's host times are mapped by
 * fw_now - host_time_us at receipt. */
#ifndef EDGERL_EDIT_H
#define EDGERL_EDIT_H

#include <stdint.h>

#include "edgerl_msgs.h"
#include "edit_policy.h"

#ifndef EDGERL_EDIT_INTENT_DIM /* an edit_policy.h from before the planner intent */
#define EDGERL_EDIT_INTENT_DIM 0
#endif

#if EDGERL_EDIT_ACTION_DIM > EDGERL_MAX_CMD || EDGERL_EDIT_OBS_DIM > EDGERL_MAX_STATE
#error "edit_policy.h dimensions exceed EDGERL_MAX_CMD / EDGERL_MAX_STATE"
#endif
#if EDGERL_EDIT_INTENT_DIM > EDGERL_MAX_INTENT
#error "edit_policy.h intent exceeds EDGERL_MAX_INTENT"
#endif
#if EDGERL_EDIT_NET_IN_DIM != EDGERL_EDIT_DIM || EDGERL_EDIT_NET_OUT_DIM != EDGERL_EDIT_ACTION_DIM
#error "edit_net.h does not map the edit observation to an action"
#endif

#define EDGERL_EDIT_ROWS (1 + EDGERL_EDIT_LOOKAHEAD)
#define EDGERL_EDIT_HIST (EDGERL_EDIT_N_COMMITTED * EDGERL_EDIT_ACTION_DIM)

typedef struct {
    float actions[EDGERL_MAX_CHUNK_FLOATS]; /* (horizon, ACTION_DIM) row-major */
    uint32_t step0;
    uint32_t t0_us;  /* firmware clock */
    uint32_t dt_us;
    uint32_t obs_us; /* firmware clock */
    float intent[EDGERL_MAX_INTENT]; /* the planner's intent (intent_n values) */
    uint8_t horizon;
    uint8_t intent_n; /* 0 (none: the edit reads zeros) or EDGERL_EDIT_INTENT_DIM */
    uint8_t valid;
} edgerl_edit_chunk_t;

typedef struct {
    edgerl_edit_chunk_t chunk;
    float committed[EDGERL_EDIT_HIST + 1]; /* last K commands, newest first */
    float x[EDGERL_EDIT_DIM];               /* the last edit observation */
    float cmd[EDGERL_EDIT_ACTION_DIM];      /* the last command */
    uint32_t last_tick_us;
    uint8_t ticked;                          /* last_tick_us / cmd are set */
    uint8_t row;                             /* row used by the last tick or EDGERL_NO_ROW */
    uint32_t ticks;
    uint32_t chunks_rx;
    uint32_t chunks_rejected;
} edgerl_edit_t;

/* Forget the chunk, the history and the last command (counters kept). */
void edgerl_edit_reset(edgerl_edit_t *e);
/* Take a CHUNK received at now_us; returns 1 if accepted, 0 if refused (n, horizon, dt, an
 * intent_n other than 0 or INTENT_DIM, non-finite, or an older step0 than the current
 * chunk's) and counted. Ordered by step0, not by the mapped t0: a chunk's clock mapping
 * carries its own link delay. */
int edgerl_edit_set_chunk(edgerl_edit_t *e, const edgerl_chunk_t *m, uint32_t now_us);
/* The chunk row for now_us (edgerl.contract.timing: clip(floor((t - t0) / dt), 0, H - 1) while
 * floor(...) < H + STALE_STEPS), or -1: no chunk or stale. */
int edgerl_edit_row(const edgerl_edit_t *e, uint32_t now_us);
/* edgerl.contract.edit_obs.build_edit_obs for one sample: obs (OBS_DIM, already normalised),
 * rows (ROWS, ACTION_DIM), age (s), committed (K, ACTION_DIM), has (0/1), the chunk's intent
 * (INTENT_DIM values; NULL: zeros, as without a chunk) -> x (EDIT_DIM). */
void edgerl_edit_build_obs(const float *obs, const float *rows, float age_s,
                           const float *committed, int has, const float *intent, float *x);
/* One fast-loop tick at now_us on the plant state obs (OBS_DIM raw floats): rows, edit
 * observation, network, compose (row + bound * clip(residual, -1, 1)), limits, rate limits,
 * history. Writes the command (ACTION_DIM floats) to cmd and to e->cmd. */
void edgerl_edit_tick(edgerl_edit_t *e, const float *obs, uint32_t now_us, float *cmd);

#endif /* EDGERL_EDIT_H */
