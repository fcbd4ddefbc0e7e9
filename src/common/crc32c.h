/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI, ext4 and
 * the shard format. The SSE4.2 instruction is used when the CPU has it. */
#ifndef STOKER_CRC32C_H
#define STOKER_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t stoker__crc32c_portable(uint32_t crc, const void *data, size_t size);
uint32_t stoker__crc32c_sse42(uint32_t crc, const void *data, size_t size);
/* 1 when stoker_crc32c uses the instruction. */
int stoker__crc32c_hw(void);

#endif
