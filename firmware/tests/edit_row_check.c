/*
 * edgerl_edit_row under UBSan: which chunk row the edit step reads at a given time.
 *
 *   edit_row_check DT_US T0_US HORIZON NOW_US [NOW_US ...]
 *
 * Takes one CHUNK (host and firmware clocks equal, so t0 is T0_US on the firmware clock) and
 * prints edgerl_edit_row for each NOW_US, one per line (-1: no row, the chunk is stale).
 * Exit 2 on bad arguments, 3 when the chunk is refused. Built with
 * -fsanitize=undefined -fno-sanitize-recover=all by `make sanitize`: any overflow aborts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgerl_edit.h"

static int parse_u32(const char *s, uint32_t *out)
{
    char *end = NULL;
    unsigned long v = strtoul(s, &end, 0);
    if (end == s || *end != '\0' || v > 0xFFFFFFFFul) {
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    static edgerl_edit_t e;
    static edgerl_chunk_t m;
    uint32_t dt, t0, horizon, now;
    int i;
    if (argc < 5 || parse_u32(argv[1], &dt) || parse_u32(argv[2], &t0)
        || parse_u32(argv[3], &horizon) || horizon > 255u) {
        fprintf(stderr, "usage: edit_row_check DT_US T0_US HORIZON NOW_US [NOW_US ...]\n");
        return 2;
    }
    edgerl_edit_reset(&e);
    memset(&m, 0, sizeof m);
    m.n = EDGERL_EDIT_ACTION_DIM;
    m.horizon = (uint8_t)horizon;
    m.dt_us = dt;
    m.t0_us = t0;
    if (!edgerl_edit_set_chunk(&e, &m, 0u)) {
        return 3;
    }
    for (i = 4; i < argc; ++i) {
        if (parse_u32(argv[i], &now)) {
            return 2;
        }
        printf("%d\n", edgerl_edit_row(&e, now));
    }
    return 0;
}
