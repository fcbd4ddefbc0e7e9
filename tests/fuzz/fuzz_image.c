/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: stoker-pack's pack_image_inspect and pack_image_transcode
 * (tools/pack/image.h) on arbitrary bytes (JPEG, PNG or neither). Limits keep a hostile
 * header from asking for huge memory. */
#include "image.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint64_t max_pixels = 1u << 22;
    char msg[256];
    int32_t kind, w, h, c;
    pack_image_inspect(data, size, 0, max_pixels, &kind, &w, &h, &c, msg, sizeof msg);
    pack_image_inspect(data, size, PACK_IMAGE_DECODE, max_pixels, &kind, &w, &h, &c, msg,
                       sizeof msg);
    void *out = NULL;
    size_t n = 0;
    if (pack_image_transcode(data, size, PACK_IMAGE_TO_RGB, 48, 75, max_pixels, &out, &n, msg,
                             sizeof msg) == 0 &&
        out) {
        /* What we write must read back. */
        if (pack_image_inspect(out, n, PACK_IMAGE_DECODE, 0, NULL, NULL, NULL, NULL, NULL, 0))
            __builtin_trap();
    }
    free(out);
    return 0;
}
