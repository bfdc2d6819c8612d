/* Test driver for the C framing, driven from Python (tests/firmware/test_c_parser.py).
 * stdin: records "u32 little-endian length, bytes". Per record the parser is reset, fed the
 * bytes one at a time, and stdout gets one line per accepted frame "F id seq hexpayload"
 * then "R frames_ok bad_frames lost_frames".
 * With --encode, each record is "id u8, seq u16 LE, payload" and the output is "E hexframe". */
#include <stdio.h>
#include <string.h>

#include "edgerl_wire.h"

static unsigned char g_rec[1 << 20];

static int read_record(size_t *len)
{
    unsigned char h[4];
    if (fread(h, 1, 4, stdin) != 4) {
        return 0;
    }
    *len = (size_t)h[0] | ((size_t)h[1] << 8) | ((size_t)h[2] << 16) | ((size_t)h[3] << 24);
    if (*len > sizeof g_rec || fread(g_rec, 1, *len, stdin) != *len) {
        return 0;
    }
    return 1;
}

static void hex(const unsigned char *b, size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        printf("%02x", b[i]);
    }
}

int main(int argc, char **argv)
{
    static edgerl_parser_t p;
    int encode = argc > 1 && strcmp(argv[1], "--encode") == 0;
    int schema = !(argc > 1 && strcmp(argv[1], "--any-id") == 0);
    size_t len;
    while (read_record(&len)) {
        if (encode) {
            unsigned char out[EDGERL_FRAME_BUF];
            size_t n;
            if (len < 3) {
                return 2;
            }
            n = edgerl_frame_encode(g_rec[0], (uint16_t)(g_rec[1] | (g_rec[2] << 8)),
                                    g_rec + 3, len - 3, out);
            printf("E ");
            hex(out, n);
            printf("\n");
        } else {
            size_t i;
            edgerl_frame_t f;
            edgerl_parser_init(&p, schema);
            for (i = 0; i < len; ++i) {
                if (edgerl_parser_push(&p, g_rec[i], &f)) {
                    printf("F %u %u ", f.id, f.seq);
                    hex(f.payload, f.len);
                    printf("\n");
                }
            }
            printf("R %lu %lu %lu\n", (unsigned long)p.stats.frames_ok,
                   (unsigned long)p.stats.bad_frames, (unsigned long)p.stats.lost_frames);
        }
    }
    return 0;
}
