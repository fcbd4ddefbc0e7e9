/* SPDX-License-Identifier: Apache-2.0 */
/* The config object's layout, shared by the objects built from a config. */
#ifndef STOKER_CONFIG_H
#define STOKER_CONFIG_H

#include "common/common.h"

#define STOKER__NUM_INT_OPTS 160
#define STOKER__NUM_STR_OPTS 10

struct stoker_config {
    int64_t ints[STOKER__NUM_INT_OPTS];
    uint8_t int_set[STOKER__NUM_INT_OPTS]; /* 1 when explicitly set */
    double floats[14]; /* mean r,g,b, std r,g,b, vflip, scale min,max, ratio min,max,
                          min box size, min box visibility, hflip */
    char *strings[STOKER__NUM_STR_OPTS];
    stoker__log log;
};

/* Reads an option of a config that may be NULL (defaults). */
int64_t stoker__cfg_int(const stoker_config *cfg, stoker_option opt);
/* 1 when the option was set explicitly by the caller. */
bool stoker__cfg_is_set(const stoker_config *cfg, stoker_option opt);
double stoker__cfg_float(const stoker_config *cfg, stoker_option opt);
const char *stoker__cfg_string(const stoker_config *cfg, stoker_option opt);
stoker__log stoker__cfg_log(const stoker_config *cfg);
/* Deep copy (NULL cfg gives defaults). Returns NULL on allocation failure. */
stoker_config *stoker__cfg_clone(const stoker_config *cfg);

#endif
