/* SPDX-License-Identifier: Apache-2.0 */
/* PNG without libspng: this build refuses PNG fields (png.h). */
#include "decode/png.h"

bool stoker__png_supported(void)
{
    return false;
}

static int unsupported(stoker__err *err)
{
    return stoker__fail(err, STOKER_E_UNSUPPORTED,
                        "PNG: this build has no PNG decoder (built without libspng)");
}

int stoker__png_info_read(const uint8_t *data, size_t size, stoker__png_info *info,
                          stoker__err *err)
{
    (void)data, (void)size, (void)info;
    return unsupported(err);
}

uint64_t stoker__png_out_size(const stoker__png_info *info, stoker__png_mode mode)
{
    return (uint64_t)info->width * (uint64_t)info->height * (mode == STOKER__PNG_RGB ? 3u : 1u);
}

int stoker__png_decode(const uint8_t *data, size_t size, stoker__png_mode mode, uint64_t max_pixels,
                       uint8_t *out, size_t cap, stoker__png_info *info, stoker__err *err)
{
    (void)data, (void)size, (void)mode, (void)max_pixels, (void)out, (void)cap, (void)info;
    return unsupported(err);
}
