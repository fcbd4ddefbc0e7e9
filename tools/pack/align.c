/* SPDX-License-Identifier: Apache-2.0 */
/* The default payload alignment (no --align; docs/FORMAT.md, "Choosing the alignment").
 * 4096 lets every record be read with O_DIRECT, but each record then takes its size rounded
 * up to 4 KiB: nothing for records of tens of KB (JPEGs), 250 times their size for rows of
 * 16 bytes. A record of s bytes takes s rounded up to the alignment (one of 0 bytes takes
 * nothing), so the padding at each alignment follows from the records' sizes, known before
 * anything is written: the default is the largest alignment whose padding is at most
 * PACK_PADDING_PERCENT of the payload. */
#include "pack.h"

#include <stdio.h>

static const uint64_t aligns[PACK_ALIGNS] = {4096, 512, 1};

void pack_padding_add(pack_padding *p, uint64_t size, uint64_t count)
{
    p->payload += size * count;
    for (int i = 0; i < PACK_ALIGNS; i++)
        p->pad[i] += (aligns[i] - size % aligns[i]) % aligns[i] * count;
}

/* Padding `pad` within the limit of `payload`: pad <= payload * percent / 100, exactly. */
static bool within(uint64_t pad, uint64_t payload)
{
    return (unsigned __int128)pad * 100 <= (unsigned __int128)payload * PACK_PADDING_PERCENT;
}

int32_t pack_padding_align(const pack_padding *p)
{
    for (int i = 0; i < PACK_ALIGNS; i++)
        if (within(p->pad[i], p->payload))
            return (int32_t)aligns[i];
    return 1; /* not reached: alignment 1 pads nothing */
}

static double percent(uint64_t pad, uint64_t payload)
{
    return payload ? 100.0 * (double)pad / (double)payload : 0.0;
}

void pack_padding_describe(const pack_padding *p, char *buf, size_t cap)
{
    const int32_t align = pack_padding_align(p);
    int k = 0;
    while (aligns[k] != (uint64_t)align)
        k++;
    size_t n = 0;
    if (k == PACK_ALIGNS - 1)
        n = (size_t)snprintf(buf, cap, "no padding");
    else
        n = (size_t)snprintf(buf, cap, "padding %.1f%% of the payload",
                             percent(p->pad[k], p->payload));
    /* the larger alignments, each with what it would have added */
    for (int i = 0; i < k && n < cap; i++) {
        const double pc = percent(p->pad[i], p->payload);
        if (i == 0)
            n += (size_t)snprintf(buf + n, cap - n, "; %d would add %.0f%%%s", (int)aligns[i], pc,
                                  k > 1 ? " of the payload" : "");
        else
            n += (size_t)snprintf(buf + n, cap - n, ", %d %.0f%%", (int)aligns[i], pc);
    }
}
