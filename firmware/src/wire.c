/* COBS, CRC-16/CCITT-FALSE and the streaming frame parser (see edgerl_wire.h). */
#include "edgerl_wire.h"

#include "edgerl_msgs.h"

uint16_t edgerl_crc16(const uint8_t *data, size_t n, uint16_t init)
{
    uint16_t crc = init;
    size_t i;
    int b;
    for (i = 0; i < n; ++i) {
        crc ^= (uint16_t)((uint16_t)data[i] << 8);
        for (b = 0; b < 8; ++b) {
            if (crc & 0x8000u) {
                crc = (uint16_t)((crc << 1) ^ 0x1021u);
            } else {
                crc = (uint16_t)(crc << 1);
            }
        }
    }
    return crc;
}

size_t edgerl_cobs_encode(const uint8_t *src, size_t n, uint8_t *dst)
{
    size_t code_at = 0;
    size_t o = 1;
    uint8_t code = 1;
    size_t i;
    for (i = 0; i < n; ++i) {
        if (src[i] == 0) {
            dst[code_at] = code;
            code_at = o++;
            code = 1;
        } else {
            dst[o++] = src[i];
            ++code;
            if (code == 0xFFu) {
                dst[code_at] = code;
                code_at = o++;
                code = 1;
            }
        }
    }
    dst[code_at] = code;
    return o;
}

int edgerl_cobs_decode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap)
{
    size_t i = 0;
    size_t o = 0;
    while (i < n) {
        size_t code = src[i];
        size_t k;
        if (code == 0 || i + code > n) {
            return -1;
        }
        if (o + code - 1 > cap) {
            return -1;
        }
        for (k = 1; k < code; ++k) {
            if (src[i + k] == 0) {
                return -1;
            }
            dst[o++] = src[i + k];
        }
        i += code;
        if (code < 0xFFu && i < n) {
            if (o >= cap) {
                return -1;
            }
            dst[o++] = 0;
        }
    }
    return (int)o;
}

size_t edgerl_frame_encode(uint8_t id, uint16_t seq, const uint8_t *payload, size_t len,
                           uint8_t *out)
{
    uint8_t raw[EDGERL_MAX_RAW];
    uint16_t crc;
    size_t i;
    size_t n;
    if (len > EDGERL_MAX_PAYLOAD) {
        return 0;
    }
    raw[0] = id;
    raw[1] = (uint8_t)(seq & 0xFFu);
    raw[2] = (uint8_t)(seq >> 8);
    raw[3] = (uint8_t)len;
    for (i = 0; i < len; ++i) {
        raw[EDGERL_FRAME_HEADER + i] = payload[i];
    }
    crc = edgerl_crc16(raw, EDGERL_FRAME_HEADER + len, 0xFFFFu);
    raw[EDGERL_FRAME_HEADER + len] = (uint8_t)(crc & 0xFFu);
    raw[EDGERL_FRAME_HEADER + len + 1] = (uint8_t)(crc >> 8);
    n = edgerl_cobs_encode(raw, len + EDGERL_FRAME_OVERHEAD, out);
    out[n] = 0;
    return n + 1;
}

size_t edgerl_msg_encode(uint8_t id, uint16_t seq, const uint8_t *payload, size_t len,
                         uint8_t *out)
{
    while (len > 0 && payload[len - 1] == 0) {
        --len;
    }
    return edgerl_frame_encode(id, seq, payload, len, out);
}

size_t edgerl_actuator_encode(const float *cmd, uint8_t n, uint8_t mode, uint32_t fw_time_us,
                              uint16_t seq, uint8_t *out)
{
    edgerl_actuator_t a;
    uint8_t payload[EDGERL_MSG_ACTUATOR_SIZE];
    int i;
    a.fw_time_us = fw_time_us;
    a.mode = mode;
    a.n = n;
    for (i = 0; i < EDGERL_MAX_CMD; ++i) {
        a.cmd[i] = i < n ? cmd[i] : 0.0f;
    }
    edgerl_actuator_pack(&a, payload);
    return edgerl_msg_encode(EDGERL_MSG_ACTUATOR_ID, seq, payload, sizeof payload, out);
}

void edgerl_parser_init(edgerl_parser_t *p, int check_schema)
{
    memset(p, 0, sizeof *p);
    p->check_schema = check_schema;
}

void edgerl_parser_reset_sequence(edgerl_parser_t *p)
{
    p->has_seq = 0;
}

static void bad(edgerl_parser_t *p, uint32_t *counter)
{
    ++p->stats.bad_frames;
    ++*counter;
}

static int finish(edgerl_parser_t *p, edgerl_frame_t *out)
{
    int n = edgerl_cobs_decode(p->buf, p->len, p->raw, sizeof p->raw);
    uint16_t crc;
    uint16_t seq;
    if (n < 0) {
        bad(p, &p->stats.bad_cobs);
        return 0;
    }
    if (n < EDGERL_FRAME_OVERHEAD || p->raw[3] != (size_t)n - EDGERL_FRAME_OVERHEAD) {
        bad(p, &p->stats.bad_length);
        return 0;
    }
    crc = (uint16_t)(p->raw[n - 2] | (p->raw[n - 1] << 8));
    if (edgerl_crc16(p->raw, (size_t)n - 2, 0xFFFFu) != crc) {
        bad(p, &p->stats.bad_crc);
        return 0;
    }
    out->len = p->raw[3];
    if (p->check_schema) {
        int size = edgerl_msg_size(p->raw[0]);
        if (size < 0) {
            bad(p, &p->stats.bad_id);
            return 0;
        }
        if (p->raw[3] > size) {
            bad(p, &p->stats.bad_size);
            return 0;
        }
        out->len = (uint8_t)size;
    }
    seq = (uint16_t)(p->raw[1] | (p->raw[2] << 8));
    if (p->has_seq) {
        uint16_t gap = (uint16_t)(seq - p->last_seq - 1u);
        if (gap < 0x8000u) {
            p->stats.lost_frames += gap;
        }
    }
    p->has_seq = 1;
    p->last_seq = seq;
    ++p->stats.frames_ok;
    memset(p->payload, 0, sizeof p->payload);
    memcpy(p->payload, p->raw + EDGERL_FRAME_HEADER, p->raw[3]);
    out->id = p->raw[0];
    out->seq = seq;
    out->payload = p->payload;
    return 1;
}

int edgerl_parser_push(edgerl_parser_t *p, uint8_t byte, edgerl_frame_t *out)
{
    int ok = 0;
    if (byte != 0) {
        if (p->overflowed) {
            return 0;
        }
        if (p->len >= sizeof p->buf) {
            p->overflowed = 1;
            p->len = 0;
            return 0;
        }
        p->buf[p->len++] = byte;
        return 0;
    }
    if (p->overflowed) {
        bad(p, &p->stats.overflow);
        p->overflowed = 0;
    } else if (p->len > 0) {
        ok = finish(p, out);
    }
    p->len = 0;
    return ok;
}
