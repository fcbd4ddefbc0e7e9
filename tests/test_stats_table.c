/* SPDX-License-Identifier: Apache-2.0 */
/* The one table of statistics (src/loader/stats_table.h), as stoker_stats_field exports it,
 * against the struct it describes: each row's offset and size are the compiler's for that
 * field (offsetof, sizeof), and the rows tile stoker_stats from struct_size to its end,
 * leaving only alignment and reserved fields out, so a field declared in stoker.h without
 * a row fails here naming its neighbours (tests/python/test_stats_table.py names it). */
#include "loader/stats_table.h"
#include "testutil.h"

#include <stddef.h>
#include <string.h>

typedef struct compiled {
    const char *name;
    size_t offset, size;
} compiled;

/* What the compiler says of each row's field. */
#define COMPILED(name, type, values, decimals, doc)                                                \
    {#name, offsetof(stoker_stats, name), sizeof(((stoker_stats *)0)->name)},
static const compiled FIELDS[] = {STOKER__STATS_FIELDS(COMPILED)};
#define NFIELDS (sizeof FIELDS / sizeof FIELDS[0])

/* The reserved fields, which the table leaves out: kept for the ABI, never a figure. */
static const compiled RESERVED[] = {
    {"reserved0", offsetof(stoker_stats, reserved0), sizeof(((stoker_stats *)0)->reserved0)},
};

static size_t align_of(int32_t type)
{
    return type == STOKER_STAT_INT32 ? 4 : type == STOKER_STAT_TEXT ? 1 : 8;
}

int main(void)
{
    size_t end = sizeof(uint32_t); /* struct_size */
    const char *before = "struct_size";
    int32_t i = 0;
    for (;; i++) {
        const char *name = NULL, *doc = NULL;
        int32_t type = 0, values = -1;
        uint32_t offset = 0, size = 0;
        if (stoker_stats_field(i, &name, &type, &values, &offset, &size, &doc) != 0)
            break;
        if ((size_t)i >= NFIELDS)
            T_FAIL("stoker_stats_field lists %s past the table's %zu rows", name, NFIELDS);
        if (strcmp(name, FIELDS[i].name) || offset != FIELDS[i].offset || size != FIELDS[i].size)
            T_FAIL("row %d: %s at %u (%u bytes); the compiler: %s at %zu (%zu bytes)", i, name,
                   offset, size, FIELDS[i].name, FIELDS[i].offset, FIELDS[i].size);
        T_ASSERT(doc && *doc && !strchr(doc, '\n'));
        T_ASSERT(type >= STOKER_STAT_INT32 && type <= STOKER_STAT_TEXT);
        T_ASSERT(values == 0 || type == STOKER_STAT_INT32);
        for (size_t r = 0; r < sizeof RESERVED / sizeof RESERVED[0]; r++)
            if (RESERVED[r].offset == end)
                end += RESERVED[r].size;
        const size_t a = align_of(type);
        const size_t aligned = (end + a - 1) / a * a;
        if (offset != aligned)
            T_FAIL("stoker_stats has %zu bytes between %s and %s that the table of statistics "
                   "does not describe (src/loader/stats_table.h lacks a field there)",
                   (size_t)offset - end, before, name);
        end = offset + size;
        before = name;
    }
    T_EQ_INT(i, (int64_t)NFIELDS);
    if ((end + 7) / 8 * 8 != sizeof(stoker_stats))
        T_FAIL("stoker_stats has %zu bytes after %s that the table of statistics does not "
               "describe",
               sizeof(stoker_stats) - end, before);
    T_EQ_RC(stoker_stats_field(-1, NULL, NULL, NULL, NULL, NULL, NULL), STOKER_E_INVALID);

    /* the JSON of a snapshot: every row, in order; a small buffer gets the size it needs */
    stoker_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.records = 12345;
    snprintf(s.decoder_note, sizeof s.decoder_note, "a \"quoted\" note");
    char buf[8192];
    size_t need = 0;
    T_OK(stoker_stats_json(&s, buf, sizeof buf, &need));
    T_EQ_INT((int64_t)need, (int64_t)strlen(buf) + 1);
    T_CONTAINS(buf, "\"records\":12345,");
    T_CONTAINS(buf, "\"decoder_note\":\"a \\\"quoted\\\" note\"");
    for (size_t k = 0; k < NFIELDS; k++) {
        char key[64];
        snprintf(key, sizeof key, "\"%s\":", FIELDS[k].name);
        T_CONTAINS(buf, key);
    }
    char small[16];
    T_EQ_RC(stoker_stats_json(&s, small, sizeof small, &need), STOKER_E_LIMIT);
    T_EQ_INT((int64_t)strlen(small), (int64_t)sizeof small - 1);
    s.struct_size = 8;
    T_EQ_RC(stoker_stats_json(&s, buf, sizeof buf, NULL), STOKER_E_INVALID);
    return 0;
}
