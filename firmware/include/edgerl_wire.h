/* Framing shared with contract/wire/framing.py: COBS + 0x00 around
 * id u8 | seq u16 | len u8 | payload[len] | crc16 u16 (little-endian, CRC-16/CCITT-FALSE).
 * Portable C99, no malloc, no recursion. */
#ifndef EDGERL_WIRE_H
#define EDGERL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define EDGERL_FRAME_HEADER 4
#define EDGERL_FRAME_OVERHEAD 6
#define EDGERL_MAX_PAYLOAD 255
#define EDGERL_MAX_RAW (EDGERL_FRAME_OVERHEAD + EDGERL_MAX_PAYLOAD)
/* largest COBS block without the delimiter (matches MAX_ENCODED in Python) */
#define EDGERL_MAX_ENCODED (EDGERL_MAX_RAW + EDGERL_MAX_RAW / 254 + 1)
/* buffer size for one encoded frame including its delimiter */
#define EDGERL_FRAME_BUF (EDGERL_MAX_ENCODED + 1)

uint16_t edgerl_crc16(const uint8_t *data, size_t n, uint16_t init);

/* Encode n bytes into dst (capacity >= n + n / 254 + 1); returns bytes written. */
size_t edgerl_cobs_encode(const uint8_t *src, size_t n, uint8_t *dst);
/* Decode one block; returns decoded length or -1 if malformed or over cap. */
int edgerl_cobs_decode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap);

/* Encode a complete frame incl. delimiter into out (EDGERL_FRAME_BUF bytes); returns its
 * length, 0 if len > EDGERL_MAX_PAYLOAD. */
size_t edgerl_frame_encode(uint8_t id, uint16_t seq, const uint8_t *payload, size_t len,
                           uint8_t *out);

/* Like edgerl_frame_encode, with the payload's trailing zero bytes dropped (receivers
 * zero-fill up to the schema size: MAVLink v2 payload truncation). */
size_t edgerl_msg_encode(uint8_t id, uint16_t seq, const uint8_t *payload, size_t len,
                         uint8_t *out);

/* The ACTUATOR frame (fw->plant, HIL) for cmd[0..n-1] (zeros after n), stamped fw_time_us,
 * into out (EDGERL_FRAME_BUF bytes); returns its length. Every HAL's hal_actuator_out. */
size_t edgerl_actuator_encode(const float *cmd, uint8_t n, uint8_t mode, uint32_t fw_time_us,
                              uint16_t seq, uint8_t *out);

typedef struct {
    uint32_t frames_ok;
    uint32_t bad_frames; /* sum of the bad_* below */
    uint32_t bad_cobs;
    uint32_t bad_length;
    uint32_t bad_crc;
    uint32_t bad_id;
    uint32_t bad_size;
    uint32_t overflow;
    uint32_t lost_frames; /* gaps in the sequence numbers of accepted frames */
} edgerl_parser_stats_t;

typedef struct {
    uint8_t id;
    uint16_t seq;
    uint8_t len;            /* schema size (zero-filled) when check_schema, else as sent */
    const uint8_t *payload; /* valid until the next edgerl_parser_push */
} edgerl_frame_t;

typedef struct {
    uint8_t buf[EDGERL_MAX_ENCODED];
    uint8_t raw[EDGERL_MAX_RAW];
    uint8_t payload[EDGERL_MAX_PAYLOAD];
    size_t len;
    int overflowed;
    int has_seq;
    uint16_t last_seq;
    int check_schema; /* 1: also require a known id with its schema payload size */
    edgerl_parser_stats_t stats;
} edgerl_parser_t;

void edgerl_parser_init(edgerl_parser_t *p, int check_schema);
/* Forget the last sequence number (new connection): no loss is counted across it. */
void edgerl_parser_reset_sequence(edgerl_parser_t *p);
/* Push one byte; returns 1 and fills *out when it completes a valid frame, else 0. */
int edgerl_parser_push(edgerl_parser_t *p, uint8_t byte, edgerl_frame_t *out);

#endif /* EDGERL_WIRE_H */
