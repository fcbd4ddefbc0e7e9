/* SPDX-License-Identifier: Apache-2.0 */
/* The shard format, version 1: its on-disk constants (the magics, the sizes and field
 * offsets of a shard's header, footer and index entries, the manifest's name and limits)
 * and the size of the chunks shards are written and verified in. docs/FORMAT.md is the
 * byte-by-byte specification; keep the two in step. The manifest's parsed form is in
 * manifest.h, a shard's checks in shard.h. Used by src/format/, by the sources that read
 * packed shards (src/source/) and by tests that build or damage shards byte by byte. */
#ifndef STOKER_FORMAT_FORMAT_H
#define STOKER_FORMAT_FORMAT_H

#include "common/common.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- shard file ---- */
#define STK_HEADER_MAGIC "STKSHARD" /* 8 bytes at offset 0 */
#define STK_FOOTER_MAGIC "STKINDEX" /* 8 bytes at the footer's start */
#define STK_HEADER_REGION 4096u     /* header region; payloads start here */
#define STK_HEADER_SIZE 64u         /* the fixed header at the region's start */
#define STK_FOOTER_SIZE 64u         /* the fixed footer at the file's end */
#define STK_ENTRY_SIZE 32u          /* one record's index entry */
#define STK_MIN_SHARD (STK_HEADER_REGION + STK_FOOTER_SIZE)

/* Header fields (offsets within the header). */
#define STK_H_MAGIC 0
#define STK_H_VERSION 8
#define STK_H_ALIGN 12
#define STK_H_SHARD 16
#define STK_H_REGION 20
#define STK_H_CRC 60

/* Footer fields (offsets within the footer). */
#define STK_F_MAGIC 0
#define STK_F_VERSION 8
#define STK_F_SHARD 12
#define STK_F_COUNT 16
#define STK_F_INDEX_OFF 24
#define STK_F_INDEX_SIZE 32
#define STK_F_PAYLOAD 40
#define STK_F_INDEX_CRC 48
#define STK_F_ALIGN 52
#define STK_F_CRC 60

/* Index entry fields. */
#define STK_E_OFFSET 0
#define STK_E_LENGTH 8
#define STK_E_LABEL 16
#define STK_E_CRC 24
#define STK_E_FLAGS 28

/* ---- data set directory ---- */
#define STK_MANIFEST_NAME "manifest.stk"
#define STK_MANIFEST_MAGIC "stoker-manifest"
#define STK_MANIFEST_MAX (UINT64_C(1) << 32) /* bytes; the whole manifest is loaded */
#define STK_NAME_MAX 255                     /* a shard file name */
#define STK_WRITE_CHUNK (8u << 20)           /* staging / streaming buffer size */

#endif
