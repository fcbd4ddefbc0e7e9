/* Fuzz target for the HDF5 source's own code: the input describes what libhdf5 would have
 * answered at open (rank, shape, chunk shape, element size, filter pipeline, and each
 * chunk's address, stored size and filter mask) and also serves as the file those chunks
 * point into. The map checks run on it, then every record is assembled: chunk reads,
 * inflation, unshuffling and the copies into place. libhdf5 itself is not exercised (it is
 * not robust against malicious files; see docs/HDF5.md).
 *
 * Input layout (little-endian; missing bytes read as 0):
 *   rank-1 (mod 4), log2 element size (mod 3), filters (count mod 3; bit 2: first is
 *   shuffle, bit 3: second is shuffle, else deflate), then per axis dim (mod 24) and chunk
 *   dim (mod 9, 0 taken as 1), then per chunk a 2-byte address (0xFFFF: not allocated), a
 *   2-byte stored size and a 1-byte filter mask.
 *
 * Built without HDF5, the library's stand-in accepts every input as is. */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int stoker__h5_fuzz_map(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return stoker__h5_fuzz_map(data, size);
}
