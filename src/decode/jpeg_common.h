/* SPDX-License-Identifier: Apache-2.0 */
/* libjpeg error handling for every libjpeg user inside the library.
 *
 * The error manager never prints. A fatal error formats libjpeg's own message and longjmps
 * to `jmp`, which the one function driving libjpeg arms with setjmp() right before its
 * first libjpeg call and handles itself (releasing what it holds), so a longjmp never
 * skips a frame of ours that owns resources. Warnings are counted: those that mean the data
 * is damaged (premature end, corrupt entropy data, extraneous bytes, ...) count as
 * corruption by the project's convention, and the first one's text is kept. */
#ifndef STOKER_DECODE_JPEG_COMMON_H
#define STOKER_DECODE_JPEG_COMMON_H

#include <setjmp.h>
#include <stddef.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

typedef struct stoker__jpeg_err {
    struct jpeg_error_mgr pub; /* first member: libjpeg sees cinfo->err as this */
    jmp_buf jmp;
    int damage;                /* warnings that mean damaged data */
    char msg[JMSG_LENGTH_MAX]; /* the fatal error's text, else the first damage warning's */
} stoker__jpeg_err;

/* Fills `e` and returns the manager to store in cinfo->err (before jpeg_create_*). */
struct jpeg_error_mgr *stoker__jpeg_err_init(stoker__jpeg_err *e);

/* True once the data was found damaged (a fatal error is reported through the longjmp). */
static inline int stoker__jpeg_damaged(const stoker__jpeg_err *e)
{
    return e->damage > 0;
}

/* Is the JPEG marker SOI + the first byte of a marker at `data`? (FF D8 FF) */
int stoker__is_jpeg(const void *data, size_t size);
/* Does `data` start with the 8-byte PNG signature? */
int stoker__is_png(const void *data, size_t size);

#endif
