/* A tiny example on-MCU policy in the shape of the exported policy.h (C99, no malloc):
 * out = W2 * tanh(W1 * in + b1) + b2 with 2 inputs, 4 hidden units, 1 output.
 * Built into the `edgerl_fw_host_policy` binary so the EDGERL_WITH_POLICY path is tested. */
#ifndef EDGERL_EXAMPLE_POLICY_H
#define EDGERL_EXAMPLE_POLICY_H

#include <math.h>

#define EDGERL_POLICY_IN_DIM 2
#define EDGERL_POLICY_OUT_DIM 1

static const float edgerl_policy_w1[4][2] = {
    {0.5f, -0.25f}, {1.0f, 0.75f}, {-0.5f, 0.125f}, {0.25f, 0.5f}};
static const float edgerl_policy_b1[4] = {0.1f, -0.2f, 0.0f, 0.05f};
static const float edgerl_policy_w2[1][4] = {{1.5f, -0.5f, 0.25f, 2.0f}};
static const float edgerl_policy_b2[1] = {-0.1f};

static inline void edgerl_policy_forward(const float *in, float *out)
{
    float h[4];
    int i;
    int j;
    for (i = 0; i < 4; ++i) {
        float s = edgerl_policy_b1[i];
        for (j = 0; j < 2; ++j) {
            s += edgerl_policy_w1[i][j] * in[j];
        }
        h[i] = tanhf(s);
    }
    for (i = 0; i < 1; ++i) {
        float s = edgerl_policy_b2[i];
        for (j = 0; j < 4; ++j) {
            s += edgerl_policy_w2[i][j] * h[j];
        }
        out[i] = s;
    }
}

#endif /* EDGERL_EXAMPLE_POLICY_H */
