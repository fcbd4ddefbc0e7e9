/* SPDX-License-Identifier: Apache-2.0 */
/* libjpeg error manager: no printing, longjmp on errors, damage warnings counted. */
#include "decode/jpeg_common.h"

#include <string.h>

#include <jerror.h>

static void on_error_exit(j_common_ptr cinfo)
{
    stoker__jpeg_err *e = (stoker__jpeg_err *)cinfo->err;
    cinfo->err->format_message(cinfo, e->msg);
    longjmp(e->jmp, 1);
}

/* Warnings that say nothing about the image data itself; every other warning means the
 * compressed data is damaged (libjpeg then fills in grey and carries on). */
static int is_benign_warning(int code)
{
    return code == JWRN_ADOBE_XFORM || code == JWRN_JFIF_MAJOR || code == JWRN_BOGUS_ICC;
}

static void on_emit_message(j_common_ptr cinfo, int level)
{
    if (level >= 0)
        return; /* trace messages */
    stoker__jpeg_err *e = (stoker__jpeg_err *)cinfo->err;
    cinfo->err->num_warnings++;
    if (is_benign_warning(cinfo->err->msg_code))
        return;
    if (e->damage++ == 0)
        cinfo->err->format_message(cinfo, e->msg);
}

static void on_output_message(j_common_ptr cinfo)
{
    (void)cinfo; /* the library never prints */
}

struct jpeg_error_mgr *stoker__jpeg_err_init(stoker__jpeg_err *e)
{
    memset(e, 0, sizeof *e);
    jpeg_std_error(&e->pub);
    e->pub.error_exit = on_error_exit;
    e->pub.emit_message = on_emit_message;
    e->pub.output_message = on_output_message;
    return &e->pub;
}

int stoker__is_jpeg(const void *data, size_t size)
{
    const unsigned char *p = data;
    return size >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF;
}

int stoker__is_png(const void *data, size_t size)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    return size >= sizeof sig && memcmp(data, sig, sizeof sig) == 0;
}
