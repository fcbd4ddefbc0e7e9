/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the JPEG header reader (src/decode/jpeg_info.c): the input is the JPEG.
 * A read must stay inside the input (the sanitizer sees any byte past it: the input is an
 * exact-size copy), fail with an undocumented status never and with an empty message never,
 * and on success give fields in range; an eligible header must meet every condition of the
 * hardware decoder's rule; and the header alone (the bytes up to the first scan) must read
 * the same. */
#include "decode/jpeg_info.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ranges(const stoker__jpeg_info *in, size_t size)
{
    if (in->header_size < 2 || in->header_size > size)
        abort();
    if (in->sof < 0xC0 || in->sof > 0xCF || in->sof == 0xC4 || in->sof == 0xC8 || in->sof == 0xCC)
        abort();
    if (in->width < 1 || in->width > 65535 || in->height < 1 || in->height > 65535)
        abort();
    if (in->precision < 2 || in->precision > 16)
        abort();
    if (in->components < 1 || in->components > STOKER__JPEG_MAX_COMPONENTS)
        abort();
    if (in->scan_components < 1 || in->scan_components > in->components)
        abort();
    for (int32_t i = 0; i < in->components; i++) {
        const stoker__jpeg_component *c = &in->comp[i];
        if (c->h < 1 || c->h > 4 || c->v < 1 || c->v > 4 || c->tq < 0 || c->tq > 3)
            abort();
        if (c->h > in->h_max || c->v > in->v_max)
            abort();
    }
    if (in->adobe ? in->adobe_transform < 0 || in->adobe_transform > 255
                  : in->adobe_transform != -1)
        abort();
}

static void check_eligible(const stoker__jpeg_info *in)
{
    const char *why = "unset";
    if (!stoker__jpeg_hw_eligible(in, &why)) {
        if (!why || !why[0])
            abort(); /* a refusal names its reason */
        return;
    }
    if (why != NULL || (in->sof != 0xC0 && in->sof != 0xC1) || in->precision != 8)
        abort();
    if (in->components != 1 && in->components != 3)
        abort();
    if (in->scan_components != in->components)
        abort();
    if (in->components == 3) {
        const char *ss = stoker__jpeg_subsampling(in);
        if (in->color != STOKER__JPEG_YCBCR || !ss || strcmp(ss, "4:1:1") == 0 ||
            strcmp(ss, "4:1:0") == 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    stoker__jpeg_info in;
    stoker__err err = {0};
    const int rc = stoker__jpeg_info_read(data, size, &in, &err);
    if (rc != 0 && rc != STOKER_E_CORRUPT && rc != STOKER_E_UNSUPPORTED)
        abort();
    if (rc != 0) {
        if (err.msg[0] == '\0')
            abort();
        return 0;
    }
    check_ranges(&in, size);
    check_eligible(&in);
    /* the header alone, in a buffer of its exact size */
    uint8_t *head = malloc(in.header_size);
    if (!head)
        abort();
    memcpy(head, data, in.header_size);
    stoker__jpeg_info again;
    if (stoker__jpeg_info_read(head, in.header_size, &again, &err) != 0 ||
        memcmp(&in, &again, sizeof in) != 0)
        abort();
    free(head);
    return 0;
}
