/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU decode's conversion of decoded planes to RGB (image_kernels.h: libjpeg's fancy
 * chroma upsampling and YCbCr tables), run here on the host through the same functions the
 * kernel runs: from the planes libjpeg itself decodes (raw_data_out), every pixel must equal
 * libjpeg's own RGB decode of the image (fancy upsampling, islow), for each subsampling the
 * GPU decode takes, at sizes that leave partial MCUs and chroma planes of 1 and 2 columns. */
#include "cuda/image_kernels.h"
#include "jpeg_kinds.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

typedef struct planes {
    uint8_t *p[3];
    int32_t pitch[3];
    stoker__gpu_ycc g;
} planes;

/* The image's planes as libjpeg decodes them, before upsampling and colour conversion. */
static planes raw_planes(const uint8_t *jpg, size_t size)
{
    struct jpeg_decompress_struct d;
    t_jerr je;
    t_jpeg_read_header(&d, &je, jpg, size);
    d.raw_data_out = TRUE;
    d.dct_method = JDCT_ISLOW;
    jpeg_start_decompress(&d);
    planes pl;
    memset(&pl, 0, sizeof pl);
    const int nc = d.num_components;
    const int group = d.max_v_samp_factor * DCTSIZE; /* image rows per raw read */
    const int imcu_rows = (int)((d.image_height + (JDIMENSION)group - 1) / (JDIMENSION)group);
    for (int c = 0; c < nc; c++) {
        const jpeg_component_info *ci = &d.comp_info[c];
        pl.pitch[c] = (int32_t)(ci->width_in_blocks * DCTSIZE);
        const size_t rows = (size_t)imcu_rows * (size_t)ci->v_samp_factor * DCTSIZE;
        pl.p[c] = calloc((size_t)pl.pitch[c] * rows, 1);
        T_ASSERT(pl.p[c] != NULL);
    }
    JSAMPARRAY rows[3];
    JSAMPROW row_ptrs[3][4 * DCTSIZE];
    for (int c = 0; c < nc; c++)
        rows[c] = row_ptrs[c];
    for (int r = 0; d.output_scanline < d.output_height; r++) {
        for (int c = 0; c < nc; c++) {
            const int v = d.comp_info[c].v_samp_factor * DCTSIZE;
            for (int k = 0; k < v; k++)
                row_ptrs[c][k] = pl.p[c] + (size_t)(r * v + k) * (size_t)pl.pitch[c];
        }
        T_ASSERT(jpeg_read_raw_data(&d, rows, (JDIMENSION)group) > 0);
    }
    stoker__gpu_ycc *g = &pl.g;
    *g = (stoker__gpu_ycc){.width = (int32_t)d.image_width, .height = (int32_t)d.image_height};
    for (int c = 0; c < 3; c++) {
        g->plane[c] = pl.p[c < nc ? c : 0];
        g->pitch[c] = pl.pitch[c < nc ? c : 0];
    }
    if (nc == 3) {
        g->hs = d.max_h_samp_factor / d.comp_info[1].h_samp_factor;
        g->vs = d.max_v_samp_factor / d.comp_info[1].v_samp_factor;
        g->cw = (int32_t)d.comp_info[1].downsampled_width;
        g->ch = (int32_t)d.comp_info[1].downsampled_height;
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return pl;
}

static void check(const char *kind_name, int w, int h, uint64_t seed)
{
    const kind *k = NULL;
    for (int i = 0; i < NJPEG_KINDS; i++)
        if (strcmp(JPEG_KINDS[i].name, kind_name) == 0)
            k = &JPEG_KINDS[i];
    T_ASSERT(k != NULL);
    size_t size = 0;
    uint8_t *jpg = t_make_kind(k, w, h, seed, &size);
    planes pl = raw_planes(jpg, size);
    int32_t ww = 0, wh = 0;
    uint8_t *want = t_decode_rgb(jpg, size, &ww, &wh);
    T_ASSERT(ww == w && wh == h);
    long bad = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t got[3];
            stoker__ycc_pixel(&pl.g, x, y, got);
            const uint8_t *e = want + ((size_t)y * (size_t)w + (size_t)x) * 3;
            if (memcmp(got, e, 3) != 0 && bad++ == 0)
                fprintf(stderr, "%s %dx%d: pixel (%d, %d) %u %u %u, libjpeg %u %u %u\n", kind_name,
                        w, h, x, y, got[0], got[1], got[2], e[0], e[1], e[2]);
        }
    if (bad)
        T_FAIL("%s %dx%d: %ld of %d pixels differ from libjpeg's", kind_name, w, h, bad, w * h);
    for (int c = 0; c < 3; c++)
        if (pl.p[c])
            free(pl.p[c]);
    free(want);
    free(jpg);
}

int main(void)
{
    static const char *const kinds[] = {"4:2:0", "4:2:2", "4:4:4", "gray", "restart 4:2:0"};
    static const int sizes[][2] = {{641, 479}, {333, 17}, {16, 16}, {17, 9}, {1, 1},
                                   {2, 3},     {3, 2},    {4, 5},   {5, 4},  {100, 1}};
    int n = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++, n++)
            check(kinds[k], sizes[s][0], sizes[s][1], 1000 + (uint64_t)n);
    printf("test_ycc: %d images, every pixel libjpeg's\n", n);
    return 0;
}
